//! Direct INT8 convolution on AVX-512 VNNI for 2-D, group-1 convolutions (`IntegerConv`)
//! with kernels larger than 1x1, stride 1 or 2, without an im2col buffer.
//!
//! The input is copied once per image into a padded layout of groups of four channels,
//! bytes offset by 128 (unsigned for `vpdpbusd`; the padding is 128, a zero activation),
//! split by stride phase: with stride `s`, padded row `y` and column `x` go to phase
//! `(y % s, x % s)` at `(y / s) * wq + x / s`, `wq = ceil(wp / s)`; per channel group
//! `[s * s phases][phase_len][4]`. The output position `p = oy * wq + ox` then reads, for
//! tap `(ky, kx)`, the four bytes at `p + (ky / s) * wq + kx / s` of phase
//! `(ky % s, kx % s)`: sixteen consecutive positions are one 64-byte load for every tap.
//! Positions are computed along the phase rows (the columns past each output row are
//! computed and dropped), in register blocks of [`MB`] output channels x `V` vectors of
//! 16 positions, over every channel group and tap; weights are packed once per node,
//! `[block][c/4][ky][kx][MB][4]`. The epilogue is the integer GEMM's,
//! `(acc - 128 * sum(w)) as f32 * scale + bias` (a product then a sum), so results are
//! bit-identical to the im2col path's.

use crate::igemm::Epilogue;
use crate::ops::window::Window;
use crate::par::OutPtr;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Output channels per register block.
const MB: usize = 8;
/// 16-position vectors per register block (with [`MB`]: 24 accumulators).
const XB: usize = 3;
/// Register blocks of output channels per task: their weights stay in cache while the
/// task walks its positions.
const BLOCKS_PER_TASK: usize = 8;
/// Vectors of positions per task.
const VECTORS_PER_TASK: usize = 4 * XB;
/// Multiply-accumulates below which a convolution stays on the calling thread.
const SERIAL_WORK: usize = 1 << 20;

/// Whether [`conv`] computes this window (and the CPU can run it): 2-D, the same stride
/// 1 or 2 on both axes, no dilation, a kernel larger than 1x1 (a 1x1 kernel needs no
/// im2col at stride 1, and reads a quarter of the phases at stride 2).
pub(crate) fn applies(win: &Window) -> bool {
    vnni_available()
        && win.rank == 2
        && win.is_plain_2d()
        && win.stride[1] == win.stride[2]
        && win.stride[1] <= 2
        && win.kernel[1] * win.kernel[2] > 1
}

fn vnni_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::igemm::Isa::detect() == crate::igemm::Isa::Avx512Vnni
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Weights packed for [`conv`], with the unsigned-activation correction per channel.
pub(crate) struct DirectWeights {
    /// `[block][c/4][ky][kx][MB][4]`, zero past `m` and `c`.
    packed: Vec<i8>,
    /// `128 * sum(w[m])` per output channel.
    row_bias: Vec<i32>,
    m: usize,
    c: usize,
    taps: usize,
}

/// Packs `w` (`m x c x kh x kw`, INT8) for [`conv`].
pub(crate) fn pack_weights(w: &[i8], m: usize, c: usize, taps: usize) -> DirectWeights {
    assert_eq!(w.len(), m * c * taps, "weight size");
    let groups = c.div_ceil(4);
    let mut packed = vec![0i8; m.div_ceil(MB) * groups * taps * MB * 4];
    for (mo, filter) in w.chunks_exact(c * taps).enumerate() {
        let (b, r) = (mo / MB, mo % MB);
        for (ci, taps_of_c) in filter.chunks_exact(taps).enumerate() {
            let (g, u) = (ci / 4, ci % 4);
            for (t, &v) in taps_of_c.iter().enumerate() {
                packed[(((b * groups + g) * taps + t) * MB + r) * 4 + u] = v;
            }
        }
    }
    let row_bias = w
        .chunks_exact(c * taps)
        .map(|f| 128 * f.iter().map(|&v| i32::from(v)).sum::<i32>())
        .collect();
    DirectWeights {
        packed,
        row_bias,
        m,
        c,
        taps,
    }
}

