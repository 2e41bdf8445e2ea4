//! x86-64 micro-kernels and activation packing: AVX-512 VNNI and AVX2.

use super::Strided;
use std::arch::x86_64::*;

/// VNNI tile: rows of weights per tile.
const VNNI_MR: usize = 8;
/// VNNI panel: columns of activations (two 16-lane vectors).
const VNNI_NR: usize = 32;
/// AVX2 tile rows.
const AVX2_MR: usize = 6;
/// AVX2 panel columns (two 8-lane vectors).
const AVX2_NR: usize = 16;

/// Columns `n0..n0 + cols` of `B` (`k x n`) as VNNI groups into `out` (a buffer reused
/// across panels): for each 4 values of `k`, [`VNNI_NR`] columns of 4 bytes, each byte
/// offset by 128 (unsigned); padding 128.
pub(super) fn pack_b_vnni(
    b: Strided<'_>,
    (k, kp): (usize, usize),
    (n0, cols): (usize, usize),
    out: &mut Vec<u8>,
) {
    out.resize(kp / 4 * VNNI_NR * 4, 0x80);
    if cols < VNNI_NR || kp != k {
        // Padding columns or values of `k`; a full panel writes every byte below.
        out.fill(0x80);
    }
    for g in 0..kp / 4 {
        let dst = &mut out[g * VNNI_NR * 4..][..VNNI_NR * 4];
        let full_k = 4 * g + 4 <= k;
        if b.col == 1 && full_k {
            // Four contiguous rows: interleave 16 columns at a time.
            let mut j = 0;
            while j + 16 <= cols {
                let rows: [&[i8]; 4] =
                    std::array::from_fn(|u| &b.data[(4 * g + u) * b.row + n0 + j..][..16]);
                // SAFETY: SSE2 is part of x86-64; every slice holds 16 bytes.
                unsafe { interleave4(rows, &mut dst[j * 4..][..64]) };
                j += 16;
            }
            for c in j..cols {
                for u in 0..4 {
                    dst[c * 4 + u] = b.data[(4 * g + u) * b.row + n0 + c] as u8 ^ 0x80;
                }
            }
        } else if b.row == 1 && full_k {
            // Each column's four values are contiguous.
            for c in 0..cols {
                let src = &b.data[4 * g + (n0 + c) * b.col..][..4];
                let word =
                    u32::from_le_bytes([src[0] as u8, src[1] as u8, src[2] as u8, src[3] as u8]);
                dst[c * 4..c * 4 + 4].copy_from_slice(&(word ^ 0x8080_8080).to_le_bytes());
            }
        } else {
            for c in 0..cols {
                for u in 0..4 {
                    let kk = 4 * g + u;
                    if kk < k {
                        dst[c * 4 + u] = b.data[kk * b.row + (n0 + c) * b.col] as u8 ^ 0x80;
                    }
                }
            }
        }
    }
}

/// `dst` (64 bytes) <- the bytes of 16 columns of 4 rows, column by column, each
/// offset by 128.
#[inline]
pub(super) unsafe fn interleave4(rows: [&[i8]; 4], dst: &mut [u8]) {
    let load = |r: &[i8]| _mm_loadu_si128(r.as_ptr() as *const __m128i);
    let (a, b, c, d) = (load(rows[0]), load(rows[1]), load(rows[2]), load(rows[3]));
    let ab_lo = _mm_unpacklo_epi8(a, b);
    let ab_hi = _mm_unpackhi_epi8(a, b);
    let cd_lo = _mm_unpacklo_epi8(c, d);
    let cd_hi = _mm_unpackhi_epi8(c, d);
    let flip = _mm_set1_epi8(-128);
    let parts = [
        _mm_unpacklo_epi16(ab_lo, cd_lo),
        _mm_unpackhi_epi16(ab_lo, cd_lo),
        _mm_unpacklo_epi16(ab_hi, cd_hi),
        _mm_unpackhi_epi16(ab_hi, cd_hi),
    ];
    for (i, part) in parts.into_iter().enumerate() {
        _mm_storeu_si128(
            dst[i * 16..].as_mut_ptr() as *mut __m128i,
            _mm_xor_si128(part, flip),
        );
    }
}

/// A VNNI tile's sums, in registers: the weight tile (`groups` x [`VNNI_MR`] x 4
/// bytes) times the packed panel, offsets not yet removed.
///
/// # Safety
/// As [`tile_vnni`].
#[inline(always)]
unsafe fn sums_vnni(a: &[i8], b: &[u8], groups: usize) -> [[__m512i; 2]; VNNI_MR] {
    let mut c = [[_mm512_setzero_si512(); 2]; VNNI_MR];
    let (ap, bp) = (a.as_ptr(), b.as_ptr());
    for g in 0..groups {
        let b0 = _mm512_loadu_si512(bp.add(g * 128) as *const _);
        let b1 = _mm512_loadu_si512(bp.add(g * 128 + 64) as *const _);
        for (r, row) in c.iter_mut().enumerate() {
            let w = (ap.add(g * 32 + r * 4) as *const i32).read_unaligned();
            let wv = _mm512_set1_epi32(w);
            row[0] = _mm512_dpbusd_epi32(row[0], b0, wv);
            row[1] = _mm512_dpbusd_epi32(row[1], b1, wv);
        }
    }
    c
}

