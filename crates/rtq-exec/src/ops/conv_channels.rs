//! Convolution as a product vectorised along output channels, on AVX-512: for outputs
//! of few positions (ResNet-50's 7x7 and 14x14 planes) and for every window SGEMM
//! could only read from im2col's copies (strided, spatial kernels), on planes of any
//! size.
//!
//! SGEMM over `[m x k] x [k x positions]` vectorises along the output's rows, the
//! positions: a 7x7 plane leaves the gemm crate's 48-wide tiles one position for a
//! tile of its own, the filters are packed again on every call, and any window but a
//! plain 1x1 needs im2col's columns (each input element copied once per tap). Here the
//! filters are packed once per node, `[block][k][MB]`, and a register tile holds [`P`]
//! positions x [`MB`] output channels (4 vectors): for every step of the inner
//! dimension, 4 filter vectors are loaded and multiplied by `P` broadcast inputs, read
//! where they are ([`Taps`]: in the input itself, or in one zero-padded copy of it
//! when the windows reach into the padding). A task takes one block of output channels
//! over a chunk of positions, and the inner dimension in slices of [`KC`], so that a
//! slice of the block's filters stays in cache while every tile of the chunk uses it.
//! Tiles are kept, from their biases on, in a small channel-last buffer; the last
//! slice's sums go to the output planes by 16 x 16 register transposes, with the
//! residual and Relu applied on the way.
//!
//! Each output element is its bias (or zero) plus the products in inner-dimension
//! order (input channel, kernel row, kernel column), formed with fused multiply-adds:
//! the same on any number of threads.

use crate::gemm::Finish;
use crate::ops::columns::with_columns;
use crate::ops::conv::ConvProblem;
use crate::ops::window::{Window, SPATIAL};
use crate::par::OutPtr;
use rayon::prelude::*;
use std::cell::Cell;
use std::mem::MaybeUninit;

/// Output channels per block (4 vectors of 16).
const MB: usize = 64;
/// Positions per register tile (with 4 vectors: 24 accumulators of the 32 vector
/// registers, plus the 4 filter vectors and a broadcast input).
const P: usize = 6;
/// Register tiles per task: a chunk of at most `TILES * P` positions.
const TILES: usize = 9;
/// Inner-dimension steps per slice (a slice of a block's filters: 64 KiB).
const KC: usize = 256;
/// Most output positions (per image) of a plain 1x1 convolution (stride 1, no
/// padding) computed here, where SGEMM reads the input in place. Planes of up to 64
/// positions leave SGEMM's 48-wide position tiles part empty (measured, one thread:
/// 512 -> 2048 1x1 on 7x7 1.0 ms here, 1.3 ms by SGEMM); up to 14x14, the filters
/// packed once still pay (in ResNet-50, one thread: its 256 -> 1024 1x1 layers with
/// their residual 1.19-1.24 ms by SGEMM, 1.07-1.12 ms here). On bigger planes SGEMM's
/// tiles are full and it wins (128 -> 512 1x1 on 28x28: 1.1 ms by SGEMM, 1.4 ms here).
/// Other windows, which SGEMM reads from im2col's copies, are computed here on planes
/// of any size (one thread, with residual and Relu: 128 -> 128 3x3 stride 2 to 28x28
/// 2.16 ms here, 2.54 ms by im2col + SGEMM; 128 -> 256 3x3 stride 2 to 56x56 18.5 vs
/// 19.9 ms; 512 -> 1024 1x1 stride 2 to 28x28 7.8 vs 8.1 ms).
const MAX_POINTWISE_POSITIONS: usize = 256;
/// Shortest inner dimension (`c * kh * kw`) computed here.
const MIN_DEPTH: usize = 256;
/// Fewest filter elements (`m * c * kh * kw`) computed here: below, filters and
/// columns stay in cache whatever the order, and the transposed store and im2col
/// weigh more (64 -> 128 3x3 stride 2 to 7x7: 0.19 ms here, 0.15 ms by SGEMM).
const MIN_FILTERS: usize = 1 << 17;

