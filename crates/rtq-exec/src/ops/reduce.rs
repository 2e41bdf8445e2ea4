//! Reductions: ReduceSum (axes as input, noop_with_empty_axes) and ReduceMean, Max,
//! Min, Prod, L1, L2, SumSquare, LogSum and LogSumExp (axes as attribute), all with
//! keepdims.
//!
//! The reduced axes are moved last (a strided copy, skipped when they already are) so
//! every output element reduces one contiguous block. Float reductions accumulate in
//! f64; integer ones in their own type (wrapping).

use rayon::prelude::*;

use crate::ctx::OpCtx;
use crate::elem::{max_elem, min_elem, with_numeric, Elem};
use crate::float::{f32_view, from_f32};
use crate::par::PAR_MIN_ELEMS;
use crate::registry::Kernel;
use crate::strided::{dense_strides, gather, View};
use crate::ExecError;
use rtq_ir::{DType, Tensor};
use std::borrow::Cow;

/// Reduction kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("ReduceSum", reduce_sum),
    ("ReduceMean", reduce_mean),
    ("ReduceMax", reduce_max),
    ("ReduceMin", reduce_min),
    ("ReduceProd", reduce_prod),
    ("ReduceL1", reduce_l1),
    ("ReduceL2", reduce_l2),
    ("ReduceSumSquare", reduce_sum_square),
    ("ReduceLogSum", reduce_log_sum),
    ("ReduceLogSumExp", reduce_log_sum_exp),
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Red {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    SumSquare,
    LogSum,
    LogSumExp,
}

fn reduce_block_f32(b: &[f32], red: Red) -> f32 {
    let n = b.len() as f64;
    let r = match red {
        Red::Sum => b.iter().map(|&v| v as f64).sum::<f64>(),
        Red::Mean => b.iter().map(|&v| v as f64).sum::<f64>() / n,
        Red::Max => return b.iter().copied().fold(f32::NEG_INFINITY, max_elem),
        Red::Min => return b.iter().copied().fold(f32::INFINITY, min_elem),
        Red::Prod => b.iter().map(|&v| v as f64).product::<f64>(),
        Red::L1 => b.iter().map(|&v| (v as f64).abs()).sum::<f64>(),
        Red::L2 => b.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt(),
        Red::SumSquare => b.iter().map(|&v| (v as f64).powi(2)).sum::<f64>(),
        Red::LogSum => b.iter().map(|&v| v as f64).sum::<f64>().ln(),
        Red::LogSumExp => {
            let m = b.iter().copied().fold(f32::NEG_INFINITY, max_elem) as f64;
            if m.is_infinite() || m.is_nan() {
                return (b.iter().map(|&v| (v as f64).exp()).sum::<f64>()).ln() as f32;
            }
            b.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln() + m
        }
    };
    r as f32
}

fn reduce_block<T: Elem>(b: &[T], red: Red) -> T {
    match red {
        Red::Sum => b.iter().fold(T::zero(), |a, &v| a.add(v)),
        Red::Mean => {
            let s = b.iter().fold(T::zero(), |a, &v| a.add(v));
            if T::IS_FLOAT {
                T::from_f64(s.to_f64() / b.len() as f64)
            } else {
                s.div(T::from_f64(b.len() as f64))
            }
        }
        Red::Max => b.iter().copied().fold(T::lowest(), max_elem),
        Red::Min => b.iter().copied().fold(T::highest(), min_elem),
        Red::Prod => b.iter().fold(T::one(), |a, &v| a.mul(v)),
        Red::L1 => b.iter().fold(T::zero(), |a, &v| a.add(v.abs())),
        Red::SumSquare => b.iter().fold(T::zero(), |a, &v| a.add(v.mul(v))),
        Red::L2 => T::from_f64(b.iter().map(|&v| v.to_f64().powi(2)).sum::<f64>().sqrt()),
        Red::LogSum => T::from_f64(b.iter().map(|&v| v.to_f64()).sum::<f64>().ln()),
        Red::LogSumExp => T::from_f64(b.iter().map(|&v| v.to_f64().exp()).sum::<f64>().ln()),
    }
}

/// Reduces consecutive `len`-element blocks of `v` into `out_len` values.
fn reduce_blocks<T: Copy + Send + Sync>(
    v: &[T],
    len: usize,
    out_len: usize,
    f: impl Fn(&[T]) -> T + Sync + Send,
) -> Vec<T> {
    if len == 0 {
        return (0..out_len).map(|_| f(&[])).collect();
    }
    if v.len() >= PAR_MIN_ELEMS && out_len > 1 {
        v.par_chunks(len).map(f).collect()
    } else {
        v.chunks(len).map(f).collect()
    }
}

