//! Direct f32 convolution for 2-D, group-1 convolutions on AVX-512: stride 1 with few
//! output channels, and strides 1-2 on few input channels (a stem: ResNet's 7x7 on 3
//! channels).
//!
//! With few output channels (PP-OCRv4 det's 96 -> 24 3x3 layers) im2col + SGEMM is
//! bound by the column buffer: every input element is copied `kh * kw` times and each
//! copy feeds only a few products. With few input channels the product's inner
//! dimension (`c * kh * kw`, 147 for ResNet's stem) is too short for SGEMM to pay for
//! that buffer and its packing. Here an output row is computed in register blocks of
//! [`MB`] output channels x [`XB`] vectors of 16 columns, reading the input in place:
//! for every input channel and tap, `XB` input vectors (masked at the row's edges,
//! where the padding is) are multiplied by `MB` broadcast weights. A horizontal stride
//! of 2 reads the input split once into its even and odd columns ([`Phases`]), where
//! every tap's inputs are again consecutive. Weights are packed once per node,
//! `[block][c][ky][kx][MB]`, the channels past `m` zero. The output is written once:
//! each register block starts from its biases and is stored after Relu (when asked
//! for and no residual comes first); a residual, then Relu, is applied to the block
//! right after its store, while it is in L1.
//!
//! Each output element is its bias (or zero) plus the products in the order input
//! channel, kernel row, kernel column, formed with fused multiply-adds.

use crate::gemm::Finish;
use crate::ops::conv::ConvProblem;
use crate::par::OutPtr;
use rayon::prelude::*;
use std::mem::MaybeUninit;

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
/// Most products per output element (`c * kh * kw`) at which any number of output
/// channels is computed here (ResNet's stem, 147, takes two thirds of im2col + SGEMM's
/// time; its 3x3 layers on 64 channels, 576, are left to Winograd and SGEMM).
const MAX_TAPS_ANY_CHANNELS: usize = 160;
/// Widest stride handled ([`Phases`] splits rows in two).
const MAX_STRIDE: usize = 2;
/// Output rows per parallel task.
const ROWS_PER_TASK: usize = 2;

/// Whether [`conv`] computes `p` (and the CPU can run it).
pub(crate) fn applies(p: &ConvProblem) -> bool {
    let w = &p.win;
    let taps = p.c * w.kernel_size();
    let stride_1 = w.stride == [1, 1, 1];
    crate::simd::Simd::has_avx512()
        && w.rank == 2
        && p.group == 1
        && w.stride[1] <= MAX_STRIDE
        && w.stride[2] <= MAX_STRIDE
        && w.dilation == [1, 1, 1]
        && !w.is_pointwise()
        && w.kernel[2] <= MAX_KW
        && ((stride_1 && p.m < MAX_CHANNELS) || taps <= MAX_TAPS_ANY_CHANNELS)
}

/// The input as the kernel reads it: each row split into `stride` phases of `len`
/// elements (phase `q` holds columns `q, q + stride, ...`, padded to `len`), so that
/// the inputs of consecutive output columns under one tap are consecutive. With
/// stride 1 that is the input itself, borrowed.
struct Phases<'a> {
    data: std::borrow::Cow<'a, [f32]>,
    stride: usize,
    len: usize,
}

