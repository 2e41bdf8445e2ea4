//! MatMul (numpy semantics: 1-D promotion and batch broadcasting) and Gemm (alpha,
//! beta, transA, transB, optional broadcast C). Float products run on SGEMM; integer
//! MatMul uses a plain triple loop with wrapping arithmetic.

use rayon::prelude::*;

use crate::broadcast::{broadcast_shapes, broadcasts_to, Layout};
use crate::ctx::OpCtx;
use crate::elem::{with_numeric, Elem};
use crate::float::tensor_from_f32;
use crate::gemm::{sgemm, Mat};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::Tensor;

/// Matrix-product kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("MatMul", matmul), ("Gemm", gemm)];

/// SGEMM problems below this size run single-threaded in the gemm crate, so a batch of
/// them is spread over rayon instead.
const SMALL_GEMM: usize = 1 << 15;

/// The resolved shapes of a batched matrix product.
struct MatMulShape {
    m: usize,
    k: usize,
    n: usize,
    batch: Vec<usize>,
    a_batch: Vec<usize>,
    b_batch: Vec<usize>,
    out: Vec<usize>,
}

fn matmul_shape(ctx: &OpCtx<'_>, a: &[usize], b: &[usize]) -> Result<MatMulShape, ExecError> {
    if a.is_empty() || b.is_empty() {
        return Err(ctx.err("MatMul inputs must be at least 1-D"));
    }
    let (a_batch, m, ka) = if a.len() == 1 {
        (vec![], 1, a[0])
    } else {
        (a[..a.len() - 2].to_vec(), a[a.len() - 2], a[a.len() - 1])
    };
    let (b_batch, kb, n) = if b.len() == 1 {
        (vec![], b[0], 1)
    } else {
        (b[..b.len() - 2].to_vec(), b[b.len() - 2], b[b.len() - 1])
    };
    if ka != kb {
        return Err(ctx.err(format!("inner dimensions differ: A {a:?} and B {b:?}")));
    }
    let batch = broadcast_shapes(&[&a_batch, &b_batch]).ok_or_else(|| {
        ctx.err(format!(
            "batch dimensions of A {a:?} and B {b:?} do not broadcast"
        ))
    })?;
    let mut out = batch.clone();
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(MatMulShape {
        m,
        k: ka,
        n,
        batch,
        a_batch,
        b_batch,
        out,
    })
}

/// Element offsets of A's and B's matrices for every output batch entry.
fn batch_offsets(s: &MatMulShape) -> Vec<(usize, usize)> {
    let count: usize = s.batch.iter().product();
    let mut offsets = vec![(0usize, 0usize); count];
    let layout = Layout::new(&s.batch, [&s.a_batch, &s.b_batch]);
    layout.for_each_row(&mut offsets, |row, [oa, ob]| {
        let [sa, sb] = layout.inner_strides();
        for (i, o) in row.iter_mut().enumerate() {
            *o = ((oa + i * sa) * s.m * s.k, (ob + i * sb) * s.k * s.n);
        }
    });
    offsets
}

fn matmul(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let s = matmul_shape(ctx, a.shape(), b.shape())?;
    let (m, k, n) = (s.m, s.k, s.n);
    if a.dtype().is_float() {
        let dtype = a.dtype();
        let (x, y) = (ctx.float_input(0)?, ctx.float_input(1)?);
        let count: usize = s.batch.iter().product();
        let mut out = vec![0.0f32; count * m * n];
        if s.b_batch.iter().all(|&d| d == 1) && s.batch == s.a_batch {
            // B is shared by every batch entry: one tall product.
            let rows = count * m;
            sgemm(
                1.0,
                Mat::row_major(&x, rows, k),
                Mat::row_major(&y, k, n),
                0.0,
                &mut out,
                n,
            );
        } else {
            let offsets = batch_offsets(&s);
            let one = |(oa, ob): (usize, usize), dst: &mut [f32]| {
                sgemm(
                    1.0,
                    Mat::row_major(&x[oa..oa + m * k], m, k),
                    Mat::row_major(&y[ob..ob + k * n], k, n),
                    0.0,
                    dst,
                    n,
                );
            };
            let chunk = (m * n).max(1);
            if count > 1 && m * k + k * n < SMALL_GEMM {
                out.par_chunks_mut(chunk)
                    .zip(offsets.par_iter())
                    .for_each(|(dst, &o)| one(o, dst));
            } else {
                for (dst, &o) in out.chunks_mut(chunk).zip(&offsets) {
                    one(o, dst);
                }
            }
        }
        return Ok(vec![tensor_from_f32(dtype, s.out, out)]);
    }
    if a.dtype() != b.dtype() {
        return Err(ctx.err(format!(
            "inputs have different element types ({} and {})",
            a.dtype(),
            b.dtype()
        )));
    }
    let offsets = batch_offsets(&s);
    let data = with_numeric!(a.data(), T, x => {
        let y = T::slice(b.data()).ok_or_else(|| ctx.err("element types differ"))?;
        T::wrap(int_matmul::<T>(x, y, &offsets, m, k, n))
    }, _ => return Err(ctx.err(format!("MatMul is not defined on {} tensors", a.dtype()))));
    Ok(vec![ctx.tensor(s.out, data)?])
}

