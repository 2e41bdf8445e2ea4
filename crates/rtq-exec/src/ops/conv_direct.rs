//! Direct f32 convolution for 2-D, group-1, stride-1 convolutions with few output
//! channels, on AVX-512.
//!
//! With few output channels (PP-OCRv4 det's 96 -> 24 3x3 layers) im2col + SGEMM is
//! bound by the column buffer: every input element is copied `kh * kw` times and each
//! copy feeds only a few products. Here an output row is computed in register blocks
//! of [`MB`] output channels x [`XB`] vectors of 16 columns, reading the input in place:
//! for every input channel and tap, `XB` input vectors (masked at the row's edges,
//! where the padding is) are multiplied by `MB` broadcast weights. Weights are packed
//! once per node, `[block][c][ky][kx][MB]`, the channels past `m` zero.
//!
//! Each output element is its bias (or zero) plus the products in the order input
//! channel, kernel row, kernel column, formed with fused multiply-adds.

use crate::ops::conv::ConvProblem;
use crate::par::OutPtr;
use rayon::prelude::*;

/// Output channels per register block (with [`XB`]: 24 accumulators of the 32
/// vector registers).
const MB: usize = 8;
/// 16-column vectors per register block.
const XB: usize = 3;
/// Fewest output channels left to Winograd or im2col + SGEMM, which use the weights
/// better from there on (measured: 32 -> 32 3x3 on 16x16 takes a third of Winograd's
/// time here, 64 -> 64 on 56x56 a fifth more).
const MAX_CHANNELS: usize = 64;
/// Widest kernel handled (one load mask per column tap and vector).
const MAX_KW: usize = 8;
/// Output rows per parallel task.
const ROWS_PER_TASK: usize = 2;

/// Whether [`conv`] computes `p` (and the CPU can run it).
pub(crate) fn applies(p: &ConvProblem) -> bool {
    let w = &p.win;
    crate::simd::Simd::has_avx512()
        && w.rank == 2
        && p.group == 1
        && w.stride == [1, 1, 1]
        && w.dilation == [1, 1, 1]
        && !w.is_pointwise()
        && w.kernel[2] <= MAX_KW
        && p.m < MAX_CHANNELS
}

/// Weights packed for [`conv`]: `[block][c][ky][kx][MB]`.
pub(crate) struct DirectWeights {
    packed: Vec<f32>,
}

/// Packs `w` (`m x c x kh x kw`) for [`conv`].
pub(crate) fn pack_weights(w: &[f32], p: &ConvProblem) -> DirectWeights {
    let taps = p.win.kernel_size();
    let blocks = p.m.div_ceil(MB);
    let mut packed = vec![0.0f32; blocks * p.c * taps * MB];
    for (mo, filter) in w.chunks_exact(p.c * taps).enumerate() {
        let (b, r) = (mo / MB, mo % MB);
        for (i, &v) in filter.iter().enumerate() {
            packed[(b * p.c * taps + i) * MB + r] = v;
        }
    }
    DirectWeights { packed }
}

/// Computes the convolution into `out` (`n * m * oh * ow`), which holds the bias planes
/// (or zeros) on entry. `applies(p)` must hold.
pub(crate) fn conv(x: &[f32], w: &DirectWeights, p: &ConvProblem, out: &mut [f32]) {
    assert!(applies(p), "direct convolution on an unsupported problem");
    let win = &p.win;
    let (oh, ow) = (win.output[1], win.output[2]);
    assert_eq!(out.len(), p.n * p.m * oh * ow, "output size");
    assert_eq!(x.len(), p.n * p.c * win.input_size(), "input size");
    assert_eq!(
        w.packed.len(),
        p.m.div_ceil(MB) * p.c * win.kernel_size() * MB
    );
    let blocks = p.m.div_ceil(MB);
    let chunks = oh.div_ceil(ROWS_PER_TASK);
    let tasks = p.n * blocks * chunks;
    let ptr = OutPtr(out.as_mut_ptr());
    let run = |t: usize| {
        let (ni, rest) = (t / (blocks * chunks), t % (blocks * chunks));
        let (b, chunk) = (rest / chunks, rest % chunks);
        let rows = chunk * ROWS_PER_TASK..((chunk + 1) * ROWS_PER_TASK).min(oh);
        for oy in rows {
            // SAFETY: AVX-512 F is available (`applies`); the sizes were checked above
            // and this task alone writes row `oy` of block `b`'s planes of image `ni`.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                avx512::row(x, w, p, ni, b, oy, ptr)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (ni, b, oy, ptr);
        }
    };
    let work = p.n * p.m * p.c * win.kernel_size() * oh * ow;
    if work < 1 << 20 {
        (0..tasks).for_each(run);
    } else {
        (0..tasks).into_par_iter().for_each(run);
    }
}

