//! Rules for ops whose result type or shape comes from attributes or input values:
//! Shape, Size, Cast, CastLike, Constant, ConstantOfShape, Range, EyeLike and the
//! random generators.

use super::ctx::{Fact, NodeCtx};
use super::dims::{unknown, unknown_shape};
use super::symbolic::to_dim;
use crate::PassError;
use rtq_ir::{Attr, DType, Dim, Shape};

/// The type named by integer attribute `name` (an ONNX `TensorProto.DataType` code).
fn dtype_attr(ctx: &NodeCtx<'_>, name: &str) -> Result<Option<DType>, PassError> {
    match ctx.node.attr(name).and_then(Attr::as_int) {
        None => Ok(None),
        Some(code) => i32::try_from(code)
            .ok()
            .and_then(DType::from_onnx_code)
            .map(Some)
            .ok_or_else(|| {
                ctx.invalid(format!("attribute `{name}` names unknown data type {code}"))
            }),
    }
}

/// `Shape(data)` with optional `start`/`end`: a 1-D int64 tensor.
pub(crate) fn shape(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let len = ctx.rank(0).map(|rank| {
        let r = rank as i64;
        let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r);
        let (start, end) = (
            clamp(ctx.attr_int("start", 0)),
            clamp(ctx.attr_int("end", r)),
        );
        (end - start).max(0) as usize
    });
    Ok(vec![Fact::new(
        Some(DType::I64),
        len.map(|n| vec![Dim::Known(n)]),
    )])
}

/// `Size(data)`: an int64 scalar.
pub(crate) fn size(_ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    Ok(vec![Fact::shaped(Some(DType::I64), vec![])])
}

/// `Cast(to)`: the input's shape with the new type.
pub(crate) fn cast(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let to = dtype_attr(ctx, "to")?;
    if to.is_none() {
        return Err(ctx.invalid("attribute `to` is required"));
    }
    Ok(vec![Fact::new(to, ctx.shape(0).map(<[_]>::to_vec))])
}

/// `CastLike(input, target)`: the input's shape with the target's type.
pub(crate) fn cast_like(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    Ok(vec![Fact::new(
        ctx.dtype(1),
        ctx.shape(0).map(<[_]>::to_vec),
    )])
}

/// `Constant`: type and shape of whichever `value*` attribute is set.
pub(crate) fn constant(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let n = ctx.node;
    let fact = if let Some(t) = n.attr("value").and_then(Attr::as_tensor) {
        Fact::shaped(
            Some(t.dtype()),
            t.shape().iter().map(|&d| Dim::Known(d)).collect(),
        )
    } else if n.attr("value_float").is_some() {
        Fact::shaped(Some(DType::F32), vec![])
    } else if let Some(v) = n.attr("value_floats").and_then(Attr::as_floats) {
        Fact::shaped(Some(DType::F32), vec![Dim::Known(v.len())])
    } else if n.attr("value_int").is_some() {
        Fact::shaped(Some(DType::I64), vec![])
    } else if let Some(Attr::Ints(v)) = n.attr("value_ints") {
        Fact::shaped(Some(DType::I64), vec![Dim::Known(v.len())])
    } else if n.attr("value_string").is_some() {
        Fact::shaped(Some(DType::String), vec![])
    } else if let Some(Attr::Strings(v)) = n.attr("value_strings") {
        Fact::shaped(Some(DType::String), vec![Dim::Known(v.len())])
    } else {
        Fact::default()
    };
    Ok(vec![fact])
}

/// The shape held by input `slot` (a 1-D int64 tensor), known element-wise when its
/// elements are tracked, else only its length.
fn shape_input(ctx: &NodeCtx<'_>, slot: usize) -> Result<Option<Shape>, PassError> {
    if let Some(v) = ctx.sym_ints(slot) {
        let dims = v
            .iter()
            .map(|e| {
                to_dim(e).ok_or_else(|| {
                    ctx.invalid(format!(
                        "shape input {} holds a negative extent",
                        ctx.describe(slot)
                    ))
                })
            })
            .collect::<Result<Shape, _>>()?;
        return Ok(Some(dims));
    }
    Ok(match ctx.shape(slot) {
        Some([Dim::Known(n)]) => Some(unknown_shape(*n)),
        _ => None,
    })
}

/// `ConstantOfShape(shape)`: the shape held by the input; type of the `value` attribute
/// (float32 by default).
pub(crate) fn constant_of_shape(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx
        .node
        .attr("value")
        .and_then(Attr::as_tensor)
        .map_or(DType::F32, |t| t.dtype());
    Ok(vec![Fact::new(Some(dtype), shape_input(ctx, 0)?)])
}

