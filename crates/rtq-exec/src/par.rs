//! Parallelism policy: small tensors stay on the calling thread, big ones are split
//! across rayon's pool.

use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Element count from which elementwise work is spread over threads.
pub(crate) const PAR_MIN_ELEMS: usize = 1 << 15;

/// Elements per parallel piece of a streaming elementwise pass (a few L1-sized
/// blocks, many pieces per thread on big tensors).
pub(crate) const PIECE: usize = 1 << 14;

/// A raw output pointer shared by parallel tasks that write disjoint elements.
#[derive(Clone, Copy)]
pub(crate) struct OutPtr<T>(pub *mut T);
// SAFETY: a kernel hands an `OutPtr` only to tasks that write disjoint elements.
unsafe impl<T> Send for OutPtr<T> {}
unsafe impl<T> Sync for OutPtr<T> {}

impl<T> OutPtr<T> {
    /// The pointer `count` elements further.
    ///
    /// # Safety
    /// As [`pointer::add`]: the result must stay inside the same allocation.
    pub(crate) unsafe fn offset(self, count: usize) -> OutPtr<T> {
        OutPtr(self.0.add(count))
    }
}

/// `f` applied to every element of `src`, in pieces over threads for big inputs.
pub(crate) fn map<A: Sync, O: Copy + Send>(src: &[A], f: impl Fn(&A) -> O + Sync + Send) -> Vec<O> {
    written(src.len(), PIECE, src.len(), |i, dst| {
        for (d, a) in dst.iter_mut().zip(&src[i * PIECE..]) {
            d.write(f(a));
        }
    })
}

/// Calls `f(index, chunk)` for consecutive `chunk`-sized pieces of `buf` (the last may be
/// shorter), in parallel when `work` (an estimate of the total cost in elements) is big.
pub(crate) fn chunks_mut<T: Send>(
    buf: &mut [T],
    chunk: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    let chunk = chunk.max(1);
    if work >= PAR_MIN_ELEMS && buf.len() > chunk {
        buf.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(i, c)| f(i, c));
    } else {
        buf.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// A vector of `len` elements written by `fill(index, chunk)` over consecutive
/// `chunk`-sized pieces (in parallel when `work` is big, as [`chunks_mut`]), without
/// initializing it first. `fill` must write every element of its piece.
pub(crate) fn written<T: Copy + Send>(
    len: usize,
    chunk: usize,
    work: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<T>]) + Sync + Send,
) -> Vec<T> {
    let mut out = uninit_vec(len);
    chunks_mut(&mut out, chunk, work, fill);
    // SAFETY: the pieces cover `out` and `fill` wrote every element of each.
    unsafe { assume_written(out) }
}

/// A vector of `len` elements to be written before it is read ([`assume_written`]).
/// Big vectors reuse a block the run in progress freed ([`crate::arena::take`]).
pub(crate) fn uninit_vec<T>(len: usize) -> Vec<MaybeUninit<T>> {
    crate::arena::take(len)
}

/// The vector of `T` that `v` holds once every element has been written.
///
/// # Safety
/// Every element of `v` must have been written.
pub(crate) unsafe fn assume_written<T>(v: Vec<MaybeUninit<T>>) -> Vec<T> {
    let mut v = std::mem::ManuallyDrop::new(v);
    // `MaybeUninit<T>` has `T`'s layout; the caller vouches for the contents.
    Vec::from_raw_parts(v.as_mut_ptr().cast::<T>(), v.len(), v.capacity())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_preserves_order_in_parallel() {
        let src: Vec<u32> = (0..(PAR_MIN_ELEMS as u32 * 2 + 7)).collect();
        let out = map(&src, |&x| x * 2);
        assert!(out.iter().enumerate().all(|(i, &v)| v == 2 * i as u32));
    }

    #[test]
    fn written_vectors_hold_what_each_piece_wrote() {
        let v: Vec<usize> = written(10, 3, usize::MAX, |i, piece| {
            piece.iter_mut().for_each(|x| {
                x.write(i);
            })
        });
        assert_eq!(v, vec![0, 0, 0, 1, 1, 1, 2, 2, 2, 3]);
    }

    #[test]
    fn chunks_cover_the_buffer() {
        let mut buf = vec![0usize; 10];
        chunks_mut(&mut buf, 3, usize::MAX, |i, c| {
            c.iter_mut().for_each(|x| *x = i)
        });
        assert_eq!(buf, vec![0, 0, 0, 1, 1, 1, 2, 2, 2, 3]);
    }
}
