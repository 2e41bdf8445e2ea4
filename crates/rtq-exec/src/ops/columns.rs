//! The per-thread column buffer of the im2col (Conv) and col2im (ConvTranspose)
//! kernels, kept between calls so that it is not allocated and zero-filled each time.

use std::cell::Cell;

/// Elements a column buffer may hold (16 MiB of f32); kernels tile their work to
/// stay within it, and larger buffers (only kernels of over 16 K taps need them) are
/// not kept.
pub(crate) const COL_BUDGET: usize = 1 << 22;

thread_local! {
    /// This thread's column buffer.
    static COLUMNS: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with this thread's column buffer cut to `len` elements. Its contents are
/// whatever an earlier call left there: `f` must write every element it reads.
///
/// The buffer is taken out for the call, so a kernel started on this thread while
/// `f` waits for rayon (work stealing) gets a buffer of its own instead of a
/// conflicting borrow.
pub(crate) fn with_columns<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    let mut col = COLUMNS.take();
    if col.len() < len {
        // Grow only: shrinking and regrowing would zero-fill the buffer again.
        col.resize(len, 0.0);
    }
    let result = f(&mut col[..len]);
    if col.len() <= COL_BUDGET {
        COLUMNS.set(col);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_is_reused_grown_and_not_shared_by_nested_calls() {
        with_columns(4, |col| col.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]));
        with_columns(2, |col| {
            assert_eq!(col, &[1.0, 2.0], "kept from the last call");
            // A nested call (as under rayon work stealing) gets a fresh buffer.
            with_columns(3, |inner| assert_eq!(inner, &[0.0; 3]));
        });
        with_columns(6, |col| assert_eq!(col.len(), 6));
    }
}