/// Whether [`conv`] computes `p` (and the CPU can run it).
pub(crate) fn applies(p: &ConvProblem) -> bool {
    let w = &p.win;
    let depth = p.c * w.kernel_size();
    let positions = w.output_size();
    crate::simd::Simd::has_avx512()
        && p.group == 1
        && p.m.is_multiple_of(MB)
        && positions > 0
        && (positions <= MAX_POINTWISE_POSITIONS || !w.is_pointwise())
        && depth >= MIN_DEPTH
        && p.m * depth >= MIN_FILTERS
}

/// Filters packed for [`conv`]: `[block][k][MB]`.
pub(crate) struct ChannelWeights {
    packed: Vec<f32>,
}

/// Packs `w` (`m x c x kernel`) for [`conv`].
pub(crate) fn pack_weights(w: &[f32], p: &ConvProblem) -> ChannelWeights {
    let depth = p.c * p.win.kernel_size();
    assert_eq!(w.len(), p.m * depth, "filter size");
    // Blocks of MB filters in parallel, each block's filters interleaved.
    let packed = crate::par::written(p.m * depth, MB * depth, w.len(), |b, block| {
        for (r, filter) in w[b * MB * depth..].chunks_exact(depth).take(MB).enumerate() {
            for (i, &v) in filter.iter().enumerate() {
                block[i * MB + r].write(v);
            }
        }
    });
    ChannelWeights { packed }
}

/// Where [`conv`]'s register tiles read their inputs: the input of one image (or its
/// zero-padded copy), an offset per output position (its window's first tap) and an
/// offset per step of the inner dimension (input channel, kernel depth, row and column:
/// the packed filters' order), so that step `k` of position `p` reads
/// `source[positions[p] + steps[k]]`. Nothing is copied for windows that stay inside
/// the input; with padding, the image is copied once into a plane wide enough for
/// every window (instead of im2col's `kernel_size` copies of every element).
struct Taps {
    /// Extents of the plane read (the input's, or the padded copy's), per spatial axis.
    plane: [usize; SPATIAL],
    /// Whether the input is copied into a zero-padded plane first.
    padded: bool,
}

impl Taps {
    fn of(win: &Window) -> Taps {
        // Each axis's reads, in padded coordinates: 0 ..= (out - 1) * stride +
        // (kernel - 1) * dilation.
        let reach: [usize; SPATIAL] = std::array::from_fn(|a| {
            (win.output[a].max(1) - 1) * win.stride[a] + (win.kernel[a] - 1) * win.dilation[a] + 1
        });
        let padded = (0..SPATIAL).any(|a| win.pad_begin[a] > 0 || reach[a] > win.input[a]);
        Taps {
            plane: if padded { reach } else { win.input },
            padded,
        }
    }

    /// Elements of one channel's plane.
    fn plane_size(&self) -> usize {
        self.plane.iter().product()
    }

    /// Elements of one image's padded copy (0 when the input is read in place).
    fn copy_len(&self, channels: usize) -> usize {
        if self.padded {
            channels * self.plane_size()
        } else {
            0
        }
    }

    /// Element strides of the plane's axes.
    fn strides(&self) -> [usize; SPATIAL] {
        [self.plane[1] * self.plane[2], self.plane[2], 1]
    }

    /// Fills `positions` (one per output position) and `steps` (one per inner step).
    fn offsets(&self, win: &Window, channels: usize, positions: &mut [usize], steps: &mut [usize]) {
        let st = self.strides();
        let [_, oh, ow] = win.output;
        for (i, at) in positions.iter_mut().enumerate() {
            let (od, oy, ox) = (i / (oh * ow), i / ow % oh, i % ow);
            *at = od * win.stride[0] * st[0] + oy * win.stride[1] * st[1] + ox * win.stride[2];
        }
        let [kd, kh, kw] = win.kernel;
        let plane = self.plane_size();
        let mut k = 0;
        for c in 0..channels {
            for z in 0..kd {
                for y in 0..kh {
                    for x in 0..kw {
                        steps[k] = c * plane
                            + z * win.dilation[0] * st[0]
                            + y * win.dilation[1] * st[1]
                            + x * win.dilation[2];
                        k += 1;
                    }
                }
            }
        }
    }