/// The padded, phase-split geometry of one image.
struct Geometry {
    /// Stride.
    stride: usize,
    /// Phase row length: `ceil(wp / stride)`.
    wq: usize,
    /// Positions computed: `oh * wq`.
    positions: usize,
    /// 16-position vectors covering them.
    vectors: usize,
    /// Positions per phase: every load of every tap stays inside.
    phase_len: usize,
}

impl Geometry {
    fn of(win: &Window) -> Geometry {
        let [_, kh, kw] = win.kernel;
        let s = win.stride[1];
        let hp = win.input[1] + win.pad_begin[1] + win.pad_end[1];
        let wp = win.input[2] + win.pad_begin[2] + win.pad_end[2];
        let (hq, wq) = (hp.div_ceil(s), wp.div_ceil(s));
        let positions = win.output[1] * wq;
        let vectors = positions.div_ceil(16);
        let reach = ((kh - 1) / s) * wq + (kw - 1) / s;
        let phase_len = (vectors * 16 + reach).max(hq * wq);
        Geometry {
            stride: s,
            wq,
            positions,
            vectors,
            phase_len,
        }
    }

    /// Positions per channel group (every phase).
    fn group_len(&self) -> usize {
        self.stride * self.stride * self.phase_len
    }
}

/// One image's input in the padded, phase-split layout: `[c/4][phases][phase_len][4]`,
/// offset by 128. Big inputs are laid out one channel group per task.
fn pad_input(x: &[i8], c: usize, win: &Window, g: &Geometry) -> Vec<u8> {
    let groups = c.div_ceil(4);
    let group_bytes = g.group_len() * 4;
    let mut buf = crate::par::uninit_vec::<u8>(groups * group_bytes);
    let fill = |(gi, dst): (usize, &mut [MaybeUninit<u8>])| pad_group(x, c, gi, win, g, dst);
    if buf.len() >= PARALLEL_PAD_BYTES && groups > 1 {
        buf.par_chunks_exact_mut(group_bytes)
            .enumerate()
            .for_each(fill);
    } else {
        buf.chunks_exact_mut(group_bytes).enumerate().for_each(fill);
    }
    // SAFETY: `pad_group` wrote every byte of each group.
    unsafe { crate::par::assume_written(buf) }
}

/// Padded inputs of at least this many bytes are laid out on every thread.
const PARALLEL_PAD_BYTES: usize = 1 << 16;

/// Channel group `gi` of [`pad_input`]'s layout into `dst` (every byte written).
fn pad_group(
    x: &[i8],
    c: usize,
    gi: usize,
    win: &Window,
    g: &Geometry,
    dst: &mut [MaybeUninit<u8>],
) {
    let [_, ih, iw] = win.input;
    let (top, left) = (win.pad_begin[1], win.pad_begin[2]);
    let s = g.stride;
    dst.fill(MaybeUninit::new(0x80));
    // SAFETY: every byte was just written.
    let dst = unsafe { &mut *(dst as *mut [MaybeUninit<u8>] as *mut [u8]) };
    let plane = ih * iw;
    let zero_row = vec![0i8; iw];
    let mut row = vec![0u8; iw * 4];
    for y in 0..ih {
        let rows: [&[i8]; 4] = std::array::from_fn(|u| {
            let ci = gi * 4 + u;
            if ci < c {
                &x[ci * plane + y * iw..][..iw]
            } else {
                &zero_row[..]
            }
        });
        let py = y + top;
        let phase_row = |px: usize| ((py % s) * s + px % s) * g.phase_len + (py / s) * g.wq;
        if s == 1 {
            let start = (phase_row(0) + left) * 4;
            crate::igemm::interleave_rows(rows, &mut dst[start..start + iw * 4]);
            continue;
        }
        crate::igemm::interleave_rows(rows, &mut row);
        // Padded columns of phase q: input columns xi = q - left (mod s), s apart,
        // consecutive words in the phase row from padded column px / s.
        for q in 0..s {
            let first = (q + s - left % s) % s;
            if first >= iw {
                continue;
            }
            let px = first + left;
            let at = (phase_row(px) + px / s) * 4;
            let words = row[first * 4..].chunks(4 * s).map(|w| &w[..4]);
            for (d, word) in dst[at..].chunks_exact_mut(4).zip(words) {
                d.copy_from_slice(word);
            }
        }
    }
}

