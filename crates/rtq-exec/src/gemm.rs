//! A bounds-checked wrapper over the `gemm-f32` crate's SGEMM (runtime-selected AVX2 /
//! AVX-512 / NEON kernels), spread over rayon's threads ([`Split`]).

use crate::ops::unary::relu_f32;
use crate::simd::multiversioned;
use gemm_common::Parallelism;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::ops::Range;

/// A read-only strided matrix view.
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a> {
    /// Backing elements.
    pub data: &'a [f32],
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Element step between rows.
    pub row_stride: usize,
    /// Element step between columns.
    pub col_stride: usize,
}

impl<'a> Mat<'a> {
    /// A row-major `rows x cols` matrix.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Mat<'a> {
        Mat {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transposed view (no copy).
    pub fn t(self) -> Mat<'a> {
        Mat {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }

    fn fits(&self, len: usize) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride < len
    }
}

/// `c = alpha * a * b + beta * c`, where `c` is `a.rows x b.cols` with row stride
/// `ldc` (columns contiguous). Shapes are validated by the calling kernel; a mismatch
/// here is an executor bug and panics.
pub(crate) fn sgemm(alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: &mut [f32], ldc: usize) {
    let dst = Dst::of(c, ldc);
    product(alpha, a, b, beta, dst, Finish::NONE, false);
}

/// [`sgemm`] on the calling thread only, for kernels that run several independent
/// products in parallel themselves.
pub(crate) fn sgemm_serial(
    alpha: f32,
    a: Mat<'_>,
    b: Mat<'_>,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) {
    let dst = Dst::of(c, ldc);
    product(alpha, a, b, beta, dst, Finish::NONE, true);
}

/// `c = finish(a * b)`, written without reading `c` (which may be uninitialized):
/// every element of the `a.rows x b.cols` block at row stride `ldc` is written, the
/// elements between rows (when `ldc > b.cols`) are left as they were.
pub(crate) fn sgemm_write(
    a: Mat<'_>,
    b: Mat<'_>,
    c: &mut [MaybeUninit<f32>],
    ldc: usize,
    finish: Finish<'_>,
) {
    // SAFETY: `c` is borrowed exclusively for the call.
    unsafe { sgemm_write_raw(a, b, c.as_mut_ptr().cast(), c.len(), ldc, finish, false) }
}

/// [`sgemm_write`] into the `len` elements at `c`, single-threaded when `serial`: for
/// kernels whose parallel pieces write disjoint columns of one output.
///
/// # Safety
/// `c..c + len` must lie inside a live allocation that no other thread reads or
/// writes meanwhile, except for elements outside the `a.rows x b.cols` block at row
/// stride `ldc`.
pub(crate) unsafe fn sgemm_write_raw(
    a: Mat<'_>,
    b: Mat<'_>,
    c: *mut f32,
    len: usize,
    ldc: usize,
    finish: Finish<'_>,
    serial: bool,
) {
    if let Some(bias) = finish.bias {
        assert_eq!(bias.len(), a.rows, "one bias per row of the product");
    }
    if let Some(residual) = finish.residual {
        let (m, n) = (a.rows, b.cols);
        assert!(
            m == 0 || n == 0 || (m - 1) * ldc + n <= residual.len(),
            "residual shorter than the product"
        );
    }
    let dst = Dst { ptr: c, len, ldc };
    product(1.0, a, b, 0.0, dst, finish, serial);
}

/// How many single-threaded pieces of columns an `m x k` by `k x n` product is cut
/// into on `threads` threads, when [`sgemm`] would cut its columns (see [`Split`]):
/// for kernels that prepare each piece's columns themselves.
pub(crate) fn column_pieces(m: usize, k: usize, n: usize, threads: usize) -> Option<usize> {
    match Split::of(m, k, n, threads) {
        Split::Pieces { rows: false, count } => Some(count),
        _ => None,
    }
}

/// Columns of piece `p` of `count` over `n` columns (see [`column_pieces`]).
pub(crate) fn column_piece(n: usize, count: usize, p: usize) -> Range<usize> {
    Split::piece(n, count, p)
}

/// What is applied to each block of a product right after it is computed, while the
/// block is still in cache (instead of another pass over the whole output).
#[derive(Clone, Copy)]
pub(crate) struct Finish<'a> {
    /// Added to every element of row `r`: `bias[r]` (one value per row of `c`).
    pub bias: Option<&'a [f32]>,
    /// Added next, element by element: a tensor laid out as `c` (same start and row
    /// stride).
    pub residual: Option<&'a [f32]>,
    /// Relu (as the Relu op computes it), last.
    pub relu: bool,
}

