//! CumSum along one axis (exclusive and reverse variants).

use crate::ctx::OpCtx;
use crate::elem::{with_numeric, Elem};
use crate::float::{f32_view, from_f32};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{DType, Tensor};

/// CumSum kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("CumSum", cumsum)];

fn cumsum_typed<T: Elem>(
    v: &[T],
    outer: usize,
    len: usize,
    inner: usize,
    exclusive: bool,
    reverse: bool,
) -> Vec<T> {
    let mut out = vec![T::zero(); v.len()];
    for o in 0..outer {
        for j in 0..inner {
            let mut acc = T::zero();
            for step in 0..len {
                let i = if reverse { len - 1 - step } else { step };
                let at = (o * len + i) * inner + j;
                if exclusive {
                    out[at] = acc;
                    acc = acc.add(v[at]);
                } else {
                    acc = acc.add(v[at]);
                    out[at] = acc;
                }
            }
        }
    }
    out
}

fn cumsum(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let axis = match ctx.ints_input(1)?.as_slice() {
        [a] => ctx.axis(*a, x.rank())?,
        other => return Err(ctx.err(format!("axis must be a scalar, got {other:?}"))),
    };
    let exclusive = ctx.attr_int("exclusive", 0)? != 0;
    let reverse = ctx.attr_int("reverse", 0)? != 0;
    let shape = x.shape();
    let len = shape.get(axis).copied().unwrap_or(1);
    let outer: usize = shape[..axis.min(shape.len())].iter().product();
    let inner: usize = shape.get(axis + 1..).map_or(1, |s| s.iter().product());
    let dtype = x.dtype();
    let data = if matches!(dtype, DType::F16 | DType::BF16) {
        let v = f32_view(x).ok_or_else(|| ctx.err("float input could not be read"))?;
        from_f32(
            dtype,
            cumsum_typed::<f32>(&v, outer, len, inner, exclusive, reverse),
        )
    } else {
        with_numeric!(x.data(), T, v => T::wrap(cumsum_typed::<T>(v, outer, len, inner, exclusive, reverse)),
            _ => return Err(ctx.err(format!("CumSum is not defined on {dtype} tensors"))))
    };
    Ok(vec![ctx.tensor(shape.to_vec(), data)?])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Tensor};

    fn run(attrs: &[(&str, Attr)], x: &Tensor, axis: i64) -> Tensor {
        let n = rtq_test_support::node("CumSum", attrs, 1);
        let a = Tensor::from_i64(vec![], vec![axis]);
        eval_node(&n, &[Some(x), Some(&a)]).unwrap().remove(0)
    }

    #[test]
    fn variants() {
        let x = Tensor::from_i64(vec![4], vec![1, 2, 3, 4]);
        assert_eq!(run(&[], &x, 0).as_i64().unwrap(), &[1, 3, 6, 10]);
        assert_eq!(
            run(&[("exclusive", Attr::Int(1))], &x, 0).as_i64().unwrap(),
            &[0, 1, 3, 6]
        );
        assert_eq!(
            run(&[("reverse", Attr::Int(1))], &x, -1).as_i64().unwrap(),
            &[10, 9, 7, 4]
        );
        assert_eq!(
            run(
                &[("reverse", Attr::Int(1)), ("exclusive", Attr::Int(1))],
                &x,
                0
            )
            .as_i64()
            .unwrap(),
            &[9, 7, 4, 0]
        );
        let m = Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(run(&[], &m, 0).as_f32().unwrap(), &[1.0, 2.0, 4.0, 6.0]);
    }
}
