//! Comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual), logical ops (And,
//! Or, Xor, Not) and Where, all broadcasting.

use crate::broadcast;
use crate::ctx::OpCtx;
use crate::elem::{map_any2, with_numeric, Elem};
use crate::float::f32_view;
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{Tensor, TensorData};

/// Comparison and logical kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("Equal", equal),
    ("Less", less),
    ("LessOrEqual", less_or_equal),
    ("Greater", greater),
    ("GreaterOrEqual", greater_or_equal),
    ("And", and),
    ("Or", or),
    ("Xor", xor),
    ("Not", not),
    ("Where", where_op),
];

#[derive(Clone, Copy)]
enum Cmp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

fn cmp_typed<T: PartialOrd + Copy + Sync>(
    cmp: Cmp,
    a: &[T],
    ash: &[usize],
    b: &[T],
    bsh: &[usize],
) -> Option<(Vec<usize>, Vec<bool>)> {
    match cmp {
        Cmp::Eq => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x == y),
        Cmp::Lt => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x < y),
        Cmp::Le => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x <= y),
        Cmp::Gt => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x > y),
        Cmp::Ge => broadcast::binary(a, ash, b, bsh, |x: T, y: T| x >= y),
    }
}

fn compare(ctx: &OpCtx<'_>, cmp: Cmp) -> Result<Vec<Tensor>, ExecError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if a.dtype() != b.dtype() {
        return Err(ctx.err(format!(
            "inputs have different element types ({} and {})",
            a.dtype(),
            b.dtype()
        )));
    }
    let (ash, bsh) = (a.shape(), b.shape());
    let result = match (a.data(), b.data()) {
        (TensorData::F16(_), _) | (TensorData::BF16(_), _) => {
            let (Some(x), Some(y)) = (f32_view(a), f32_view(b)) else {
                return Err(ctx.err("float inputs could not be read"));
            };
            cmp_typed(cmp, &x, ash, &y, bsh)
        }
        (TensorData::Bool(x), TensorData::Bool(y)) => cmp_typed(cmp, x, ash, y, bsh),
        (TensorData::String(x), TensorData::String(y)) if matches!(cmp, Cmp::Eq) => {
            let xs: Vec<&[u8]> = x.iter().map(|s| s.as_slice()).collect();
            let ys: Vec<&[u8]> = y.iter().map(|s| s.as_slice()).collect();
            cmp_typed(cmp, &xs, ash, &ys, bsh)
        }
        (data, _) => with_numeric!(data, T, x => {
            let y = T::slice(b.data()).ok_or_else(|| ctx.err("element types differ"))?;
            cmp_typed::<T>(cmp, x, ash, y, bsh)
        }, _ => return Err(ctx.err(format!("cannot compare {} tensors", a.dtype())))),
    };
    let (shape, out) =
        result.ok_or_else(|| ctx.err(format!("shapes {ash:?} and {bsh:?} do not broadcast")))?;
    Ok(vec![ctx.tensor(shape, TensorData::Bool(out))?])
}

fn equal(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    compare(ctx, Cmp::Eq)
}

fn less(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    compare(ctx, Cmp::Lt)
}

fn less_or_equal(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    compare(ctx, Cmp::Le)
}

fn greater(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    compare(ctx, Cmp::Gt)
}

fn greater_or_equal(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    compare(ctx, Cmp::Ge)
}

fn bool_input<'a>(ctx: &OpCtx<'a>, slot: usize) -> Result<&'a [bool], ExecError> {
    match ctx.input(slot)?.data() {
        TensorData::Bool(v) => Ok(v),
        other => Err(ctx.err(format!(
            "input {slot} must be a bool tensor, got {}",
            other.dtype()
        ))),
    }
}

fn logical(ctx: &OpCtx<'_>, f: fn(bool, bool) -> bool) -> Result<Vec<Tensor>, ExecError> {
    let (x, y) = (bool_input(ctx, 0)?, bool_input(ctx, 1)?);
    let (ash, bsh) = (ctx.input(0)?.shape(), ctx.input(1)?.shape());
    let (shape, out) = broadcast::binary(x, ash, y, bsh, f)
        .ok_or_else(|| ctx.err(format!("shapes {ash:?} and {bsh:?} do not broadcast")))?;
    Ok(vec![ctx.tensor(shape, TensorData::Bool(out))?])
}

fn and(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    logical(ctx, |a, b| a && b)
}

fn or(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    logical(ctx, |a, b| a || b)
}

fn xor(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    logical(ctx, |a, b| a != b)
}