    /// Copies image `x` (`channels` planes of the input) into `copy` (`copy_len`), zero
    /// where the windows reach past the input.
    fn pad(&self, x: &[f32], win: &Window, copy: &mut [f32], parallel: bool) {
        let (plane, in_sp) = (self.plane_size(), win.input_size());
        let [pd, ph, pw] = win.pad_begin;
        let [id, ih, iw] = win.input;
        let [_, rows, width] = self.plane;
        // Columns of a padded row that come from the input.
        let (x0, x1) = (pw.min(width), (pw + iw).min(width));
        let fill = |(c, dst): (usize, &mut [f32])| {
            let src = &x[c * in_sp..][..in_sp];
            for (r, row) in dst.chunks_exact_mut(width).enumerate() {
                let (z, y) = (r / rows, r % rows);
                let inside = (pd..pd + id).contains(&z) && (ph..ph + ih).contains(&y);
                if !inside {
                    row.fill(0.0);
                    continue;
                }
                row[..x0].fill(0.0);
                row[x1..].fill(0.0);
                let from = ((z - pd) * ih + (y - ph)) * iw;
                row[x0..x1].copy_from_slice(&src[from..][..x1 - x0]);
            }
        };
        if parallel {
            copy.par_chunks_mut(plane).enumerate().for_each(fill);
        } else {
            copy.chunks_mut(plane).enumerate().for_each(fill);
        }
    }
}

