//! OneHot: expands integer (or float) indices into one-hot vectors along a new axis.

use crate::ctx::OpCtx;
use crate::elem::{with_any, Storage};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{DType, Tensor};

/// OneHot kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("OneHot", one_hot)];

/// The one-hot output: `off` (`v[0]`) everywhere except `on` (`v[1]`) at each index's
/// hot position along the new axis of extent `depth`.
fn expand<T: Storage>(
    v: &[T],
    hot: &[Option<usize>],
    outer: usize,
    depth: usize,
    inner: usize,
) -> Vec<T> {
    let mut out = vec![v[0].clone(); outer * depth * inner];
    for o in 0..outer {
        for j in 0..inner {
            if let Some(h) = hot[o * inner + j] {
                out[(o * depth + h) * inner + j] = v[1].clone();
            }
        }
    }
    out
}

fn one_hot(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let indices = ctx.input(0)?;
    let depth = ctx
        .scalar_input(1)?
        .ok_or_else(|| ctx.err("depth is required"))?;
    let values = ctx.input(2)?;
    if values.len() != 2 {
        return Err(ctx.err(format!(
            "values must hold [off, on], got shape {:?}",
            values.shape()
        )));
    }
    if depth.is_nan() || depth < 1.0 || depth > i64::MAX as f64 {
        return Err(ctx.err(format!("depth must be positive, got {depth}")));
    }
    let depth = depth as i64;
    if indices.dtype() == DType::String || indices.dtype() == DType::Bool {
        return Err(ctx.err(format!("indices must be numeric, got {}", indices.dtype())));
    }
    let rank = indices.rank() + 1;
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, rank)?;
    let mut shape = indices.shape().to_vec();
    shape.insert(axis, depth as usize);
    ctx.numel(&shape)?;
    let outer: usize = indices.shape()[..axis].iter().product();
    let inner: usize = indices.shape()[axis..].iter().product();
    // Position of the hot element of each index (None: out of range, all off).
    let hot: Vec<Option<usize>> = (0..indices.len())
        .map(|i| {
            let v = indices.data().get_f64(i) as i64;
            let v = if v < 0 { v + depth } else { v };
            (0..depth).contains(&v).then_some(v as usize)
        })
        .collect();
    let data = with_any!(values.data(), T, v => T::into_data(expand::<T>(v, &hot, outer, depth as usize, inner)));
    Ok(vec![ctx.tensor(shape, data)?])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(axis: i64) -> Node {
        rtq_test_support::node("OneHot", &[("axis", Attr::Int(axis))], 1)
    }

    #[test]
    fn one_hot_last_and_first_axis() {
        let idx = Tensor::from_i64(vec![3], vec![0, -1, 5]);
        let depth = Tensor::from_i64(vec![], vec![3]);
        let values = Tensor::from_f32(vec![2], vec![0.0, 1.0]);
        let y = eval_node(&node(-1), &[Some(&idx), Some(&depth), Some(&values)])
            .unwrap()
            .remove(0);
        assert_eq!(y.shape(), &[3, 3]);
        assert_eq!(
            y.as_f32().unwrap(),
            &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
        );
        let y = eval_node(&node(0), &[Some(&idx), Some(&depth), Some(&values)])
            .unwrap()
            .remove(0);
        assert_eq!(
            y.as_f32().unwrap(),
            &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
        );
        let zero = Tensor::from_i64(vec![], vec![0]);
        assert!(eval_node(&node(-1), &[Some(&idx), Some(&zero), Some(&values)]).is_err());
    }
}
