//! INT8 matrix products with INT32 accumulation, for the integer Q/DQ kernels.
//!
//! `C(m, n) = sum_k A(m, k) * B(k, n)` with `A` the (constant) weights, packed once
//! per node ([`PackedWeights`]), and `B` the activations, read through strides and
//! packed per call into column panels. Every accumulation is exact (INT32, no
//! saturation on any path), so the result does not depend on the instruction set.
//! The epilogue turns each accumulator into `acc * scale[m] + bias[m]` (f32).
//!
//! Instruction sets, chosen at run time ([`Isa::detect`]):
//! * AVX-512 VNNI: `vpdpbusd` multiplies 4 unsigned by 4 signed bytes per lane; the
//!   activations are made unsigned by adding 128 and `128 * sum_k A(m, k)` is
//!   subtracted again (exact).
//! * AVX2: bytes widened to i16 pairs, `vpmaddwd` (exact: no `vpmaddubsw`, whose i16
//!   sums saturate).
//! * Portable: plain loops (Arm and older x86).

mod portable;
#[cfg(target_arch = "x86_64")]
mod x86;

use crate::par::OutPtr;
use crate::simd::multiversioned;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// An instruction set an integer product can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 F/BW + VNNI (Ice Lake, Sapphire Rapids, Zen 4 and later).
    Avx512Vnni,
    /// AVX2 (Haswell and later).
    Avx2,
    /// No SIMD assumed.
    Portable,
}

impl Isa {
    /// The best instruction set this CPU has (detected once).
    pub fn detect() -> Isa {
        static BEST: OnceLock<Isa> = OnceLock::new();
        *BEST.get_or_init(|| Isa::available()[0])
    }

    /// Every instruction set this CPU can run, best first (the lower ones are what
    /// tests force to check every path).
    pub fn available() -> Vec<Isa> {
        let mut isas = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vnni")
            {
                isas.push(Isa::Avx512Vnni);
            }
            if is_x86_feature_detected!("avx2") {
                isas.push(Isa::Avx2);
            }
        }
        isas.push(Isa::Portable);
        isas
    }

    /// Rows of `A` per micro-tile.
    fn rows(self) -> usize {
        match self {
            Isa::Avx512Vnni => 8,
            Isa::Avx2 => 6,
            Isa::Portable => 4,
        }
    }

    /// Columns of `B` per panel.
    fn cols(self) -> usize {
        match self {
            Isa::Avx512Vnni => 32,
            Isa::Avx2 => 16,
            Isa::Portable => portable::NR,
        }
    }

    /// Values of `k` one instruction reduces per lane (`k` is padded to a multiple).
    fn k_step(self) -> usize {
        match self {
            Isa::Avx512Vnni => 4,
            Isa::Avx2 => 2,
            Isa::Portable => 1,
        }
    }

    /// The name used in messages and benchmarks.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512Vnni => "avx512-vnni",
            Isa::Avx2 => "avx2",
            Isa::Portable => "portable",
        }
    }
}

/// A strided view of an INT8 matrix: element `(r, c)` is `data[r * row + c * col]`.
#[derive(Debug, Clone, Copy)]
pub struct Strided<'a> {
    /// The elements.
    pub data: &'a [i8],
    /// Step between rows.
    pub row: usize,
    /// Step between columns.
    pub col: usize,
}

impl Strided<'_> {
    #[inline]
    fn at(&self, r: usize, c: usize) -> i8 {
        self.data[r * self.row + c * self.col]
    }
}

/// The weights `A` (`m x k`), packed for one instruction set: row tiles of
/// [`Isa::rows`] rows, `k` padded with zeros to the ISA's step.
#[derive(Debug)]
pub struct PackedWeights {
    isa: Isa,
    m: usize,
    k: usize,
    /// Padded `k`.
    kp: usize,
    /// AVX-512 VNNI and portable: bytes, tile by tile, `[k/4][rows][4]` (VNNI) or
    /// `[rows][k]` (portable).
    bytes: Vec<i8>,
    /// AVX2: i16 pairs, tile by tile, `[k/2][rows][2]`.
    words: Vec<i16>,
    /// `128 * sum_k A(m, k)` per row (VNNI's correction for the unsigned activations).
    row_bias: Vec<i32>,
}