/// `Range(start, limit, delta)`: `[max(ceil((limit - start) / delta), 0)]`, computed
/// in the element type as onnxruntime does (float32 rounding included).
pub(crate) fn range(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let scalar_int = |slot: usize| match ctx.ints(slot)?.as_slice() {
        [v] => Some(*v),
        _ => None,
    };
    let scalar_float = |slot: usize| match ctx.floats(slot)?.as_slice() {
        [v] => Some(*v),
        _ => None,
    };
    let len = if let (Some(start), Some(limit), Some(delta)) =
        (scalar_int(0), scalar_int(1), scalar_int(2))
    {
        if delta == 0 {
            return Err(ctx.invalid("delta is 0"));
        }
        let diff = i128::from(limit) - i128::from(start);
        let delta = i128::from(delta);
        let mut n = diff / delta;
        if diff % delta != 0 && ((diff < 0) == (delta < 0)) {
            n += 1;
        }
        usize::try_from(n.max(0)).map_or_else(|_| unknown(), Dim::Known)
    } else if let (Some(start), Some(limit), Some(delta)) =
        (scalar_float(0), scalar_float(1), scalar_float(2))
    {
        if delta == 0.0 {
            return Err(ctx.invalid("delta is 0"));
        }
        let n = if dtype == Some(DType::F64) {
            ((limit - start) / delta).ceil()
        } else {
            f64::from(((limit as f32 - start as f32) / delta as f32).ceil())
        };
        if n.is_finite() && n < 1e15 {
            Dim::Known(n.max(0.0) as usize)
        } else {
            unknown()
        }
    } else {
        unknown()
    };
    Ok(vec![Fact::shaped(dtype, vec![len])])
}

/// `EyeLike(input, dtype?)`: the input's shape.
pub(crate) fn eye_like(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = dtype_attr(ctx, "dtype")?.or(ctx.dtype(0));
    Ok(vec![Fact::new(dtype, ctx.shape(0).map(<[_]>::to_vec))])
}

/// `RandomNormal`/`RandomUniform` (shape attribute), their `*Like` forms and
/// `Bernoulli` (input's shape); `dtype` attribute or float32 / the input's type.
pub(crate) fn random(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let op = ctx.node.op_type.as_str();
    let like = op.ends_with("Like") || op == "Bernoulli";
    let dtype = dtype_attr(ctx, "dtype")?.or(if like { ctx.dtype(0) } else { Some(DType::F32) });
    let shape = if like {
        ctx.shape(0).map(<[_]>::to_vec)
    } else {
        ctx.attr_ints("shape").map(|s| {
            s.iter()
                .map(|&d| usize::try_from(d).map_or_else(|_| unknown(), Dim::Known))
                .collect()
        })
    };
    Ok(vec![Fact::new(dtype, shape)])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{s, sym, Case};
    use rtq_ir::{Attr, DType, Tensor};

    #[test]
    fn cast_and_shape() {
        let f = Case::new("Cast")
            .input(DType::F32, vec![sym("N"), s(3)])
            .attr("to", Attr::Int(10))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F16));
        assert_eq!(f[0].shape, Some(vec![sym("N"), s(3)]));
        assert!(Case::new("Cast")
            .input(DType::F32, vec![s(1)])
            .attr("to", Attr::Int(999))
            .infer()
            .is_err());
        let f = Case::new("Shape")
            .input(DType::F32, vec![sym("N"), s(3), s(4)])
            .attr("start", Attr::Int(1))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::I64));
        assert_eq!(f[0].shape, Some(vec![s(2)]));
    }

    #[test]
    fn fp8_casts() {
        // 17 is FLOAT8E4M3FN; `saturate` does not change the type.
        let f = Case::new("Cast")
            .input(DType::F32, vec![sym("N"), s(3)])
            .attr("to", Attr::Int(17))
            .attr("saturate", Attr::Int(0))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F8E4M3));
        assert_eq!(f[0].shape, Some(vec![sym("N"), s(3)]));
        let f = Case::new("Cast")
            .input(DType::F8E4M3, vec![s(3)])
            .attr("to", Attr::Int(1))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F32));
        let f = Case::new("CastLike")
            .input(DType::F16, vec![s(2), s(5)])
            .input(DType::F8E4M3, vec![s(1)])
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F8E4M3));
        assert_eq!(f[0].shape, Some(vec![s(2), s(5)]));
    }

    #[test]
    fn constant_of_shape_and_range() {
        let f = Case::new("ConstantOfShape")
            .ints(&[2, 3])
            .attr("value", Attr::Tensor(Tensor::from_i64(vec![1], vec![7])))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::I64));
        assert_eq!(f[0].shape, Some(vec![s(2), s(3)]));
        let f = Case::new("ConstantOfShape")
            .input(DType::I64, vec![s(3)])
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F32));
        assert_eq!(f[0].shape, Some(vec![sym("?"); 3]));
        let shape = Case::new("Range")
            .constant(Tensor::scalar_f32(1.0))
            .constant(Tensor::scalar_f32(2.0))
            .constant(Tensor::scalar_f32(0.3))
            .shape();
        assert_eq!(shape, Some(vec![s(4)]));
        let shape = Case::new("Range")
            .constant(Tensor::from_i64(vec![], vec![10]))
            .constant(Tensor::from_i64(vec![], vec![0]))
            .constant(Tensor::from_i64(vec![], vec![-3]))
            .shape();
        assert_eq!(shape, Some(vec![s(4)]));
    }

    #[test]
    fn constant_node_attributes() {
        let f = Case::new("Constant")
            .attr(
                "value",
                Attr::Tensor(Tensor::from_f32(vec![2, 2], vec![0.0; 4])),
            )
            .infer()
            .unwrap();
        assert_eq!(f[0].shape, Some(vec![s(2), s(2)]));
        let f = Case::new("Constant")
            .attr("value_ints", Attr::Ints(vec![1, 2, 3]))
            .infer()
            .unwrap();
        assert_eq!(
            (f[0].dtype, f[0].shape.clone()),
            (Some(DType::I64), Some(vec![s(3)]))
        );
    }
}
