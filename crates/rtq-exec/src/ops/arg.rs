//! Searches along an axis: ArgMax, ArgMin (keepdims, select_last_index) and TopK.

use crate::ctx::OpCtx;
use crate::elem::{with_numeric, Elem};
use crate::float::f32_view;
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{DType, Tensor, TensorData};
use std::cmp::Ordering;

/// Search kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] =
    &[("ArgMax", arg_max), ("ArgMin", arg_min), ("TopK", top_k)];

/// `x` as numeric storage: f16/bf16 widen to f32 (exact), others are used as they are.
fn numeric(ctx: &OpCtx<'_>, x: &Tensor) -> Result<TensorData, ExecError> {
    match x.dtype() {
        DType::F16 | DType::BF16 => Ok(TensorData::F32(
            f32_view(x)
                .ok_or_else(|| ctx.err("float input could not be read"))?
                .into_owned(),
        )),
        DType::Bool | DType::String => Err(ctx.err(format!("{} tensors have no order", x.dtype()))),
        _ => Ok(x.data().clone()),
    }
}

fn arg_typed<T: Elem>(
    v: &[T],
    outer: usize,
    len: usize,
    inner: usize,
    max: bool,
    last: bool,
) -> Vec<i64> {
    let mut out = vec![0i64; outer * inner];
    for o in 0..outer {
        for j in 0..inner {
            let mut best = 0usize;
            for i in 1..len {
                let (a, b) = (
                    v[(o * len + i) * inner + j],
                    v[(o * len + best) * inner + j],
                );
                let better = if max { a > b } else { a < b };
                if better || (last && a == b) {
                    best = i;
                }
            }
            out[o * inner + j] = best as i64;
        }
    }
    out
}

fn arg(ctx: &OpCtx<'_>, max: bool) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, x.rank())?;
    let keepdims = ctx.attr_int("keepdims", 1)? != 0;
    let last = ctx.attr_int("select_last_index", 0)? != 0;
    let shape = x.shape();
    let len = shape.get(axis).copied().unwrap_or(1);
    if len == 0 {
        return Err(ctx.err(format!("cannot search the empty axis {axis}")));
    }
    let outer: usize = shape[..axis.min(shape.len())].iter().product();
    let inner: usize = shape.get(axis + 1..).map_or(1, |s| s.iter().product());
    let data = numeric(ctx, x)?;
    let idx = with_numeric!(&data, T, v => arg_typed::<T>(v, outer, len, inner, max, last),
        _ => return Err(ctx.err(format!("{} tensors have no order", x.dtype()))));
    let mut out_shape = shape.to_vec();
    if !out_shape.is_empty() {
        if keepdims {
            out_shape[axis] = 1;
        } else {
            out_shape.remove(axis);
        }
    }
    Ok(vec![ctx.tensor(out_shape, TensorData::I64(idx))?])
}

fn arg_max(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    arg(ctx, true)
}

fn arg_min(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    arg(ctx, false)
}

/// Values and indices of the `k` extreme elements of each line.
fn top_k_typed<T: Elem>(
    v: &[T],
    outer: usize,
    len: usize,
    inner: usize,
    k: usize,
    largest: bool,
) -> (Vec<T>, Vec<i64>) {
    let mut values = Vec::with_capacity(outer * k * inner);
    let mut indices = Vec::with_capacity(outer * k * inner);
    values.resize(outer * k * inner, T::zero());
    indices.resize(outer * k * inner, 0i64);
    let mut order: Vec<usize> = Vec::with_capacity(len);
    for o in 0..outer {
        for j in 0..inner {
            let at = |i: usize| v[(o * len + i) * inner + j];
            order.clear();
            order.extend(0..len);
            // NaN sorts as the largest value; ties keep the lower index first.
            let cmp = |a: &usize, b: &usize| {
                let (x, y) = (at(*a), at(*b));
                let ord = match (x.is_nan(), y.is_nan()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    _ => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
                };
                let ord = if largest { ord.reverse() } else { ord };
                ord.then(a.cmp(b))
            };
            if k < len {
                order.select_nth_unstable_by(k, cmp);
                order.truncate(k);
            }
            order.sort_by(cmp);
            for (r, &i) in order.iter().take(k).enumerate() {
                values[(o * k + r) * inner + j] = at(i);
                indices[(o * k + r) * inner + j] = i as i64;
            }
        }
    }
    (values, indices)
}

