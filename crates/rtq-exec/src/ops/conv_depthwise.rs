//! Depthwise 2-D convolution (one input channel per group) on AVX-512, stride 1 or 2.
//!
//! Each output row is computed in register blocks of up to [`XB`] vectors of 16
//! columns, reading the input plane in place: a tap's input vector is one masked
//! load (stride 1; lanes in the padding load as zero without touching memory) or two
//! masked loads and an even-lane permute (stride 2). Each output element is its bias
//! (or zero) plus the taps in row-major kernel order, each a product then a sum (no
//! fused multiply-add: measured as fast here, since the blocks hold enough independent
//! sums), which is what the generic kernel computes, bit for bit. No padded copy of the
//! input is made.

use crate::ops::conv::ConvProblem;
use crate::par;
use crate::simd::lane_mask;
use std::mem::MaybeUninit;

/// Widest register block, in 16-column vectors.
const XB: usize = 4;
/// Widest kernel handled (one load mask per column tap and vector).
const MAX_KW: usize = 8;

/// Whether [`conv`] computes `p` (and the CPU can run it).
pub(crate) fn applies(p: &ConvProblem) -> bool {
    let w = &p.win;
    crate::simd::Simd::has_avx512()
        && w.rank == 2
        && p.c / p.group == 1
        && w.kernel[2] <= MAX_KW
        && w.stride[1] <= 2
        && (w.stride[2] == 1 || w.stride[2] == 2)
        && w.dilation == [1, 1, 1]
}

/// Computes the convolution into `out` (`n * m * oh * ow`), which holds the bias planes
/// (or zeros) on entry; `w` is `m x 1 x kh x kw`. `applies(p)` must hold.
pub(crate) fn conv(x: &[f32], w: &[f32], p: &ConvProblem, out: &mut [f32]) {
    assert!(applies(p), "depthwise kernel on an unsupported problem");
    let win = &p.win;
    let (out_sp, ksz) = (win.output_size(), win.kernel_size());
    assert_eq!(out.len(), p.n * p.m * out_sp, "output size");
    assert_eq!(x.len(), p.n * p.c * win.input_size(), "input size");
    assert_eq!(w.len(), p.m * ksz, "weights size");
    let masks = vector_masks(p);
    par::chunks_mut(out, out_sp, out.len() * ksz, |index, dst| {
        let (ni, mo) = (index / p.m, index % p.m);
        let ci = mo / (p.m / p.group);
        let xp = &x[(ni * p.c + ci) * win.input_size()..][..win.input_size()];
        plane(xp, &w[mo * ksz..][..ksz], p, &masks, dst);
    });
}

/// One output plane `dst` (holding its bias or zeros on entry) of a depthwise
/// convolution, from its input plane `xp` and its `kh x kw` weights `wk`; `masks` are
/// [`vector_masks`]`(p)`. `applies(p)` must hold.
pub(crate) fn plane(
    xp: &[f32],
    wk: &[f32],
    p: &ConvProblem,
    masks: &[VectorMasks],
    dst: &mut [f32],
) {
    check_plane(p, (xp, wk, masks), dst.len());
    // SAFETY: AVX-512 F is available (`applies`); the plane sizes match `win`.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        avx512::plane(xp, wk, p, masks, (dst.as_mut_ptr(), Finish::Accumulate))
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (xp, wk, masks, dst);
}

/// Checks one plane's operands against `p` (which [`applies`]) and its output size.
fn check_plane(p: &ConvProblem, (xp, wk, masks): (&[f32], &[f32], &[VectorMasks]), out: usize) {
    assert!(applies(p), "depthwise kernel on an unsupported problem");
    let win = &p.win;
    assert_eq!(xp.len(), win.input_size(), "input plane size");
    assert_eq!(wk.len(), win.kernel_size(), "weights size");
    assert_eq!(out, win.output_size(), "output plane size");
    assert_eq!(
        masks.len(),
        win.output[2].div_ceil(16),
        "masks of another problem"
    );
}

