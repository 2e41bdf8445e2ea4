//! Integer depthwise convolution on AVX-512 VNNI with VBMI byte permutes (Ice Lake,
//! Sapphire Rapids, Zen 4 and later): 2-D, stride 1 or 2, kernels up to [`MAX_KW`]
//! columns wide.
//!
//! Each input plane is copied once, as unsigned bytes (`x + 128`), into a per-thread
//! buffer with its padding (the offset zero, 128) around it. For 16 output columns of
//! one input row, one 64-byte load holds every input they read; a byte permute gathers,
//! for each output, four consecutive taps' inputs into its 32-bit lane, and one
//! `vpdpbusd` adds the four products to the output's INT32 sum. A kernel row of up to 4
//! columns costs one permute and one multiply-add per 16 outputs (8 columns: two),
//! where the float kernel spends a multiply and an add per tap. An input row is loaded
//! and permuted once for every output row of a block that reads it.
//!
//! The `+ 128` offset adds `128 * sum(w)` to every sum (padding included, as it holds
//! the offset zero), which is subtracted before the sum is converted: the INT32 result
//! is exact, then scaled as the integer GEMM's epilogue scales it (`sum as f32 * scale
//! + bias`, a multiplication then an addition), bit for bit the other paths' result.

use crate::ops::conv::ConvProblem;
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// Widest kernel handled: two groups of four taps per kernel row.
pub(crate) const MAX_KW: usize = 8;
/// Groups of four taps per kernel row in [`Packed`] (the widest kernel's).
const GROUPS: usize = MAX_KW / 4;

/// Whether this CPU has AVX-512 F, BW, VNNI and VBMI (never on other architectures).
pub(crate) fn available() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vnni")
                && is_x86_feature_detected!("avx512vbmi")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// Whether [`plane`] computes `p`'s planes (and the CPU can run it).
pub(crate) fn applies(p: &ConvProblem) -> bool {
    let w = &p.win;
    available()
        && w.rank == 2
        && p.group > 0
        && p.c == p.group
        && w.kernel[2] <= MAX_KW
        && (1..=2).contains(&w.stride[1])
        && (1..=2).contains(&w.stride[2])
        && w.dilation == [1, 1, 1]
}

/// Depthwise weights in the kernel's layout: per output channel and kernel row,
/// [`GROUPS`] words of four taps (bytes, zero past the row's end), and per channel the
/// offset's contribution `128 * sum(w)`.
pub(crate) struct Packed {
    words: Vec<i32>,
    offset: Vec<i32>,
    kernel: [usize; 2],
}

impl Packed {
    /// Packs `w` (`m x 1 x kh x kw`, `kw <= MAX_KW`).
    pub(crate) fn new(w: &[i8], m: usize, [kh, kw]: [usize; 2]) -> Packed {
        assert!(kw <= MAX_KW, "depthwise kernel wider than {MAX_KW}");
        assert_eq!(w.len(), m * kh * kw, "weights size");
        let mut words = Vec::with_capacity(m * kh * GROUPS);
        for row in w.chunks_exact(kw.max(1)).take(m * kh) {
            for g in 0..GROUPS {
                let byte = |b: usize| row.get(4 * g + b).map_or(0, |&v| v as u8);
                words.push(i32::from_le_bytes([byte(0), byte(1), byte(2), byte(3)]));
            }
        }
        let offset = (0..m)
            .map(|mo| {
                let taps = &w[mo * kh * kw..][..kh * kw];
                128 * taps.iter().map(|&v| i32::from(v)).sum::<i32>()
            })
            .collect();
        Packed {
            words,
            offset,
            kernel: [kh, kw],
        }
    }
}