impl<'a> Phases<'a> {
    fn of(x: &'a [f32], iw: usize, stride: usize) -> Phases<'a> {
        if stride == 1 {
            return Phases {
                data: std::borrow::Cow::Borrowed(x),
                stride,
                len: iw,
            };
        }
        assert_eq!(stride, 2, "rows are split in two phases at most");
        let len = iw.div_ceil(2);
        let rows = x.len() / iw;
        // Every element is written: the odd phase's padding (an odd row's last
        // element) with zero, though masked loads never read it.
        let mut data = crate::par::uninit_vec::<f32>(rows * 2 * len);
        let split = |(src, dst): (&[f32], &mut [MaybeUninit<f32>])| {
            let (even, odd) = dst.split_at_mut(len);
            // Pairs of columns, which vectorises.
            for ((pair, e), o) in src.chunks_exact(2).zip(&mut *even).zip(&mut *odd) {
                e.write(pair[0]);
                o.write(pair[1]);
            }
            if iw % 2 == 1 {
                even[len - 1].write(src[iw - 1]);
                odd[len - 1].write(0.0);
            }
        };
        if x.len() < 1 << 16 {
            x.chunks_exact(iw)
                .zip(data.chunks_exact_mut(2 * len))
                .for_each(split);
        } else {
            x.par_chunks_exact(iw)
                .zip(data.par_chunks_exact_mut(2 * len))
                .for_each(split);
        }
        Phases {
            // SAFETY: `split` wrote every element of every row's phases.
            data: std::borrow::Cow::Owned(unsafe { crate::par::assume_written(data) }),
            stride,
            len,
        }
    }

    /// Valid elements of phase `q`.
    fn valid(&self, q: usize, iw: usize) -> usize {
        (iw - q.min(iw)).div_ceil(self.stride)
    }
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

/// Computes the convolution into `out` (`n * m * oh * ow`, every element written, none
/// read), each element finished as `finish` says (its bias per output channel, its
/// residual laid out as `out`). `applies(p)` must hold.
pub(crate) fn conv(
    x: &[f32],
    w: &DirectWeights,
    finish: Finish<'_>,
    p: &ConvProblem,
    out: &mut [MaybeUninit<f32>],
) {
    assert!(applies(p), "direct convolution on an unsupported problem");
    let win = &p.win;
    let (oh, ow) = (win.output[1], win.output[2]);
    assert_eq!(out.len(), p.n * p.m * oh * ow, "output size");
    assert_eq!(x.len(), p.n * p.c * win.input_size(), "input size");
    assert_eq!(
        w.packed.len(),
        p.m.div_ceil(MB) * p.c * win.kernel_size() * MB
    );
    assert!(
        finish.bias.is_none_or(|b| b.len() == p.m),
        "one bias per channel"
    );
    assert!(
        finish.residual.is_none_or(|r| r.len() == out.len()),
        "residual laid out as the output"
    );
    let blocks = p.m.div_ceil(MB);
    let chunks = oh.div_ceil(ROWS_PER_TASK);
    let tasks = p.n * blocks * chunks;
    let ptr = OutPtr(out.as_mut_ptr().cast::<f32>());
    let phases = Phases::of(x, win.input[2], win.stride[2]);
    let x = &phases;
    let run = |t: usize| {
        let (ni, rest) = (t / (blocks * chunks), t % (blocks * chunks));
        let (b, chunk) = (rest / chunks, rest % chunks);
        let rows = chunk * ROWS_PER_TASK..((chunk + 1) * ROWS_PER_TASK).min(oh);
        for oy in rows {
            // SAFETY: AVX-512 F is available (`applies`); the sizes were checked above
            // and this task alone writes row `oy` of block `b`'s planes of image `ni`.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                avx512::row(x, w, &finish, p, ni, b, oy, ptr)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (ni, b, oy, ptr, &finish);
        }
    };
    let work = p.n * p.m * p.c * win.kernel_size() * oh * ow;
    if work < 1 << 20 {
        (0..tasks).for_each(run);
    } else {
        (0..tasks).into_par_iter().for_each(run);
    }
    if let std::borrow::Cow::Owned(split) = phases.data {
        crate::arena::give(split);
    }
}

// Tap loops index several per-tap arrays (weights, masks, offsets) by the tap.
#[allow(clippy::needless_range_loop)]
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{ConvProblem, DirectWeights, Finish, Phases, MAX_KW, MB, XB};
    use crate::par::OutPtr;
    use crate::simd::{lane_mask, relu_512};
    use std::arch::x86_64::*;

    /// Output row `oy` of image `ni`, channels of block `b`: blocks of [`XB`] vectors,
    /// then narrower blocks for the vectors left.
    ///
    /// # Safety
    /// AVX-512 F must be available, the sizes those [`super::conv`] checks, and no
    /// other thread may write this row of these planes.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn row(
        x: &Phases<'_>,
        w: &DirectWeights,
        finish: &Finish<'_>,
        p: &ConvProblem,
        ni: usize,
        b: usize,
        oy: usize,
        out: OutPtr<f32>,
    ) {
        if p.win.stride[2] == 1 {
            blocks::<1>(x, w, finish, p, (ni, b, oy), out)
        } else {
            blocks::<2>(x, w, finish, p, (ni, b, oy), out)
        }
    }

    /// [`row`] for horizontal stride `SX`.
    ///
    /// # Safety
    /// As [`row`].
    #[inline(always)]
    unsafe fn blocks<const SX: usize>(
        x: &Phases<'_>,
        w: &DirectWeights,
        finish: &Finish<'_>,
        p: &ConvProblem,
        (ni, b, oy): (usize, usize, usize),
        out: OutPtr<f32>,
    ) {
        let ow = p.win.output[2];
        let vectors = ow.div_ceil(16);
        // A lone vector left after blocks of XB is taken with the last of them as two
        // blocks of 2 (a 1-vector block uses its broadcast weights a third as well).
        let full = match vectors % XB {
            1 if vectors > XB => vectors / XB - 1,
            _ => vectors / XB,
        };
        let mut v = 0;
        for _ in 0..full {
            block::<XB, SX>(x, w, finish, p, (ni, b, oy, 16 * v), out);
            v += XB;
        }
        if vectors - v == XB + 1 {
            block::<2, SX>(x, w, finish, p, (ni, b, oy, 16 * v), out);
            v += 2;
        }
        match vectors - v {
            0 => {}
            1 => block::<1, SX>(x, w, finish, p, (ni, b, oy, 16 * v), out),
            2 => block::<2, SX>(x, w, finish, p, (ni, b, oy, 16 * v), out),
            left => unreachable!("{left} vectors left in a block of {XB}"),
        }
    }