/// `v` (shape `shape`) with the `reduced` axes moved last, borrowed when already so.
fn reduced_last<'a, T: Clone + Default + Send + Sync>(
    v: &'a [T],
    shape: &[usize],
    reduced: &[bool],
) -> Cow<'a, [T]> {
    let kept: Vec<usize> = (0..shape.len()).filter(|&a| !reduced[a]).collect();
    let red: Vec<usize> = (0..shape.len()).filter(|&a| reduced[a]).collect();
    let order: Vec<usize> = kept.iter().chain(red.iter()).copied().collect();
    let trailing = order.iter().enumerate().all(|(i, &a)| i == a);
    if trailing {
        return Cow::Borrowed(v);
    }
    let dense = dense_strides(shape);
    let view = View {
        offset: 0,
        shape: order.iter().map(|&a| shape[a]).collect(),
        strides: order.iter().map(|&a| dense[a]).collect(),
    };
    Cow::Owned(gather(v, &view))
}

fn reduce(ctx: &OpCtx<'_>, red: Red, axes_from_input: bool) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let rank = x.rank();
    let keepdims = ctx.attr_int("keepdims", 1)? != 0;
    let noop_empty = ctx.attr_int("noop_with_empty_axes", 0)? != 0;
    // Opset-13 convention: ReduceSum takes axes as input, the others as an attribute; the
    // other form is accepted too so opset-18 graphs run unchanged.
    let axes = if axes_from_input {
        match ctx.opt_ints_input(1)? {
            Some(a) => Some(a),
            None => ctx.attr_ints("axes")?,
        }
    } else {
        match ctx.attr_ints("axes")? {
            Some(a) => Some(a),
            None => ctx.opt_ints_input(1)?,
        }
    };
    let axes = axes.unwrap_or_default();
    // Empty axes reduce every axis, or none under noop_with_empty_axes: each element is
    // then a block of its own, so ReduceL1 still yields |x| and ReduceLogSum ln x.
    let axes = match (axes.is_empty(), noop_empty) {
        (true, true) => Vec::new(),
        (true, false) => (0..rank).collect(),
        (false, _) => ctx.axes(&axes, rank)?,
    };
    let shape = x.shape();
    let mut reduced = vec![false; rank];
    for &a in &axes {
        reduced[a] = true;
    }
    let len: usize = axes.iter().map(|&a| shape[a]).product();
    let out_len: usize = (0..rank)
        .filter(|&a| !reduced[a])
        .map(|a| shape[a])
        .product();
    let out_shape: Vec<usize> = (0..rank)
        .filter_map(|a| match (reduced[a], keepdims) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(shape[a]),
        })
        .collect();
    let dtype = x.dtype();
    let data = if dtype.is_float() && dtype != DType::F64 {
        let v = f32_view(x).ok_or_else(|| ctx.err("float input could not be read"))?;
        let v = reduced_last(&v, shape, &reduced);
        from_f32(
            dtype,
            reduce_blocks(&v, len, out_len, |b| reduce_block_f32(b, red)),
        )
    } else {
        with_numeric!(x.data(), T, v => {
            let v = reduced_last(v, shape, &reduced);
            T::wrap(reduce_blocks(&v, len, out_len, |b| reduce_block::<T>(b, red)))
        }, _ => return Err(ctx.err(format!("reductions are not defined on {dtype} tensors"))))
    };
    Ok(vec![ctx.tensor(out_shape, data)?])
}

fn reduce_sum(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    reduce(ctx, Red::Sum, true)
}

fn reduce_mean(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    reduce(ctx, Red::Mean, false)
}

fn reduce_max(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    reduce(ctx, Red::Max, false)
}

fn reduce_min(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    reduce(ctx, Red::Min, false)
}

fn reduce_prod(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    reduce(ctx, Red::Prod, false)
}

fn reduce_l1(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    reduce(ctx, Red::L1, false)
}

fn reduce_l2(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    reduce(ctx, Red::L2, false)
}

fn reduce_sum_square(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    reduce(ctx, Red::SumSquare, false)
}

fn reduce_log_sum(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    reduce(ctx, Red::LogSum, false)
}

