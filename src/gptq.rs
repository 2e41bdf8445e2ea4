//! GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for Generative
//! Pre-trained Transformers", 2022) for blockwise INT4 weights: rounding with error
//! compensation.
//!
//! Round-to-nearest picks every INT4 value on its own. GPTQ quantizes the input channels
//! of a `[K, N]` weight one at a time and moves each channel's rounding error onto the
//! channels not yet quantized, weighted by the activations' second moments
//! `H = X^T X`, so that the layer's output `X W` changes as little as it can: after
//! channel `i`, `W[j, :] -= U[i, j] / U[i, i] * (W[i, :] - deq(Q(W[i, :])))` for `j > i`,
//! with `U` the upper Cholesky factor of `H^-1` (`H^-1 = U^T U`). Every block of input
//! channels gets its scales (per output channel, with the block's clip ratio) when its
//! first channel is reached, from the weights as updated so far. The linear algebra runs
//! in f64.

use rtq_ir::{int4_from_f64, ScaleFormat};
use rtq_passes::quant::int4_block_scale;

/// Share of the mean diagonal of `H` added to its diagonal (GPTQ's `percdamp`).
const DAMP: f64 = 0.01;

/// The second moments `X^T X` of a layer's activations (`K x K`, f64), accumulated over
/// rows of length K.
#[derive(Debug, Clone)]
pub struct Hessian {
    /// Input channels.
    pub k: usize,
    /// `X^T X`, row-major; only the upper triangle is filled until [`Hessian::matrix`].
    sum: Vec<f64>,
    /// Rows accumulated.
    pub rows: usize,
}

impl Hessian {
    /// An empty accumulator for `k` input channels.
    pub fn new(k: usize) -> Self {
        Hessian {
            k,
            sum: vec![0.0; k * k],
            rows: 0,
        }
    }

    /// Adds the rows of `x` (a multiple of K values, row-major).
    pub fn add_rows(&mut self, x: &[f32]) {
        let k = self.k;
        if k == 0 {
            return;
        }
        let mut row = vec![0.0f64; k];
        for chunk in x.chunks_exact(k) {
            for (r, &v) in row.iter_mut().zip(chunk) {
                *r = f64::from(v);
            }
            for i in 0..k {
                let xi = row[i];
                if xi == 0.0 {
                    continue;
                }
                let dst = &mut self.sum[i * k + i..(i + 1) * k];
                for (d, &xj) in dst.iter_mut().zip(&row[i..]) {
                    *d += xi * xj;
                }
            }
            self.rows += 1;
        }
    }

    /// The full symmetric `X^T X` of the activations divided channel-wise by `s`
    /// (AWQ's input scale): `H[i, j] / (s[i] s[j])`.
    pub fn matrix(&self, s: Option<&[f32]>) -> Vec<f64> {
        let k = self.k;
        let inv: Vec<f64> = (0..k)
            .map(|i| s.map_or(1.0, |s| 1.0 / f64::from(s[i])))
            .collect();
        let mut h = vec![0.0f64; k * k];
        for i in 0..k {
            for j in i..k {
                let v = self.sum[i * k + j] * inv[i] * inv[j];
                h[i * k + j] = v;
                h[j * k + i] = v;
            }
        }
        h
    }
}

