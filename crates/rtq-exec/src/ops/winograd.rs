//! Winograd F(2x2, 3x3) convolution for 3x3, stride-1, undilated 2-D kernels.
//!
//! Each 2x2 block of outputs (a tile) is computed from the 4x4 input patch under it
//! with 16 multiplications per channel pair instead of 36 (Lavin & Gray, "Fast
//! Algorithms for Convolutional Neural Networks", 2015):
//!
//! ```text
//! Y = Aᵀ [ Σ_c (G g Gᵀ) ⊙ (Bᵀ d B) ] A
//! ```
//!
//! The weights `g` are transformed once per plan (see [`crate::memo`]); the input
//! patches `d` of all tiles are transformed into 16 matrices `V_ξ` (channels x tiles),
//! so the sum over channels becomes 16 independent SGEMMs `M_ξ = U_ξ V_ξ`, and each
//! output tile is transformed back from its 16 products. Tiles that stick out of an
//! odd-sized output read the zero padding and their extra outputs are dropped.
//!
//! The 16 products run in parallel, each on one thread, and the transforms split by
//! channel: how work is cut depends only on the shape, so results are the same on
//! any number of threads.

use rayon::prelude::*;

use crate::gemm::{sgemm_serial, Mat};
use crate::ops::columns::with_columns;
use crate::ops::conv::ConvProblem;
use crate::ops::window::Window;
use crate::par::{self, OutPtr};

/// Elements of a transformed 4x4 tile, and the number of products.
const TILE: usize = 16;
/// Fewest input and output channels per group: below this the products are too thin
/// for the transforms to pay off.
const MIN_CHANNELS: usize = 32;
/// Fewest output tiles per image.
const MIN_TILES: usize = 4;
/// Elements of transformed inputs and products one pass may hold (1 MiB of f32): a
/// pass's data then stays in a core's L2 cache between its three steps.
const PASS_BUDGET: usize = 1 << 18;
/// Output channels the output transform handles together.
const LANES: usize = 16;
/// Multiply-adds from which the 16 products run in parallel.
const PARALLEL_MACS: usize = 1 << 18;

/// Whether the Winograd kernel computes convolution `p`.
pub(crate) fn applies(p: &ConvProblem) -> bool {
    let win = &p.win;
    let (ty, tx) = tiles(win);
    win.rank == 2
        && win.kernel == [1, 3, 3]
        && win.stride == [1, 1, 1]
        && win.dilation == [1, 1, 1]
        && p.c / p.group >= MIN_CHANNELS
        && p.m / p.group >= MIN_CHANNELS
        && ty * tx >= MIN_TILES
}

/// Tile rows and tile columns of the output.
fn tiles(win: &Window) -> (usize, usize) {
    (win.output[1].div_ceil(2), win.output[2].div_ceil(2))
}

/// A convolution's weights in the Winograd domain: per group, 16 matrices `U_ξ`
/// (element ξ of `G g Gᵀ`), each stored transposed (`in_channels x out_channels`)
/// and cut into column blocks of [`BLOCK`] output channels, each block row-major and
/// contiguous: the SGEMM reads a block in place, one short contiguous run per input
/// channel.
pub(crate) struct WinogradWeights {
    u: Vec<f32>,
}

/// Output channels per stored weight block (one AVX-512 SGEMM micro-kernel's rows).
const BLOCK: usize = 64;

/// Transforms OIHW 3x3 weights `w` of problem `p`.
pub(crate) fn transform_weights(w: &[f32], p: &ConvProblem) -> WinogradWeights {
    let (cg, mg) = (p.c / p.group, p.m / p.group);
    let mut u = vec![0.0; p.group * TILE * mg * cg];
    for (o, kernels) in w.chunks_exact(cg * 9).enumerate() {
        let (g, mo) = (o / mg, o % mg);
        let (block, col) = (mo / BLOCK, mo % BLOCK);
        let width = BLOCK.min(mg - block * BLOCK);
        for (ci, k) in kernels.chunks_exact(9).enumerate() {
            let t = kernel_tile(k);
            for (xi, &v) in t.iter().enumerate() {
                u[(g * TILE + xi) * cg * mg + block * BLOCK * cg + ci * width + col] = v;
            }
        }
    }
    WinogradWeights { u }
}