fn reduce_log_sum_exp(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    reduce(ctx, Red::LogSumExp, false)
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(op: &str, attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node(op, attrs, 1)
    }

    /// [2,3] = [[1,2,3],[4,5,6]]
    fn x() -> Tensor {
        Tensor::from_f32(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    }

    fn run(op: &str, attrs: &[(&str, Attr)], axes_input: Option<&[i64]>) -> Tensor {
        let a = axes_input.map(|v| Tensor::from_i64(vec![v.len()], v.to_vec()));
        eval_node(&node(op, attrs), &[Some(&x()), a.as_ref()])
            .unwrap()
            .remove(0)
    }

    #[test]
    fn reduce_sum_axes_input_and_noop() {
        let y = run("ReduceSum", &[], Some(&[1]));
        assert_eq!(
            (y.shape(), y.as_f32().unwrap()),
            (&[2usize, 1][..], &[6.0, 15.0][..])
        );
        let y = run("ReduceSum", &[("keepdims", Attr::Int(0))], Some(&[0]));
        assert_eq!(
            (y.shape(), y.as_f32().unwrap()),
            (&[3usize][..], &[5.0, 7.0, 9.0][..])
        );
        let y = run("ReduceSum", &[("keepdims", Attr::Int(0))], None);
        assert_eq!((y.shape(), y.as_f32().unwrap()), (&[][..], &[21.0][..]));
        let y = run(
            "ReduceSum",
            &[("noop_with_empty_axes", Attr::Int(1))],
            Some(&[]),
        );
        assert_eq!(y, x());
    }

    #[test]
    fn attribute_axis_reductions() {
        let ax0 = ("axes", Attr::Ints(vec![0]));
        assert_eq!(
            run("ReduceMean", std::slice::from_ref(&ax0), None)
                .as_f32()
                .unwrap(),
            &[2.5, 3.5, 4.5]
        );
        assert_eq!(
            run("ReduceMax", &[("axes", Attr::Ints(vec![-1]))], None)
                .as_f32()
                .unwrap(),
            &[3.0, 6.0]
        );
        assert_eq!(
            run("ReduceMin", std::slice::from_ref(&ax0), None)
                .as_f32()
                .unwrap(),
            &[1.0, 2.0, 3.0]
        );
        assert_eq!(
            run("ReduceProd", std::slice::from_ref(&ax0), None)
                .as_f32()
                .unwrap(),
            &[4.0, 10.0, 18.0]
        );
        assert_eq!(run("ReduceL1", &[], None).as_f32().unwrap(), &[21.0]);
        assert_eq!(
            run("ReduceSumSquare", std::slice::from_ref(&ax0), None)
                .as_f32()
                .unwrap(),
            &[17.0, 29.0, 45.0]
        );
        let l2 = run("ReduceL2", std::slice::from_ref(&ax0), None);
        assert!((l2.as_f32().unwrap()[0] - 17f32.sqrt()).abs() < 1e-6);
        let lse = run("ReduceLogSumExp", &[("axes", Attr::Ints(vec![1]))], None);
        let want = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln() as f32;
        assert!((lse.as_f32().unwrap()[0] - want).abs() < 1e-6);
        assert_eq!(run("ReduceMean", &[], None).as_f32().unwrap(), &[3.5]);
    }

    #[test]
    fn reduce_log_sum_and_noop_with_empty_axes() {
        let close = |y: &Tensor, shape: &[usize], want: &[f64]| {
            assert_eq!(y.shape(), shape);
            let got = y.as_f32().unwrap();
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(want) {
                assert!((*g as f64 - w).abs() < 1e-6, "{got:?} vs {want:?}");
            }
        };
        let y = run("ReduceLogSum", &[("axes", Attr::Ints(vec![1]))], None);
        close(&y, &[2, 1], &[6f64.ln(), 15f64.ln()]);
        // Opset-18 form: axes as input.
        let y = run("ReduceLogSum", &[("keepdims", Attr::Int(0))], Some(&[0]));
        close(&y, &[3], &[5f64.ln(), 7f64.ln(), 9f64.ln()]);
        let y = run("ReduceLogSum", &[("keepdims", Attr::Int(0))], None);
        close(&y, &[], &[21f64.ln()]);
        // noop_with_empty_axes still takes the log of every element, as ONNX defines
        // ReduceLogSum as Log(ReduceSum).
        let noop = [("noop_with_empty_axes", Attr::Int(1))];
        let y = run("ReduceLogSum", &noop, Some(&[]));
        let logs: Vec<f64> = (1..=6).map(|v| (v as f64).ln()).collect();
        close(&y, &[2, 3], &logs);
        let y = run("ReduceSumSquare", &noop, Some(&[]));
        close(&y, &[2, 3], &[1.0, 4.0, 9.0, 16.0, 25.0, 36.0]);
        // An empty sum is 0, whose log is -inf.
        let empty = Tensor::from_f32(vec![0, 3], vec![]);
        let n = node("ReduceLogSum", &[("axes", Attr::Ints(vec![0]))]);
        let y = eval_node(&n, &[Some(&empty)]).unwrap().remove(0);
        assert_eq!(y.as_f32().unwrap(), &[f32::NEG_INFINITY; 3]);
    }

    #[test]
    fn middle_axis_and_integers() {
        let x = Tensor::from_i64(vec![2, 2, 2], (1..=8).collect());
        let n = node(
            "ReduceProd",
            &[("axes", Attr::Ints(vec![1])), ("keepdims", Attr::Int(0))],
        );
        let y = eval_node(&n, &[Some(&x)]).unwrap().remove(0);
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[2usize, 2][..], &[3, 8, 35, 48][..])
        );
        let n = node("ReduceSum", &[]);
        let axes = Tensor::from_i64(vec![2], vec![0, 2]);
        let y = eval_node(&n, &[Some(&x), Some(&axes)]).unwrap().remove(0);
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[1usize, 2, 1][..], &[14, 22][..])
        );
        let n = node("ReduceMax", &[("axes", Attr::Ints(vec![3]))]);
        assert!(eval_node(&n, &[Some(&x)]).is_err());
    }
}
