//! Activation-aware INT4 weight quantization (AWQ, as NVIDIA ModelOpt's `awq_lite` and
//! `awq_clip`): for each weight, the per-input-channel scale `s = mean|x|^alpha` that
//! minimizes the layer's output error on calibration activations, then each block's clip
//! ratio.
//!
//! Input channels that carry large activations matter most for the output; multiplying
//! their weight rows by `s > 1` before quantization gives them finer steps, and the
//! activation is divided by `s` (a `Mul` before the layer) so the product is unchanged
//! in exact arithmetic. `alpha` is searched on a grid (0 = plain round-to-nearest) by
//! the squared error of `X W` against `(X / s) deq(Q(W s))` on rows of the layer's real
//! inputs; then, per block of input channels and output channel, the fraction of the
//! block's range the scale covers (clipping the weight's outliers so the rest get finer
//! steps), by that block's share of the same error. Each step is kept only where it
//! lowers the layer's error. With GPTQ ([`crate::gptq`]), the scaled weight is then
//! rounded with error compensation on the second moments of all the activation rows of
//! the calibration files, kept too only where it lowers the layer's error.

use crate::gptq::Hessian;
use anyhow::{Context, Result};
use rtq_calib::{CalibrationSet, InputSpec};
use rtq_ir::{int4_from_f64, Graph, Node, NodeId, ScaleFormat, Tensor, ValueId};
use rtq_passes::quant::{
    dequantize_int4_blocks, int4_activations, int4_block_scale, quantize_int4_blocks, scale_rows,
    Int4Plan, Int4Site, Int4Tuning,
};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// `alpha` values tried for the input-channel scale (0: no scaling).
const ALPHAS: [f32; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// Clip ratios tried for every block after the scale is chosen.
const CLIPS: [f32; 11] = [1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5];

/// Activation rows kept per layer (spread over the calibration samples).
const MAX_ROWS: usize = 256;

/// What the search found for one layer.
#[derive(Debug, Clone, Serialize)]
pub struct AwqLayer {
    /// Node name.
    pub node: String,
    /// The chosen exponent (0: no input scaling).
    pub alpha: f32,
    /// The chosen clip ratio.
    pub clip: f32,
    /// Relative output error `||X W - X' W'|| / ||X W||` with round-to-nearest.
    pub rtn_error: f64,
    /// The same with the chosen scale and clip (AWQ).
    pub error: f64,
    /// The same with GPTQ's rounding of the AWQ-scaled weight (with AWQ's clip ratios),
    /// when it ran (it needs at least K activation rows).
    pub gptq_error: Option<f64>,
    /// Whether GPTQ's values were kept (`gptq_error < error`).
    pub gptq: bool,
    /// Activation rows measured.
    pub rows: usize,
    /// Activation rows in GPTQ's `H = X^T X` (0 without GPTQ).
    pub hessian_rows: usize,
}

/// Searches every site of `plan` on the calibration `files` of `set`, run through
/// `reference` (the FP32 graph), then, given `gptq_files` (calibration files whose
/// activations make GPTQ's `H`), rounds each weight with GPTQ; returns the tuning per
/// node and the per-layer record.
pub fn search(
    reference: &Graph,
    plan: &Int4Plan,
    block: usize,
    format: ScaleFormat,
    set: &CalibrationSet,
    files: &[usize],
    gptq_files: Option<&[usize]>,
) -> Result<(HashMap<NodeId, Int4Tuning>, Vec<AwqLayer>)> {
    let (rows, hessians) = collect_rows(reference, plan, set, files, gptq_files)?;
    let activation: HashMap<NodeId, ValueId> =
        int4_activations(reference, plan).into_iter().collect();
    let mut tuning = HashMap::new();
    let mut layers = Vec::new();
    for site in &plan.sites {
        let Some(x) = rows.get(&site.node).filter(|x| !x.is_empty()) else {
            continue;
        };
        let w = reference
            .constant(reference.node(site.node).input(1).expect("planned weight"))
            .expect("planned weight is constant")
            .to_f32_vec();
        let hessian = activation
            .get(&site.node)
            .and_then(|v| hessians.get(v))
            .filter(|h| h.rows > 0);
        let (t, layer) = search_layer(site, &w, x, hessian, block, format)
            .with_context(|| format!("AWQ on `{}`", reference.node(site.node).name))?;
        layers.push(AwqLayer {
            node: reference.node(site.node).name.clone(),
            ..layer
        });
        tuning.insert(site.node, t);
    }
    Ok((tuning, layers))
}

/// Activation rows kept per node.
type Rows = HashMap<NodeId, Vec<Vec<f32>>>;

/// Rows (length K) of each site's activation, at most [`MAX_ROWS`] per site, taken
/// evenly from every sample of `files`; with `hessian_files`, also `X^T X` of each
/// activation over all its rows in those files.
fn collect_rows(
    reference: &Graph,
    plan: &Int4Plan,
    set: &CalibrationSet,
    files: &[usize],
    hessian_files: Option<&[usize]>,
) -> Result<(Rows, HashMap<ValueId, Hessian>)> {
    let readers: BTreeMap<ValueId, Vec<NodeId>> = int4_activations(reference, plan)
        .into_iter()
        .fold(BTreeMap::new(), |mut m, (node, x)| {
            m.entry(x).or_insert_with(Vec::new).push(node);
            m
        });
    let k_of: HashMap<NodeId, usize> = plan.sites.iter().map(|s| (s.node, s.k)).collect();
    let specs = InputSpec::from_graph(reference)?;
    let exec = rtq_exec::Plan::new(reference).context("preparing the FP32 graph")?;
    let samples: usize = files.len().max(1);
    let per_sample = MAX_ROWS.div_ceil(samples);
    let mut rows: Rows = HashMap::new();
    let mut moments: HashMap<ValueId, Hessian> = HashMap::new();
    let mut all: Vec<usize> = files.to_vec();
    for f in hessian_files.unwrap_or_default() {
        if !all.contains(f) {
            all.push(*f);
        }
    }
    for &file in &all {
        let (rows_from, moments_from) = (
            files.contains(&file),
            hessian_files.is_some_and(|h| h.contains(&file)),
        );
        for sample in set.load(file, &specs)? {
            exec.run_observed(&sample, &mut |v, t| {
                let Some(nodes) = readers.get(&v) else {
                    return;
                };
                let values = t.to_f32_vec();
                if moments_from {
                    let k = k_of[&nodes[0]];
                    moments
                        .entry(v)
                        .or_insert_with(|| Hessian::new(k))
                        .add_rows(&values);
                }
                if !rows_from {
                    return;
                }
                for node in nodes {
                    let k = k_of[node];
                    let available = values.len() / k.max(1);
                    let step = available.div_ceil(per_sample).max(1);
                    let kept = rows.entry(*node).or_default();
                    for r in (0..available).step_by(step) {
                        if kept.len() < MAX_ROWS {
                            kept.push(values[r * k..(r + 1) * k].to_vec());
                        }
                    }
                }
            })
            .with_context(|| format!("FP32 run on {}", set.files()[file].display()))?;
        }
    }
    Ok((rows, moments))
}

/// The best scale exponent for one layer, then the best clip ratio of every block, then
/// (given the activations' second moments) GPTQ's rounding.
fn search_layer(
    site: &Int4Site,
    w: &[f32],
    x: &[Vec<f32>],
    hessian: Option<&Hessian>,
    block: usize,
    format: ScaleFormat,
) -> Result<(Int4Tuning, AwqLayer)> {
    let (k, n, r) = (site.k, site.n, x.len());
    let flat: Vec<f32> = x.iter().flatten().copied().collect();
    let xt = Tensor::from_f32(vec![r, k], flat.clone());
    let w_kn = as_kn(w, site);
    let exact = matmul(&xt, &Tensor::from_f32(vec![k, n], w_kn.clone()))?;
    let energy: f64 = exact
        .iter()
        .map(|&v| (v as f64).powi(2))
        .sum::<f64>()
        .max(f64::MIN_POSITIVE);
    let mean_abs: Vec<f32> = (0..k)
        .map(|c| (x.iter().map(|row| row[c].abs() as f64).sum::<f64>() / r as f64) as f32)
        .collect();
    let kn_site = Int4Site {
        transposed: false,
        ..site.clone()
    };
    let scaled_weight = |s: Option<&[f32]>| match s {
        Some(s) => scale_rows(&w_kn, &kn_site, s),
        None => w_kn.clone(),
    };
    // The output error of the dequantized weight `deq` ([K, N], scaled by `s`).
    let deq_error = |s: Option<&[f32]>, deq: Vec<f32>| -> Result<f64> {
        let xs = match s {
            Some(s) => Tensor::from_f32(
                vec![r, k],
                flat.iter()
                    .enumerate()
                    .map(|(i, &v)| v / s[i % k])
                    .collect(),
            ),
            None => xt.clone(),
        };
        let got = matmul(&xs, &Tensor::from_f32(vec![k, n], deq))?;
        Ok(exact
            .iter()
            .zip(&got)
            .map(|(&a, &b)| ((a - b) as f64).powi(2))
            .sum::<f64>())
    };
    // The output error of quantizing with input scale `s` and clip ratios `clip`.
    let error = |s: Option<&[f32]>, clip: &[f32]| -> Result<f64> {
        let (q, scales) = quantize_int4_blocks(&scaled_weight(s), &kn_site, block, clip, format);
        deq_error(s, dequantize_int4_blocks(&q, &scales, &kn_site, block))
    };
    let rtn = error(None, &[1.0])?;
    let (mut best_alpha, mut best_s, mut best) = (0.0f32, None::<Vec<f32>>, rtn);
    for &alpha in &ALPHAS[1..] {
        let s = input_scale(&mean_abs, alpha);
        let e = error(Some(&s), &[1.0])?;
        if e < best {
            (best_alpha, best_s, best) = (alpha, Some(s), e);
        }
    }
    let clip = block_clips(&w_kn, x, best_s.as_deref(), site, block, format);
    let clipped = error(best_s.as_deref(), &clip)?;
    let clip = if clipped < best {
        best = clipped;
        clip
    } else {
        vec![1.0]
    };
    let awq = best;
    let (mut gptq_error, mut precomputed) = (None, None);
    // With fewer rows than input channels H is singular: GPTQ would fit the calibration
    // rows (the error measured here is on the same rows), so it does not run.
    if let Some(h) = hessian.filter(|h| h.rows >= k) {
        let s = best_s.as_deref();
        let found = crate::gptq::gptq(&scaled_weight(s), k, n, &h.matrix(s), block, &clip, format);
        if let Some((q, scales)) = found {
            let e = deq_error(s, dequantize_int4_blocks(&q, &scales, &kn_site, block))?;
            gptq_error = Some((e / energy).sqrt());
            if e < best {
                precomputed = Some(stored_layout(q, scales, site, block));
            }
        }
    }
    let tuning = Int4Tuning {
        input_scale: best_s,
        clip,
        precomputed,
    };
    Ok((
        tuning.clone(),
        AwqLayer {
            node: String::new(),
            alpha: best_alpha,
            clip: tuning.mean_clip(),
            rtn_error: (rtn / energy).sqrt(),
            error: (awq / energy).sqrt(),
            gptq_error,
            gptq: tuning.precomputed.is_some(),
            rows: r,
            hessian_rows: hessian.map_or(0, |h| h.rows),
        },
    ))
}

/// INT4 values (`[K, N]`) and scales (`[blocks, N]`) in the weight's stored layout
/// (`[N, K]` and `[N, blocks]` when transposed).
fn stored_layout(
    q: Vec<i8>,
    scales: Vec<f32>,
    site: &Int4Site,
    block: usize,
) -> (Vec<i8>, Vec<f32>) {
    if !site.transposed {
        return (q, scales);
    }
    let (k, n, blocks) = (site.k, site.n, site.k.div_ceil(block));
    let mut qt = vec![0i8; q.len()];
    for kk in 0..k {
        for nn in 0..n {
            qt[nn * k + kk] = q[kk * n + nn];
        }
    }
    let mut st = vec![0.0f32; scales.len()];
    for b in 0..blocks {
        for nn in 0..n {
            st[nn * blocks + b] = scales[b * n + nn];
        }
    }
    (qt, st)
}

/// The clip ratio of every block and output channel (`ceil(K / block) x N`) that
/// minimizes that block's share of the output error, `d^T G d` with `d` the block's
/// weight error and `G` the Gram matrix of the (scaled) activations over its channels.
fn block_clips(
    w_kn: &[f32],
    x: &[Vec<f32>],
    s: Option<&[f32]>,
    site: &Int4Site,
    block: usize,
    format: ScaleFormat,
) -> Vec<f32> {
    let (k, n) = (site.k, site.n);
    let scale_of = |c: usize| s.map_or(1.0, |s| s[c]);
    let blocks = k.div_ceil(block);
    let mut clips = vec![1.0f32; blocks * n];
    for b in 0..blocks {
        let (lo, hi) = (b * block, ((b + 1) * block).min(k));
        let m = hi - lo;
        // G = X'^T X' over the block's channels, X' = X / s.
        let mut gram = vec![0.0f64; m * m];
        for row in x {
            let xs: Vec<f64> = (lo..hi).map(|c| (row[c] / scale_of(c)) as f64).collect();
            for i in 0..m {
                for j in i..m {
                    gram[i * m + j] += xs[i] * xs[j];
                }
            }
        }
        for i in 0..m {
            for j in 0..i {
                gram[i * m + j] = gram[j * m + i];
            }
        }
        for nn in 0..n {
            let wb: Vec<f32> = (lo..hi).map(|c| w_kn[c * n + nn] * scale_of(c)).collect();
            let amax = wb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let mut best = (f64::INFINITY, 1.0f32);
            for &ratio in &CLIPS {
                let Some(step) = int4_block_scale(amax, ratio, format) else {
                    continue;
                };
                let d: Vec<f64> = wb
                    .iter()
                    .map(|&v| (v - f32::from(int4_from_f64(f64::from(v / step))) * step) as f64)
                    .collect();
                let mut e = 0.0f64;
                for i in 0..m {
                    let gi = &gram[i * m..(i + 1) * m];
                    e += d[i] * gi.iter().zip(&d).map(|(g, dj)| g * dj).sum::<f64>();
                }
                if e < best.0 {
                    best = (e, ratio);
                }
            }
            clips[b * n + nn] = best.1;
        }
    }
    clips
}

/// `mean|x|^alpha` per channel, normalized so that the largest and smallest scales are
/// reciprocal (the weight's overall range stays put), with silent channels at 1.
fn input_scale(mean_abs: &[f32], alpha: f32) -> Vec<f32> {
    let floor = mean_abs.iter().copied().fold(0.0f32, f32::max) * 1e-4;
    let raw: Vec<f32> = mean_abs
        .iter()
        .map(|&m| m.max(floor).max(f32::MIN_POSITIVE).powf(alpha))
        .collect();
    let (lo, hi) = raw.iter().fold((f32::INFINITY, 0.0f32), |(lo, hi), &v| {
        (lo.min(v), hi.max(v))
    });
    let norm = (lo * hi).sqrt();
    raw.iter().map(|&v| v / norm).collect()
}

/// The weight as a row-major `[K, N]` matrix.
fn as_kn(w: &[f32], site: &Int4Site) -> Vec<f32> {
    if !site.transposed {
        return w.to_vec();
    }
    let mut out = vec![0.0f32; w.len()];
    for nn in 0..site.n {
        for kk in 0..site.k {
            out[kk * site.n + nn] = w[nn * site.k + kk];
        }
    }
    out
}

/// `a @ b` with the executor's MatMul kernel.
fn matmul(a: &Tensor, b: &Tensor) -> Result<Vec<f32>> {
    let node = Node {
        name: "awq".into(),
        op_type: "MatMul".into(),
        domain: String::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        attrs: BTreeMap::new(),
    };
    let out = rtq_exec::eval_node(&node, &[Some(a), Some(b)])?;
    Ok(out[0].to_f32_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_scales_are_balanced_powers_of_the_activation() {
        let s = input_scale(&[4.0, 1.0, 0.25], 0.5);
        // sqrt: 2, 1, 0.5 -> normalized by sqrt(2 * 0.5) = 1.
        assert_eq!(s, vec![2.0, 1.0, 0.5]);
        assert_eq!(input_scale(&[4.0, 1.0], 0.0), vec![1.0, 1.0]);
    }

    /// A 64 x 8 layer (`[K, N]` layout) with deterministic weights in [-0.1, 0.1].
    fn toy_layer() -> (Int4Site, Vec<f32>) {
        let (k, n) = (64, 8);
        let site = Int4Site {
            node: NodeId(0),
            k,
            n,
            transposed: false,
        };
        let w = (0..k * n)
            .map(|i| ((i * 7919 % 211) as f32 / 105.0 - 1.0) * 0.1)
            .collect();
        (site, w)
    }

    /// A layer whose first input channel carries activations 50x larger than the
    /// rest: scaling that channel's weights up beats round-to-nearest.
    #[test]
    fn an_outlier_channel_is_protected() {
        let (site, w) = toy_layer();
        let (k, n) = (site.k, site.n);
        let x: Vec<Vec<f32>> = (0..32)
            .map(|r| {
                (0..k)
                    .map(|c| {
                        let v = ((r * 31 + c * 17) % 23) as f32 / 11.0 - 1.0;
                        if c == 0 {
                            50.0 * v
                        } else {
                            v
                        }
                    })
                    .collect()
            })
            .collect();
        let (t, layer) = search_layer(&site, &w, &x, None, 32, ScaleFormat::F32).unwrap();
        assert!(layer.alpha > 0.0 && t.input_scale.is_some(), "{layer:?}");
        assert!(layer.error < 0.8 * layer.rtn_error, "{layer:?}");
        // The transposed layout finds the same.
        let wt = {
            let mut out = vec![0.0; k * n];
            for kk in 0..k {
                for nn in 0..n {
                    out[nn * k + kk] = w[kk * n + nn];
                }
            }
            out
        };
        let transposed = Int4Site {
            transposed: true,
            ..site
        };
        let (_, again) = search_layer(&transposed, &wt, &x, None, 32, ScaleFormat::F32).unwrap();
        assert_eq!((again.alpha, again.clip), (layer.alpha, layer.clip));
        assert!((again.error - layer.error).abs() < 1e-6);
    }

    /// Correlated input channels: GPTQ's values are kept where they lower the layer's
    /// error, and land in the weight's stored layout (`[N, K]` for Gemm's transB).
    #[test]
    fn gptq_is_kept_where_it_lowers_the_error() {
        let (site, w) = toy_layer();
        let (k, n) = (site.k, site.n);
        // Three latent factors mixed into every channel, plus a little noise.
        let x: Vec<Vec<f32>> = (0..256)
            .map(|r| {
                let z = [
                    ((r * 13 % 29) as f32 / 14.0 - 1.0),
                    ((r * 7 % 31) as f32 / 15.0 - 1.0),
                    ((r * 5 % 37) as f32 / 18.0 - 1.0),
                ];
                (0..k)
                    .map(|c| {
                        let mix = [(c as f32 * 0.37).sin(), (c as f32 * 0.11).cos(), 0.5];
                        let noise = ((r * 31 + c * 17) % 23) as f32 / 230.0 - 0.05;
                        z.iter().zip(mix).map(|(a, b)| a * b).sum::<f32>() + noise
                    })
                    .collect()
            })
            .collect();
        let mut h = Hessian::new(k);
        h.add_rows(&x.iter().flatten().copied().collect::<Vec<_>>());
        let (t, layer) = search_layer(&site, &w, &x, Some(&h), 32, ScaleFormat::F32).unwrap();
        let gptq_error = layer.gptq_error.unwrap();
        assert!(layer.gptq && gptq_error < layer.error, "{layer:?}");
        assert_eq!(layer.hessian_rows, 256);
        let (q, scales) = t.precomputed.clone().unwrap();
        let transposed = Int4Site {
            transposed: true,
            ..site.clone()
        };
        let wt: Vec<f32> = (0..k * n).map(|i| w[(i % k) * n + i / k]).collect();
        let (tt, again) =
            search_layer(&transposed, &wt, &x, Some(&h), 32, ScaleFormat::F32).unwrap();
        assert!((again.gptq_error.unwrap() - gptq_error).abs() < 1e-9);
        let (qt, st) = tt.precomputed.unwrap();
        for kk in 0..k {
            for nn in 0..n {
                assert_eq!(qt[nn * k + kk], q[kk * n + nn]);
                assert_eq!(st[nn * 2 + kk / 32], scales[(kk / 32) * n + nn]);
            }
        }
    }
}
