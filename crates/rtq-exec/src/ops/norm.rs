//! Normalisations: BatchNormalization (inference form), InstanceNormalization,
//! LayerNormalization, GroupNormalization, MeanVarianceNormalization,
//! LpNormalization and LRN. Statistics accumulate in f64.

use rayon::prelude::*;

use crate::broadcast::{broadcasts_to, Layout};
use crate::ctx::OpCtx;
use crate::float::tensor_from_f32;
use crate::par::{self, PAR_MIN_ELEMS};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{DType, Tensor};

/// Normalisation kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("BatchNormalization", batch_norm),
    ("InstanceNormalization", instance_norm),
    ("LayerNormalization", layer_norm),
    ("GroupNormalization", group_norm),
    ("MeanVarianceNormalization", mean_variance_norm),
    ("LpNormalization", lp_norm),
    ("LRN", lrn),
];

/// Mean and 1/sqrt(variance + eps) of each of the `groups` consecutive `len`-element
/// groups of `x` (empty groups have mean 0 and variance 0).
fn group_stats(x: &[f32], groups: usize, len: usize, eps: f64) -> Vec<(f32, f32)> {
    let stats = |g: &[f32]| {
        if g.is_empty() {
            return (0.0, (1.0 / eps.sqrt()) as f32);
        }
        let n = g.len() as f64;
        let mean = g.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = g.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        (mean as f32, (1.0 / (var + eps).sqrt()) as f32)
    };
    if len == 0 {
        return vec![stats(&[]); groups];
    }
    if x.len() >= PAR_MIN_ELEMS {
        x.par_chunks(len).map(stats).collect()
    } else {
        x.chunks(len).map(stats).collect()
    }
}

/// Checks that a per-channel parameter input holds `c` elements.
fn per_channel<'a>(
    ctx: &OpCtx<'a>,
    slot: usize,
    c: usize,
    what: &str,
) -> Result<std::borrow::Cow<'a, [f32]>, ExecError> {
    let v = ctx.float_input(slot)?;
    if v.len() != c {
        return Err(ctx.err(format!("{what} has {} elements, expected {c}", v.len())));
    }
    Ok(v)
}

fn channels(ctx: &OpCtx<'_>, x: &Tensor) -> Result<(usize, usize, usize), ExecError> {
    if x.rank() < 2 {
        return Err(ctx.err(format!("X must be at least 2-D, got shape {:?}", x.shape())));
    }
    let sp: usize = x.shape()[2..].iter().product();
    Ok((x.shape()[0], x.shape()[1], sp))
}

/// `y = x * a[c] + b[c]` over (N, C, spatial) data.
fn channel_affine(x: &[f32], c: usize, sp: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len()];
    par::chunks_mut(&mut out, sp.max(1), x.len(), |plane, dst| {
        let ch = plane % c;
        let src = &x[plane * sp..][..sp];
        for (o, &v) in dst.iter_mut().zip(src) {
            *o = v * a[ch] + b[ch];
        }
    });
    out
}

fn batch_norm(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    if ctx.attr_int("training_mode", 0)? != 0 {
        return Err(ctx.err("training_mode=1 is not supported by the inference executor"));
    }
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let (_, c, sp) = channels(ctx, x)?;
    let scale = per_channel(ctx, 1, c, "scale")?;
    let bias = per_channel(ctx, 2, c, "B")?;
    let mean = per_channel(ctx, 3, c, "mean")?;
    let var = per_channel(ctx, 4, c, "var")?;
    let mut a = vec![0.0f32; c];
    let mut b = vec![0.0f32; c];
    for i in 0..c {
        let inv = 1.0 / (var[i] as f64 + eps).sqrt();
        a[i] = (scale[i] as f64 * inv) as f32;
        b[i] = (bias[i] as f64 - mean[i] as f64 * scale[i] as f64 * inv) as f32;
    }
    let out = channel_affine(&ctx.float_input(0)?, c, sp, &a, &b);
    Ok(vec![tensor_from_f32(dtype, x.shape().to_vec(), out)])
}

fn instance_norm(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let (_, c, sp) = channels(ctx, x)?;
    let scale = per_channel(ctx, 1, c, "scale")?;
    let bias = per_channel(ctx, 2, c, "B")?;
    let data = ctx.float_input(0)?;
    let stats = group_stats(&data, data.len() / sp.max(1), sp, eps);
    let mut out = vec![0.0f32; data.len()];
    par::chunks_mut(&mut out, sp.max(1), data.len(), |plane, dst| {
        let ch = plane % c;
        let (mean, inv) = stats[plane];
        let (a, b) = (scale[ch] * inv, bias[ch] - mean * scale[ch] * inv);
        for (o, &v) in dst.iter_mut().zip(&data[plane * sp..][..sp]) {
            *o = v * a + b;
        }
    });
    Ok(vec![tensor_from_f32(dtype, x.shape().to_vec(), out)])
}