/// What a plane's sums start from and how they are stored.
#[derive(Clone, Copy)]
pub(crate) enum Finish {
    /// Added to the plane's values on entry (its bias or zeros).
    Accumulate,
    /// Summed from zero, each sum stored as `sum * scale + bias` (the integer
    /// epilogue: exact integer sums scaled), without reading the plane.
    Scale(f32, f32),
}

/// [`plane`] into a plane that need not be initialized: each output is the sum of
/// its taps (from zero) times `scale`, plus `bias`, as a multiplication then an
/// addition ([`Finish::Scale`]); every element of `dst` is written.
pub(crate) fn plane_scaled(
    xp: &[f32],
    wk: &[f32],
    p: &ConvProblem,
    masks: &[VectorMasks],
    (scale, bias): (f32, f32),
    dst: &mut [MaybeUninit<f32>],
) {
    check_plane(p, (xp, wk, masks), dst.len());
    let finish = Finish::Scale(scale, bias);
    // SAFETY: AVX-512 F is available (`applies`); the plane sizes match `win`, and
    // `Finish::Scale` writes every element without reading any.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        avx512::plane(xp, wk, p, masks, (dst.as_mut_ptr().cast(), finish))
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (xp, wk, masks, dst, finish);
}

/// The lanes of one 16-column vector of an output row: those inside the row, and per
/// column tap those inside the input row (for stride 2, of the two vectors whose even
/// lanes are the tap's inputs). The same for every row and plane.
#[derive(Clone, Copy)]
pub(crate) struct VectorMasks {
    store: u16,
    load: [[u16; 2]; MAX_KW],
}

/// The masks of every vector of an output row.
pub(crate) fn vector_masks(p: &ConvProblem) -> Vec<VectorMasks> {
    let win = &p.win;
    let (kw, iw, sw, ow) = (win.kernel[2], win.input[2], win.stride[2], win.output[2]);
    let left = win.pad_begin[2] as isize;
    (0..ow.div_ceil(16))
        .map(|j| {
            let col = 16 * j as isize;
            let mut load = [[0u16; 2]; MAX_KW];
            for (kx, l) in load.iter_mut().enumerate().take(kw) {
                let first = col * sw as isize + kx as isize - left;
                *l = [
                    lane_mask(first, 0, iw as isize),
                    lane_mask(first + 16, 0, iw as isize),
                ];
            }
            VectorMasks {
                store: lane_mask(col, 0, ow as isize),
                load,
            }
        })
        .collect()
}