/// `G g Gᵀ` for one 3x3 kernel `g` (row-major), with
/// `G = [[1, 0, 0], [½, ½, ½], [½, -½, ½], [0, 0, 1]]`.
fn kernel_tile(g: &[f32]) -> [f32; TILE] {
    let col = |a: [f32; 3]| {
        [
            a[0],
            0.5 * (a[0] + a[1] + a[2]),
            0.5 * (a[0] - a[1] + a[2]),
            a[2],
        ]
    };
    let row = |r: usize| [g[3 * r], g[3 * r + 1], g[3 * r + 2]];
    // G g: combinations of the kernel's rows.
    let (r0, r1, r2) = (row(0), row(1), row(2));
    let gg = [
        r0,
        [0, 1, 2].map(|j| 0.5 * (r0[j] + r1[j] + r2[j])),
        [0, 1, 2].map(|j| 0.5 * (r0[j] - r1[j] + r2[j])),
        r2,
    ];
    // (G g) Gᵀ: the same combinations of each row's elements.
    let mut t = [0.0; TILE];
    for (i, r) in gg.iter().enumerate() {
        t[4 * i..4 * i + 4].copy_from_slice(&col(*r));
    }
    t
}

/// Computes convolution `p` (see [`applies`]) of `x` with transformed weights `u` into
/// `out`, which holds the bias planes (or zeros) on entry.
pub(crate) fn conv(x: &[f32], u: &WinogradWeights, p: &ConvProblem, out: &mut [f32]) {
    let win = &p.win;
    let (cg, mg) = (p.c / p.group, p.m / p.group);
    let (in_sp, out_sp) = (win.input_size(), win.output_size());
    let (ty_n, tx_n) = tiles(win);
    // Tile rows per pass, so that the transformed inputs and products stay within
    // the pass budget (at least one row).
    let rows = (PASS_BUDGET / (TILE * (cg + mg) * tx_n)).clamp(1, ty_n);
    let passes: Vec<(usize, usize)> = (0..ty_n)
        .step_by(rows)
        .map(|ty0| (ty0, (ty0 + rows).min(ty_n)))
        .collect();
    // Enough passes to share out run in parallel, each on one thread (fewer
    // fork-joins than splitting each of a pass's three steps); otherwise each pass
    // splits its steps. Either way every value is computed the same way.
    let outer = passes.len() >= 2 * rayon::current_num_threads()
        && rayon::current_num_threads() > 1
        && cg * mg * ty_n * tx_n >= PARALLEL_MACS;
    for (t, block) in out.chunks_mut(mg * out_sp).enumerate() {
        let (ni, g) = (t / p.group, t % p.group);
        let xg = &x[(ni * p.c + g * cg) * in_sp..][..cg * in_sp];
        let ug = &u.u[g * TILE * mg * cg..][..TILE * mg * cg];
        let block = OutPtr(block.as_mut_ptr());
        let run = |&(ty0, ty1): &(usize, usize)| {
            let tb = (ty1 - ty0) * tx_n;
            with_columns(TILE * (cg + mg) * tb, |buf| {
                let (v, prod) = buf.split_at_mut(TILE * cg * tb);
                let pass = Pass {
                    win,
                    ty0,
                    ty1,
                    tx_n,
                    tb,
                    serial: outer,
                };
                pass.transform_input(xg, v);
                multiply(ug, v, prod, cg, mg, tb, !outer);
                // SAFETY: `block` holds this group's `mg` output planes; passes write
                // disjoint rows of them.
                unsafe { pass.transform_output(prod, mg, block) };
            })
        };
        if outer {
            passes.par_iter().for_each(run);
        } else {
            passes.iter().for_each(run);
        }
    }
}

/// One pass over tile rows `ty0..ty1` of one image and group.
struct Pass<'a> {
    win: &'a Window,
    ty0: usize,
    ty1: usize,
    /// Tile columns.
    tx_n: usize,
    /// Tiles in the pass.
    tb: usize,
    /// Whether the steps run on the calling thread only (passes run in parallel).
    serial: bool,
}