    /// `V` vectors of output columns from `ox0` of row `oy`, image `ni`, channels of
    /// block `b`, accumulated in registers over every input channel and tap.
    ///
    /// # Safety
    /// As [`row`].
    #[inline(always)]
    unsafe fn block<const V: usize, const SX: usize>(
        x: &Phases<'_>,
        w: &DirectWeights,
        finish: &Finish<'_>,
        p: &ConvProblem,
        (ni, b, oy, ox0): (usize, usize, usize, usize),
        out: OutPtr<f32>,
    ) {
        let win = &p.win;
        let [_, kh, kw] = win.kernel;
        let [_, ih, iw] = win.input;
        let [_, oh, ow] = win.output;
        let (top, left) = (win.pad_begin[1] as isize, win.pad_begin[2] as isize);
        let sy = win.stride[1];
        debug_assert_eq!(win.stride[2], SX);
        // One input row: its `SX` phases of `x.len` elements.
        let row_len = SX * x.len;
        let plane = ih * row_len;
        let xi = x.data.as_ptr().add(ni * p.c * plane);
        // Kernel rows that land inside the input for this output row.
        let y0 = (sy * oy) as isize - top;
        let ky_lo = (-y0).max(0) as usize;
        let ky_hi = ((ih as isize - y0).max(0) as usize).min(kh);
        let wb = w.packed.as_ptr().add(b * p.c * kh * kw * MB);
        let rows_here = MB.min(p.m - b * MB);
        let row_at = |r: usize| ((ni * p.m + b * MB + r) * oh + oy) * ow;
        // Lanes of each vector inside the output row, and, per column tap, inside the
        // input row (the rest is padding: loaded as zero, never read).
        // Column tap `kx` reads phase `q` of each row from element `first(kx)` on (for
        // the block's first output column).
        let phase = |kx: usize| {
            let t = kx as isize - left;
            if SX == 1 {
                (0, ox0 as isize + t)
            } else {
                (t.rem_euclid(2) as usize, ox0 as isize + t.div_euclid(2))
            }
        };
        let first = |kx: usize| {
            let (q, at) = phase(kx);
            (q * x.len) as isize + at
        };
        let mut store = [0u16; V];
        let mut load = [[0u16; MAX_KW]; V];
        for kx in 0..kw {
            let (q, at) = phase(kx);
            let valid = x.valid(q, iw) as isize;
            for j in 0..V {
                load[j][kx] = lane_mask(at + 16 * j as isize, 0, valid);
            }
        }
        for j in 0..V {
            store[j] = lane_mask(ox0 as isize + 16 * j as isize, 0, ow as isize);
        }
        // The block's biases, zero past its rows: every register row is set with a
        // constant trip count, so that the accumulators stay in registers.
        let mut bias = [0.0f32; MB];
        if let Some(all) = finish.bias {
            bias[..rows_here].copy_from_slice(&all[b * MB..][..rows_here]);
        }
        let mut acc = [[_mm512_setzero_ps(); V]; MB];
        for r in 0..MB {
            for j in 0..V {
                acc[r][j] = _mm512_set1_ps(bias[r]);
            }
        }
        for c in 0..p.c {
            let xc = xi.add(c * plane);
            let wc = wb.add(c * kh * kw * MB);
            for ky in ky_lo..ky_hi {
                let iy = (y0 + ky as isize) as usize;
                let xr = xc.add(iy * row_len);
                let wr = wc.add(ky * kw * MB);
                for kx in 0..kw {
                    let mut xs = [_mm512_setzero_ps(); V];
                    for (j, v) in xs.iter_mut().enumerate() {
                        // Masked-off lanes are not accessed (no fault), so the address
                        // may lie outside the row.
                        let at = xr.wrapping_offset(first(kx) + 16 * j as isize);
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
        // Relu is applied in registers when no residual comes before it.
        let relu_here = finish.relu && finish.residual.is_none();
        for r in 0..MB {
            if r >= rows_here {
                continue;
            }
            let at = row_at(r) + ox0;
            for j in 0..V {
                let mut v = acc[r][j];
                if relu_here {
                    v = relu_512(v);
                }
                _mm512_mask_storeu_ps(out.0.add(at + 16 * j), store[j], v);
            }
        }
        // A residual, then Relu, over the block's rows while they are in L1, in a
        // function of their own (inside this one they cost the accumulators their
        // registers).
        if let Some(residual) = finish.residual {
            let len = (16 * V).min(ow - ox0);
            for r in 0..rows_here {
                let at = row_at(r) + ox0;
                let row = std::slice::from_raw_parts_mut(out.0.add(at), len);
                crate::gemm::finish_row(row, None, Some(&residual[at..at + len]), finish.relu);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::conv_depthwise::tests::values;
    use crate::ops::window::Window;

    /// A plain 2-D convolution (group 1) as the oracle.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn naive(
        x: &[f32],
        w: &[f32],
        bias: &[f32],
        (n, c, ih, iw): (usize, usize, usize, usize),
        (m, kh, kw): (usize, usize, usize),
        (pt, pl, pb, pr): (usize, usize, usize, usize),
        (sy, sx): (usize, usize),
    ) -> Vec<f32> {
        let oh = (ih + pt + pb - kh) / sy + 1;
        let ow = (iw + pl + pr - kw) / sx + 1;
        let mut out = vec![0.0f64; n * m * oh * ow];
        for ni in 0..n {
            for mo in 0..m {
                for y in 0..oh {
                    for xx in 0..ow {
                        let mut acc = f64::from(bias[mo]);
                        for ci in 0..c {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (sy * y + ky) as isize - pt as isize;
                                    let ix = (sx * xx + kx) as isize - pl as isize;
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
        let mut strided = 0;
        for &(n, c, ih, iw, m, kh, kw, pads, strides) in &[
            (1, 5, 7, 20, 7, 3, 3, (1, 1, 1, 1), (1, 1)),
            (2, 3, 9, 33, 13, 3, 5, (0, 2, 1, 2), (1, 1)),
            (1, 16, 12, 70, 24, 3, 3, (1, 1, 1, 1), (1, 1)),
            (1, 2, 4, 17, 1, 2, 2, (0, 0, 0, 0), (1, 1)),
            (1, 4, 6, 40, 31, 7, 7, (3, 3, 3, 3), (1, 1)),
            (1, 3, 3, 18, 5, 5, 3, (0, 1, 4, 1), (1, 1)),
            // Stems: stride 2, any number of output channels.
            (1, 3, 30, 45, 70, 7, 7, (3, 3, 3, 3), (2, 2)),
            (2, 3, 17, 64, 16, 3, 3, (1, 1, 1, 1), (2, 2)),
            (1, 2, 11, 37, 9, 4, 5, (0, 2, 1, 1), (2, 1)),
            (1, 1, 9, 100, 3, 3, 8, (1, 7, 0, 3), (1, 2)),
        ] {
            let x = values(n * c * ih * iw, 1);
            let w = values(m * c * kh * kw, 2);
            let bias = values(m, 3);
            let win = Window {
                rank: 2,
                input: [1, ih, iw],
                kernel: [1, kh, kw],
                stride: [1, strides.0, strides.1],
                dilation: [1, 1, 1],
                pad_begin: [0, pads.0, pads.1],
                pad_end: [0, pads.2, pads.3],
                output: [
                    1,
                    (ih + pads.0 + pads.2 - kh) / strides.0 + 1,
                    (iw + pads.1 + pads.3 - kw) / strides.1 + 1,
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
            let len = n * m * p.win.output_size();
            let residual = values(len, 4);
            let packed = pack_weights(&w, &p);
            strided += usize::from(strides != (1, 1));
            let want = naive(&x, &w, &bias, (n, c, ih, iw), (m, kh, kw), pads, strides);
            // Bias alone, then bias, residual and Relu applied by the kernel.
            for fused in [false, true] {
                let mut out = vec![MaybeUninit::new(f32::NAN); len];
                let finish = Finish {
                    bias: Some(&bias),
                    residual: fused.then_some(residual.as_slice()),
                    relu: fused,
                };
                conv(&x, &packed, finish, &p, &mut out);
                for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                    // SAFETY: every element was initialised above.
                    let a = unsafe { a.assume_init() };
                    let b = if fused {
                        (b + residual[i]).max(0.0)
                    } else {
                        *b
                    };
                    assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{i}: {a} vs {b}");
                }
            }
        }
        assert_eq!(strided, 4, "every strided case runs here");
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
            let mut direct_out = vec![MaybeUninit::new(0.0f32); m * hw * hw];
            let finish = Finish {
                bias: None,
                residual: None,
                relu: false,
            };
            // The fastest of 50 runs (the machine may be shared).
            let s = (0..50)
                .map(|_| {
                    let t = std::time::Instant::now();
                    conv(&x, &w, finish, &p, &mut direct_out);
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
