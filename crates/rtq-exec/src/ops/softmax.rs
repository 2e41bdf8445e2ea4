//! Softmax, LogSoftmax and Hardmax over one axis (opset-13 semantics, default -1).

use crate::ctx::OpCtx;
use crate::float::tensor_from_f32;
use crate::par;
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::Tensor;

/// Softmax-family kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("Softmax", softmax),
    ("LogSoftmax", log_softmax),
    ("Hardmax", hardmax),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Soft,
    LogSoft,
    Hard,
}

/// Applies the op along `axis`: each (outer, inner) position sees a strided line of
/// `len` elements.
fn along_axis(ctx: &OpCtx<'_>, kind: Kind) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.rank())?;
    let shape = x.shape();
    let len = shape.get(axis).copied().unwrap_or(1);
    let inner: usize = shape.get(axis + 1..).map_or(1, |s| s.iter().product());
    let data = ctx.float_input(0)?;
    let mut out = vec![0.0f32; data.len()];
    let block = len * inner;
    if block == 0 {
        return Ok(vec![tensor_from_f32(dtype, shape.to_vec(), out)]);
    }
    par::chunks_mut(&mut out, block, data.len() * 4, |o, dst| {
        let src = &data[o * block..][..block];
        let mut line = vec![0.0f32; len];
        for j in 0..inner {
            for (i, l) in line.iter_mut().enumerate() {
                *l = src[i * inner + j];
            }
            line_op(&mut line, kind);
            for (i, &l) in line.iter().enumerate() {
                dst[i * inner + j] = l;
            }
        }
    });
    Ok(vec![tensor_from_f32(dtype, shape.to_vec(), out)])
}

/// The op applied in place to one contiguous line.
fn line_op(line: &mut [f32], kind: Kind) {
    let max = line.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    match kind {
        Kind::Hard => {
            let at = line.iter().position(|&v| v == max).unwrap_or(0);
            line.iter_mut().for_each(|v| *v = 0.0);
            if let Some(v) = line.get_mut(at) {
                *v = 1.0;
            }
        }
        Kind::Soft => {
            let mut sum = 0.0f64;
            for v in line.iter_mut() {
                *v = (*v - max).exp();
                sum += *v as f64;
            }
            let inv = (1.0 / sum) as f32;
            line.iter_mut().for_each(|v| *v *= inv);
        }
        Kind::LogSoft => {
            let sum: f64 = line.iter().map(|&v| ((v - max) as f64).exp()).sum();
            let log_sum = sum.ln() as f32;
            line.iter_mut().for_each(|v| *v = *v - max - log_sum);
        }
    }
}

fn softmax(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    along_axis(ctx, Kind::Soft)
}

fn log_softmax(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    along_axis(ctx, Kind::LogSoft)
}

fn hardmax(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    along_axis(ctx, Kind::Hard)
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(op: &str, axis: Option<i64>) -> Node {
        let attrs: Vec<(&str, Attr)> = axis.map(|a| ("axis", Attr::Int(a))).into_iter().collect();
        rtq_test_support::node(op, &attrs, 1)
    }

    fn run(op: &str, axis: Option<i64>, x: &Tensor) -> Vec<f32> {
        eval_node(&node(op, axis), &[Some(x)]).unwrap()[0]
            .as_f32()
            .unwrap()
            .to_vec()
    }

    fn close(a: &[f32], b: &[f32]) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-6, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn softmax_last_and_middle_axes() {
        let x = Tensor::from_f32(vec![2, 2], vec![1000.0, 1000.0, 10.0, 10.0 + 2f32.ln()]);
        close(&run("Softmax", None, &x), &[0.5, 0.5, 1.0 / 3.0, 2.0 / 3.0]);
        // Axis 0 of [[0, ln 3],[0, 0]]: columns normalise.
        let x = Tensor::from_f32(vec![2, 2], vec![0.0, 3f32.ln(), 0.0, 0.0]);
        close(&run("Softmax", Some(0), &x), &[0.5, 0.75, 0.5, 0.25]);
        close(
            &run("LogSoftmax", Some(-2), &x),
            &[0.5f32.ln(), 0.75f32.ln(), 0.5f32.ln(), 0.25f32.ln()],
        );
    }

    #[test]
    fn hardmax_picks_first_maximum() {
        let x = Tensor::from_f32(vec![2, 3], vec![1.0, 3.0, 3.0, -1.0, -2.0, -3.0]);
        assert_eq!(run("Hardmax", None, &x), vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.0]);
    }

    #[test]
    fn bad_axis_is_an_error() {
        let x = Tensor::from_f32(vec![2], vec![1.0, 2.0]);
        assert!(eval_node(&node("Softmax", Some(1)), &[Some(&x)]).is_err());
    }
}