impl Finish<'_> {
    /// Nothing applied.
    const NONE: Finish<'static> = Finish {
        bias: None,
        residual: None,
        relu: false,
    };
}

/// A product's output: `len` elements from `ptr`, rows `ldc` apart.
#[derive(Clone, Copy)]
struct Dst {
    ptr: *mut f32,
    len: usize,
    ldc: usize,
}

impl Dst {
    fn of(c: &mut [f32], ldc: usize) -> Dst {
        Dst {
            ptr: c.as_mut_ptr(),
            len: c.len(),
            ldc,
        }
    }
}

/// `c = finish(alpha * a * b + beta * c)`, single-threaded when `serial`; `c` is read
/// only when `beta != 0`.
fn product(
    alpha: f32,
    a: Mat<'_>,
    b: Mat<'_>,
    beta: f32,
    c: Dst,
    finish: Finish<'_>,
    serial: bool,
) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let ldc = c.ldc;
    assert_eq!(b.rows, k, "gemm inner dimensions differ");
    assert!(
        a.fits(a.data.len()) && b.fits(b.data.len()),
        "gemm operand out of bounds"
    );
    assert!(
        m == 0 || n == 0 || (m - 1) * ldc + n <= c.len,
        "gemm output out of bounds"
    );
    if m == 0 || n == 0 {
        return;
    }
    // `c`'s base, as an address so that blocks can be written from rayon's threads.
    let c_addr = c.ptr as usize;
    if k == 0 {
        // SAFETY: every row's `n` elements lie inside `c` (asserted above), which the
        // caller lends exclusively for the call.
        unsafe {
            for r in 0..m {
                let row = (c_addr as *mut f32).add(r * ldc);
                for j in 0..n {
                    let v = if beta == 0.0 { 0.0 } else { *row.add(j) * beta };
                    row.add(j).write(v);
                }
            }
            finish_block(&finish, c_addr as *mut f32, ldc, 0..m, 0..n);
        }
        return;
    }
    let split = if serial {
        Split::Single
    } else {
        Split::of(m, k, n, rayon::current_num_threads())
    };
    // SAFETY (both closures): the asserts above guarantee every element addressed
    // through the given dimensions and strides lies inside `a.data`, `b.data` and `c`;
    // a block addresses rows `rows` of `a` and `c` and columns `cols` of `b` and `c`,
    // distinct blocks write disjoint elements of `c`, which the caller lends
    // exclusively for the whole call and which cannot alias the shared operands.
    let block = |rows: Range<usize>, cols: Range<usize>, parallelism: Parallelism| unsafe {
        let a_rows = Mat {
            data: &a.data[rows.start * a.row_stride..],
            rows: rows.len(),
            ..a
        };
        let dst = (c_addr as *mut f32).add(rows.start * ldc + cols.start);
        column_block(
            alpha,
            &a_rows,
            &b,
            beta,
            dst,
            ldc,
            cols.clone(),
            parallelism,
        );
        finish_block(&finish, c_addr as *mut f32, ldc, rows, cols);
    };
    match split {
        Split::Single => block(0..m, 0..n, Parallelism::None),
        Split::Crate => block(0..m, 0..n, Parallelism::Rayon(0)),
        Split::Pieces { rows, count } => {
            let len = if rows { m } else { n };
            (0..count).into_par_iter().for_each(|p| {
                let piece = Split::piece(len, count, p);
                if rows {
                    block(piece, 0..n, Parallelism::None)
                } else {
                    block(0..m, piece, Parallelism::None)
                }
            })
        }
    }
}

/// Applies `finish` to rows `rows`, columns `cols` of the output at `c` (row stride
/// `ldc`); `rows` index `finish.bias`.
///
/// # Safety
/// Those elements must lie inside a live output that the caller may write and that
/// no other thread touches meanwhile.
unsafe fn finish_block(
    finish: &Finish<'_>,
    c: *mut f32,
    ldc: usize,
    rows: Range<usize>,
    cols: Range<usize>,
) {
    if finish.bias.is_none() && finish.residual.is_none() && !finish.relu {
        return;
    }
    for r in rows {
        let at = r * ldc + cols.start;
        let row = std::slice::from_raw_parts_mut(c.add(at), cols.len());
        let residual = finish.residual.map(|x| &x[at..at + cols.len()]);
        finish_row(row, finish.bias.map(|b| b[r]), residual, finish.relu);
    }
}

