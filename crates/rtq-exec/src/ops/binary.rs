//! Broadcasting arithmetic: Add, Sub, Mul, Div, Mod, Pow, PRelu and the variadic Sum,
//! Mean, Max and Min. Works on every numeric type; f16/bf16 compute in f32.

use crate::broadcast;
use crate::ctx::OpCtx;
use crate::elem::{max_elem, min_elem, with_numeric, Elem};
use crate::float::{f32_view, from_f32};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{DType, Tensor};

/// Arithmetic kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("Add", add),
    ("Sub", sub),
    ("Mul", mul),
    ("Div", div),
    ("Mod", modulo),
    ("Pow", pow),
    ("PRelu", prelu),
    ("Sum", sum),
    ("Mean", mean),
    ("Max", max),
    ("Min", min),
];

/// A broadcasting binary arithmetic operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arith {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (integers truncate).
    Div,
    /// Remainder with the divisor's sign.
    Mod,
    /// Remainder with the dividend's sign.
    Fmod,
    /// Larger of the two (NaN propagates).
    Max,
    /// Smaller of the two (NaN propagates).
    Min,
    /// `a < 0 ? a * b : a`.
    PRelu,
}

fn typed<T: Elem>(
    op: Arith,
    a: &[T],
    ash: &[usize],
    b: &[T],
    bsh: &[usize],
) -> Option<(Vec<usize>, Vec<T>)> {
    match op {
        Arith::Add => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x.add(y)),
        Arith::Sub => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x.sub(y)),
        Arith::Mul => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x.mul(y)),
        Arith::Div => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x.div(y)),
        Arith::Mod => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x.pymod(y)),
        Arith::Fmod => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x.fmod(y)),
        Arith::Max => broadcast::binary(a, ash, b, bsh, max_elem::<T>),
        Arith::Min => broadcast::binary(a, ash, b, bsh, min_elem::<T>),
        Arith::PRelu => broadcast::binary(
            a,
            ash,
            b,
            bsh,
            |x: T, s: T| {
                if x < T::zero() {
                    x.mul(s)
                } else {
                    x
                }
            },
        ),
    }
}

fn no_broadcast(ctx: &OpCtx<'_>, a: &Tensor, b: &Tensor) -> ExecError {
    ctx.err(format!(
        "shapes {:?} and {:?} do not broadcast",
        a.shape(),
        b.shape()
    ))
}

/// `a (op) b` with numpy broadcasting; both tensors must have the same element type.
pub(crate) fn arith(
    ctx: &OpCtx<'_>,
    op: Arith,
    a: &Tensor,
    b: &Tensor,
) -> Result<Tensor, ExecError> {
    if a.dtype() != b.dtype() {
        return Err(ctx.err(format!(
            "inputs have different element types ({} and {})",
            a.dtype(),
            b.dtype()
        )));
    }
    let dtype = a.dtype();
    if matches!(dtype, DType::F16 | DType::BF16) {
        let (x, y) = (f32_view(a), f32_view(b));
        let (Some(x), Some(y)) = (x, y) else {
            return Err(ctx.err("float inputs could not be read"));
        };
        let (shape, out) = typed::<f32>(op, &x, a.shape(), &y, b.shape())
            .ok_or_else(|| no_broadcast(ctx, a, b))?;
        return ctx.tensor(shape, from_f32(dtype, out));
    }
    let is_division = matches!(op, Arith::Div | Arith::Mod | Arith::Fmod);
    with_numeric!(a.data(), T, x => {
        let y = T::slice(b.data()).ok_or_else(|| ctx.err("element types differ"))?;
        if is_division && !T::IS_FLOAT && y.iter().any(|&v| v == T::zero()) {
            return Err(ctx.err("integer division by zero"));
        }
        let (shape, out) = typed::<T>(op, x, a.shape(), y, b.shape())
            .ok_or_else(|| no_broadcast(ctx, a, b))?;
        ctx.tensor(shape, T::wrap(out))
    }, _ => Err(ctx.err(format!("arithmetic is not defined on {dtype} tensors"))))
}

fn binary_kernel(ctx: &OpCtx<'_>, op: Arith) -> Result<Vec<Tensor>, ExecError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    Ok(vec![arith(ctx, op, a, b)?])
}

fn add(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    binary_kernel(ctx, Arith::Add)
}

fn sub(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    binary_kernel(ctx, Arith::Sub)
}

fn mul(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    binary_kernel(ctx, Arith::Mul)
}

fn div(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    binary_kernel(ctx, Arith::Div)
}

fn modulo(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let op = if ctx.attr_int("fmod", 0)? != 0 {
        Arith::Fmod
    } else {
        Arith::Mod
    };
    binary_kernel(ctx, op)
}

fn prelu(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (x, slope) = (ctx.input(0)?, ctx.input(1)?);
    let y = arith(ctx, Arith::PRelu, x, slope)?;
    if y.shape() != x.shape() {
        return Err(ctx.err(format!(
            "slope of shape {:?} does not broadcast to X of shape {:?}",
            slope.shape(),
            x.shape()
        )));
    }
    Ok(vec![y])
}

