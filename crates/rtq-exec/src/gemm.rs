//! A bounds-checked wrapper over the `gemm-f32` crate's SGEMM (runtime-selected AVX2 /
//! AVX-512 / NEON kernels), spread over rayon's threads ([`Split`]).

use gemm_common::Parallelism;
use rayon::prelude::*;
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
    product(alpha, a, b, beta, c, ldc, false);
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
    product(alpha, a, b, beta, c, ldc, true);
}

/// [`sgemm`], single-threaded when `serial`.
fn product(alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: &mut [f32], ldc: usize, serial: bool) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(b.rows, k, "gemm inner dimensions differ");
    assert!(
        a.fits(a.data.len()) && b.fits(b.data.len()),
        "gemm operand out of bounds"
    );
    assert!(
        m == 0 || n == 0 || (m - 1) * ldc + n <= c.len(),
        "gemm output out of bounds"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for r in 0..m {
            let row = &mut c[r * ldc..r * ldc + n];
            if beta == 0.0 {
                row.fill(0.0);
            } else {
                row.iter_mut().for_each(|v| *v *= beta);
            }
        }
        return;
    }
    let split = if serial {
        Split::Single
    } else {
        Split::of(m, k, n)
    };
    // `c`'s base, as an address so that column blocks can be written from rayon's
    // threads.
    let c_addr = c.as_mut_ptr() as usize;
    let run = |cols: Range<usize>, parallelism: Parallelism| {
        // SAFETY: the asserts above guarantee every element addressed through the
        // given dimensions and strides lies inside `a.data`, `b.data` and `c`; a
        // block addresses columns `cols` of `b` and `c`, distinct blocks write
        // disjoint columns of `c`, which is borrowed mutably for the whole call and
        // cannot alias the shared operands.
        unsafe {
            let block = (c_addr as *mut f32).add(cols.start);
            column_block(alpha, &a, &b, beta, block, ldc, cols, parallelism);
        }
    };
    match split {
        Split::Single => run(0..n, Parallelism::None),
        Split::Crate => run(0..n, Parallelism::Rayon(0)),
        Split::Columns { width, count } => (0..count)
            .into_par_iter()
            .for_each(|j| run(j * width..((j + 1) * width).min(n), Parallelism::None)),
    }
}

/// Products of fewer flops run as one single-threaded call.
const PARALLEL_FLOPS: usize = 4 << 20;
/// Products with at least this many rows of `c` use the gemm crate's own threading.
const TALL: usize = 128;
/// Flops of work per column block of a short product.
const BLOCK_FLOPS: usize = 8 << 20;
/// Fewest column blocks a parallel short product is cut into.
const MIN_BLOCKS: usize = 8;
/// Most column blocks a short product is cut into.
const MAX_BLOCKS: usize = 256;
/// Narrowest column block; widths are multiples of [`ALIGN`].
const MIN_WIDTH: usize = 64;
/// Block widths are multiples of this (one AVX-512 register of f32).
const ALIGN: usize = 16;

/// How a product is spread over rayon's threads.
///
/// The gemm crate's own parallel mode handles tall products well but splits short
/// ones (the 64 output channels by 3136 positions of ResNet's first stage) poorly:
/// cut into independent column blocks, each a single-threaded call, these run up to
/// 1.7x faster on two cores. The cut depends only on the shape, never on the thread
/// count, because the gemm crate's blocking (and so the float rounding) depends on
/// the block shape: results are the same on any number of threads.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Split {
    /// One single-threaded call.
    Single,
    /// One call, threaded by the gemm crate.
    Crate,
    /// `count` blocks of `width` columns of `c` (the last may be narrower).
    Columns { width: usize, count: usize },
}

impl Split {
    /// The split of an `m x k` by `k x n` product.
    fn of(m: usize, k: usize, n: usize) -> Split {
        let flops = 2 * m * k * n;
        if flops < PARALLEL_FLOPS {
            return Split::Single;
        }
        if m >= TALL {
            return Split::Crate;
        }
        let wanted = (flops / BLOCK_FLOPS)
            .clamp(MIN_BLOCKS, MAX_BLOCKS)
            .min(n / MIN_WIDTH);
        if wanted <= 1 {
            return Split::Crate;
        }
        let width = n.div_ceil(wanted).next_multiple_of(ALIGN).min(n);
        Split::Columns {
            width,
            count: n.div_ceil(width),
        }
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
    fn split_depends_on_the_shape_only() {
        assert_eq!(Split::of(8, 8, 8), Split::Single);
        assert_eq!(Split::of(256, 2304, 196), Split::Crate);
        let Split::Columns { width, count } = Split::of(64, 576, 3136) else {
            panic!("a short product is cut into column blocks");
        };
        assert_eq!(width % ALIGN, 0);
        assert!(width >= MIN_WIDTH && count >= MIN_BLOCKS);
        assert!((count - 1) * width < 3136 && count * width >= 3136);
        // Too narrow to cut: one threaded call.
        assert_eq!(Split::of(64, 100_000, 100), Split::Crate);
    }

    #[test]
    fn column_blocks_match_the_reference_on_any_thread_count() {
        let (m, k, n) = (40, 150, 1000);
        assert!(matches!(Split::of(m, k, n), Split::Columns { .. }));
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.01)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.02)
            .collect();
        let product = |threads: usize| {
            // c has a wider row stride than n and starts from ones (beta = 0.5).
            let ldc = n + 3;
            let mut c = vec![1.0f32; m * ldc];
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                sgemm(
                    2.0,
                    Mat::row_major(&a, m, k),
                    Mat::row_major(&b, k, n),
                    0.5,
                    &mut c,
                    ldc,
                )
            });
            c
        };
        let one = product(1);
        assert_eq!(one, product(3), "bit-identical on 1 and 3 threads");
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