multiversioned! {
    /// `v <- v + bias`, then `v <- v + residual`, then Relu when `relu` (each only
    /// when given), on one row (in L1).
    pub(crate) fn finish_row(v: &mut [f32], bias: Option<f32>, residual: Option<&[f32]>, relu: bool)
        => finish_row_body
}

#[inline(always)]
fn finish_row_body(v: &mut [f32], bias: Option<f32>, residual: Option<&[f32]>, relu: bool) {
    if let Some(b) = bias {
        v.iter_mut().for_each(|x| *x += b);
    }
    if let Some(r) = residual {
        v.iter_mut().zip(r).for_each(|(x, r)| *x += r);
    }
    if relu {
        v.iter_mut().for_each(|x| *x = relu_f32(*x));
    }
}

/// Products of fewer flops run as one single-threaded call.
const PARALLEL_FLOPS: usize = 4 << 20;
/// Pieces of a split product are cut at multiples of this (one AVX-512 register of
/// f32).
const ALIGN: usize = 16;
/// Pieces of a split product per thread: with more than one, a thread that falls
/// behind (another process took its core for a while) leaves its last piece to one
/// that is done (ResNet-50 on two threads of a shared 2-core VM, median of eight
/// runs: 41.5 ms with one piece per thread, 40.6 ms with two).
const PIECES_PER_THREAD: usize = 2;
/// Shortest piece along the cut dimension: longer than the gemm crate's small-matrix
/// limit (64), so that no piece takes a path that rounds differently.
const MIN_PIECE: usize = 80;

/// How a product is spread over rayon's threads.
///
/// The gemm crate's own parallel mode scales poorly on these shapes (ResNet-50's
/// 128x256x3136 product gained nothing on two cores). Cut along its longer dimension
/// into [`PIECES_PER_THREAD`] single-threaded calls per thread, a product runs
/// 1.8-1.95x faster on two cores; only the smaller operand is packed again per piece.
///
/// Results stay the same on any number of threads: the gemm crate's depth blocking
/// depends on the inner dimension and the cache sizes only, so every output element
/// sums the same products in the same order whatever the piece, as long as no piece
/// is small enough for the crate's small-matrix, matrix-vector or 16x16 kernels
/// (which [`MIN_PIECE`] and the shortest side of 4 exclude).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Split {
    /// One single-threaded call.
    Single,
    /// One call, threaded by the gemm crate (products too narrow to cut).
    Crate,
    /// `count` single-threaded calls on pieces of the rows of `a` and `c` (when
    /// `rows`) or of the columns of `b` and `c`.
    Pieces { rows: bool, count: usize },
}

impl Split {
    /// The split of an `m x k` by `k x n` product over `threads` threads.
    fn of(m: usize, k: usize, n: usize, threads: usize) -> Split {
        if 2 * m * k * n < PARALLEL_FLOPS || threads <= 1 {
            return Split::Single;
        }
        let rows = m > n;
        let (long, short) = if rows { (m, n) } else { (n, m) };
        let count = (threads * PIECES_PER_THREAD).min(long / MIN_PIECE);
        if count <= 1 || short < 4 {
            return Split::Crate;
        }
        Split::Pieces { rows, count }
    }

    /// Piece `p` of `count` over `0..len`, cut at multiples of [`ALIGN`].
    fn piece(len: usize, count: usize, p: usize) -> Range<usize> {
        let cut = |p: usize| (len * p / count).next_multiple_of(ALIGN).min(len);
        cut(p)..cut(p + 1)
    }
}