impl PackedWeights {
    /// Packs `a` (`m x k`) for `isa`.
    pub fn new(isa: Isa, a: Strided<'_>, m: usize, k: usize) -> PackedWeights {
        let (mr, step) = (isa.rows(), isa.k_step());
        let kp = k.div_ceil(step) * step;
        let tiles = m.div_ceil(mr);
        let value = |r: usize, kk: usize| -> i8 {
            if r < m && kk < k {
                a.at(r, kk)
            } else {
                0
            }
        };
        let mut bytes = Vec::new();
        let mut words = Vec::new();
        match isa {
            Isa::Avx512Vnni => {
                bytes.reserve(tiles * mr * kp);
                for t in 0..tiles {
                    for g in 0..kp / 4 {
                        for r in 0..mr {
                            for u in 0..4 {
                                bytes.push(value(t * mr + r, g * 4 + u));
                            }
                        }
                    }
                }
            }
            Isa::Avx2 => {
                words.reserve(tiles * mr * kp);
                for t in 0..tiles {
                    for g in 0..kp / 2 {
                        for r in 0..mr {
                            for u in 0..2 {
                                words.push(i16::from(value(t * mr + r, g * 2 + u)));
                            }
                        }
                    }
                }
            }
            Isa::Portable => {
                bytes.reserve(tiles * mr * kp);
                for r in 0..tiles * mr {
                    for kk in 0..kp {
                        bytes.push(value(r, kk));
                    }
                }
            }
        }
        let row_bias = (0..m)
            .map(|r| 128 * (0..k).map(|kk| i32::from(a.at(r, kk))).sum::<i32>())
            .collect();
        PackedWeights {
            isa,
            m,
            k,
            kp,
            bytes,
            words,
            row_bias,
        }
    }

    /// Rows (`m`).
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Inner dimension (`k`).
    pub fn depth(&self) -> usize {
        self.k
    }

    /// The instruction set the weights are packed for.
    pub fn isa(&self) -> Isa {
        self.isa
    }
}

/// Where and how the accumulators are written: `out[m * row + n * col] = acc * scale[m]
/// + bias[m]`.
pub struct Epilogue<'a> {
    /// Per-row scale (length `m`).
    pub scale: &'a [f32],
    /// Per-row bias (length `m`), if any.
    pub bias: Option<&'a [f32]>,
    /// Output step between rows.
    pub row: usize,
    /// Output step between columns.
    pub col: usize,
}

/// `dst` (`4 * len` bytes) <- the rows' bytes interleaved column by column (four rows of
/// `len` bytes), each offset by 128: the activation layout of the VNNI kernels.
pub(crate) fn interleave_rows(rows: [&[i8]; 4], dst: &mut [u8]) {
    let len = rows[0].len();
    assert!(rows.iter().all(|r| r.len() == len) && dst.len() == 4 * len);
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    while j + 16 <= len {
        let chunk: [&[i8]; 4] = std::array::from_fn(|u| &rows[u][j..j + 16]);
        // SAFETY: SSE2 is part of x86-64; every slice holds 16 bytes, `dst` 64 more.
        unsafe { x86::interleave4(chunk, &mut dst[j * 4..][..64]) };
        j += 16;
    }
    for c in j..len {
        for u in 0..4 {
            dst[c * 4 + u] = rows[u][c] as u8 ^ 0x80;
        }
    }
}