/// `base ^ exponent`; the output has the base's type. Float bases compute in f32
/// (f64 for f64), integer bases in f64 and truncate.
fn pow(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if b.dtype() == DType::String || b.dtype() == DType::Bool {
        return Err(ctx.err(format!("exponent type {} is not numeric", b.dtype())));
    }
    let no_bc = || no_broadcast(ctx, a, b);
    let dtype = a.dtype();
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            let x = ctx.float_input(0)?;
            let y: Vec<f32> = match f32_view(b) {
                Some(v) => v.into_owned(),
                None => b.to_f32_vec(),
            };
            let (shape, out) = broadcast::binary(&x, a.shape(), &y, b.shape(), |p: f32, q: f32| {
                if q == 2.0 {
                    p * p
                } else {
                    p.powf(q)
                }
            })
            .ok_or_else(no_bc)?;
            Ok(vec![ctx.tensor(shape, from_f32(dtype, out))?])
        }
        _ => {
            let y: Vec<f64> = (0..b.len()).map(|i| b.data().get_f64(i)).collect();
            let data = with_numeric!(a.data(), T, x => {
                let (shape, out) = broadcast::binary(x, a.shape(), &y, b.shape(), |p: T, q: f64| {
                    T::from_f64(p.to_f64().powf(q))
                })
                .ok_or_else(no_bc)?;
                (shape, T::wrap(out))
            }, _ => return Err(ctx.err(format!("Pow is not defined on {dtype} tensors"))));
            Ok(vec![ctx.tensor(data.0, data.1)?])
        }
    }
}

/// Folds the variadic inputs with `op`; f16/bf16 accumulate in f32 and round once.
fn fold(ctx: &OpCtx<'_>, op: Arith) -> Result<(Tensor, DType), ExecError> {
    let inputs = ctx.variadic()?;
    let dtype = inputs[0].dtype();
    if let Some(t) = inputs.iter().find(|t| t.dtype() != dtype) {
        return Err(ctx.err(format!(
            "inputs have different element types ({dtype} and {})",
            t.dtype()
        )));
    }
    let widen = matches!(dtype, DType::F16 | DType::BF16);
    let prep = |t: &Tensor| if widen { t.cast(DType::F32) } else { t.clone() };
    let step = |acc: &Tensor, t: &Tensor| {
        if widen {
            arith(ctx, op, acc, &prep(t))
        } else {
            arith(ctx, op, acc, t)
        }
    };
    let Some((&first, rest)) = inputs.split_first() else {
        unreachable!("variadic() returns at least one input");
    };
    // The first operation reads the first input in place instead of a copy of it.
    let mut acc = match rest.split_first() {
        None => prep(first),
        Some((&second, _)) if widen => step(&prep(first), second)?,
        Some((&second, _)) => step(first, second)?,
    };
    for t in rest.iter().skip(1) {
        acc = step(&acc, t)?;
    }
    Ok((acc, dtype))
}

fn finish(ctx: &OpCtx<'_>, acc: Tensor, dtype: DType) -> Result<Vec<Tensor>, ExecError> {
    if acc.dtype() == dtype {
        return Ok(vec![acc]);
    }
    let shape = acc.shape().to_vec();
    let v = acc.to_f32_vec();
    Ok(vec![ctx.tensor(shape, from_f32(dtype, v))?])
}

fn sum(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (acc, dtype) = fold(ctx, Arith::Add)?;
    finish(ctx, acc, dtype)
}

fn max(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (acc, dtype) = fold(ctx, Arith::Max)?;
    finish(ctx, acc, dtype)
}

fn min(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (acc, dtype) = fold(ctx, Arith::Min)?;
    finish(ctx, acc, dtype)
}

