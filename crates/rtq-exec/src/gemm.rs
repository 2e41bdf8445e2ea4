//! A bounds-checked wrapper over the `gemm` crate's SGEMM (runtime-selected AVX2 /
//! AVX-512 / NEON kernels; large products are split over rayon's threads).

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
    // SAFETY: the asserts above guarantee every element addressed through the given
    // dimensions and strides lies inside `a.data`, `b.data` and `c`; `c` is borrowed
    // mutably and cannot alias the shared operands.
    unsafe {
        // gemm computes dst := alpha * dst + beta * lhs * rhs, reading dst only when
        // asked to; its strides are (column, row).
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            ldc as isize,
            beta != 0.0,
            a.data.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            beta,
            alpha,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        );
    }
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
