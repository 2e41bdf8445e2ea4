//! Trilu: keeps the upper or lower triangle (offset by `k`) of the last two axes.

use crate::ctx::OpCtx;
use crate::elem::{with_any, Storage};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::Tensor;

/// Trilu kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("Trilu", trilu)];

fn keep_triangle<T: Storage>(v: &[T], rows: usize, cols: usize, k: i64, upper: bool) -> Vec<T> {
    let mut out = v.to_vec();
    for chunk in out.chunks_mut((rows * cols).max(1)) {
        for i in 0..rows {
            for j in 0..cols {
                let d = j as i64 - i as i64;
                let keep = if upper { d >= k } else { d <= k };
                if !keep {
                    chunk[i * cols + j] = T::default();
                }
            }
        }
    }
    out
}

fn trilu(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        return Err(ctx.err(format!("input must be at least 2-D, got {:?}", x.shape())));
    }
    let k = match ctx.opt_ints_input(1)?.as_deref() {
        None => 0,
        Some([k]) => *k,
        Some(other) => return Err(ctx.err(format!("k must be a scalar, got {other:?}"))),
    };
    let upper = ctx.attr_int("upper", 1)? != 0;
    let (rows, cols) = (x.shape()[x.rank() - 2], x.shape()[x.rank() - 1]);
    let data =
        with_any!(x.data(), T, v => T::into_data(keep_triangle::<T>(v, rows, cols, k, upper)));
    Ok(vec![ctx.tensor(x.shape().to_vec(), data)?])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Tensor};

    fn run(upper: i64, k: Option<i64>) -> Vec<i64> {
        let n = rtq_test_support::node("Trilu", &[("upper", Attr::Int(upper))], 1);
        let x = Tensor::from_i64(vec![3, 3], (1..=9).collect());
        let k = k.map(|k| Tensor::from_i64(vec![], vec![k]));
        eval_node(&n, &[Some(&x), k.as_ref()]).unwrap()[0]
            .as_i64()
            .unwrap()
            .to_vec()
    }

    #[test]
    fn triangles_with_offsets() {
        assert_eq!(run(1, None), vec![1, 2, 3, 0, 5, 6, 0, 0, 9]);
        assert_eq!(run(0, None), vec![1, 0, 0, 4, 5, 0, 7, 8, 9]);
        assert_eq!(run(1, Some(1)), vec![0, 2, 3, 0, 0, 6, 0, 0, 0]);
        assert_eq!(run(0, Some(-1)), vec![0, 0, 0, 4, 0, 0, 7, 8, 0]);
    }
}