fn mean(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let count = ctx.variadic()?.len();
    let (acc, dtype) = fold(ctx, Arith::Add)?;
    if !dtype.is_float() {
        return Err(ctx.err(format!("Mean is defined on float tensors, got {dtype}")));
    }
    let divisor = Tensor::new(
        vec![],
        crate::float::from_f32(acc.dtype(), vec![count as f32]),
    )
    .map_err(|e| ctx.err(e.to_string()))?;
    let acc = arith(ctx, Arith::Div, &acc, &divisor)?;
    finish(ctx, acc, dtype)
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use half::f16;
    use rtq_ir::{Attr, DType, Node, Tensor, TensorData};

    fn node(op: &str, attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node(op, attrs, 1)
    }

    fn run(op: &str, attrs: &[(&str, Attr)], inputs: &[&Tensor]) -> Tensor {
        let ins: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
        eval_node(&node(op, attrs), &ins).unwrap().remove(0)
    }

    #[test]
    fn float_broadcasting_arithmetic() {
        let a = Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let b = Tensor::from_f32(vec![2], vec![10.0, 20.0]);
        assert_eq!(
            run("Add", &[], &[&a, &b]).as_f32().unwrap(),
            &[11.0, 22.0, 13.0, 24.0]
        );
        assert_eq!(
            run("Sub", &[], &[&b, &a]).as_f32().unwrap(),
            &[9.0, 18.0, 7.0, 16.0]
        );
        assert_eq!(
            run("Div", &[], &[&a, &b]).as_f32().unwrap(),
            &[0.1, 0.1, 0.3, 0.2]
        );
        let c = Tensor::from_f32(vec![3, 1, 1], vec![1.0, 2.0, 3.0]);
        let y = run("Mul", &[], &[&a, &c]);
        assert_eq!(y.shape(), &[3, 2, 2]);
        assert_eq!(y.as_f32().unwrap()[8..], [3.0, 6.0, 9.0, 12.0]);
    }

    #[test]
    fn integer_shape_arithmetic() {
        let a = Tensor::from_i64(vec![3], vec![7, -7, 224]);
        let b = Tensor::from_i64(vec![], vec![2]);
        assert_eq!(run("Div", &[], &[&a, &b]).as_i64().unwrap(), &[3, -3, 112]);
        assert_eq!(run("Mod", &[], &[&a, &b]).as_i64().unwrap(), &[1, 1, 0]);
        assert_eq!(
            run("Mod", &[("fmod", Attr::Int(1))], &[&a, &b])
                .as_i64()
                .unwrap(),
            &[1, -1, 0]
        );
        assert_eq!(
            run("Mul", &[], &[&a, &b]).as_i64().unwrap(),
            &[14, -14, 448]
        );
        let zero = Tensor::from_i64(vec![], vec![0]);
        let err = eval_node(&node("Div", &[]), &[Some(&a), Some(&zero)]).unwrap_err();
        assert!(err.to_string().contains("division by zero"), "{err}");
    }

    #[test]
    fn mismatched_types_and_shapes_are_errors() {
        let a = Tensor::from_f32(vec![2], vec![1.0, 2.0]);
        let i = Tensor::from_i64(vec![2], vec![1, 2]);
        assert!(eval_node(&node("Add", &[]), &[Some(&a), Some(&i)]).is_err());
        let b = Tensor::from_f32(vec![3], vec![1.0, 2.0, 3.0]);
        let err = eval_node(&node("Add", &[]), &[Some(&a), Some(&b)]).unwrap_err();
        assert!(err.to_string().contains("do not broadcast"), "{err}");
    }

    #[test]
    fn pow_and_prelu() {
        let a = Tensor::from_f32(vec![3], vec![2.0, -3.0, 4.0]);
        let e = Tensor::from_i64(vec![], vec![2]);
        assert_eq!(
            run("Pow", &[], &[&a, &e]).as_f32().unwrap(),
            &[4.0, 9.0, 16.0]
        );
        let half = Tensor::scalar_f32(0.5);
        assert_eq!(run("Pow", &[], &[&a, &half]).as_f32().unwrap()[2], 2.0);
        let ai = Tensor::from_i64(vec![2], vec![3, 2]);
        assert_eq!(run("Pow", &[], &[&ai, &e]).as_i64().unwrap(), &[9, 4]);
        let slope = Tensor::from_f32(vec![1], vec![0.25]);
        assert_eq!(
            run("PRelu", &[], &[&a, &slope]).as_f32().unwrap(),
            &[2.0, -0.75, 4.0]
        );
    }

    #[test]
    fn variadic_ops() {
        let a = Tensor::from_f32(vec![2], vec![1.0, 5.0]);
        let b = Tensor::from_f32(vec![1], vec![3.0]);
        let c = Tensor::from_f32(vec![2], vec![2.0, f32::NAN]);
        assert_eq!(run("Sum", &[], &[&a, &b]).as_f32().unwrap(), &[4.0, 8.0]);
        assert_eq!(run("Mean", &[], &[&a, &b]).as_f32().unwrap(), &[2.0, 4.0]);
        assert_eq!(run("Max", &[], &[&a, &b]).as_f32().unwrap(), &[3.0, 5.0]);
        assert_eq!(run("Min", &[], &[&a]).as_f32().unwrap(), &[1.0, 5.0]);
        assert!(run("Max", &[], &[&a, &c]).as_f32().unwrap()[1].is_nan());
    }

    #[test]
    fn f16_add_rounds_to_half() {
        let h = |v: &[f32]| {
            Tensor::new(
                vec![v.len()],
                TensorData::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
            )
            .unwrap()
        };
        // 2048 + 1 is not representable in f16 (spacing 2 there): rounds to even 2048.
        let y = run("Add", &[], &[&h(&[2048.0, 0.1]), &h(&[1.0, 0.2])]);
        assert_eq!(y.dtype(), DType::F16);
        let v = y.to_f32_vec();
        assert_eq!(v[0], 2048.0);
        let expect = f16::from_f32(f16::from_f32(0.1).to_f32() + f16::from_f32(0.2).to_f32());
        assert_eq!(v[1], expect.to_f32());
    }
}