/// GPTQ-rounds the `[K, N]` row-major weight `w` (already multiplied by any AWQ input
/// scale) for activations with second moments `h` (`K x K`, for the activations divided
/// by that scale). Scales are per block of `block` input channels and output channel
/// (`clip`: one ratio, or one per block and output channel, as
/// [`rtq_passes::quant::Int4Tuning::clip`]), exact in `format`. Returns the INT4 values
/// (`[K, N]`) and scales (`[ceil(K / block), N]`), or `None` when `H` is unusable (no
/// energy, not finite, or not positive definite even with more damping).
pub fn gptq(
    w: &[f32],
    k: usize,
    n: usize,
    h: &[f64],
    block: usize,
    clip: &[f32],
    format: ScaleFormat,
) -> Option<(Vec<i8>, Vec<f32>)> {
    assert_eq!(w.len(), k * n, "weight of {k}x{n}");
    assert_eq!(h.len(), k * k, "H of {k}x{k}");
    let u = inverse_cholesky(h, k)?;
    let blocks = k.div_ceil(block);
    let mut w: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
    let mut q = vec![0i8; k * n];
    let mut scales = vec![1.0f32; blocks * n];
    let mut err = vec![0.0f64; n];
    for i in 0..k {
        if i % block == 0 {
            let b = i / block;
            let hi = ((b + 1) * block).min(k);
            for nn in 0..n {
                let amax = (i..hi)
                    .map(|kk| (w[kk * n + nn] as f32).abs())
                    .fold(0.0f32, f32::max);
                let ratio = if clip.len() == 1 {
                    clip[0]
                } else {
                    clip[b * n + nn]
                };
                scales[b * n + nn] = int4_block_scale(amax, ratio, format).unwrap_or(1.0);
            }
        }
        let b = i / block;
        let d = u[i * k + i];
        for nn in 0..n {
            let s = scales[b * n + nn];
            let v = w[i * n + nn];
            let code = int4_from_f64(f64::from(v as f32 / s));
            q[i * n + nn] = code;
            err[nn] = (v - f64::from(code) * f64::from(s)) / d;
        }
        // Spread the error over the channels still to quantize.
        for (j, row) in w[(i + 1) * n..].chunks_exact_mut(n).enumerate() {
            let c = u[i * k + i + 1 + j];
            if c == 0.0 {
                continue;
            }
            for (x, e) in row.iter_mut().zip(&err) {
                *x -= c * e;
            }
        }
    }
    Some((q, scales))
}

/// The upper Cholesky factor `U` of `(H + damping)^-1` (`U^T U`, row-major `K x K`), as
/// GPTQ uses it: channels no activation reaches (zero diagonal) get the mean diagonal
/// so they stand alone, and `DAMP` of the mean diagonal is added to every channel (ten
/// and a hundred times more if `H` is still not positive definite).
fn inverse_cholesky(h: &[f64], k: usize) -> Option<Vec<f64>> {
    let mean = (0..k).map(|i| h[i * k + i]).sum::<f64>() / k.max(1) as f64;
    if !(mean.is_finite() && mean > 0.0) {
        return None;
    }
    for damp in [DAMP, 10.0 * DAMP, 100.0 * DAMP] {
        let mut a = h.to_vec();
        for i in 0..k {
            if a[i * k + i] <= 0.0 {
                a[i * k + i] = mean;
            }
            a[i * k + i] += damp * mean;
        }
        let Some(l) = cholesky(a, k) else {
            continue;
        };
        let hinv = inverse_from_cholesky(&l, k);
        let Some(l2) = cholesky(hinv, k) else {
            continue;
        };
        // U = L2^T.
        let mut u = vec![0.0f64; k * k];
        for i in 0..k {
            for j in i..k {
                u[i * k + j] = l2[j * k + i];
            }
        }
        return Some(u);
    }
    None
}

/// The lower Cholesky factor `L` of the symmetric `a` (`L L^T = a`, row-major, zeros
/// above the diagonal), or `None` when `a` is not (numerically) positive definite.
fn cholesky(mut a: Vec<f64>, k: usize) -> Option<Vec<f64>> {
    for j in 0..k {
        let row_j = &a[j * k..j * k + j];
        let d = a[j * k + j] - row_j.iter().map(|x| x * x).sum::<f64>();
        if !(d.is_finite() && d > 0.0) {
            return None;
        }
        let d = d.sqrt();
        a[j * k + j] = d;
        for i in j + 1..k {
            let dot: f64 = a[i * k..i * k + j]
                .iter()
                .zip(&a[j * k..j * k + j])
                .map(|(x, y)| x * y)
                .sum();
            a[i * k + j] = (a[i * k + j] - dot) / d;
        }
        a[j * k + j + 1..(j + 1) * k].fill(0.0);
    }
    Some(a)
}