/// One product of `a` by columns `cols` of `b` into the block of `c` at `c_block`
/// (row stride `ldc`).
///
/// # Safety
/// `cols` must lie within `b.cols`, `a` and `b` must address only elements of their
/// slices, and `c_block` must point at the block's first element inside a live,
/// exclusively borrowed output of row stride `ldc` that holds the whole block and
/// that no other thread writes to.
#[allow(clippy::too_many_arguments)]
unsafe fn column_block(
    alpha: f32,
    a: &Mat<'_>,
    b: &Mat<'_>,
    beta: f32,
    c_block: *mut f32,
    ldc: usize,
    cols: Range<usize>,
    parallelism: Parallelism,
) {
    // gemm-f32 computes dst := alpha * dst + beta * lhs * rhs, reading dst only when
    // asked to; its strides are (column, row) and its kernels prefer a column-major
    // dst, so a row-major one is handled as the transposed product (as the `gemm`
    // facade crate does).
    let sgemm = gemm_f32::gemm::f32::get_gemm_fn();
    let (m, n, k) = (a.rows, cols.len(), a.cols);
    let lhs = (
        a.data.as_ptr(),
        a.col_stride as isize,
        a.row_stride as isize,
    );
    let rhs = (
        b.data.as_ptr().add(cols.start * b.col_stride),
        b.col_stride as isize,
        b.row_stride as isize,
    );
    let ldc = ldc as isize;
    // (rows, cols, dst column stride, dst row stride, lhs, rhs); a view's transpose
    // swaps its strides.
    let (rows, columns, dst_cs, dst_rs, (l, l_cs, l_rs), (r, r_cs, r_rs)) = if 1 < ldc {
        // C^T (n x m, column-major) = B^T A^T.
        let t = |(p, cs, rs)| (p, rs, cs);
        (n, m, ldc, 1, t(rhs), t(lhs))
    } else {
        (m, n, 1, ldc, lhs, rhs)
    };
    sgemm(
        rows,
        columns,
        k,
        c_block,
        dst_cs,
        dst_rs,
        beta != 0.0,
        l,
        l_cs,
        l_rs,
        r,
        r_cs,
        r_rs,
        beta,
        alpha,
        false,
        false,
        false,
        parallelism,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiplies_with_transposes_and_accumulates() {
        // a = [[1,2,3],[4,5,6]] (2x3), b = a^T (3x2)
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let am = Mat::row_major(&a, 2, 3);
        let mut c = vec![1.0; 4];
        sgemm(1.0, am, am.t(), 1.0, &mut c, 2);
        assert_eq!(c, vec![15.0, 33.0, 33.0, 78.0]);
        // a^T a is 3x3
        let mut c = vec![0.0; 9];
        sgemm(2.0, am.t(), am, 0.0, &mut c, 3);
        assert_eq!(
            c,
            vec![34.0, 44.0, 54.0, 44.0, 58.0, 72.0, 54.0, 72.0, 90.0]
        );
    }

    #[test]
    fn products_are_cut_along_their_longer_side_into_pieces_per_thread() {
        assert_eq!(Split::of(8, 8, 8, 2), Split::Single);
        assert_eq!(Split::of(256, 2304, 196, 1), Split::Single);
        assert_eq!(
            Split::of(256, 2304, 196, 2),
            Split::Pieces {
                rows: true,
                count: 3
            }
        );
        assert_eq!(
            Split::of(64, 576, 3136, 16),
            Split::Pieces {
                rows: false,
                count: 32
            }
        );
        // Pieces stay longer than the gemm crate's small-matrix limit.
        assert_eq!(
            Split::of(64, 4608, 200, 8),
            Split::Pieces {
                rows: false,
                count: 2
            }
        );
        assert_eq!(Split::of(64, 100_000, 100, 2), Split::Crate);
        assert_eq!(Split::of(2, 100_000, 4000, 2), Split::Crate);
        for (len, count) in [(3136, 2), (196, 2), (49 * 40, 3), (1000, 12)] {
            let pieces: Vec<_> = (0..count).map(|p| Split::piece(len, count, p)).collect();
            assert_eq!(pieces[0].start, 0);
            assert_eq!(pieces[count - 1].end, len);
            assert!(pieces.windows(2).all(|w| w[0].end == w[1].start));
            assert!(pieces[..count - 1].iter().all(|p| p.end % ALIGN == 0));
        }
    }

    /// `c = 2 a b + 0.5 c` for an `m x k` by `k x n` product on `threads` threads,
    /// with `c` of a wider row stride than `n` and starting from ones.
    fn product_on(
        threads: usize,
        a: &[f32],
        b: &[f32],
        (m, k, n): (usize, usize, usize),
    ) -> Vec<f32> {
        let ldc = n + 3;
        let mut c = vec![1.0f32; m * ldc];
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            sgemm(
                2.0,
                Mat::row_major(a, m, k),
                Mat::row_major(b, k, n),
                0.5,
                &mut c,
                ldc,
            )
        });
        c
    }

    fn values(len: usize, step: usize, modulus: usize, scale: f32) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * step % modulus) as f32 - modulus as f32 / 2.0) * scale)
            .collect()
    }

    #[test]
    fn pieces_match_the_reference_on_any_thread_count() {
        let (m, k, n) = (40, 150, 1000);
        let a = values(m * k, 37, 101, 0.01);
        let b = values(k * n, 53, 97, 0.02);
        let one = product_on(1, &a, &b, (m, k, n));
        assert_eq!(
            one,
            product_on(3, &a, &b, (m, k, n)),
            "bit-identical on 1 and 3 threads"
        );
        for r in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|i| f64::from(a[r * k + i]) * f64::from(b[i * n + j]))
                    .sum();
                let expected = 2.0 * dot + 0.5;
                let got = f64::from(one[r * (n + 3) + j]);
                assert!(
                    (got - expected).abs() < 1e-3,
                    "c[{r}][{j}] = {got}, expected {expected}"
                );
            }
            assert_eq!(
                &one[r * (n + 3) + n..(r + 1) * (n + 3)],
                &[1.0; 3],
                "padding untouched"
            );
        }
    }

    #[test]
    fn every_split_rounds_as_one_call() {
        // Tall and wide products, depths below and above the crate's 512-deep blocks,
        // edges that are not multiples of its register tiles.
        for (m, k, n) in [
            (256, 64, 3136),
            (2048, 520, 49),
            (300, 1030, 97),
            (5, 700, 2000),
            (97, 1200, 81),
        ] {
            let a = values(m * k, 37, 101, 0.013);
            let b = values(k * n, 53, 97, 0.021);
            let one = product_on(1, &a, &b, (m, k, n));
            for threads in [2, 3, 4, 7] {
                assert!(
                    one == product_on(threads, &a, &b, (m, k, n)),
                    "{m}x{k}x{n} on {threads} threads differs from one thread"
                );
            }
        }
    }

    #[test]
    fn empty_inner_dimension_still_finishes_every_row() {
        // 2x0 by 0x3: zeros, then each row's bias, its own residual and Relu.
        let residual = [1.0, -5.0, 2.0, -1.0, 4.0, 0.5];
        let mut c = [MaybeUninit::<f32>::uninit(); 6];
        let finish = Finish {
            bias: Some(&[0.5, -2.0]),
            residual: Some(&residual),
            relu: true,
        };
        sgemm_write(
            Mat::row_major(&[], 2, 0),
            Mat::row_major(&[], 0, 3),
            &mut c,
            3,
            finish,
        );
        // SAFETY: the product wrote all six elements.
        let c = c.map(|v| unsafe { v.assume_init() });
        assert_eq!(c, [1.5, 0.0, 2.5, 0.0, 2.0, 0.0]);
    }

    #[test]
    fn empty_inner_dimension_scales_c() {
        let mut c = vec![2.0; 4];
        sgemm(
            1.0,
            Mat::row_major(&[], 2, 0),
            Mat::row_major(&[], 0, 2),
            0.5,
            &mut c,
            2,
        );
        assert_eq!(c, vec![1.0; 4]);
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec gemm::speed -- --ignored --nocapture --test-threads=1"]
    fn resnet_pointwise_shapes() {
        for (m, k, n) in [
            (64, 64, 3136),
            (256, 64, 3136),
            (64, 256, 3136),
            (128, 256, 3136),
            (128, 512, 784),
            (512, 128, 784),
            (256, 1024, 196),
            (1024, 256, 196),
            (512, 2048, 49),
            (2048, 512, 49),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 * 0.1).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.1).collect();
            let c = vec![0f32; m * n];
            let (am, bm) = (Mat::row_major(&a, m, k), Mat::row_major(&b, k, n));
            // The fastest of 40 runs on a pool of `threads` (the machine may be shared).
            let time = |threads: usize, f: &(dyn Fn(&mut [f32]) + Sync)| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| {
                    (0..40)
                        .map(|_| {
                            let mut c = c.clone();
                            let t = std::time::Instant::now();
                            f(&mut c);
                            t.elapsed().as_secs_f64() * 1e3
                        })
                        .fold(f64::INFINITY, f64::min)
                })
            };
            let split = |c: &mut [f32]| sgemm(1.0, am, bm, 0.0, c, n);
            // SAFETY: `c` holds the whole m x n product.
            let crate_threads = |c: &mut [f32]| unsafe {
                column_block(
                    1.0,
                    &am,
                    &bm,
                    0.0,
                    c.as_mut_ptr(),
                    n,
                    0..n,
                    Parallelism::Rayon(0),
                )
            };
            let gmacs = |ms: f64| (m * k * n) as f64 / ms / 1e6;
            let (s1, s2, c2) = (time(1, &split), time(2, &split), time(2, &crate_threads));
            println!(
                "{m}x{k}x{n}: 1 thread {s1:.3} ms ({:.0} GMAC/s); 2 threads {s2:.3} ms ({:.0}), \
                 the crate's own threading {c2:.3} ms ({:.0})",
                gmacs(s1),
                gmacs(s2),
                gmacs(c2)
            );
        }
    }
}