/// The convolution of `x` (`n x c x ih x iw`, INT8) into `out` (`n x m x oh x ow`,
/// f32, every element written) through `ep`'s per-channel scale and bias (`ep.row`,
/// `ep.col` unused: the output is dense). `applies(win)` must hold.
pub(crate) fn conv(
    x: &[i8],
    n: usize,
    w: &DirectWeights,
    win: &Window,
    ep: &Epilogue<'_>,
    out: &mut [MaybeUninit<f32>],
) {
    assert!(
        applies(win),
        "direct integer convolution on an unsupported window"
    );
    let (m, c) = (w.m, w.c);
    assert_eq!(w.taps, win.kernel_size(), "kernel size");
    assert_eq!(x.len(), n * c * win.input_size(), "input size");
    assert_eq!(out.len(), n * m * win.output_size(), "output size");
    assert!(ep.scale.len() == m && ep.bias.is_none_or(|b| b.len() == m));
    let geo = Geometry::of(win);
    let blocks = m.div_ceil(MB);
    let block_groups = blocks.div_ceil(BLOCKS_PER_TASK);
    let chunks = geo.vectors.div_ceil(VECTORS_PER_TASK);
    let work = m * c * w.taps * win.output_size();
    let ptr = OutPtr(out.as_mut_ptr().cast::<f32>());
    for ni in 0..n {
        let img = &x[ni * c * win.input_size()..][..c * win.input_size()];
        let input = pad_input(img, c, win, &geo);
        let run = |t: usize| {
            let (bg, chunk) = (t / chunks, t % chunks);
            let blocks = bg * BLOCKS_PER_TASK..((bg + 1) * BLOCKS_PER_TASK).min(blocks);
            let vectors =
                chunk * VECTORS_PER_TASK..((chunk + 1) * VECTORS_PER_TASK).min(geo.vectors);
            let plane_out = ni * m * win.output_size();
            // SAFETY: VNNI is available (`applies`); the sizes were checked above; this
            // task alone writes these channels' positions of image `ni`.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                let image = Image {
                    input: &input,
                    w,
                    win,
                    geo: &geo,
                    ep,
                    out: ptr.offset(plane_out),
                };
                vnni::task(&image, blocks, vectors)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (blocks, vectors, plane_out, &input);
        };
        let tasks = block_groups * chunks;
        if work < SERIAL_WORK {
            (0..tasks).for_each(run);
        } else {
            (0..tasks).into_par_iter().for_each(run);
        }
        crate::arena::give(input);
    }
}