thread_local! {
    /// A thread's packed panel of `B` (VNNI), reused from panel to panel.
    static PACKED: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Multiply-adds below which a product stays on the calling thread.
pub(crate) const SERIAL_WORK: usize = 1 << 16;

/// `out <- epilogue(A * B)` for `B` of `a.depth() x n`; `out` must hold every element
/// the epilogue's strides address.
pub fn igemm(a: &PackedWeights, b: Strided<'_>, n: usize, ep: &Epilogue<'_>, out: &mut [f32]) {
    // SAFETY: f32 values are valid `MaybeUninit<f32>`s, and only f32s are written.
    let out = unsafe { &mut *(out as *mut [f32] as *mut [MaybeUninit<f32>]) };
    igemm_into(a, b, n, ep, out);
}

/// [`igemm`] into an output that need not be initialized: every element the
/// epilogue's strides address is written.
pub(crate) fn igemm_into(
    a: &PackedWeights,
    b: Strided<'_>,
    n: usize,
    ep: &Epilogue<'_>,
    out: &mut [MaybeUninit<f32>],
) {
    igemm_panels(a, b, n, ep, out, true);
}

/// [`igemm_into`] on the calling thread only: for callers that already split their
/// work over threads (the same results).
pub(crate) fn igemm_into_serial(
    a: &PackedWeights,
    b: Strided<'_>,
    n: usize,
    ep: &Epilogue<'_>,
    out: &mut [MaybeUninit<f32>],
) {
    igemm_panels(a, b, n, ep, out, false);
}

/// [`igemm_into`], its column panels over rayon's threads when `parallel` and the
/// product is big enough.
fn igemm_panels(
    a: &PackedWeights,
    b: Strided<'_>,
    n: usize,
    ep: &Epilogue<'_>,
    out: &mut [MaybeUninit<f32>],
    parallel: bool,
) {
    let (m, k) = (a.m, a.k);
    if m == 0 || n == 0 {
        return;
    }
    assert!(ep.scale.len() == m && ep.bias.is_none_or(|bias| bias.len() == m));
    assert!(
        (m - 1) * ep.row + (n - 1) * ep.col < out.len(),
        "output too small"
    );
    if k > 0 {
        assert!(
            (k - 1) * b.row + (n - 1) * b.col < b.data.len(),
            "B too small"
        );
    }
    let nr = a.isa.cols();
    let panels = n.div_ceil(nr);
    let ptr = OutPtr(out.as_mut_ptr().cast::<f32>());
    let run = |p: usize| {
        let n0 = p * nr;
        let cols = nr.min(n - n0);
        // SAFETY: `ptr` covers `out`; this panel writes columns n0..n0+cols only.
        unsafe { panel(a, b, n0, cols, ep, ptr) };
    };
    if !parallel || m * k * n < SERIAL_WORK || panels == 1 {
        (0..panels).for_each(run);
    } else {
        (0..panels).into_par_iter().for_each(run);
    }
}

/// Computes columns `n0..n0 + cols` of the product and writes them.
///
/// # Safety
/// `out` must address every element the epilogue writes for these columns, and no
/// other thread may write them.
unsafe fn panel(
    a: &PackedWeights,
    b: Strided<'_>,
    n0: usize,
    cols: usize,
    ep: &Epilogue<'_>,
    out: OutPtr<f32>,
) {
    let (mr, nr) = (a.isa.rows(), a.isa.cols());
    // Accumulators of the paths that write through `write` (not the VNNI and AVX2
    // kernels' own epilogues on contiguous rows, most products): allocated only there.
    let mut accumulators = Vec::new();
    let write = |t: usize, acc: &[i32], correct: bool| {
        for r in 0..mr.min(a.m - t * mr) {
            let row = t * mr + r;
            let (scale, bias) = (ep.scale[row], ep.bias.map_or(0.0, |b| b[row]));
            let fix = if correct { a.row_bias[row] } else { 0 };
            let acc = &acc[r * nr..][..cols];
            if ep.col == 1 {
                // SAFETY: in bounds (checked by `igemm`); this panel's columns only.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(
                        out.0.add(row * ep.row + n0).cast::<MaybeUninit<f32>>(),
                        cols,
                    )
                };
                write_row(dst, acc, fix, scale, bias);
            } else {
                for (c, &v) in acc.iter().enumerate() {
                    // SAFETY: as above.
                    unsafe {
                        *out.0.add(row * ep.row + (n0 + c) * ep.col) =
                            (v - fix) as f32 * scale + bias
                    };
                }
            }
        }
    };
    let tiles = a.m.div_ceil(mr);
    // Where tile `t` writes this panel's columns (for output rows `ep.row` apart).
    #[cfg(target_arch = "x86_64")]
    let tile_out = |t: usize| {
        let (r0, rows) = (t * mr, mr.min(a.m - t * mr));
        x86::TileOut {
            // SAFETY: in bounds (checked by `igemm_into`).
            ptr: unsafe { out.0.add(r0 * ep.row + n0) },
            stride: ep.row,
            rows,
            cols,
            fix: &a.row_bias[r0..r0 + rows],
            scale: &ep.scale[r0..r0 + rows],
            bias: ep.bias.map(|b| &b[r0..r0 + rows]),
        }
    };
    match a.isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => {
            let mut packed = PACKED.take();
            x86::pack_b_vnni(b, (a.k, a.kp), (n0, cols), &mut packed);
            for t in 0..tiles {
                let tile = &a.bytes[t * mr * a.kp..][..mr * a.kp];
                if ep.col != 1 {
                    let acc = zeroed(&mut accumulators, mr * nr);
                    // SAFETY: the ISA was detected (or chosen from `Isa::available`).
                    unsafe { x86::tile_vnni(tile, &packed, a.kp / 4, acc) };
                    write(t, acc, true);
                    continue;
                }
                let out = tile_out(t);
                // SAFETY: the ISA was detected (or chosen from `Isa::available`); the
                // tile's rows and this panel's columns lie in `out` (checked by
                // `igemm_into`), which only this panel writes there.
                unsafe { x86::tile_vnni_write(tile, &packed, a.kp / 4, &out) };
            }
            PACKED.set(packed);
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            let packed = x86::pack_b_avx2(b, a.k, a.kp, n0, cols);
            for t in 0..tiles {
                let tile = &a.words[t * mr * a.kp..][..mr * a.kp];
                if ep.col != 1 {
                    let acc = zeroed(&mut accumulators, mr * nr);
                    // SAFETY: as above.
                    unsafe { x86::tile_avx2(tile, &packed, a.kp / 2, acc) };
                    write(t, acc, false);
                    continue;
                }
                let out = tile_out(t);
                // SAFETY: as above.
                unsafe { x86::tile_avx2_write(tile, &packed, a.kp / 2, &out) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx512Vnni | Isa::Avx2 => unreachable!("x86 instruction sets are never available"),
        Isa::Portable => {
            let packed = portable::pack_b(b, a.k, a.kp, n0, cols, nr);
            for t in 0..tiles {
                let tile = &a.bytes[t * mr * a.kp..][..mr * a.kp];
                let acc = zeroed(&mut accumulators, mr * nr);
                portable::tile(tile, &packed, a.kp, mr, acc);
                write(t, acc, false);
            }
        }
    }
}

/// The first `len` elements of `v`, which grows (zero-filled) to hold them.
fn zeroed(v: &mut Vec<i32>, len: usize) -> &mut [i32] {
    if v.len() < len {
        v.resize(len, 0);
    }
    &mut v[..len]
}

multiversioned! {
    /// `dst[i] = (acc[i] - fix) as f32 * scale + bias`: one row of a panel's epilogue,
    /// in the widest vectors the CPU has (the same bits on every path).
    fn write_row(dst: &mut [MaybeUninit<f32>], acc: &[i32], fix: i32, scale: f32, bias: f32)
        => write_row_body
}

#[inline(always)]
fn write_row_body(dst: &mut [MaybeUninit<f32>], acc: &[i32], fix: i32, scale: f32, bias: f32) {
    for (d, &v) in dst.iter_mut().zip(acc) {
        d.write(v.wrapping_sub(fix) as f32 * scale + bias);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Random bytes over the whole i8 range (extremes included): the integer kernels'
    /// test data.
    pub(crate) fn bytes(len: usize, seed: u64) -> Vec<i8> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..len)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                match i % 17 {
                    0 => -128,
                    1 => 127,
                    _ => (s >> 56) as i8,
                }
            })
            .collect()
    }

    #[test]
    fn every_path_is_exact_for_odd_shapes_and_strides() {
        for (m, k, n) in [
            (1, 1, 1),
            (7, 5, 3),
            (9, 33, 47),
            (17, 130, 70),
            (64, 300, 257),
        ] {
            let a = bytes(m * k, 1);
            // B stored transposed ([n, k]) to exercise the strides.
            let b = bytes(k * n, 2);
            let scale: Vec<f32> = (0..m).map(|r| 0.5 + r as f32 * 0.25).collect();
            let bias: Vec<f32> = (0..m).map(|r| r as f32 - 3.0).collect();
            let want: Vec<f32> = (0..m)
                .flat_map(|r| {
                    let (a, b) = (&a, &b);
                    let (scale, bias) = (&scale, &bias);
                    (0..n).map(move |c| {
                        let acc: i64 = (0..k)
                            .map(|kk| i64::from(a[r * k + kk]) * i64::from(b[c * k + kk]))
                            .sum();
                        acc as f32 * scale[r] + bias[r]
                    })
                })
                .collect();
            for isa in Isa::available() {
                let packed = PackedWeights::new(
                    isa,
                    Strided {
                        data: &a,
                        row: k,
                        col: 1,
                    },
                    m,
                    k,
                );
                let mut out = vec![f32::NAN; m * n];
                let ep = Epilogue {
                    scale: &scale,
                    bias: Some(&bias),
                    row: n,
                    col: 1,
                };
                let bv = Strided {
                    data: &b,
                    row: 1,
                    col: k,
                };
                igemm(&packed, bv, n, &ep, &mut out);
                assert_eq!(out, want, "{} m={m} k={k} n={n}", isa.name());
                // Rows further apart than `n`: the values between them are left as they
                // were (the tiles' masked stores stop at the last column).
                let gap = 5;
                let mut padded = vec![f32::NAN; m * (n + gap)];
                let ep_padded = Epilogue { row: n + gap, ..ep };
                igemm(&packed, bv, n, &ep_padded, &mut padded);
                for (r, row) in padded.chunks(n + gap).enumerate() {
                    assert_eq!(
                        row[..n],
                        want[r * n..][..n],
                        "{} padded row {r}",
                        isa.name()
                    );
                    assert!(
                        row[n..].iter().all(|v| v.is_nan()),
                        "{} gap written",
                        isa.name()
                    );
                }
                // Transposed output.
                let mut out_t = vec![f32::NAN; m * n];
                let ep_t = Epilogue {
                    row: 1,
                    col: m,
                    ..ep
                };
                igemm(&packed, bv, n, &ep_t, &mut out_t);
                for r in 0..m {
                    for c in 0..n {
                        assert_eq!(out_t[c * m + r], want[r * n + c]);
                    }
                }
            }
        }
    }

    #[test]
    fn extreme_values_do_not_saturate() {
        // Every product is -128 * -128 or 127 * -128: the worst case for i16 sums.
        let (m, k, n) = (8, 1024, 40);
        let a = vec![-128i8; m * k];
        let b: Vec<i8> = (0..k * n)
            .map(|i| if i % 2 == 0 { -128 } else { 127 })
            .collect();
        let scale = vec![1.0f32; m];
        for isa in Isa::available() {
            let packed = PackedWeights::new(
                isa,
                Strided {
                    data: &a,
                    row: k,
                    col: 1,
                },
                m,
                k,
            );
            let mut out = vec![0.0f32; m * n];
            let ep = Epilogue {
                scale: &scale,
                bias: None,
                row: n,
                col: 1,
            };
            igemm(
                &packed,
                Strided {
                    data: &b,
                    row: n,
                    col: 1,
                },
                n,
                &ep,
                &mut out,
            );
            for c in 0..n {
                let want: i64 = (0..k).map(|kk| -128 * i64::from(b[kk * n + c])).sum();
                assert_eq!(out[c], want as f32, "{} column {c}", isa.name());
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use crate::gemm::{sgemm, Mat};

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec igemm::speed -- --ignored --nocapture"]
    fn against_sgemm() {
        for (m, k, n) in [
            (64, 576, 3136),
            (256, 64, 3136),
            (512, 4608, 49),
            (128, 1152, 784),
            // PP-OCRv4 det's pointwise layers of few input channels (the epilogue's
            // share is largest).
            (96, 12, 6400),
            (32, 16, 25600),
        ] {
            let a: Vec<i8> = (0..m * k).map(|i| (i % 251) as i8).collect();
            let b: Vec<i8> = (0..k * n).map(|i| (i % 241) as i8).collect();
            let af: Vec<f32> = a.iter().map(|&v| v as f32).collect();
            let bf: Vec<f32> = b.iter().map(|&v| v as f32).collect();
            let scale = vec![1.0f32; m];
            let mut out = vec![0f32; m * n];
            let reps = 20;
            let t = std::time::Instant::now();
            for _ in 0..reps {
                sgemm(
                    1.0,
                    Mat::row_major(&af, m, k),
                    Mat::row_major(&bf, k, n),
                    0.0,
                    &mut out,
                    n,
                );
            }
            let fs = t.elapsed().as_secs_f64() / reps as f64;
            for isa in Isa::available() {
                let packed = PackedWeights::new(
                    isa,
                    Strided {
                        data: &a,
                        row: k,
                        col: 1,
                    },
                    m,
                    k,
                );
                let ep = Epilogue {
                    scale: &scale,
                    bias: None,
                    row: n,
                    col: 1,
                };
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    igemm(
                        &packed,
                        Strided {
                            data: &b,
                            row: n,
                            col: 1,
                        },
                        n,
                        &ep,
                        &mut out,
                    );
                }
                let is = t.elapsed().as_secs_f64() / reps as f64;
                println!(
                    "{m}x{k}x{n}: sgemm {:.3} ms, {} {:.3} ms (x{:.2})",
                    fs * 1e3,
                    isa.name(),
                    is * 1e3,
                    fs / is
                );
            }
        }
    }
}