/// A parameter broadcast (unidirectionally) to `shape`, materialised.
fn expand_param(
    ctx: &OpCtx<'_>,
    slot: usize,
    shape: &[usize],
    what: &str,
) -> Result<Vec<f32>, ExecError> {
    let t = ctx.input(slot)?;
    if !broadcasts_to(t.shape(), shape) {
        return Err(ctx.err(format!(
            "{what} of shape {:?} does not broadcast to {shape:?}",
            t.shape()
        )));
    }
    let v = ctx.float_input(slot)?;
    let n: usize = shape.iter().product();
    let mut out = vec![0.0f32; n];
    let layout = Layout::new(shape, [t.shape()]);
    let [s] = layout.inner_strides();
    layout.for_each_row(&mut out, |row, [o]| {
        for (i, r) in row.iter_mut().enumerate() {
            *r = v[o + i * s];
        }
    });
    Ok(out)
}

fn layer_norm(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.rank())?;
    let norm_shape = &x.shape()[axis..];
    let len: usize = norm_shape.iter().product();
    let scale = expand_param(ctx, 1, norm_shape, "Scale")?;
    let bias = match ctx.opt_input(2) {
        Some(_) => Some(expand_param(ctx, 2, norm_shape, "B")?),
        None => None,
    };
    let data = ctx.float_input(0)?;
    let outer: usize = x.shape()[..axis].iter().product();
    let stats = group_stats(&data, outer, len, eps);
    let mut out = vec![0.0f32; data.len()];
    par::chunks_mut(&mut out, len.max(1), data.len(), |g, dst| {
        let (mean, inv) = stats[g];
        for (i, (o, &v)) in dst.iter_mut().zip(&data[g * len..][..len]).enumerate() {
            let y = (v - mean) * inv * scale[i];
            *o = match &bias {
                Some(b) => y + b[i],
                None => y,
            };
        }
    });
    let mut outputs = vec![tensor_from_f32(dtype, x.shape().to_vec(), out)];
    if ctx.num_outputs() > 1 {
        let mut stat_shape = x.shape()[..axis].to_vec();
        stat_shape.extend(std::iter::repeat_n(1, x.rank() - axis));
        let means = stats.iter().map(|s| s.0).collect();
        let invs = stats.iter().map(|s| s.1).collect();
        outputs.push(tensor_from_f32(DType::F32, stat_shape.clone(), means));
        outputs.push(tensor_from_f32(DType::F32, stat_shape, invs));
    }
    Ok(outputs)
}

fn group_norm(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let (_, c, sp) = channels(ctx, x)?;
    let groups = ctx.attr_int("num_groups", 0)?;
    if groups < 1 || c % groups as usize != 0 {
        return Err(ctx.err(format!(
            "num_groups={groups} must be positive and divide the {c} channels"
        )));
    }
    let groups = groups as usize;
    let per_group = c / groups;
    let scale = ctx.float_input(1)?;
    let bias = ctx.float_input(2)?;
    // Opset 21 gives one scale per channel, opset 18 one per group.
    let channel_of = |ch: usize, len: usize| if len == c { ch } else { ch / per_group };
    for (v, what) in [(&scale, "scale"), (&bias, "bias")] {
        if v.len() != c && v.len() != groups {
            return Err(ctx.err(format!(
                "{what} has {} elements, expected {c} (per channel) or {groups} (per group)",
                v.len()
            )));
        }
    }
    let data = ctx.float_input(0)?;
    let stats = group_stats(&data, x.shape()[0] * groups, per_group * sp, eps);
    let mut out = vec![0.0f32; data.len()];
    par::chunks_mut(&mut out, sp.max(1), data.len(), |plane, dst| {
        let ch = plane % c;
        let (mean, inv) = stats[plane / per_group];
        let (s, b) = (
            scale[channel_of(ch, scale.len())],
            bias[channel_of(ch, bias.len())],
        );
        for (o, &v) in dst.iter_mut().zip(&data[plane * sp..][..sp]) {
            *o = (v - mean) * inv * s + b;
        }
    });
    Ok(vec![tensor_from_f32(dtype, x.shape().to_vec(), out)])
}