impl Pass<'_> {
    /// `f(index, chunk)` over `chunk`-sized pieces of `buf`: in parallel for big work
    /// unless the pass is serial.
    fn chunks<T: Send>(
        &self,
        buf: &mut [T],
        chunk: usize,
        work: usize,
        f: impl Fn(usize, &mut [T]) + Sync + Send,
    ) {
        if self.serial {
            buf.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
        } else {
            par::chunks_mut(buf, chunk, work, f);
        }
    }
}

impl Pass<'_> {
    /// Writes `Bᵀ d B` of every tile of every channel of `xg` into `v`, laid out as
    /// `[channel][ξ][tile]`, with `Bᵀ = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0],
    /// [0, 1, 0, -1]]`.
    ///
    /// Each tile row reads four input rows, split into even and odd columns so that
    /// every step below works on contiguous runs (tile `tx` covers columns `2tx` to
    /// `2tx + 3`: even and odd entries `tx` and `tx + 1`).
    fn transform_input(&self, xg: &[f32], v: &mut [f32]) {
        let win = self.win;
        let [_, ih, iw] = win.input;
        let pt = win.pad_begin[1];
        let in_sp = ih * iw;
        let (tx_n, tb) = (self.tx_n, self.tb);
        let half = tx_n + 1;
        self.chunks(v, TILE * tb, v.len(), |ci, vc| {
            let plane = &xg[ci * in_sp..][..in_sp];
            // Rows 0-3, even columns then odd columns.
            let mut rows = vec![0.0f32; 8 * half];
            for ty in self.ty0..self.ty1 {
                for (r, row) in rows.chunks_exact_mut(2 * half).enumerate() {
                    let iy = (2 * ty + r) as isize - pt as isize;
                    let src = (0..ih as isize)
                        .contains(&iy)
                        .then(|| &plane[iy as usize * iw..][..iw]);
                    let (even, odd) = row.split_at_mut(half);
                    split_columns(src, win.pad_begin[2], even, odd);
                }
                // Bᵀ d: combinations of the four rows, column by column.
                let (r0, rest) = rows.split_at_mut(2 * half);
                let (r1, rest) = rest.split_at_mut(2 * half);
                let (r2, r3) = rest.split_at_mut(2 * half);
                for (((d0, d1), d2), d3) in r0.iter_mut().zip(r1).zip(r2).zip(r3) {
                    let (a, b, c, e) = (*d0, *d1, *d2, *d3);
                    *d0 = a - c;
                    *d1 = b + c;
                    *d2 = c - b;
                    *d3 = b - e;
                }
                // (Bᵀ d) B: the same combinations along each tile's four columns.
                let base = (ty - self.ty0) * tx_n;
                for (k, row) in rows.chunks_exact(2 * half).enumerate() {
                    let (even, odd) = row.split_at(half);
                    let (e0, e1, o0, o1) = (&even[..tx_n], &even[1..], &odd[..tx_n], &odd[1..]);
                    let out = |j: usize| (4 * k + j) * tb + base;
                    let (w0, rest) = vc[out(0)..].split_at_mut(tb);
                    let (w1, rest) = rest.split_at_mut(tb);
                    let (w2, rest) = rest.split_at_mut(tb);
                    let w3 = &mut rest[..tx_n];
                    for (w, (a, c)) in w0.iter_mut().zip(e0.iter().zip(e1)) {
                        *w = a - c;
                    }
                    for (w, (b, c)) in w1.iter_mut().zip(o0.iter().zip(e1)) {
                        *w = b + c;
                    }
                    for (w, (b, c)) in w2.iter_mut().zip(o0.iter().zip(e1)) {
                        *w = c - b;
                    }
                    for (w, (b, d)) in w3.iter_mut().zip(o0.iter().zip(o1)) {
                        *w = b - d;
                    }
                }
            }
        });
    }

    /// Adds `Aᵀ M A` of every tile to the output planes in `block`, reading the
    /// products `prod` laid out as `[ξ][tile][out channel]`, with
    /// `Aᵀ = [[1, 1, 1, 0], [0, 1, -1, -1]]`. Works on [`LANES`] output channels at
    /// a time (contiguous in every product), one tile row at a time: the row's
    /// outputs are gathered in a small buffer, then added to the planes row by row.
    ///
    /// # Safety
    /// `block` must address `mg` output planes, whose rows of this pass no other
    /// thread accesses during the call.
    unsafe fn transform_output(&self, prod: &[f32], mg: usize, block: OutPtr<f32>) {
        let [_, oh, ow] = self.win.output;
        let out_sp = oh * ow;
        let (tb, tx_n) = (self.tb, self.tx_n);
        let width = 2 * tx_n;
        let mut chunks: Vec<usize> = (0..mg.div_ceil(LANES)).collect();
        self.chunks(&mut chunks, 1, prod.len(), |_, chunk| {
            let mo0 = chunk[0] * LANES;
            let lanes = LANES.min(mg - mo0);
            // Two output rows per channel: `[lane][row][column]`.
            let mut rows = vec![0.0f32; lanes * 2 * width];
            for ty in self.ty0..self.ty1 {
                for tx in 0..tx_n {
                    let t = (ty - self.ty0) * tx_n + tx;
                    let m = |xi: usize| {
                        let src = &prod[(xi * tb + t) * mg + mo0..];
                        match <[f32; LANES]>::try_from(src.get(..LANES).unwrap_or_default()) {
                            // A whole chunk: one vector load instead of a copy loop.
                            Ok(row) if lanes == LANES => row,
                            _ => {
                                let mut row = [0.0f32; LANES];
                                row[..lanes].copy_from_slice(&src[..lanes]);
                                row
                            }
                        }
                    };
                    // Aᵀ M: rows s (sums) and d (differences) of the 2x4 intermediate.
                    let mut s = [[0.0f32; LANES]; 4];
                    let mut d = [[0.0f32; LANES]; 4];
                    for j in 0..4 {
                        let (a, b, c, e) = (m(j), m(4 + j), m(8 + j), m(12 + j));
                        for l in 0..LANES {
                            s[j][l] = a[l] + b[l] + c[l];
                            d[j][l] = b[l] - c[l] - e[l];
                        }
                    }
                    // (Aᵀ M) A: the tile's 2x2 outputs.
                    for (l, out) in rows.chunks_exact_mut(2 * width).enumerate() {
                        let (top, bottom) = out.split_at_mut(width);
                        top[2 * tx] = s[0][l] + s[1][l] + s[2][l];
                        top[2 * tx + 1] = s[1][l] - s[2][l] - s[3][l];
                        bottom[2 * tx] = d[0][l] + d[1][l] + d[2][l];
                        bottom[2 * tx + 1] = d[1][l] - d[2][l] - d[3][l];
                    }
                }
                // Tiles sticking out of an odd-sized output lose their extra row or
                // column here.
                let oy = 2 * ty;
                let down = (oh - oy).min(2);
                for (l, out) in rows.chunks_exact(2 * width).enumerate() {
                    for (dy, y) in out.chunks_exact(width).take(down).enumerate() {
                        // SAFETY: inside plane `mo0 + l` of `block`, a row of this pass
                        // (the caller's contract), of this task's channels.
                        let row = unsafe {
                            let at = block.offset((mo0 + l) * out_sp + (oy + dy) * ow);
                            std::slice::from_raw_parts_mut(at.0, ow)
                        };
                        for (o, y) in row.iter_mut().zip(y) {
                            *o += y;
                        }
                    }
                }
            }
        });
    }
}

