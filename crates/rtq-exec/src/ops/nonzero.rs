//! NonZero: the coordinates of every non-zero element, as an `[rank, count]` i64 tensor.

use crate::ctx::OpCtx;
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{DType, Tensor, TensorData};

/// NonZero kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("NonZero", non_zero)];

fn non_zero(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    if x.dtype() == DType::String {
        return Err(ctx.err("NonZero is not defined on string tensors"));
    }
    let d = x.data();
    let hits: Vec<usize> = (0..x.len()).filter(|&i| d.get_f64(i) != 0.0).collect();
    let rank = x.rank();
    let shape = x.shape();
    let mut out = vec![0i64; rank * hits.len()];
    for (k, &flat) in hits.iter().enumerate() {
        let mut rem = flat;
        for a in (0..rank).rev() {
            out[a * hits.len() + k] = (rem % shape[a]) as i64;
            rem /= shape[a];
        }
    }
    let rows = if rank == 0 { 1 } else { rank };
    let out = if rank == 0 { vec![0; hits.len()] } else { out };
    Ok(vec![
        ctx.tensor(vec![rows, hits.len()], TensorData::I64(out))?
    ])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::Tensor;

    #[test]
    fn coordinates_of_nonzeros() {
        let n = rtq_test_support::node("NonZero", &[], 1);
        let x = Tensor::from_f32(vec![2, 2], vec![1.0, 0.0, 0.0, 3.0]);
        let y = eval_node(&n, &[Some(&x)]).unwrap().remove(0);
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[2usize, 2][..], &[0, 1, 0, 1][..])
        );
        let z = Tensor::from_i64(vec![3], vec![0, 0, 0]);
        assert_eq!(eval_node(&n, &[Some(&z)]).unwrap()[0].shape(), &[1, 0]);
    }
}