fn not(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = bool_input(ctx, 0)?;
    let out = x.iter().map(|&b| !b).collect();
    Ok(vec![ctx.tensor(
        ctx.input(0)?.shape().to_vec(),
        TensorData::Bool(out),
    )?])
}

fn select<T: Clone + Default + Send + Sync>(
    c: (&[bool], &[usize]),
    x: (&[T], &[usize]),
    y: (&[T], &[usize]),
    shape_out: &mut Vec<usize>,
) -> Option<Vec<T>> {
    let (shape, out) = broadcast::ternary(
        c,
        x,
        y,
        |c, a: &T, b: &T| if c { a.clone() } else { b.clone() },
    )?;
    *shape_out = shape;
    Some(out)
}

/// `condition ? X : Y` elementwise with three-way broadcasting; X and Y share any type.
fn where_op(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let cond = bool_input(ctx, 0)?;
    let (c, x, y) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let mut shape = Vec::new();
    let mut failed = false;
    let data = map_any2!(x.data(), y.data(), a, b => {
        match select((cond, c.shape()), (a, x.shape()), (b, y.shape()), &mut shape) {
            Some(v) => v,
            None => {
                failed = true;
                Vec::new()
            }
        }
    }, _ => return Err(ctx.err(format!(
        "X and Y have different element types ({} and {})",
        x.dtype(),
        y.dtype()
    ))));
    if failed {
        return Err(ctx.err(format!(
            "shapes {:?}, {:?} and {:?} do not broadcast",
            c.shape(),
            x.shape(),
            y.shape()
        )));
    }
    Ok(vec![ctx.tensor(shape, data)?])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Node, Tensor, TensorData};

    fn node(op: &str) -> Node {
        rtq_test_support::node(op, &[], 1)
    }

    fn run(op: &str, inputs: &[&Tensor]) -> Tensor {
        let ins: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
        eval_node(&node(op), &ins).unwrap().remove(0)
    }

    fn bools(v: &[bool]) -> Tensor {
        Tensor::new(vec![v.len()], TensorData::Bool(v.to_vec())).unwrap()
    }

    #[test]
    fn comparisons_broadcast_and_yield_bool() {
        let a = Tensor::from_i64(vec![3], vec![1, 2, 3]);
        let b = Tensor::from_i64(vec![], vec![2]);
        assert_eq!(
            run("Equal", &[&a, &b]).data(),
            &TensorData::Bool(vec![false, true, false])
        );
        assert_eq!(
            run("Less", &[&a, &b]).data(),
            &TensorData::Bool(vec![true, false, false])
        );
        assert_eq!(
            run("GreaterOrEqual", &[&a, &b]).data(),
            &TensorData::Bool(vec![false, true, true])
        );
        let f = Tensor::from_f32(vec![2, 1], vec![0.5, f32::NAN]);
        let g = Tensor::from_f32(vec![2], vec![0.5, 1.0]);
        let y = run("LessOrEqual", &[&f, &g]);
        assert_eq!(y.shape(), &[2, 2]);
        assert_eq!(y.data(), &TensorData::Bool(vec![true, true, false, false]));
    }

    #[test]
    fn logical_ops() {
        let a = bools(&[true, true, false, false]);
        let b = bools(&[true, false, true, false]);
        assert_eq!(
            run("And", &[&a, &b]).data(),
            &TensorData::Bool(vec![true, false, false, false])
        );
        assert_eq!(
            run("Or", &[&a, &b]).data(),
            &TensorData::Bool(vec![true, true, true, false])
        );
        assert_eq!(
            run("Xor", &[&a, &b]).data(),
            &TensorData::Bool(vec![false, true, true, false])
        );
        assert_eq!(
            run("Not", &[&a]).data(),
            &TensorData::Bool(vec![false, false, true, true])
        );
        let f = Tensor::from_f32(vec![1], vec![1.0]);
        assert!(eval_node(&node("Not"), &[Some(&f)]).is_err());
    }

    #[test]
    fn where_broadcasts_three_ways() {
        let c = Tensor::new(vec![2, 1], TensorData::Bool(vec![true, false])).unwrap();
        let x = Tensor::from_i64(vec![3], vec![1, 2, 3]);
        let y = Tensor::from_i64(vec![], vec![-1]);
        let out = run("Where", &[&c, &x, &y]);
        assert_eq!(out.shape(), &[2, 3]);
        assert_eq!(out.as_i64().unwrap(), &[1, 2, 3, -1, -1, -1]);
        let yf = Tensor::scalar_f32(0.0);
        assert!(eval_node(&node("Where"), &[Some(&c), Some(&x), Some(&yf)]).is_err());
    }
}