thread_local! {
    /// This thread's offset tables for [`Taps`], kept between calls.
    static OFFSETS: Cell<Vec<usize>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with this thread's offset buffer cut to `len` elements (contents left by
/// an earlier call: `f` must write what it reads), as [`with_columns`] does for floats.
fn with_offsets<R>(len: usize, f: impl FnOnce(&mut [usize]) -> R) -> R {
    let mut buf = OFFSETS.take();
    if buf.len() < len {
        buf.resize(len, 0);
    }
    let result = f(&mut buf[..len]);
    OFFSETS.set(buf);
    result
}

/// Computes the convolution into `out` (`n * m * positions`, every element written,
/// none read), each element finished as `finish` says (its bias per output channel,
/// its residual laid out as `out`). `applies(p)` must hold.
pub(crate) fn conv(
    x: &[f32],
    w: &ChannelWeights,
    finish: Finish<'_>,
    p: &ConvProblem,
    out: &mut [MaybeUninit<f32>],
) {
    assert!(
        applies(p),
        "channel-vectorised convolution on an unsupported problem"
    );
    let win = &p.win;
    let (in_sp, positions) = (win.input_size(), win.output_size());
    let depth = p.c * win.kernel_size();
    assert_eq!(out.len(), p.n * p.m * positions, "output size");
    assert_eq!(x.len(), p.n * p.c * in_sp, "input size");
    assert_eq!(w.packed.len(), p.m * depth, "packed filter size");
    assert!(
        finish.bias.is_none_or(|b| b.len() == p.m),
        "one bias per channel"
    );
    assert!(
        finish.residual.is_none_or(|r| r.len() == out.len()),
        "residual laid out as the output"
    );
    let taps = Taps::of(win);
    let blocks = p.m / MB;
    let tiles = positions.div_ceil(P);
    let chunks = tiles.div_ceil(TILES);
    // Chunk `i`'s positions: balanced whole tiles, clipped to the plane.
    let chunk = move |i: usize| {
        let at = |i: usize| (tiles * i / chunks * P).min(positions);
        at(i)..at(i + 1)
    };
    let ptr = OutPtr(out.as_mut_ptr().cast::<f32>());
    let work = p.m * depth * positions;
    with_offsets(positions + depth, |offsets| {
        let (starts, steps) = offsets.split_at_mut(positions);
        taps.offsets(win, p.c, starts, steps);
        let (starts, steps) = (&*starts, &*steps);
        for ni in 0..p.n {
            let xi = &x[ni * p.c * in_sp..][..p.c * in_sp];
            with_columns(taps.copy_len(p.c), |copy| {
                let source: &[f32] = if taps.padded {
                    taps.pad(xi, win, copy, work >= 1 << 20);
                    copy
                } else {
                    xi
                };
                // Both tables grow with their index: the last pair is the furthest read.
                assert!(
                    starts[positions - 1] + steps[depth - 1] < source.len(),
                    "windows reach past the input"
                );
                let run = |t: usize| {
                    let (b, range) = (t / chunks, chunk(t % chunks));
                    // SAFETY: AVX-512 F is available (`applies`), the sizes were
                    // checked above, every offset pair stays inside `source` (asserted
                    // just above), and this task alone writes block `b`'s planes of
                    // image `ni` over `range`.
                    #[cfg(target_arch = "x86_64")]
                    unsafe {
                        avx512::task(source, (starts, steps), w, &finish, p, (ni, b, range), ptr)
                    };
                    #[cfg(not(target_arch = "x86_64"))]
                    let _ = (b, range, ptr, &finish, source, starts, steps);
                };
                if work < 1 << 20 {
                    (0..blocks * chunks).for_each(run);
                } else {
                    (0..blocks * chunks).into_par_iter().for_each(run);
                }
            });
        }
    });
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{ChannelWeights, ConvProblem, Finish, KC, MB, P, TILES};
    use crate::par::OutPtr;
    use crate::simd::{lane_mask, relu_512};
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// Block `b` of output channels of image `ni` over positions `range` (at most
    /// `TILES * P`): step `k` of position `q` reads `source[starts[q] + steps[k]]`.
    ///
    /// # Safety
    /// AVX-512 F must be available, the sizes those [`super::conv`] checks, and no
    /// other thread may write these positions of these planes.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn task(
        source: &[f32],
        (starts, steps): (&[usize], &[usize]),
        w: &ChannelWeights,
        finish: &Finish<'_>,
        p: &ConvProblem,
        (ni, b, range): (usize, usize, Range<usize>),
        out: OutPtr<f32>,
    ) {
        let positions = p.win.output_size();
        let depth = p.c * p.win.kernel_size();
        debug_assert!(range.len() <= TILES * P);
        // The chunk's sums, channel-last: `[position][MB]`.
        let mut sums = [[0.0f32; MB]; TILES * P];
        let mut bias = [0.0f32; MB];
        if let Some(all) = finish.bias {
            bias.copy_from_slice(&all[b * MB..][..MB]);
        }
        let wb = w.packed.as_ptr().add(b * depth * MB);
        let mut k0 = 0;
        while k0 < depth {
            let kn = KC.min(depth - k0);
            let ws = wb.add(k0 * MB);
            let mut n0 = range.start;
            while n0 < range.end {
                let acc = sums.as_mut_ptr().add(n0 - range.start).cast::<f32>();
                let taps = (
                    source.as_ptr(),
                    starts.as_ptr().add(n0),
                    steps.as_ptr().add(k0),
                );
                let from = if k0 == 0 { bias.as_ptr() } else { acc };
                let step = if k0 == 0 { 0 } else { MB };
                match range.end - n0 {
                    1 => tile::<1>(ws, taps, kn, from, step, acc),
                    2 => tile::<2>(ws, taps, kn, from, step, acc),
                    3 => tile::<3>(ws, taps, kn, from, step, acc),
                    4 => tile::<4>(ws, taps, kn, from, step, acc),
                    5 => tile::<5>(ws, taps, kn, from, step, acc),
                    _ => tile::<P>(ws, taps, kn, from, step, acc),
                }
                n0 += P;
            }
            k0 += kn;
        }
        // Written to the output planes, 16 channels x 16 positions at a time
        // (transposed in registers), finished on the way.
        let len = range.len();
        let residual = finish.residual.map(|all| all.as_ptr());
        for group in 0..MB / 16 {
            for p0 in (0..len).step_by(16) {
                let count = 16.min(len - p0);
                let mask = lane_mask(0, 0, count as isize);
                let mut rows = [_mm512_setzero_ps(); 16];
                for (i, row) in rows.iter_mut().enumerate().take(count) {
                    *row = _mm512_loadu_ps(sums[p0 + i][16 * group..].as_ptr());
                }
                let columns = transpose16(rows);
                for (j, &column) in columns.iter().enumerate() {
                    let channel = b * MB + 16 * group + j;
                    let at = (ni * p.m + channel) * positions + range.start + p0;
                    let mut v = column;
                    if let Some(r) = residual {
                        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, r.add(at)));
                    }
                    if finish.relu {
                        v = relu_512(v);
                    }
                    _mm512_mask_storeu_ps(out.0.add(at), mask, v);
                }
            }
        }
    }

    /// The 16 x 16 block `rows` transposed: lane `i` of vector `j` of the result is
    /// lane `j` of `rows[i]`.
    #[inline(always)]
    pub(super) unsafe fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
        let pd = _mm512_castps_pd;
        let ps = _mm512_castpd_ps;
        // Pairs of rows interleaved, then pairs of pairs: each 128-bit lane holds a
        // 4 x 4 block transposed.
        let mut t = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        let mut u = [_mm512_setzero_ps(); 16];
        for i in 0..4 {
            let (a, b, c, d) = (t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3]);
            u[4 * i] = ps(_mm512_unpacklo_pd(pd(a), pd(c)));
            u[4 * i + 1] = ps(_mm512_unpackhi_pd(pd(a), pd(c)));
            u[4 * i + 2] = ps(_mm512_unpacklo_pd(pd(b), pd(d)));
            u[4 * i + 3] = ps(_mm512_unpackhi_pd(pd(b), pd(d)));
        }
        // Then the 4 x 4 blocks moved across 128-bit lanes, in two rounds.
        for i in 0..2 {
            for j in 0..4 {
                let (a, b) = (u[8 * i + j], u[8 * i + 4 + j]);
                t[8 * i + j] = _mm512_shuffle_f32x4::<0x88>(a, b);
                t[8 * i + 4 + j] = _mm512_shuffle_f32x4::<0xdd>(a, b);
            }
        }
        for j in 0..8 {
            u[j] = _mm512_shuffle_f32x4::<0x88>(t[j], t[8 + j]);
            u[8 + j] = _mm512_shuffle_f32x4::<0xdd>(t[j], t[8 + j]);
        }
        u
    }

    /// `Q` positions x [`MB`] channels: the sums start from `from` (channel-last rows
    /// `step` apart: 0 repeats one row, the biases), take `kn` steps of filters `w`
    /// (`[k][MB]`) times inputs `x[starts[j] + steps[k]]`, and are stored to `acc`
    /// (channel-last rows of [`MB`]).
    ///
    /// # Safety
    /// AVX-512 F must be available and every pointer valid for what it is read or
    /// written for.
    #[inline(always)]
    unsafe fn tile<const Q: usize>(
        w: *const f32,
        (x, starts, steps): (*const f32, *const usize, *const usize),
        kn: usize,
        from: *const f32,
        step: usize,
        acc: *mut f32,
    ) {
        let bases: [*const f32; Q] = std::array::from_fn(|j| x.add(*starts.add(j)));
        let mut sum = [[_mm512_setzero_ps(); 4]; Q];
        for (j, s) in sum.iter_mut().enumerate() {
            for (v, s) in s.iter_mut().enumerate() {
                *s = _mm512_loadu_ps(from.add(j * step + 16 * v));
            }
        }
        for k in 0..kn {
            let wk = w.add(k * MB);
            let wv = [
                _mm512_loadu_ps(wk),
                _mm512_loadu_ps(wk.add(16)),
                _mm512_loadu_ps(wk.add(32)),
                _mm512_loadu_ps(wk.add(48)),
            ];
            let at = *steps.add(k);
            for (j, s) in sum.iter_mut().enumerate() {
                let xv = _mm512_set1_ps(*bases[j].add(at));
                for (v, s) in s.iter_mut().enumerate() {
                    *s = _mm512_fmadd_ps(wv[v], xv, *s);
                }
            }
        }
        for (j, s) in sum.iter().enumerate() {
            for (v, s) in s.iter().enumerate() {
                _mm512_storeu_ps(acc.add(j * MB + 16 * v), *s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::conv_depthwise::tests::values;
    use crate::ops::conv_direct::tests::naive;
    use crate::ops::window::Window;

    #[test]
    fn matches_a_plain_convolution() {
        if !crate::simd::Simd::has_avx512() {
            return;
        }
        let mut ran = 0;
        for &(n, c, ih, iw, m, k, pads, stride) in &[
            // 1x1 on 7x7 (one chunk with a 1-position tail tile), two slices of depth.
            (1, 300, 7, 7, 448, 1, (0, 0, 0, 0), 1),
            // 1x1 stride 2 (read in place, every other row and column), batch 2.
            (2, 520, 14, 14, 256, 1, (0, 0, 0, 0), 2),
            // 3x3 stride 2 with padding (a padded copy); 3x3 stride 1 on a plane of 4
            // chunks.
            (1, 40, 13, 11, 384, 3, (1, 1, 1, 1), 2),
            (1, 120, 15, 13, 128, 3, (1, 1, 1, 1), 1),
            // Padding at the end only; at the start only, unequal.
            (2, 64, 9, 10, 256, 3, (0, 0, 1, 1), 2),
            (1, 32, 12, 12, 512, 3, (2, 1, 0, 0), 1),
            // Every tail width: 1 to 5 positions.
            (1, 2048, 1, 5, 64, 1, (0, 0, 0, 0), 1),
            (1, 2048, 2, 2, 64, 1, (0, 0, 0, 0), 1),
            (1, 2048, 1, 3, 64, 1, (0, 0, 0, 0), 1),
            (1, 2048, 1, 2, 64, 1, (0, 0, 0, 0), 1),
            (1, 2048, 1, 1, 64, 1, (0, 0, 0, 0), 1),
        ] {
            let win = Window::plain_2d((ih, iw), (k, k), (stride, stride), pads);
            let (o, ow) = (win.output[1], win.output[2]);
            let p = ConvProblem {
                n,
                c,
                m,
                group: 1,
                win,
            };
            assert!(applies(&p), "{c}->{m} {k}x{k} on {ih}x{iw}");
            let x = values(n * c * ih * iw, 1);
            let w = values(m * c * k * k, 2);
            let bias = values(m, 3);
            let len = n * m * o * ow;
            let residual = values(len, 4);
            let packed = pack_weights(&w, &p);
            let want = naive(
                &x,
                &w,
                &bias,
                (n, c, ih, iw),
                (m, k, k),
                pads,
                (stride, stride),
            );
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
            ran += 1;
        }
        assert_eq!(ran, 11);
    }

    #[test]
    fn dilated_and_3d_windows_match_im2col() {
        if !crate::simd::Simd::has_avx512() {
            return;
        }
        let dilated = Window {
            rank: 2,
            input: [1, 11, 12],
            kernel: [1, 3, 3],
            stride: [1, 1, 2],
            dilation: [1, 2, 3],
            pad_begin: [0, 2, 1],
            pad_end: [0, 2, 3],
            output: [1, 11, 6],
        };
        let volume = Window {
            rank: 3,
            input: [4, 6, 5],
            kernel: [2, 3, 3],
            stride: [1, 1, 1],
            dilation: [1, 1, 1],
            pad_begin: [1, 1, 1],
            pad_end: [0, 1, 1],
            output: [4, 6, 5],
        };
        for (c, m, win) in [(48, 320, dilated), (24, 320, volume)] {
            let p = ConvProblem {
                n: 2,
                c,
                m,
                group: 1,
                win,
            };
            assert!(applies(&p), "{:?}", p.win);
            let len = p.n * m * p.win.output_size();
            let x = values(p.n * c * p.win.input_size(), 8);
            let w = values(m * c * p.win.kernel_size(), 9);
            let bias = values(m, 10);
            let residual = values(len, 11);
            let finish = Finish {
                bias: Some(&bias),
                residual: Some(&residual),
                relu: true,
            };
            let want = crate::ops::conv::conv_gemm(&x, &w, finish, &p);
            let mut out = vec![MaybeUninit::new(f32::NAN); len];
            conv(&x, &pack_weights(&w, &p), finish, &p, &mut out);
            for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                // SAFETY: every element was initialised above.
                let a = unsafe { a.assume_init() };
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{i}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn transposes_16_by_16_blocks() {
        if !crate::simd::Simd::has_avx512() {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            let m: Vec<f32> = (0..256).map(|i| i as f32).collect();
            let mut got = [0.0f32; 256];
            // SAFETY: AVX-512 F is available (checked above); every pointer covers 16
            // elements of `m` or `got`.
            unsafe {
                let rows = std::array::from_fn(|i| _mm512_loadu_ps(m[16 * i..].as_ptr()));
                for (j, c) in avx512::transpose16(rows).iter().enumerate() {
                    _mm512_storeu_ps(got[16 * j..].as_mut_ptr(), *c);
                }
            }
            for i in 0..16 {
                for j in 0..16 {
                    assert_eq!(got[16 * j + i], m[16 * i + j], "row {i}, column {j}");
                }
            }
        }
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        if !crate::simd::Simd::has_avx512() {
            return;
        }
        // Big enough to run in parallel: 1024 -> 256 1x1 on 14x14.
        let (c, hw, m) = (1024, 14, 256);
        let p = ConvProblem {
            n: 1,
            c,
            m,
            group: 1,
            win: Window::plain_2d((hw, hw), (1, 1), (1, 1), (0, 0, 0, 0)),
        };
        let x = values(c * hw * hw, 5);
        let packed = pack_weights(&values(m * c, 6), &p);
        let bias = values(m, 7);
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut out = vec![MaybeUninit::new(0.0f32); m * hw * hw];
            let finish = Finish {
                bias: Some(&bias),
                residual: None,
                relu: true,
            };
            pool.install(|| conv(&x, &packed, finish, &p, &mut out));
            out.iter()
                // SAFETY: initialised above.
                .map(|v| unsafe { v.assume_init() }.to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(on(1), on(3));
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use crate::ops::window::Window;

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec conv_channels::speed -- --ignored --nocapture"]
    fn resnet_shapes() {
        for (c, hw, m, k, s) in [
            (256, 14, 1024, 1, 1),
            (1024, 14, 256, 1, 1),
            (512, 7, 2048, 1, 1),
            (2048, 7, 512, 1, 1),
            (512, 28, 1024, 1, 2),
            (256, 28, 256, 3, 2),
            (512, 14, 512, 3, 2),
            (128, 16, 128, 1, 1),
            (128, 28, 512, 1, 1),
            (512, 28, 128, 1, 1),
            (128, 56, 128, 3, 2),
            (256, 56, 512, 1, 2),
            (64, 56, 256, 1, 1),
            (256, 56, 64, 1, 1),
            (96, 40, 96, 1, 1),
            (256, 20, 64, 1, 1),
            (64, 80, 64, 1, 1),
            (64, 8, 64, 1, 1),
            (128, 6, 256, 1, 1),
            (96, 7, 192, 1, 1),
            (288, 7, 64, 1, 1),
            (64, 14, 128, 3, 2),
            (1024, 14, 2048, 1, 2),
            (96, 64, 256, 3, 2),
            (128, 112, 256, 3, 2),
            (512, 56, 1024, 1, 2),
        ] {
            let pad = k / 2;
            let win = Window::plain_2d((hw, hw), (k, k), (s, s), (pad, pad, pad, pad));
            let o = win.output[1];
            let p = ConvProblem {
                n: 1,
                c,
                m,
                group: 1,
                win,
            };
            if !applies(&p) {
                continue;
            }
            let x = vec![0.5f32; c * hw * hw];
            let w = vec![0.25f32; m * c * k * k];
            let packed = pack_weights(&w, &p);
            let bias = vec![0.1f32; m];
            let residual = vec![0.1f32; m * o * o];
            let finish = Finish {
                bias: Some(&bias),
                residual: Some(&residual),
                relu: true,
            };
            let mut out = vec![MaybeUninit::new(0.0f32); m * o * o];
            // The fastest of 50 runs (the machine may be shared).
            let best = |f: &mut dyn FnMut()| {
                (0..400)
                    .map(|_| {
                        let t = std::time::Instant::now();
                        f();
                        t.elapsed().as_secs_f64()
                    })
                    .fold(f64::INFINITY, f64::min)
            };
            let here = best(&mut || conv(&x, &packed, finish, &p, &mut out));
            let plain = Finish {
                bias: Some(&bias),
                residual: None,
                relu: false,
            };
            let bare = best(&mut || conv(&x, &packed, plain, &p, &mut out));
            println!("bare {:.3}", bare * 1e3);
            let sgemm = best(&mut || {
                std::hint::black_box(crate::ops::conv::conv_gemm(&x, &w, finish, &p));
            });
            let gflops = (2 * m * c * k * k * o * o) as f64 / here / 1e9;
            println!(
                "{c}->{m} {k}x{k}/{s} to {o}x{o}: {:.3} ms ({gflops:.0} GFLOP/s), SGEMM {:.3} ms",
                here * 1e3,
                sgemm * 1e3
            );
        }
    }
}