fn mean_variance_norm(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let axes = ctx.attr_ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]);
    let axes = ctx.axes(&axes, x.rank())?;
    // Move the reduced axes last by iterating with explicit strides.
    let shape = x.shape();
    let kept: Vec<usize> = (0..x.rank()).filter(|a| !axes.contains(a)).collect();
    let strides: Vec<usize> = (0..x.rank())
        .map(|a| shape[a + 1..].iter().product())
        .collect();
    let offsets = |dims: &[usize]| -> Vec<usize> {
        let mut offs = vec![0usize];
        for &a in dims {
            offs = offs
                .iter()
                .flat_map(|&o| {
                    let step = strides[a];
                    (0..shape[a]).map(move |i| o + i * step)
                })
                .collect();
        }
        offs
    };
    let outer = offsets(&kept);
    let inner = offsets(&axes);
    let data = ctx.float_input(0)?;
    let mut out = vec![0.0f32; data.len()];
    let n = inner.len() as f64;
    for &o in &outer {
        let mean = inner.iter().map(|&i| data[o + i] as f64).sum::<f64>() / n;
        let var = inner
            .iter()
            .map(|&i| (data[o + i] as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        let denom = var.sqrt() + 1e-9;
        for &i in &inner {
            out[o + i] = ((data[o + i] as f64 - mean) / denom) as f32;
        }
    }
    Ok(vec![tensor_from_f32(dtype, shape.to_vec(), out)])
}

fn lp_norm(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.rank())?;
    let p = ctx.attr_int("p", 2)?;
    if p != 1 && p != 2 {
        return Err(ctx.err(format!("p must be 1 or 2, got {p}")));
    }
    let shape = x.shape();
    let (len, inner) = (shape[axis], shape[axis + 1..].iter().product::<usize>());
    let data = ctx.float_input(0)?;
    let mut out = vec![0.0f32; data.len()];
    let block = len * inner;
    par::chunks_mut(&mut out, block.max(1), data.len(), |o, dst| {
        let src = &data[o * block..][..block];
        for j in 0..inner {
            let norm = (0..len)
                .map(|i| {
                    let v = src[i * inner + j] as f64;
                    if p == 1 {
                        v.abs()
                    } else {
                        v * v
                    }
                })
                .sum::<f64>();
            let norm = if p == 2 { norm.sqrt() } else { norm };
            for i in 0..len {
                let v = src[i * inner + j];
                dst[i * inner + j] = if norm == 0.0 {
                    0.0
                } else {
                    (v as f64 / norm) as f32
                };
            }
        }
    });
    Ok(vec![tensor_from_f32(dtype, shape.to_vec(), out)])
}