thread_local! {
    /// A thread's padded input plane, as offset bytes.
    static PLANE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `body` with input plane `xp` of `p` copied into the thread's padded byte
/// buffer, as a [`PaddedPlane`]. `applies(p)` must hold.
pub(crate) fn with_plane<R>(xp: &[i8], p: &ConvProblem, body: impl FnOnce(&PaddedPlane) -> R) -> R {
    let win = &p.win;
    let [_, ih, iw] = win.input;
    let [_, kh, kw] = win.kernel;
    let [_, oh, ow] = win.output;
    let (sh, sw) = (win.stride[1], win.stride[2]);
    let (top, left) = (win.pad_begin[1], win.pad_begin[2]);
    assert_eq!(xp.len(), ih * iw, "input plane size");
    // Every row and column some output reads; a row is wide enough for the 64-byte
    // load of its last 16 outputs.
    let rows = (oh.max(1) - 1) * sh + kh;
    let width = 16 * (ow.div_ceil(16).max(1) - 1) * sw + 64;
    debug_assert!(width >= (ow.max(1) - 1) * sw + kw);
    PLANE.with_borrow_mut(|buf| {
        buf.clear();
        buf.resize(rows * width, 0x80);
        for (r, dst) in buf.chunks_exact_mut(width).enumerate() {
            let Some(iy) = r.checked_sub(top).filter(|&iy| iy < ih) else {
                continue;
            };
            let cols = iw.min(width.saturating_sub(left));
            let src = &xp[iy * iw..][..cols];
            dst[left..left + cols]
                .iter_mut()
                .zip(src)
                .for_each(|(d, &v)| *d = (v as u8) ^ 0x80);
        }
        body(&PaddedPlane { bytes: buf, width })
    })
}

/// An input plane as offset bytes with its padding, rows of `width` bytes.
pub(crate) struct PaddedPlane<'a> {
    bytes: &'a [u8],
    width: usize,
}