fn int_matmul<T: Elem>(
    x: &[T],
    y: &[T],
    offsets: &[(usize, usize)],
    m: usize,
    k: usize,
    n: usize,
) -> Vec<T> {
    let mut out = vec![T::zero(); offsets.len() * m * n];
    for (bi, &(oa, ob)) in offsets.iter().enumerate() {
        for i in 0..m {
            let row = &mut out[(bi * m + i) * n..][..n];
            for p in 0..k {
                let av = x[oa + i * k + p];
                let brow = &y[ob + p * n..][..n];
                for (o, &bv) in row.iter_mut().zip(brow) {
                    *o = o.add(av.mul(bv));
                }
            }
        }
    }
    out
}

fn gemm(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dtype = ctx.float_dtype(0)?;
    if a.rank() != 2 || b.rank() != 2 {
        return Err(ctx.err(format!(
            "A {:?} and B {:?} must be 2-D",
            a.shape(),
            b.shape()
        )));
    }
    let alpha = ctx.attr_float("alpha", 1.0)?;
    let beta = ctx.attr_float("beta", 1.0)?;
    let trans_a = ctx.attr_int("transA", 0)? != 0;
    let trans_b = ctx.attr_int("transB", 0)? != 0;
    let x = ctx.float_input(0)?;
    let y = ctx.float_input(1)?;
    let am = Mat::row_major(&x, a.shape()[0], a.shape()[1]);
    let bm = Mat::row_major(&y, b.shape()[0], b.shape()[1]);
    let am = if trans_a { am.t() } else { am };
    let bm = if trans_b { bm.t() } else { bm };
    let (m, k, n) = (am.rows, am.cols, bm.cols);
    if bm.rows != k {
        return Err(ctx.err(format!(
            "inner dimensions differ: A {:?} (transA={}) and B {:?} (transB={})",
            a.shape(),
            trans_a as u8,
            b.shape(),
            trans_b as u8
        )));
    }
    let mut out = vec![0.0f32; m * n];
    let mut acc = 0.0;
    if let (Some(c), true) = (ctx.opt_input(2), beta != 0.0) {
        if !broadcasts_to(c.shape(), &[m, n]) {
            return Err(ctx.err(format!(
                "C of shape {:?} does not broadcast to [{m}, {n}]",
                c.shape()
            )));
        }
        let cv = ctx.float_input(2)?;
        let layout = Layout::new(&[m, n], [c.shape()]);
        let [sc] = layout.inner_strides();
        layout.for_each_row(&mut out, |row, [oc]| {
            for (i, o) in row.iter_mut().enumerate() {
                *o = beta * cv[oc + i * sc];
            }
        });
        acc = 1.0;
    }
    sgemm(alpha, am, bm, acc, &mut out, n);
    Ok(vec![tensor_from_f32(dtype, vec![m, n], out)])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(op: &str, attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node(op, attrs, 1)
    }

    fn run(op: &str, attrs: &[(&str, Attr)], inputs: &[Option<&Tensor>]) -> Tensor {
        eval_node(&node(op, attrs), inputs).unwrap().remove(0)
    }

    #[test]
    fn gemm_transposes_alpha_beta_and_bias_broadcast() {
        // A^T where A = [[1,2],[3,4],[5,6]] (3x2) -> 2x3 ; B = I3 scaled.
        let a = Tensor::from_f32(vec![3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = Tensor::from_f32(
            vec![3, 3],
            vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        );
        let c = Tensor::from_f32(vec![3], vec![10.0, 20.0, 30.0]);
        let y = run(
            "Gemm",
            &[
                ("transA", Attr::Int(1)),
                ("alpha", Attr::Float(2.0)),
                ("beta", Attr::Float(0.5)),
            ],
            &[Some(&a), Some(&b), Some(&c)],
        );
        assert_eq!(y.shape(), &[2, 3]);
        assert_eq!(y.as_f32().unwrap(), &[7.0, 16.0, 25.0, 9.0, 18.0, 27.0]);
        // transB: x (1x2) . W^T with W (3x2), column bias (2x1 -> broadcast fails for m=1? use [1,1]).
        let x = Tensor::from_f32(vec![1, 2], vec![1.0, -1.0]);
        let c1 = Tensor::from_f32(vec![1, 1], vec![100.0]);
        let y = run(
            "Gemm",
            &[("transB", Attr::Int(1))],
            &[Some(&x), Some(&a), Some(&c1)],
        );
        assert_eq!(y.as_f32().unwrap(), &[99.0, 99.0, 99.0]);
        // Without C.
        let y = run(
            "Gemm",
            &[("transB", Attr::Int(1))],
            &[Some(&x), Some(&a), None],
        );
        assert_eq!(y.as_f32().unwrap(), &[-1.0, -1.0, -1.0]);
        let bad = Tensor::from_f32(vec![2], vec![0.0; 2]);
        assert!(eval_node(
            &node("Gemm", &[("transB", Attr::Int(1))]),
            &[Some(&x), Some(&a), Some(&bad)]
        )
        .is_err());
    }

    #[test]
    fn matmul_broadcasts_batches_and_promotes_vectors() {
        // A: [2,1,2,2], B: [3,2,1] -> [2,3,2,1]
        let a = Tensor::from_f32(
            vec![2, 1, 2, 2],
            vec![1.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 2.0],
        );
        let b = Tensor::from_f32(vec![3, 2, 1], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let y = run("MatMul", &[], &[Some(&a), Some(&b)]);
        assert_eq!(y.shape(), &[2, 3, 2, 1]);
        assert_eq!(
            y.as_f32().unwrap(),
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
        );
        // Vector promotion: [2] x [2,3] -> [3]; [2,3] x [3] -> [2]; [2] x [2] -> [].
        let v = Tensor::from_f32(vec![2], vec![1.0, 2.0]);
        let m = Tensor::from_f32(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let y = run("MatMul", &[], &[Some(&v), Some(&m)]);
        assert_eq!(
            (y.shape(), y.as_f32().unwrap()),
            (&[3usize][..], &[9.0, 12.0, 15.0][..])
        );
        let w = Tensor::from_f32(vec![3], vec![1.0, 0.0, -1.0]);
        let y = run("MatMul", &[], &[Some(&m), Some(&w)]);
        assert_eq!(
            (y.shape(), y.as_f32().unwrap()),
            (&[2usize][..], &[-2.0, -2.0][..])
        );
        let y = run("MatMul", &[], &[Some(&v), Some(&v)]);
        assert_eq!((y.shape(), y.as_f32().unwrap()), (&[][..], &[5.0][..]));
    }

    #[test]
    fn matmul_shared_weights_and_integers() {
        // [2,2,2] x [2,1]: the shared-B fast path.
        let a = Tensor::from_f32(vec![2, 2, 2], (1..=8).map(|v| v as f32).collect());
        let b = Tensor::from_f32(vec![2, 1], vec![1.0, 1.0]);
        let y = run("MatMul", &[], &[Some(&a), Some(&b)]);
        assert_eq!(y.as_f32().unwrap(), &[3.0, 7.0, 11.0, 15.0]);
        let ai = Tensor::from_i64(vec![2, 2], vec![1, 2, 3, 4]);
        let y = run("MatMul", &[], &[Some(&ai), Some(&ai)]);
        assert_eq!(y.as_i64().unwrap(), &[7, 10, 15, 22]);
        let bad = Tensor::from_f32(vec![3, 1], vec![0.0; 3]);
        let err = eval_node(&node("MatMul", &[]), &[Some(&a), Some(&bad)]).unwrap_err();
        assert!(err.to_string().contains("inner dimensions"), "{err}");
    }
}