fn top_k(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let k = ctx.ints_input(1)?;
    let k = match k.as_slice() {
        [k] if *k >= 0 => *k as usize,
        other => return Err(ctx.err(format!("K must be one non-negative value, got {other:?}"))),
    };
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.rank())?;
    let largest = ctx.attr_int("largest", 1)? != 0;
    let shape = x.shape();
    let len = shape.get(axis).copied().unwrap_or(1);
    if k > len {
        return Err(ctx.err(format!("K={k} exceeds the axis extent {len}")));
    }
    let outer: usize = shape[..axis.min(shape.len())].iter().product();
    let inner: usize = shape.get(axis + 1..).map_or(1, |s| s.iter().product());
    let data = numeric(ctx, x)?;
    let (values, indices) = with_numeric!(&data, T, v => {
        let (vals, idx) = top_k_typed::<T>(v, outer, len, inner, k, largest);
        (T::wrap(vals), idx)
    }, _ => return Err(ctx.err(format!("{} tensors have no order", x.dtype()))));
    let mut out_shape = shape.to_vec();
    if !out_shape.is_empty() {
        out_shape[axis] = k;
    }
    let values = ctx.tensor(out_shape.clone(), values)?;
    let values = if values.dtype() != x.dtype() {
        values.cast(x.dtype())
    } else {
        values
    };
    Ok(vec![
        values,
        ctx.tensor(out_shape, TensorData::I64(indices))?,
    ])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Tensor};
    use rtq_test_support::node;

    #[test]
    fn argmax_argmin_with_ties() {
        let x = Tensor::from_f32(vec![2, 3], vec![1.0, 5.0, 5.0, -1.0, -3.0, -3.0]);
        let y = eval_node(&node("ArgMax", &[("axis", Attr::Int(1))], 1), &[Some(&x)])
            .unwrap()
            .remove(0);
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[2usize, 1][..], &[1, 0][..])
        );
        let y = eval_node(
            &node(
                "ArgMin",
                &[
                    ("axis", Attr::Int(-1)),
                    ("keepdims", Attr::Int(0)),
                    ("select_last_index", Attr::Int(1)),
                ],
                1,
            ),
            &[Some(&x)],
        )
        .unwrap()
        .remove(0);
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[2usize][..], &[0, 2][..])
        );
        let y = eval_node(&node("ArgMax", &[], 1), &[Some(&x)])
            .unwrap()
            .remove(0);
        assert_eq!(y.as_i64().unwrap(), &[0, 0, 0]);
        // Large i64 values are compared exactly.
        let big = Tensor::from_i64(vec![2], vec![(1 << 60) + 1, 1 << 60]);
        let y = eval_node(&node("ArgMax", &[], 1), &[Some(&big)])
            .unwrap()
            .remove(0);
        assert_eq!(y.as_i64().unwrap(), &[0]);
    }

    #[test]
    fn top_k_largest_and_smallest() {
        let x = Tensor::from_f32(vec![2, 4], vec![3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]);
        let k = Tensor::from_i64(vec![1], vec![2]);
        let out = eval_node(&node("TopK", &[], 2), &[Some(&x), Some(&k)]).unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &[4.0, 3.0, 9.0, 6.0]);
        assert_eq!(out[1].as_i64().unwrap(), &[2, 0, 1, 3]);
        let out = eval_node(
            &node("TopK", &[("largest", Attr::Int(0))], 2),
            &[Some(&x), Some(&k)],
        )
        .unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &[1.0, 1.0, 2.0, 5.0]);
        assert_eq!(out[1].as_i64().unwrap(), &[1, 3, 2, 0]);
        let out = eval_node(
            &node("TopK", &[("axis", Attr::Int(0))], 2),
            &[Some(&x), Some(&Tensor::from_i64(vec![1], vec![1]))],
        )
        .unwrap();
        assert_eq!(out[1].as_i64().unwrap(), &[1, 1, 0, 1]);
        let too_big = Tensor::from_i64(vec![1], vec![5]);
        assert!(eval_node(&node("TopK", &[], 2), &[Some(&x), Some(&too_big)]).is_err());
    }
}
