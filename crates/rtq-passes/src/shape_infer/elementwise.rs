//! Rules for elementwise ops: unary maps, broadcasting binary/variadic ops,
//! comparisons and `Where`.

use super::ctx::{Fact, NodeCtx};
use super::dims::broadcast_shapes;
use crate::PassError;
use rtq_ir::{DType, Shape};

/// Ops whose output has the type and shape of input 0.
pub(crate) const SAME_AS_INPUT: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "BitwiseNot",
    "Ceil",
    "Celu",
    "Clip",
    "Cos",
    "Cosh",
    "CumSum",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "GroupNormalization",
    "HardSigmoid",
    "HardSwish",
    "Hardmax",
    "Identity",
    "InstanceNormalization",
    "LeakyRelu",
    "Log",
    "LogSoftmax",
    "LpNormalization",
    "LRN",
    "MeanVarianceNormalization",
    "Mish",
    "Neg",
    "Not",
    "PRelu",
    "Reciprocal",
    "Relu",
    "ReverseSequence",
    "Round",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "Selu",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softmax",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Swish",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Trilu",
];

/// Broadcasting ops whose output has the type of input 0.
pub(crate) const BROADCAST: &[&str] = &[
    "Add",
    "And",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Div",
    "Max",
    "Mean",
    "Min",
    "Mod",
    "Mul",
    "Or",
    "Pow",
    "Sub",
    "Sum",
    "Xor",
];

/// Broadcasting comparisons, producing booleans.
pub(crate) const COMPARISON: &[&str] =
    &["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"];

/// Output 0 is input 0's type and shape (extra outputs, e.g. Dropout's mask, are left).
pub(crate) fn same_as_input(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    Ok(vec![Fact::new(
        ctx.dtype(0),
        ctx.shape(0).map(<[_]>::to_vec),
    )])
}

/// `IsNaN`, `IsInf`: booleans shaped like the input.
pub(crate) fn predicate(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    Ok(vec![Fact::new(
        Some(DType::Bool),
        ctx.shape(0).map(<[_]>::to_vec),
    )])
}

/// `Dropout`: output like the input, mask of booleans of the same shape.
pub(crate) fn dropout(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let shape = ctx.shape(0).map(<[_]>::to_vec);
    Ok(vec![
        Fact::new(ctx.dtype(0), shape.clone()),
        Fact::new(Some(DType::Bool), shape),
    ])
}

/// The multidirectional broadcast of the shapes of the present inputs in `slots`; `None`
/// when one is unknown, an error naming both inputs when two cannot broadcast.
pub(crate) fn broadcast_inputs(
    ctx: &NodeCtx<'_>,
    slots: impl IntoIterator<Item = usize>,
) -> Result<Option<Shape>, PassError> {
    let mut acc: Option<(Shape, usize)> = None;
    for slot in slots {
        if ctx.input(slot).is_none() {
            continue;
        }
        let Some(shape) = ctx.shape(slot) else {
            return Ok(None);
        };
        acc = Some(match acc {
            None => (shape.to_vec(), slot),
            Some((prev, first)) => match broadcast_shapes(&prev, shape) {
                Ok(s) => (s, first),
                Err(_) => {
                    return Err(ctx.conflict(
                        "shapes are not broadcastable",
                        ctx.describe(first),
                        ctx.describe(slot),
                    ))
                }
            },
        });
    }
    Ok(acc.map(|(s, _)| s))
}

/// Broadcasting arithmetic/logic: type of the first input with a known type.
pub(crate) fn broadcast(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let shape = broadcast_inputs(ctx, 0..ctx.num_inputs())?;
    let dtype = (0..ctx.num_inputs()).find_map(|s| ctx.dtype(s));
    Ok(vec![Fact::new(dtype, shape)])
}

/// Broadcasting comparison: booleans.
pub(crate) fn comparison(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let shape = broadcast_inputs(ctx, 0..ctx.num_inputs())?;
    Ok(vec![Fact::new(Some(DType::Bool), shape)])
}

/// `Where(cond, x, y)`: broadcast of all three, type of `x`.
pub(crate) fn where_(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let shape = broadcast_inputs(ctx, 0..3)?;
    Ok(vec![Fact::new(ctx.dtype(1).or(ctx.dtype(2)), shape)])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{infer_one, s, sym};
    use rtq_ir::{DType, Dim};

    #[test]
    fn broadcasting_with_symbols() {
        let facts = infer_one(
            "Add",
            &[
                (DType::F32, vec![sym("N"), s(3), s(1)]),
                (DType::F32, vec![s(4)]),
            ],
            &[],
        )
        .unwrap();
        assert_eq!(facts[0].shape, Some(vec![sym("N"), s(3), s(4)]));
        assert_eq!(facts[0].dtype, Some(DType::F32));
    }

    #[test]
    fn non_broadcastable_add_names_node_and_both_shapes() {
        let err = infer_one(
            "Add",
            &[(DType::F32, vec![s(3)]), (DType::F32, vec![s(4)])],
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("node `n`") && err.contains("Add"), "{err}");
        assert!(
            err.contains("float[3]") && err.contains("float[4]"),
            "{err}"
        );
    }

    #[test]
    fn comparisons_and_where() {
        let f = infer_one(
            "Less",
            &[(DType::F32, vec![s(2), s(1)]), (DType::F32, vec![s(3)])],
            &[],
        )
        .unwrap();
        assert_eq!(f[0].dtype, Some(DType::Bool));
        assert_eq!(f[0].shape, Some(vec![s(2), s(3)]));
        let f = infer_one(
            "Where",
            &[
                (DType::Bool, vec![s(2), s(1)]),
                (DType::F16, vec![s(1), s(5)]),
                (DType::F16, vec![]),
            ],
            &[],
        )
        .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F16));
        assert_eq!(f[0].shape, Some(vec![s(2), s(5)]));
    }

    #[test]
    fn unary_and_variadic() {
        let f = infer_one("Relu", &[(DType::F16, vec![sym("N"), s(8)])], &[]).unwrap();
        assert_eq!(f[0].shape, Some(vec![sym("N"), s(8)]));
        let f = infer_one(
            "Sum",
            &[
                (DType::F32, vec![s(1), s(4)]),
                (DType::F32, vec![s(3), s(1)]),
                (DType::F32, vec![s(4)]),
            ],
            &[],
        )
        .unwrap();
        assert_eq!(f[0].shape, Some(vec![s(3), s(4)]));
        let f = infer_one("Dropout", &[(DType::F32, vec![s(2)])], &[]).unwrap();
        assert_eq!(f[1].dtype, Some(DType::Bool));
        let _ = Dim::Known(0);
    }
}