/// What every register block of one image reads and where it writes.
#[cfg(target_arch = "x86_64")]
struct Image<'a> {
    /// [`pad_input`]'s layout of the image.
    input: &'a [u8],
    w: &'a DirectWeights,
    win: &'a Window,
    geo: &'a Geometry,
    ep: &'a Epilogue<'a>,
    /// The image's `m x oh x ow` outputs.
    out: OutPtr<f32>,
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use super::{Geometry, Image, MB, XB};
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// Channel blocks `blocks` at vectors `vectors` of one image.
    ///
    /// # Safety
    /// AVX-512 VNNI must be available; `image.input` is [`super::pad_input`]'s layout
    /// for `image.geo`; `image.out` addresses the image's `m x oh x ow` outputs, of
    /// which no other thread writes these.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn task(image: &Image<'_>, blocks: Range<usize>, vectors: Range<usize>) {
        let mut v = vectors.start;
        while v < vectors.end {
            let left = vectors.end - v;
            for b in blocks.clone() {
                match left {
                    1 => strided::<1>(image, b, v),
                    2 => strided::<2>(image, b, v),
                    _ => strided::<XB>(image, b, v),
                }
            }
            v += left.min(XB);
        }
    }

    /// `V` vectors of positions from vector `v0`, channels of block `b`.
    ///
    /// # Safety
    /// As [`task`].
    #[inline(always)]
    unsafe fn strided<const V: usize>(image: &Image<'_>, b: usize, v0: usize) {
        if image.geo.stride == 1 {
            block::<V, 1>(image, b, v0)
        } else {
            block::<V, 2>(image, b, v0)
        }
    }

    /// [`strided`] for stride `S`.
    ///
    /// # Safety
    /// As [`task`].
    #[inline(always)]
    unsafe fn block<const V: usize, const S: usize>(image: &Image<'_>, b: usize, v0: usize) {
        let Image {
            input,
            w,
            win,
            geo,
            ep,
            out,
        } = *image;
        let [_, kh, kw] = win.kernel;
        let (groups, taps) = (w.c.div_ceil(4), w.taps);
        let (wq, phase_len) = (geo.wq, geo.phase_len);
        let mut acc = [[_mm512_setzero_si512(); V]; MB];
        let wb = w.packed.as_ptr().add(b * groups * taps * MB * 4);
        let xb = input.as_ptr().add(v0 * 16 * 4);
        for g in 0..groups {
            let xg = xb.add(g * S * S * phase_len * 4);
            let wg = wb.add(g * taps * MB * 4);
            for ky in 0..kh {
                let row = ((ky % S) * S * phase_len + (ky / S) * wq) * 4;
                for kx in 0..kw {
                    let xt = xg.add(row + ((kx % S) * phase_len + kx / S) * 4);
                    let wt = wg.add((ky * kw + kx) * MB * 4);
                    let mut xv = [_mm512_setzero_si512(); V];
                    for (j, x) in xv.iter_mut().enumerate() {
                        *x = _mm512_loadu_si512(xt.add(j * 64) as *const _);
                    }
                    for (r, acc_r) in acc.iter_mut().enumerate() {
                        let wv = _mm512_set1_epi32((wt.add(r * 4) as *const i32).read_unaligned());
                        for j in 0..V {
                            acc_r[j] = _mm512_dpbusd_epi32(acc_r[j], xv[j], wv);
                        }
                    }
                }
            }
        }
        let [_, oh, ow] = win.output;
        let plane = oh * ow;
        for (r, acc_r) in acc.iter().enumerate().take(MB.min(w.m - b * MB)) {
            let mo = b * MB + r;
            let fix = _mm512_set1_epi32(w.row_bias[mo]);
            let scale = _mm512_set1_ps(ep.scale[mo]);
            let bias = _mm512_set1_ps(ep.bias.map_or(0.0, |bias| bias[mo]));
            let dst = out.0.add(mo * plane);
            for (j, &a) in acc_r.iter().enumerate() {
                let y = _mm512_add_ps(
                    _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a, fix)), scale),
                    bias,
                );
                scatter_rows(y, (v0 + j) * 16, geo, ow, dst);
            }
        }
    }

    /// Writes the 16 values of positions `p0..p0 + 16` (along phase rows of `geo.wq`)
    /// that are outputs (column below `ow`, position below `geo.positions`) to `dst`
    /// (`oh x ow`). Each run of lanes within one output row is one masked store (the
    /// vector's address may lie before the row: its lanes there are masked off, not
    /// accessed).
    ///
    /// # Safety
    /// `dst` addresses the plane's `oh x ow` values.
    #[inline(always)]
    unsafe fn scatter_rows(lanes: __m512, p0: usize, geo: &Geometry, ow: usize, dst: *mut f32) {
        let mut lane = 0;
        let mut p = p0;
        while lane < 16 && p < geo.positions {
            let (y, x) = (p / geo.wq, p % geo.wq);
            let run = (16 - lane).min(geo.wq - x).min(geo.positions - p);
            if x < ow {
                let cnt = run.min(ow - x);
                let mask = (((1u32 << cnt) - 1) << lane) as u16;
                let base = dst.wrapping_add(y * ow + x).wrapping_sub(lane);
                _mm512_mask_storeu_ps(base, mask, lanes);
            }
            lane += run;
            p += run;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::igemm::tests::bytes;
    use crate::igemm::{igemm, Isa, PackedWeights, Strided};
    use crate::ops::conv::im2col;
    use crate::ops::window::widen;

    fn window(
        input: [usize; 2],
        kernel: [usize; 2],
        stride: usize,
        begin: [usize; 2],
        end: [usize; 2],
    ) -> Window {
        let output = [0, 1].map(|a| (input[a] + begin[a] + end[a] - kernel[a]) / stride + 1);
        Window {
            rank: 2,
            input: widen(&input, 1),
            kernel: widen(&kernel, 1),
            stride: [1, stride, stride],
            dilation: [1, 1, 1],
            pad_begin: widen(&begin, 0),
            pad_end: widen(&end, 0),
            output: widen(&output, 1),
        }
    }

    /// Bit-identical to im2col + the integer GEMM on odd shapes: channels not a multiple
    /// of 4, output channels not a multiple of 8, rows narrower and wider than a vector,
    /// asymmetric padding.
    #[test]
    fn matches_the_im2col_path_bit_for_bit() {
        if !applies(&window([4, 4], [3, 3], 1, [1, 1], [1, 1])) {
            eprintln!("no AVX-512 VNNI here: skipped");
            return;
        }
        for (n, c, m, input, kernel, stride, begin, end) in [
            (1, 3, 5, [7, 9], [3, 3], 1, [1, 1], [1, 1]),
            (2, 13, 24, [20, 37], [3, 3], 1, [1, 1], [1, 1]),
            (1, 16, 17, [5, 5], [5, 5], 1, [2, 2], [2, 2]),
            (1, 8, 9, [6, 40], [3, 2], 1, [0, 1], [2, 0]),
            (1, 96, 24, [10, 10], [3, 3], 1, [1, 1], [1, 1]),
            (1, 4, 8, [1, 70], [1, 3], 1, [0, 1], [0, 1]),
            // Stride 2: odd and even padded sizes, ResNet's 7x7 stem, a lone row.
            (1, 3, 16, [23, 30], [7, 7], 2, [3, 3], [3, 3]),
            (2, 20, 9, [9, 8], [3, 3], 2, [1, 1], [1, 1]),
            (1, 5, 8, [6, 35], [3, 2], 2, [0, 1], [1, 0]),
            (1, 4, 8, [1, 41], [1, 3], 2, [0, 1], [0, 1]),
            // Inputs laid out one channel group per task (at least 64 KiB padded).
            (1, 18, 8, [64, 66], [3, 3], 1, [1, 1], [1, 1]),
            (2, 10, 8, [90, 81], [3, 3], 2, [1, 1], [0, 1]),
        ] {
            let win = window(input, kernel, stride, begin, end);
            let taps = win.kernel_size();
            let (in_sp, out_sp) = (win.input_size(), win.output_size());
            let x = bytes(n * c * in_sp, 1);
            let wq = bytes(m * c * taps, 2);
            let scale: Vec<f32> = (0..m).map(|r| 0.01 + r as f32 * 1e-3).collect();
            let bias: Vec<f32> = (0..m).map(|r| r as f32 * 0.5 - 2.0).collect();
            let ep = Epilogue {
                scale: &scale,
                bias: Some(&bias),
                row: out_sp,
                col: 1,
            };
            let k = c * taps;
            let gemm_w = PackedWeights::new(
                Isa::Avx512Vnni,
                Strided {
                    data: &wq,
                    row: k,
                    col: 1,
                },
                m,
                k,
            );
            let mut want = vec![0f32; n * m * out_sp];
            let mut col = vec![0i8; k * out_sp];
            for ni in 0..n {
                im2col(
                    &x[ni * c * in_sp..][..c * in_sp],
                    &win,
                    0,
                    out_sp,
                    &mut col,
                    true,
                );
                let b = Strided {
                    data: &col,
                    row: out_sp,
                    col: 1,
                };
                igemm(
                    &gemm_w,
                    b,
                    out_sp,
                    &ep,
                    &mut want[ni * m * out_sp..][..m * out_sp],
                );
            }
            let mut got = vec![f32::NAN; n * m * out_sp];
            let packed = pack_weights(&wq, m, c, taps);
            // SAFETY: f32 values are valid `MaybeUninit<f32>`s.
            let uninit = unsafe { &mut *(got.as_mut_slice() as *mut [f32] as *mut [_]) };
            conv(&x, n, &packed, &win, &ep, uninit);
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "c={c} m={m} input={input:?} kernel={kernel:?} stride {stride}"
            );
        }
    }
}