/// `even[i]` and `odd[i]` = columns `2i - pad` and `2i + 1 - pad` of the input row
/// `src` (0 outside it, and for a row in the padding, `src` = `None`).
fn split_columns(src: Option<&[f32]>, pad: usize, even: &mut [f32], odd: &mut [f32]) {
    let Some(src) = src else {
        even.fill(0.0);
        odd.fill(0.0);
        return;
    };
    let at = |c: isize| {
        if (0..src.len() as isize).contains(&c) {
            src[c as usize]
        } else {
            0.0
        }
    };
    // Entries whose two columns both lie inside the row: a plain de-interleave.
    let lo = pad.div_ceil(2).min(even.len());
    let hi = ((src.len() + pad) / 2).clamp(lo, even.len());
    for i in (0..lo).chain(hi..even.len()) {
        let c = (2 * i) as isize - pad as isize;
        even[i] = at(c);
        odd[i] = at(c + 1);
    }
    let inner = &src[(2 * lo).saturating_sub(pad).min(src.len())..];
    for ((e, o), pair) in even[lo..hi]
        .iter_mut()
        .zip(&mut odd[lo..hi])
        .zip(inner.chunks_exact(2))
    {
        *e = pair[0];
        *o = pair[1];
    }
}

/// The 16 products `M_ξ = U_ξ V_ξ` (`mg x cg` by `cg x tb`), computed transposed
/// (`V_ξᵀ U_ξᵀ`, so that the SGEMM's vector lanes run along output channels and the
/// stored weights are read in place) and written to `prod` as
/// `[ξ][tile][out channel]`.
fn multiply(
    ug: &[f32],
    v: &[f32],
    prod: &mut [f32],
    cg: usize,
    mg: usize,
    tb: usize,
    parallel: bool,
) {
    let one = |xi: usize, m: &mut [f32]| {
        // V_ξᵀ: row `t` holds element ξ of tile `t` of every channel.
        let a = Mat {
            data: &v[xi * tb..],
            rows: tb,
            cols: cg,
            row_stride: 1,
            col_stride: TILE * tb,
        };
        let u = &ug[xi * cg * mg..][..cg * mg];
        for first in (0..mg).step_by(BLOCK) {
            let width = BLOCK.min(mg - first);
            let b = Mat::row_major(&u[first * cg..][..cg * width], cg, width);
            sgemm_serial(1.0, a, b, 0.0, &mut m[first..], mg);
        }
    };
    if parallel && mg * cg * tb >= PARALLEL_MACS {
        prod.par_chunks_mut(tb * mg)
            .enumerate()
            .for_each(|(xi, m)| one(xi, m));
    } else {
        prod.chunks_mut(tb * mg)
            .enumerate()
            .for_each(|(xi, m)| one(xi, m));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::Finish;
    use crate::ops::conv::conv_gemm;

    fn seq(n: usize, scale: f32, salt: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i + salt) * 7919 % 23) as f32 - 11.0) * scale)
            .collect()
    }

    /// Winograd and im2col outputs of one problem (bias 0.25 on every channel).
    fn both(xs: [usize; 4], m: usize, group: usize, pads: [usize; 4]) -> (Vec<f32>, Vec<f32>) {
        let [n, c, h, w] = xs;
        let oh = h + pads[0] + pads[2] - 2;
        let ow = w + pads[1] + pads[3] - 2;
        let p = ConvProblem {
            n,
            c,
            m,
            group,
            win: Window {
                rank: 2,
                input: [1, h, w],
                kernel: [1, 3, 3],
                stride: [1; 3],
                dilation: [1; 3],
                pad_begin: [0, pads[0], pads[1]],
                pad_end: [0, pads[2], pads[3]],
                output: [1, oh, ow],
            },
        };
        assert!(applies(&p), "{xs:?} m={m} group={group}");
        let x = seq(n * c * h * w, 0.05, 1);
        let wts = seq(m * (c / group) * 9, 0.02, 5);
        let len = n * m * oh * ow;
        let mut fast = vec![0.25; len];
        conv(&x, &transform_weights(&wts, &p), &p, &mut fast);
        let bias = vec![0.25; m];
        let finish = Finish {
            bias: Some(&bias),
            residual: None,
            relu: false,
        };
        let reference = conv_gemm(&x, &wts, finish, &p);
        (fast, reference)
    }

    fn assert_close(fast: &[f32], reference: &[f32], what: &str) {
        let scale = reference.iter().fold(1.0f32, |a, v| a.max(v.abs()));
        for (i, (a, b)) in fast.iter().zip(reference).enumerate() {
            assert!((a - b).abs() <= 1e-5 * scale, "{what} [{i}]: {a} vs {b}");
        }
    }

    #[test]
    fn kernel_transform_of_a_delta_and_of_ones() {
        // The centre tap alone: G g Gᵀ = outer product of G's middle column.
        let mut delta = [0.0; 9];
        delta[4] = 1.0;
        let col = [0.0, 0.5, -0.5, 0.0];
        let want: Vec<f32> = (0..16).map(|i| col[i / 4] * col[i % 4]).collect();
        assert_eq!(kernel_tile(&delta).to_vec(), want);
        let sums = [1.0, 1.5, 0.5, 1.0];
        let want: Vec<f32> = (0..16).map(|i| sums[i / 4] * sums[i % 4]).collect();
        assert_eq!(kernel_tile(&[1.0; 9]).to_vec(), want);
    }

    #[test]
    fn matches_im2col_for_odd_sizes_pads_groups_and_batches() {
        let cases: &[([usize; 4], usize, usize, [usize; 4])] = &[
            ([1, 32, 8, 8], 32, 1, [1, 1, 1, 1]),
            ([2, 32, 7, 9], 40, 1, [1, 1, 1, 1]), // odd output: partial tiles
            ([1, 48, 6, 5], 32, 1, [0, 0, 0, 0]), // no padding
            ([1, 32, 5, 6], 32, 1, [2, 0, 1, 3]), // asymmetric padding
            ([2, 64, 9, 4], 64, 2, [1, 1, 1, 1]), // groups
            ([1, 32, 3, 3], 32, 1, [2, 2, 2, 2]), // padding wider than the kernel
            ([1, 32, 6, 7], 32, 1, [1, 3, 0, 2]), // odd left padding
            ([1, 32, 8, 8], 100, 1, [1, 1, 1, 1]), // a partial block of output channels
        ];
        for &(xs, m, group, pads) in cases {
            let (fast, reference) = both(xs, m, group, pads);
            assert_close(
                &fast,
                &reference,
                &format!("{xs:?} m={m} g={group} {pads:?}"),
            );
        }
    }

    #[test]
    fn column_split_reads_the_padded_row() {
        for len in 1..8 {
            let src: Vec<f32> = (1..=len).map(|v| v as f32).collect();
            let at = |c: isize| {
                usize::try_from(c)
                    .ok()
                    .and_then(|c| src.get(c).copied())
                    .unwrap_or(0.0)
            };
            for pad in 0..6 {
                for n in 1..7 {
                    let (mut even, mut odd) = (vec![9.0; n], vec![9.0; n]);
                    split_columns(Some(&src), pad, &mut even, &mut odd);
                    for i in 0..n {
                        let c = (2 * i) as isize - pad as isize;
                        assert_eq!((even[i], odd[i]), (at(c), at(c + 1)), "{len} {pad} {n} {i}");
                    }
                    split_columns(None, pad, &mut even, &mut odd);
                    assert!(even.iter().chain(&odd).all(|&v| v == 0.0));
                }
            }
        }
    }

    #[test]
    fn tile_rows_are_split_to_stay_within_the_budget() {
        // 16 * (32 + 32) * 20 tile columns = 20 480 elements per tile row: 12 rows
        // per pass, so 40 tile rows take four passes.
        let (fast, reference) = both([1, 32, 80, 40], 32, 1, [1, 1, 1, 1]);
        assert_close(&fast, &reference, "split passes");
        // One tile row over the budget still runs, one row per pass.
        let (fast, reference) = both([1, 512, 4, 40], 512, 1, [1, 1, 1, 1]);
        assert_close(&fast, &reference, "one row per pass");
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| both([1, 64, 30, 30], 64, 1, [1, 1, 1, 1]).0)
        };
        let one = run(1);
        assert_eq!(one, run(3));
    }

    #[test]
    fn small_or_unsuitable_problems_are_left_to_im2col() {
        let base = ConvProblem {
            n: 1,
            c: 32,
            m: 32,
            group: 1,
            win: Window {
                rank: 2,
                input: [1, 8, 8],
                kernel: [1, 3, 3],
                stride: [1; 3],
                dilation: [1; 3],
                pad_begin: [0, 1, 1],
                pad_end: [0, 1, 1],
                output: [1, 8, 8],
            },
        };
        assert!(applies(&base));
        let with = |f: &dyn Fn(&mut ConvProblem)| {
            let mut p = ConvProblem {
                win: base.win.clone(),
                ..base
            };
            f(&mut p);
            applies(&p)
        };
        assert!(!with(&|p| p.c = 16));
        assert!(!with(&|p| p.m = 16));
        assert!(!with(&|p| p.group = 2));
        assert!(!with(&|p| p.win.stride = [1, 2, 2]));
        assert!(!with(&|p| p.win.dilation = [1, 2, 2]));
        assert!(!with(&|p| p.win.kernel = [1, 5, 5]));
        assert!(!with(&|p| p.win.output = [1, 2, 2]));
    }
}