/// Output plane `dst` of channel `mo` of `p` from its padded input plane: every element
/// written, `sum as f32 * scale + bias`. `applies(p)` must hold and `plane` must be
/// `p`'s.
pub(crate) fn plane(
    input: &PaddedPlane<'_>,
    w: &Packed,
    mo: usize,
    p: &ConvProblem,
    (scale, bias): (f32, f32),
    dst: &mut [MaybeUninit<f32>],
) {
    assert!(
        applies(p),
        "VNNI depthwise kernel on an unsupported problem"
    );
    let win = &p.win;
    let [_, kh, kw] = win.kernel;
    let [_, oh, ow] = win.output;
    assert_eq!(w.kernel, [kh, kw], "weights of another kernel");
    assert_eq!(dst.len(), oh * ow, "output plane size");
    let rows = (oh.max(1) - 1) * win.stride[1] + kh;
    let width = 16 * (ow.div_ceil(16).max(1) - 1) * win.stride[2] + 64;
    assert!(
        input.width == width && input.bytes.len() == rows * width,
        "padded plane of another problem"
    );
    let words = &w.words[mo * kh * GROUPS..][..kh * GROUPS];
    let terms = (w.offset[mo], scale, bias);
    // SAFETY: the CPU has the features (`applies`); the buffer holds every row and
    // column the outputs read (checked above), and `dst` is one output plane.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        let dst = dst.as_mut_ptr().cast::<f32>();
        if kw <= 4 {
            x86::plane::<1>(input, words, p, terms, dst);
        } else {
            x86::plane::<2>(input, words, p, terms, dst);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (words, terms, dst);
}

// Block loops index per-row and per-vector arrays by their position.
#[allow(clippy::needless_range_loop)]
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{ConvProblem, PaddedPlane, GROUPS};
    use crate::simd::lane_mask;
    use std::arch::x86_64::*;

    /// Output rows per block (independent sums; an input row serves each that reads it).
    const ROWS: usize = 4;
    /// 16-column vectors per block.
    const VECTORS: usize = 2;

    /// One output plane at `dst` from `input`, with `G` groups of four taps per kernel
    /// row and `(offset, scale, bias)` the channel's terms.
    ///
    /// # Safety
    /// AVX-512 F/BW/VNNI/VBMI must be available; `input` must be the padded plane of
    /// `p`, `words` the channel's packed rows, `dst` an output plane of `p` that no
    /// other thread touches.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi")]
    pub(super) unsafe fn plane<const G: usize>(
        input: &PaddedPlane<'_>,
        words: &[i32],
        p: &ConvProblem,
        terms: (i32, f32, f32),
        dst: *mut f32,
    ) {
        let win = &p.win;
        let sw = win.stride[2];
        let ow = win.output[2];
        // Lane `i`'s bytes: the inputs of taps `4g..4g + 4` of output column `i`.
        let mut index = [_mm512_setzero_si512(); G];
        for (g, index) in index.iter_mut().enumerate() {
            let bytes: [u8; 64] = std::array::from_fn(|b| ((b / 4) * sw + 4 * g + b % 4) as u8);
            *index = _mm512_loadu_si512(bytes.as_ptr().cast());
        }
        let vectors = ow.div_ceil(16);
        let mut v = 0;
        while v + VECTORS <= vectors {
            column::<G, VECTORS>(input, words, p, v, &index, terms, dst);
            v += VECTORS;
        }
        if v < vectors {
            column::<G, 1>(input, words, p, v, &index, terms, dst);
        }
    }

    /// The `V` vectors from vector `v0`, down every output row in blocks of [`ROWS`].
    ///
    /// # Safety
    /// As [`plane`].
    #[inline(always)]
    unsafe fn column<const G: usize, const V: usize>(
        input: &PaddedPlane<'_>,
        words: &[i32],
        p: &ConvProblem,
        v0: usize,
        index: &[__m512i; G],
        terms: (i32, f32, f32),
        dst: *mut f32,
    ) {
        let oh = p.win.output[1];
        let mut oy = 0;
        while oy < oh {
            let rows = ROWS.min(oh - oy);
            rows_block::<G, V>(input, words, p, (oy, rows, v0), index, terms, dst);
            oy += rows;
        }
    }

    /// The `V` vectors from vector `v0` of output rows `oy..oy + rows` (`rows <=
    /// ROWS`).
    ///
    /// # Safety
    /// As [`plane`].
    #[inline(always)]
    unsafe fn rows_block<const G: usize, const V: usize>(
        input: &PaddedPlane<'_>,
        words: &[i32],
        p: &ConvProblem,
        (oy, rows, v0): (usize, usize, usize),
        index: &[__m512i; G],
        (offset, scale, bias): (i32, f32, f32),
        dst: *mut f32,
    ) {
        let win = &p.win;
        let kh = win.kernel[1];
        let (sh, sw) = (win.stride[1], win.stride[2]);
        let ow = win.output[2];
        let mut acc = [[_mm512_setzero_si512(); V]; ROWS];
        let first = input
            .bytes
            .as_ptr()
            .add(oy * sh * input.width + 16 * v0 * sw);
        for t in 0..(rows - 1) * sh + kh {
            let row = first.add(t * input.width);
            let mut x = [[_mm512_setzero_si512(); G]; V];
            for v in 0..V {
                let bytes = _mm512_loadu_si512(row.add(16 * v * sw).cast());
                for g in 0..G {
                    x[v][g] = _mm512_permutexvar_epi8(index[g], bytes);
                }
            }
            for r in 0..ROWS.min(rows) {
                let Some(ky) = t.checked_sub(r * sh).filter(|&ky| ky < kh) else {
                    continue;
                };
                for g in 0..G {
                    let w = _mm512_set1_epi32(*words.get_unchecked(ky * GROUPS + g));
                    for v in 0..V {
                        acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], x[v][g], w);
                    }
                }
            }
        }
        let (offset, scale, bias) = (
            _mm512_set1_epi32(offset),
            _mm512_set1_ps(scale),
            _mm512_set1_ps(bias),
        );
        for r in 0..ROWS.min(rows) {
            for v in 0..V {
                let col = 16 * (v0 + v);
                let sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][v], offset));
                let out = _mm512_add_ps(_mm512_mul_ps(sum, scale), bias);
                let mask = lane_mask(col as isize, 0, ow as isize);
                _mm512_mask_storeu_ps(dst.add((oy + r) * ow + col), mask, out);
            }
        }
    }
}