/// `(L L^T)^-1 = L^-T L^-1` from the lower Cholesky factor `L`.
fn inverse_from_cholesky(l: &[f64], k: usize) -> Vec<f64> {
    // Columns of L^-1 by forward substitution, stored as rows of `inv_t` (L^-T).
    let mut inv_t = vec![0.0f64; k * k];
    for c in 0..k {
        let col = &mut inv_t[c * k..(c + 1) * k];
        for i in c..k {
            let mut v = if i == c { 1.0 } else { 0.0 };
            for m in c..i {
                v -= l[i * k + m] * col[m];
            }
            col[i] = v / l[i * k + i];
        }
    }
    // (L^-T L^-1)[i, j] = sum_m L^-1[m, i] L^-1[m, j] = dot(column i, column j).
    let mut out = vec![0.0f64; k * k];
    for i in 0..k {
        for j in i..k {
            let start = j.max(i);
            let v: f64 = inv_t[i * k + start..(i + 1) * k]
                .iter()
                .zip(&inv_t[j * k + start..(j + 1) * k])
                .map(|(a, b)| a * b)
                .sum();
            out[i * k + j] = v;
            out[j * k + i] = v;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::NodeId;
    use rtq_passes::quant::{dequantize_int4_blocks, quantize_int4_blocks, Int4Site};

    /// A deterministic pseudo-random value in [-1, 1).
    fn noise(i: usize) -> f32 {
        let x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let x = (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn site(k: usize, n: usize) -> Int4Site {
        Int4Site {
            node: NodeId(0),
            k,
            n,
            transposed: false,
        }
    }

    /// `sum_n d_n^T H d_n` for the weight error `d = w - deq`.
    fn output_error(w: &[f32], deq: &[f32], h: &[f64], k: usize, n: usize) -> f64 {
        let mut e = 0.0;
        for nn in 0..n {
            let d: Vec<f64> = (0..k)
                .map(|kk| f64::from(w[kk * n + nn] - deq[kk * n + nn]))
                .collect();
            for i in 0..k {
                for j in 0..k {
                    e += d[i] * h[i * k + j] * d[j];
                }
            }
        }
        e
    }

    #[test]
    fn cholesky_inverse_is_an_inverse() {
        let k = 5;
        let mut h = Hessian::new(k);
        let x: Vec<f32> = (0..40 * k).map(noise).collect();
        h.add_rows(&x);
        assert_eq!(h.rows, 40);
        let a = h.matrix(None);
        let l = cholesky(a.clone(), k).unwrap();
        let inv = inverse_from_cholesky(&l, k);
        for i in 0..k {
            for j in 0..k {
                let v: f64 = (0..k).map(|m| a[i * k + m] * inv[m * k + j]).sum();
                assert!(
                    (v - f64::from(u8::from(i == j))).abs() < 1e-9,
                    "{i} {j} {v}"
                );
            }
        }
    }

    /// With uncorrelated activations (H diagonal) no error moves between channels: GPTQ
    /// is round-to-nearest with the same scales.
    #[test]
    fn a_diagonal_hessian_reduces_to_round_to_nearest() {
        let (k, n, block) = (96, 6, 32);
        let w: Vec<f32> = (0..k * n).map(|i| noise(i) * 0.3).collect();
        let h: Vec<f64> = (0..k * k)
            .map(|i| {
                if i % (k + 1) == 0 {
                    1.0 + (i % 7) as f64
                } else {
                    0.0
                }
            })
            .collect();
        let clips: Vec<f32> = (0..3 * n).map(|i| 1.0 - 0.05 * (i % 4) as f32).collect();
        for clip in [vec![1.0f32], vec![0.8], clips] {
            for format in [ScaleFormat::F32, ScaleFormat::F16] {
                let (q, s) = gptq(&w, k, n, &h, block, &clip, format).unwrap();
                let (rq, rs) = quantize_int4_blocks(&w, &site(k, n), block, &clip, format);
                assert_eq!(s, rs);
                assert_eq!(q, rq);
            }
        }
    }

    /// Strongly correlated input channels (a few latent factors): GPTQ's output error is
    /// well below round-to-nearest's, on the rows it saw and on fresh ones.
    #[test]
    fn correlated_activations_lower_the_output_error() {
        let (k, n, block, rows) = (64, 16, 32, 512);
        let latent = 6;
        let mix: Vec<f32> = (0..latent * k).map(|i| noise(i + 7_000)).collect();
        let activations = |seed: usize| -> Vec<f32> {
            let mut x = vec![0.0f32; rows * k];
            for r in 0..rows {
                let z: Vec<f32> = (0..latent).map(|l| noise(seed + r * latent + l)).collect();
                for c in 0..k {
                    let v: f32 = (0..latent).map(|l| z[l] * mix[l * k + c]).sum();
                    x[r * k + c] = v + 0.05 * noise(seed + 1_000_000 + r * k + c);
                }
            }
            x
        };
        let mut train = Hessian::new(k);
        train.add_rows(&activations(10_000));
        let mut fresh = Hessian::new(k);
        fresh.add_rows(&activations(20_000_000));
        let w: Vec<f32> = (0..k * n).map(|i| noise(i + 99) * 0.2).collect();
        let h = train.matrix(None);
        let (q, s) = gptq(&w, k, n, &h, block, &[1.0], ScaleFormat::F32).unwrap();
        let st = site(k, n);
        let deq = dequantize_int4_blocks(&q, &s, &st, block);
        let (rq, rs) = quantize_int4_blocks(&w, &st, block, &[1.0], ScaleFormat::F32);
        let rtn = dequantize_int4_blocks(&rq, &rs, &st, block);
        for h in [h, fresh.matrix(None)] {
            let (e_gptq, e_rtn) = (
                output_error(&w, &deq, &h, k, n),
                output_error(&w, &rtn, &h, k, n),
            );
            assert!(e_gptq < 0.5 * e_rtn, "gptq {e_gptq} rtn {e_rtn}");
        }
    }

    /// Channels no activation reaches, and an input scale: still a valid quantization.
    #[test]
    fn dead_channels_and_input_scales() {
        let (k, n) = (40, 3);
        let x: Vec<f32> = (0..100 * k)
            .map(|i| if i % k < 4 { 0.0 } else { noise(i) })
            .collect();
        let mut h = Hessian::new(k);
        h.add_rows(&x);
        let s: Vec<f32> = (0..k).map(|i| 0.5 + i as f32 / k as f32).collect();
        let hm = h.matrix(Some(&s));
        let expect = h.matrix(None)[5 * k + 6] / (f64::from(s[5]) * f64::from(s[6]));
        assert!((hm[5 * k + 6] - expect).abs() <= 1e-12 * expect.abs());
        let w: Vec<f32> = (0..k * n).map(|i| noise(i + 5)).collect();
        let (q, scales) = gptq(&w, k, n, &hm, 32, &[1.0], ScaleFormat::F16).unwrap();
        assert_eq!((q.len(), scales.len()), (k * n, 2 * n));
        assert!(scales.iter().all(|v| v.is_finite() && *v > 0.0));
        // The first channels are rounded before any error reaches them: to nearest.
        let (rq, _) = quantize_int4_blocks(&w, &site(k, n), 32, &[1.0], ScaleFormat::F16);
        assert_eq!(q[..4 * n], rq[..4 * n]);
        // No energy at all: unusable.
        assert!(gptq(&w, k, n, &vec![0.0; k * k], 32, &[1.0], ScaleFormat::F32).is_none());
    }
}