// Tap loops index several per-tap arrays (weights, masks, offsets) by the tap.
#[allow(clippy::needless_range_loop)]
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{ConvProblem, Finish, VectorMasks, XB};
    use std::arch::x86_64::*;

    /// One output plane at `dst` (holding its bias or zeros with
    /// [`Finish::Accumulate`]) from input plane `xp` and the plane's `kh x kw` weights
    /// `wk`: column blocks of up to [`XB`] vectors, each down every output row.
    ///
    /// # Safety
    /// AVX-512 F must be available; `xp` and `wk` must have the sizes of `p`, and `dst`
    /// must address an output plane of `p` that no other thread touches.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn plane(
        xp: &[f32],
        wk: &[f32],
        p: &ConvProblem,
        masks: &[VectorMasks],
        dst: (*mut f32, Finish),
    ) {
        let vectors = masks.len();
        let mut v = 0;
        while v + XB <= vectors {
            column::<XB>(xp, wk, p, (v, &masks[v..v + XB]), dst);
            v += XB;
        }
        match vectors - v {
            0 => {}
            1 => column::<1>(xp, wk, p, (v, &masks[v..]), dst),
            2 => column::<2>(xp, wk, p, (v, &masks[v..]), dst),
            3 => column::<3>(xp, wk, p, (v, &masks[v..]), dst),
            left => unreachable!("{left} vectors left in a block of {XB}"),
        }
    }

    /// `V` vectors of output columns from vector `v` (their `masks`), down every
    /// output row of `dst`.
    ///
    /// # Safety
    /// As [`plane`].
    #[inline(always)]
    unsafe fn column<const V: usize>(
        xp: &[f32],
        wk: &[f32],
        p: &ConvProblem,
        (v, masks): (usize, &[VectorMasks]),
        dst: (*mut f32, Finish),
    ) {
        let oh = p.win.output[1];
        let ox0 = 16 * v;
        // A local copy of fixed size: indexed without bounds checks in the tap loop.
        let masks: [VectorMasks; V] = std::array::from_fn(|j| masks[j]);
        let masks = &masks;
        // Several rows at once: independent accumulation chains (a row's taps form
        // one chain per vector, too short to hide the multiply-add latency).
        let rows = if V <= 2 { 4 } else { 2 };
        let mut oy = 0;
        while oy + rows <= oh {
            if rows == 4 {
                rows_block::<V, 4>(xp, wk, p, (oy, ox0), masks, dst);
            } else {
                rows_block::<V, 2>(xp, wk, p, (oy, ox0), masks, dst);
            }
            oy += rows;
        }
        while oy < oh {
            rows_block::<V, 1>(xp, wk, p, (oy, ox0), masks, dst);
            oy += 1;
        }
    }

    /// The `V` vectors from `ox0` of output rows `oy..oy + R`.
    ///
    /// # Safety
    /// As [`plane`]; the masks are those of [`column`].
    #[inline(always)]
    unsafe fn rows_block<const V: usize, const R: usize>(
        xp: &[f32],
        wk: &[f32],
        p: &ConvProblem,
        (oy, ox0): (usize, usize),
        masks: &[VectorMasks; V],
        (dst, finish): (*mut f32, Finish),
    ) {
        let win = &p.win;
        let [_, kh, kw] = win.kernel;
        let [_, ih, iw] = win.input;
        let ow = win.output[2];
        let (sh, sw) = (win.stride[1], win.stride[2]);
        let (top, left) = (win.pad_begin[1] as isize, win.pad_begin[2] as isize);
        let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        // First input row of each output row (may be negative: padding).
        let sy: [isize; R] = std::array::from_fn(|r| ((oy + r) * sh) as isize - top);
        let out = dst.add(oy * ow + ox0);
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        if let Finish::Accumulate = finish {
            for (r, acc_r) in acc.iter_mut().enumerate() {
                for (j, a) in acc_r.iter_mut().enumerate() {
                    *a = _mm512_maskz_loadu_ps(masks[j].store, out.add(r * ow + 16 * j));
                }
            }
        }
        for ky in 0..kh {
            for kx in 0..kw {
                let wv = _mm512_set1_ps(*wk.get_unchecked(ky * kw + kx));
                let first = (ox0 * sw + kx) as isize - left;
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let iy = sy[r] + ky as isize;
                    if iy < 0 || iy >= ih as isize {
                        continue;
                    }
                    let xr = xp.as_ptr().add(iy as usize * iw);
                    for (j, a) in acc_r.iter_mut().enumerate() {
                        // Masked-off lanes are not accessed (no fault), so the address
                        // may lie outside the row.
                        let at = xr.wrapping_offset(first + (16 * j * sw) as isize);
                        let [m0, m1] = masks[j].load[kx];
                        let xv = if sw == 1 {
                            _mm512_maskz_loadu_ps(m0, at)
                        } else {
                            let lo = _mm512_maskz_loadu_ps(m0, at);
                            let hi = _mm512_maskz_loadu_ps(m1, at.wrapping_add(16));
                            _mm512_permutex2var_ps(lo, evens, hi)
                        };
                        *a = _mm512_add_ps(*a, _mm512_mul_ps(wv, xv));
                    }
                }
            }
        }
        if let Finish::Scale(scale, bias) = finish {
            let (scale, bias) = (_mm512_set1_ps(scale), _mm512_set1_ps(bias));
            for acc_r in acc.iter_mut() {
                for a in acc_r.iter_mut() {
                    *a = _mm512_add_ps(_mm512_mul_ps(*a, scale), bias);
                }
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            for (j, a) in acc_r.iter().enumerate() {
                _mm512_mask_storeu_ps(out.add(r * ow + 16 * j), masks[j].store, *a);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::window::Window;

    /// `len` deterministic values in [-1, 1] (kernel tests' inputs and weights).
    pub(crate) fn values(len: usize, seed: u32) -> Vec<f32> {
        (0..len)
            .map(|i| {
                let h = (i as u32 ^ seed).wrapping_mul(2654435761).rotate_left(13);
                (h % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn matches_a_plain_depthwise_convolution() {
        if !crate::simd::Simd::has_avx512() {
            return;
        }
        // (n, c, mult, ih, iw, kh, kw, (stride h, w), pads t/l/b/r)
        for &(n, c, mult, ih, iw, kh, kw, (sh, sw), pads) in &[
            (1, 3, 1, 7, 20, 3, 3, (1, 1), (1, 1, 1, 1)),
            (2, 4, 2, 9, 37, 5, 5, (1, 1), (2, 2, 2, 2)),
            (1, 5, 1, 10, 10, 5, 5, (2, 2), (2, 2, 2, 2)),
            (1, 2, 1, 160, 160, 3, 3, (2, 2), (1, 1, 1, 1)),
            (1, 2, 1, 11, 70, 3, 5, (2, 2), (0, 1, 2, 3)),
            (1, 1, 1, 3, 3, 7, 7, (1, 1), (3, 3, 3, 3)),
            (1, 2, 1, 6, 81, 1, 8, (1, 1), (0, 0, 0, 7)),
            (1, 3, 1, 12, 96, 3, 3, (2, 1), (1, 1, 1, 1)),
            (1, 3, 1, 9, 45, 5, 3, (1, 2), (2, 1, 2, 1)),
        ] {
            let m = c * mult;
            let x = values(n * c * ih * iw, 1);
            let w = values(m * kh * kw, 2);
            let bias = values(m, 3);
            let oh = (ih + pads.0 + pads.2 - kh) / sh + 1;
            let ow = (iw + pads.1 + pads.3 - kw) / sw + 1;
            let p = ConvProblem {
                n,
                c,
                m,
                group: c,
                win: Window {
                    rank: 2,
                    input: [1, ih, iw],
                    kernel: [1, kh, kw],
                    stride: [1, sh, sw],
                    dilation: [1, 1, 1],
                    pad_begin: [0, pads.0, pads.1],
                    pad_end: [0, pads.2, pads.3],
                    output: [1, oh, ow],
                },
            };
            let mut out: Vec<f32> = (0..n * m)
                .flat_map(|i| std::iter::repeat_n(bias[i % m], oh * ow))
                .collect();
            let mut generic = out.clone();
            crate::ops::conv::depthwise(&x, &w, &p, &mut generic);
            conv(&x, &w, &p, &mut out);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out), bits(&generic), "the generic kernel's bits");
            for ni in 0..n {
                for mo in 0..m {
                    let ci = mo / mult;
                    for y in 0..oh {
                        for xx in 0..ow {
                            let mut want = f64::from(bias[mo]);
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (y * sh + ky) as isize - pads.0 as isize;
                                    let ix = (xx * sw + kx) as isize - pads.1 as isize;
                                    if iy < 0 || ix < 0 || iy >= ih as isize || ix >= iw as isize {
                                        continue;
                                    }
                                    want += f64::from(
                                        x[((ni * c + ci) * ih + iy as usize) * iw + ix as usize],
                                    ) * f64::from(w[(mo * kh + ky) * kw + kx]);
                                }
                            }
                            let got = out[((ni * m + mo) * oh + y) * ow + xx];
                            assert!(
                                (f64::from(got) - want).abs() <= 1e-5 * (1.0 + want.abs()),
                                "{n}x{c}x{ih}x{iw} k{kh}x{kw} s{sh}x{sw}: ({ni},{mo},{y},{xx}) {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