fn lrn(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let size = ctx.attr_int("size", 0)?;
    if size < 1 {
        return Err(ctx.err(format!("size must be positive, got {size}")));
    }
    let size = size as usize;
    let alpha = ctx.attr_float("alpha", 1e-4)? as f64;
    let beta = ctx.attr_float("beta", 0.75)? as f64;
    let bias = ctx.attr_float("bias", 1.0)? as f64;
    let (n, c, sp) = channels(ctx, x)?;
    let (before, after) = ((size - 1) / 2, (size - 1).div_ceil(2));
    let data = ctx.float_input(0)?;
    let mut out = vec![0.0f32; data.len()];
    par::chunks_mut(&mut out, sp.max(1), n * c * sp * size, |plane, dst| {
        let (ni, ch) = (plane / c, plane % c);
        let lo = ch.saturating_sub(before);
        let hi = (ch + after).min(c - 1);
        for (s, o) in dst.iter_mut().enumerate() {
            let sq: f64 = (lo..=hi)
                .map(|k| (data[(ni * c + k) * sp + s] as f64).powi(2))
                .sum();
            let v = data[plane * sp + s] as f64;
            *o = (v / (bias + alpha / size as f64 * sq).powf(beta)) as f32;
        }
    });
    Ok(vec![tensor_from_f32(dtype, x.shape().to_vec(), out)])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Tensor};
    use rtq_test_support::node;

    fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= tol, "{a:?} vs {b:?}");
        }
    }

    fn t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32(shape.to_vec(), v.to_vec())
    }

    #[test]
    fn batch_norm_inference() {
        let x = t(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let scale = t(&[2], &[2.0, 1.0]);
        let b = t(&[2], &[0.5, 0.0]);
        let mean = t(&[2], &[1.0, 3.0]);
        let var = t(&[2], &[4.0, 1.0]);
        let n = node("BatchNormalization", &[("epsilon", Attr::Float(0.0))], 1);
        let y = eval_node(
            &n,
            &[Some(&x), Some(&scale), Some(&b), Some(&mean), Some(&var)],
        )
        .unwrap();
        close(y[0].as_f32().unwrap(), &[0.5, 1.5, 0.0, 1.0], 1e-6);
    }

    #[test]
    fn instance_and_group_norm() {
        let x = t(&[1, 2, 2], &[1.0, 3.0, 10.0, 20.0]);
        let ones = t(&[2], &[1.0, 1.0]);
        let zeros = t(&[2], &[0.0, 0.0]);
        let n = node("InstanceNormalization", &[("epsilon", Attr::Float(0.0))], 1);
        let y = eval_node(&n, &[Some(&x), Some(&ones), Some(&zeros)]).unwrap();
        close(y[0].as_f32().unwrap(), &[-1.0, 1.0, -1.0, 1.0], 1e-6);
        // One group over both channels: mean 8.5, std sqrt(55.25).
        let n = node(
            "GroupNormalization",
            &[("epsilon", Attr::Float(0.0)), ("num_groups", Attr::Int(1))],
            1,
        );
        let one = t(&[1], &[1.0]);
        let zero = t(&[1], &[0.0]);
        let y = eval_node(&n, &[Some(&x), Some(&one), Some(&zero)]).unwrap();
        let s = 55.25f32.sqrt();
        close(
            y[0].as_f32().unwrap(),
            &[-7.5 / s, -5.5 / s, 1.5 / s, 11.5 / s],
            1e-6,
        );
    }

    #[test]
    fn layer_norm_with_stats_outputs() {
        let x = t(&[2, 2], &[1.0, 3.0, 2.0, 6.0]);
        let scale = t(&[2], &[1.0, 2.0]);
        let b = t(&[2], &[0.0, 1.0]);
        let n = node("LayerNormalization", &[("epsilon", Attr::Float(0.0))], 3);
        let y = eval_node(&n, &[Some(&x), Some(&scale), Some(&b)]).unwrap();
        close(y[0].as_f32().unwrap(), &[-1.0, 3.0, -1.0, 3.0], 1e-6);
        assert_eq!(y[1].shape(), &[2, 1]);
        close(y[1].as_f32().unwrap(), &[2.0, 4.0], 0.0);
        close(y[2].as_f32().unwrap(), &[1.0, 0.5], 1e-7);
        // Scale over both axes of a [1,2,2] input with axis=1.
        let x3 = t(&[1, 2, 2], &[1.0, 3.0, 2.0, 6.0]);
        let s2 = t(&[2, 1], &[1.0, 10.0]);
        let n = node(
            "LayerNormalization",
            &[("axis", Attr::Int(1)), ("epsilon", Attr::Float(0.0))],
            1,
        );
        let y = eval_node(&n, &[Some(&x3), Some(&s2)]).unwrap();
        // mean 3, var (4+0+1+9)/4 = 3.5
        let s = 3.5f32.sqrt();
        close(
            y[0].as_f32().unwrap(),
            &[-2.0 / s, 0.0, -10.0 / s, 30.0 / s],
            1e-5,
        );
    }

    #[test]
    fn lp_norm_and_lrn() {
        let x = t(&[2, 2], &[3.0, 4.0, 0.0, 0.0]);
        let y = eval_node(&node("LpNormalization", &[], 1), &[Some(&x)]).unwrap();
        close(y[0].as_f32().unwrap(), &[0.6, 0.8, 0.0, 0.0], 1e-6);
        let y = eval_node(
            &node(
                "LpNormalization",
                &[("p", Attr::Int(1)), ("axis", Attr::Int(0))],
                1,
            ),
            &[Some(&x)],
        )
        .unwrap();
        close(y[0].as_f32().unwrap(), &[1.0, 1.0, 0.0, 0.0], 1e-6);
        // LRN size 3 over 3 channels of one pixel: x = [1,2,3].
        let x = t(&[1, 3, 1, 1], &[1.0, 2.0, 3.0]);
        let n = node(
            "LRN",
            &[
                ("size", Attr::Int(3)),
                ("alpha", Attr::Float(3.0)),
                ("beta", Attr::Float(1.0)),
                ("bias", Attr::Float(1.0)),
            ],
            1,
        );
        let y = eval_node(&n, &[Some(&x)]).unwrap();
        // denominators: 1 + (1+4) = 6, 1 + 14 = 15, 1 + (4+9) = 14
        close(
            y[0].as_f32().unwrap(),
            &[1.0 / 6.0, 2.0 / 15.0, 3.0 / 14.0],
            1e-6,
        );
    }

    #[test]
    fn mvn_normalises_over_axes() {
        let x = t(&[1, 1, 1, 2], &[1.0, 3.0]);
        let y = eval_node(&node("MeanVarianceNormalization", &[], 1), &[Some(&x)]).unwrap();
        close(y[0].as_f32().unwrap(), &[-1.0, 1.0], 1e-6);
    }

    #[test]
    fn parameter_shape_errors() {
        let x = t(&[1, 2, 2], &[1.0; 4]);
        let bad = t(&[3], &[1.0; 3]);
        let err = eval_node(
            &node("InstanceNormalization", &[], 1),
            &[Some(&x), Some(&bad), Some(&bad)],
        )
        .unwrap_err();
        assert!(err.to_string().contains("scale has 3 elements"), "{err}");
    }
}