/// One VNNI tile: `acc` (`VNNI_MR x VNNI_NR`, row-major) <- the weight tile (`groups`
/// x `VNNI_MR` x 4 bytes) times the packed panel, offsets not yet removed.
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VNNI; `a` holds `groups * 32` bytes, `b`
/// `groups * 128`, `acc` 256 values.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn tile_vnni(a: &[i8], b: &[u8], groups: usize, acc: &mut [i32]) {
    debug_assert!(a.len() >= groups * VNNI_MR * 4 && b.len() >= groups * VNNI_NR * 4);
    debug_assert!(acc.len() >= VNNI_MR * VNNI_NR);
    let c = sums_vnni(a, b, groups);
    for (r, row) in c.iter().enumerate() {
        _mm512_storeu_si512(acc.as_mut_ptr().add(r * VNNI_NR) as *mut _, row[0]);
        _mm512_storeu_si512(acc.as_mut_ptr().add(r * VNNI_NR + 16) as *mut _, row[1]);
    }
}

/// Where a tile's values go: `rows` rows from `ptr` (the tile's first value), `stride`
/// apart, `cols` (at most [`VNNI_NR`]) values each, with each row's offset correction,
/// scale and bias.
pub(super) struct TileOut<'a> {
    pub ptr: *mut f32,
    pub stride: usize,
    pub rows: usize,
    pub cols: usize,
    pub fix: &'a [i32],
    pub scale: &'a [f32],
    pub bias: Option<&'a [f32]>,
}

/// [`tile_vnni`], its values written straight from the registers as the epilogue
/// writes them (`(acc - fix) as f32 * scale + bias`, rounded the same way: a
/// conversion, a multiplication, an addition), instead of through `acc` and a call per
/// row.
///
/// # Safety
/// As [`tile_vnni`]; `out.ptr` must address `out.rows` rows of `out.cols` values,
/// `out.stride` apart, that no other thread touches; `fix`, `scale` (and `bias`) hold
/// `out.rows` values each.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn tile_vnni_write(a: &[i8], b: &[u8], groups: usize, out: &TileOut<'_>) {
    debug_assert!(a.len() >= groups * VNNI_MR * 4 && b.len() >= groups * VNNI_NR * 4);
    debug_assert!(out.rows <= VNNI_MR && out.cols <= VNNI_NR);
    debug_assert!(out.fix.len() >= out.rows && out.scale.len() >= out.rows);
    let c = sums_vnni(a, b, groups);
    let masks = [
        crate::simd::lane_mask(0, 0, out.cols as isize),
        crate::simd::lane_mask(16, 0, out.cols as isize),
    ];
    for (r, row) in c.iter().enumerate().take(out.rows) {
        let fix = _mm512_set1_epi32(out.fix[r]);
        let scale = _mm512_set1_ps(out.scale[r]);
        let bias = _mm512_set1_ps(out.bias.map_or(0.0, |b| b[r]));
        let dst = out.ptr.add(r * out.stride);
        for (j, &v) in row.iter().enumerate() {
            let x = _mm512_cvtepi32_ps(_mm512_sub_epi32(v, fix));
            let y = _mm512_add_ps(_mm512_mul_ps(x, scale), bias);
            _mm512_mask_storeu_ps(dst.add(16 * j), masks[j], y);
        }
    }
}

/// Columns `n0..n0 + cols` of `B` as AVX2 groups: for each 2 values of `k`,
/// [`AVX2_NR`] columns of 2 sign-extended i16; padding 0.
pub(super) fn pack_b_avx2(b: Strided<'_>, k: usize, kp: usize, n0: usize, cols: usize) -> Vec<i16> {
    let mut out = vec![0i16; kp / 2 * AVX2_NR * 2];
    for g in 0..kp / 2 {
        let dst = &mut out[g * AVX2_NR * 2..][..AVX2_NR * 2];
        if b.col == 1 && 2 * g + 2 <= k && cols == AVX2_NR {
            let r0 = &b.data[2 * g * b.row + n0..][..16];
            let r1 = &b.data[(2 * g + 1) * b.row + n0..][..16];
            // SAFETY: `pack_b_avx2` is only called on CPUs with AVX2 (the ISA of the
            // weights); both rows hold 16 bytes, `dst` 32 values.
            unsafe { interleave2_widen(r0, r1, dst) };
            continue;
        }
        for c in 0..cols {
            for u in 0..2 {
                let kk = 2 * g + u;
                if kk < k {
                    dst[c * 2 + u] = i16::from(b.data[kk * b.row + (n0 + c) * b.col]);
                }
            }
        }
    }
    out
}