// Tap loops index several per-tap arrays (weights, masks, offsets) by the tap.
#[allow(clippy::needless_range_loop)]
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{ConvProblem, DirectWeights, MAX_KW, MB, XB};
    use crate::par::OutPtr;
    use crate::simd::lane_mask;
    use std::arch::x86_64::*;

    /// Output row `oy` of image `ni`, channels of block `b`: blocks of [`XB`] vectors,
    /// then one narrower block for the vectors left.
    ///
    /// # Safety
    /// AVX-512 F must be available, the sizes those [`super::conv`] checks, and no
    /// other thread may write this row of these planes.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn row(
        x: &[f32],
        w: &DirectWeights,
        p: &ConvProblem,
        ni: usize,
        b: usize,
        oy: usize,
        out: OutPtr<f32>,
    ) {
        let ow = p.win.output[2];
        let vectors = ow.div_ceil(16);
        let mut v = 0;
        while v + XB <= vectors {
            block::<XB>(x, w, p, (ni, b, oy, 16 * v), out);
            v += XB;
        }
        match vectors - v {
            0 => {}
            1 => block::<1>(x, w, p, (ni, b, oy, 16 * v), out),
            2 => block::<2>(x, w, p, (ni, b, oy, 16 * v), out),
            left => unreachable!("{left} vectors left in a block of {XB}"),
        }
    }

    /// `V` vectors of output columns from `ox0` of row `oy`, image `ni`, channels of
    /// block `b`, accumulated in registers over every input channel and tap.
    ///
    /// # Safety
    /// As [`row`].
    #[inline(always)]
    unsafe fn block<const V: usize>(
        x: &[f32],
        w: &DirectWeights,
        p: &ConvProblem,
        (ni, b, oy, ox0): (usize, usize, usize, usize),
        out: OutPtr<f32>,
    ) {
        let win = &p.win;
        let [_, kh, kw] = win.kernel;
        let [_, ih, iw] = win.input;
        let [_, oh, ow] = win.output;
        let (top, left) = (win.pad_begin[1] as isize, win.pad_begin[2] as isize);
        let plane = ih * iw;
        let xi = x.as_ptr().add(ni * p.c * plane);
        // Kernel rows that land inside the input for this output row.
        let ky_lo = (top - oy as isize).max(0) as usize;
        let ky_hi = ((ih as isize + top - oy as isize).max(0) as usize).min(kh);
        let wb = w.packed.as_ptr().add(b * p.c * kh * kw * MB);
        let rows_here = MB.min(p.m - b * MB);
        let out_row = |r: usize| out.0.add(((ni * p.m + b * MB + r) * oh + oy) * ow);
        // Lanes of each vector inside the output row, and, per column tap, inside the
        // input row (the rest is padding: loaded as zero, never read).
        let mut store = [0u16; V];
        let mut load = [[0u16; MAX_KW]; V];
        for j in 0..V {
            store[j] = lane_mask(ox0 as isize + 16 * j as isize, 0, ow as isize);
            for kx in 0..kw {
                let first = (ox0 + 16 * j + kx) as isize - left;
                load[j][kx] = lane_mask(first, 0, iw as isize);
            }
        }
        let mut acc = [[_mm512_setzero_ps(); V]; MB];
        for (r, acc_r) in acc.iter_mut().enumerate().take(rows_here) {
            for j in 0..V {
                acc_r[j] = _mm512_maskz_loadu_ps(store[j], out_row(r).add(ox0 + 16 * j));
            }
        }
        for c in 0..p.c {
            let xc = xi.add(c * plane);
            let wc = wb.add(c * kh * kw * MB);
            for ky in ky_lo..ky_hi {
                let iy = oy + ky - top as usize;
                let xr = xc.add(iy * iw);
                let wr = wc.add(ky * kw * MB);
                for kx in 0..kw {
                    let first = (ox0 + kx) as isize - left;
                    let mut xs = [_mm512_setzero_ps(); V];
                    for (j, v) in xs.iter_mut().enumerate() {
                        // Masked-off lanes are not accessed (no fault), so the address
                        // may lie outside the row.
                        let at = xr.wrapping_offset(first + 16 * j as isize);
                        *v = _mm512_maskz_loadu_ps(load[j][kx], at);
                    }
                    let wt = wr.add(kx * MB);
                    for (r, acc_r) in acc.iter_mut().enumerate() {
                        let wv = _mm512_set1_ps(*wt.add(r));
                        for j in 0..V {
                            acc_r[j] = _mm512_fmadd_ps(wv, xs[j], acc_r[j]);
                        }
                    }
                }
            }
        }
        for (r, acc_r) in acc.iter().enumerate().take(rows_here) {
            for j in 0..V {
                _mm512_mask_storeu_ps(out_row(r).add(ox0 + 16 * j), store[j], acc_r[j]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::conv_depthwise::tests::values;
    use crate::ops::window::Window;

    /// A plain 2-D convolution (group 1, stride 1) as the oracle.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        x: &[f32],
        w: &[f32],
        bias: &[f32],
        (n, c, ih, iw): (usize, usize, usize, usize),
        (m, kh, kw): (usize, usize, usize),
        (pt, pl, pb, pr): (usize, usize, usize, usize),
    ) -> Vec<f32> {
        let oh = ih + pt + pb - kh + 1;
        let ow = iw + pl + pr - kw + 1;
        let mut out = vec![0.0f64; n * m * oh * ow];
        for ni in 0..n {
            for mo in 0..m {
                for y in 0..oh {
                    for xx in 0..ow {
                        let mut acc = f64::from(bias[mo]);
                        for ci in 0..c {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (y + ky) as isize - pt as isize;
                                    let ix = (xx + kx) as isize - pl as isize;
                                    if iy < 0 || ix < 0 || iy >= ih as isize || ix >= iw as isize {
                                        continue;
                                    }
                                    acc += f64::from(
                                        x[((ni * c + ci) * ih + iy as usize) * iw + ix as usize],
                                    ) * f64::from(w[((mo * c + ci) * kh + ky) * kw + kx]);
                                }
                            }
                        }
                        out[((ni * m + mo) * oh + y) * ow + xx] = acc;
                    }
                }
            }
        }
        out.into_iter().map(|v| v as f32).collect()
    }

    #[test]
    fn matches_a_plain_convolution_on_odd_shapes() {
        if !crate::simd::Simd::has_avx512() {
            return;
        }
        for &(n, c, ih, iw, m, kh, kw, pads) in &[
            (1, 5, 7, 20, 7, 3, 3, (1, 1, 1, 1)),
            (2, 3, 9, 33, 13, 3, 5, (0, 2, 1, 2)),
            (1, 16, 12, 70, 24, 3, 3, (1, 1, 1, 1)),
            (1, 2, 4, 17, 1, 2, 2, (0, 0, 0, 0)),
            (1, 4, 6, 40, 31, 7, 7, (3, 3, 3, 3)),
            (1, 3, 3, 18, 5, 5, 3, (0, 1, 4, 1)),
        ] {
            let x = values(n * c * ih * iw, 1);
            let w = values(m * c * kh * kw, 2);
            let bias = values(m, 3);
            let win = Window {
                rank: 2,
                input: [1, ih, iw],
                kernel: [1, kh, kw],
                stride: [1, 1, 1],
                dilation: [1, 1, 1],
                pad_begin: [0, pads.0, pads.1],
                pad_end: [0, pads.2, pads.3],
                output: [
                    1,
                    ih + pads.0 + pads.2 - kh + 1,
                    iw + pads.1 + pads.3 - kw + 1,
                ],
            };
            let p = ConvProblem {
                n,
                c,
                m,
                group: 1,
                win,
            };
            if !applies(&p) {
                continue;
            }
            let out_sp = p.win.output_size();
            let mut out: Vec<f32> = (0..n * m)
                .flat_map(|i| std::iter::repeat_n(bias[i % m], out_sp))
                .collect();
            conv(&x, &pack_weights(&w, &p), &p, &mut out);
            let want = naive(&x, &w, &bias, (n, c, ih, iw), (m, kh, kw), pads);
            for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{i}: {a} vs {b}");
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use crate::ops::window::Window;

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec conv_direct::speed -- --ignored --nocapture"]
    fn det_shapes() {
        for (c, hw, m) in [
            (96, 80, 24),
            (96, 40, 24),
            (96, 20, 24),
            (16, 32, 16),
            (32, 16, 32),
            (64, 56, 64),
            (128, 28, 128),
            (256, 14, 256),
        ] {
            let p = ConvProblem {
                n: 1,
                c,
                m,
                group: 1,
                win: Window {
                    rank: 2,
                    input: [1, hw, hw],
                    kernel: [1, 3, 3],
                    stride: [1, 1, 1],
                    dilation: [1, 1, 1],
                    pad_begin: [0, 1, 1],
                    pad_end: [0, 1, 1],
                    output: [1, hw, hw],
                },
            };
            if !applies(&p) {
                continue;
            }
            let x = vec![0.5f32; c * hw * hw];
            let w = pack_weights(&vec![0.25f32; m * c * 9], &p);
            let mut out = vec![0.0f32; m * hw * hw];
            // The fastest of 50 runs (the machine may be shared).
            let s = (0..50)
                .map(|_| {
                    let t = std::time::Instant::now();
                    conv(&x, &w, &p, &mut out);
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min);
            let gmacs = (m * c * 9 * hw * hw) as f64 / s / 1e9;
            let wino = if crate::ops::winograd::applies(&p) {
                let u = crate::ops::winograd::transform_weights(&vec![0.25f32; m * c * 9], &p);
                let t = (0..50)
                    .map(|_| {
                        let t = std::time::Instant::now();
                        crate::ops::winograd::conv(&x, &u, &p, &mut out);
                        t.elapsed().as_secs_f64()
                    })
                    .fold(f64::INFINITY, f64::min);
                format!("{:.3} ms", t * 1e3)
            } else {
                "-".into()
            };
            println!(
                "{c}->{m} 3x3 at {hw}x{hw}: {:.3} ms ({gmacs:.1} GMAC/s), winograd {wino}",
                s * 1e3
            );
        }
    }
}