/// `dst` (32 values) <- 16 columns of 2 rows, column by column, widened to i16.
#[target_feature(enable = "avx2")]
unsafe fn interleave2_widen(r0: &[i8], r1: &[i8], dst: &mut [i16]) {
    let a = _mm_loadu_si128(r0.as_ptr() as *const __m128i);
    let b = _mm_loadu_si128(r1.as_ptr() as *const __m128i);
    let lo = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b));
    let hi = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(a, b));
    _mm256_storeu_si256(dst.as_mut_ptr() as *mut __m256i, lo);
    _mm256_storeu_si256(dst.as_mut_ptr().add(16) as *mut __m256i, hi);
}

/// An AVX2 tile's sums, in registers: the weight tile (`groups` x [`AVX2_MR`] x 2
/// i16) times the packed panel (`vpmaddwd`: exact i32 sums).
///
/// # Safety
/// As [`tile_avx2`].
#[inline(always)]
unsafe fn sums_avx2(a: &[i16], b: &[i16], groups: usize) -> [[__m256i; 2]; AVX2_MR] {
    let mut c = [[_mm256_setzero_si256(); 2]; AVX2_MR];
    let (ap, bp) = (a.as_ptr(), b.as_ptr());
    for g in 0..groups {
        let b0 = _mm256_loadu_si256(bp.add(g * 32) as *const __m256i);
        let b1 = _mm256_loadu_si256(bp.add(g * 32 + 16) as *const __m256i);
        for (r, row) in c.iter_mut().enumerate() {
            let w = (ap.add(g * 12 + r * 2) as *const i32).read_unaligned();
            let wv = _mm256_set1_epi32(w);
            row[0] = _mm256_add_epi32(row[0], _mm256_madd_epi16(b0, wv));
            row[1] = _mm256_add_epi32(row[1], _mm256_madd_epi16(b1, wv));
        }
    }
    c
}

/// One AVX2 tile: `acc` (`AVX2_MR x AVX2_NR`) <- the weight tile (`groups` x
/// `AVX2_MR` x 2 i16) times the packed panel (`vpmaddwd`: exact i32 sums).
///
/// # Safety
/// The CPU must have AVX2; `a` holds `groups * 12` values, `b` `groups * 32`, `acc` 96.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn tile_avx2(a: &[i16], b: &[i16], groups: usize, acc: &mut [i32]) {
    debug_assert!(a.len() >= groups * AVX2_MR * 2 && b.len() >= groups * AVX2_NR * 2);
    debug_assert!(acc.len() >= AVX2_MR * AVX2_NR);
    let c = sums_avx2(a, b, groups);
    for (r, row) in c.iter().enumerate() {
        _mm256_storeu_si256(acc.as_mut_ptr().add(r * AVX2_NR) as *mut __m256i, row[0]);
        _mm256_storeu_si256(
            acc.as_mut_ptr().add(r * AVX2_NR + 8) as *mut __m256i,
            row[1],
        );
    }
}

/// [`tile_avx2`], its values written straight from the registers as the epilogue
/// writes them (`acc as f32 * scale + bias`, no offset to remove: `vpmaddwd` sums are
/// signed), instead of through `acc` and a call per row.
///
/// # Safety
/// As [`tile_avx2`]; `out` as for [`tile_vnni_write`] (at most [`AVX2_MR`] rows and
/// [`AVX2_NR`] columns; `out.fix` is not read).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn tile_avx2_write(a: &[i16], b: &[i16], groups: usize, out: &TileOut<'_>) {
    debug_assert!(a.len() >= groups * AVX2_MR * 2 && b.len() >= groups * AVX2_NR * 2);
    debug_assert!(out.rows <= AVX2_MR && out.cols <= AVX2_NR);
    debug_assert!(out.scale.len() >= out.rows);
    let c = sums_avx2(a, b, groups);
    // Lane i of half j stores when 8 * j + i < cols.
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let masks =
        [0, 8].map(|first| _mm256_cmpgt_epi32(_mm256_set1_epi32(out.cols as i32 - first), lanes));
    for (r, row) in c.iter().enumerate().take(out.rows) {
        let scale = _mm256_set1_ps(out.scale[r]);
        let bias = _mm256_set1_ps(out.bias.map_or(0.0, |b| b[r]));
        let dst = out.ptr.add(r * out.stride);
        for (j, &v) in row.iter().enumerate() {
            let y = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v), scale), bias);
            _mm256_maskstore_ps(dst.add(8 * j), masks[j], y);
        }
    }
}
