//! Buffer reuse across runs: the big buffers a run frees (intermediate tensors,
//! kernels' scratch) are kept by the plan and handed to the next run's kernels, so a
//! warm plan asks the global allocator for nothing big (only its outputs, which leave
//! with the caller).
//!
//! Without it, every node of every run allocates and frees megabytes; how much that
//! costs depends on the allocator of the program that embeds the runtime (glibc's
//! malloc gives big blocks back to the OS and faults them in again at every node,
//! which made PP-OCRv4 det 1.5x slower than under mimalloc).
//!
//! A plan keeps one [`Pool`] per concurrent run ([`Arena::enter`]); while a run is in
//! progress its pool is the current pool of the thread the run executes on, which
//! [`take`] and [`give`] use. Kernels that run outside a plan (constant folding,
//! tests), and the tasks a kernel's parallel loop hands to other threads, have no
//! current pool and use the global allocator as before.

use rtq_ir::{DType, Tensor, TensorData};
use std::alloc::Layout;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Buffers smaller than this come from (and go back to) the global allocator, which
/// serves small blocks fast whatever it is.
const MIN_BYTES: usize = 4096;

/// Most blocks one pool keeps; beyond it the smallest are freed.
const MAX_BLOCKS: usize = 1024;

/// One free allocation of the global allocator, owned by a pool.
struct Block {
    ptr: NonNull<u8>,
    bytes: usize,
    align: usize,
    /// The run of its pool that last freed it.
    freed_in: u64,
}

// SAFETY: a block is the only owner of its allocation; nothing else points into it.
unsafe impl Send for Block {}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated by the global allocator with this very layout
        // (a `Vec` of `bytes / size_of::<T>()` elements of alignment `align`).
        unsafe {
            std::alloc::dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.bytes, self.align),
            )
        }
    }
}

/// Free blocks, by size.
#[derive(Default)]
struct Pool {
    /// Sorted by `bytes`.
    blocks: Vec<Block>,
    /// Runs that used the pool so far.
    runs: u64,
    /// The [`Arena::id`] of the arena the pool belongs to.
    owner: u64,
}

impl Pool {
    /// The smallest block of `align` whose size is a multiple of `size`, at least
    /// `bytes` and at most twice that.
    fn take(&mut self, bytes: usize, size: usize, align: usize) -> Option<Block> {
        let first = self.blocks.partition_point(|b| b.bytes < bytes);
        let found = self.blocks[first..]
            .iter()
            .take_while(|b| b.bytes / 2 <= bytes)
            .position(|b| b.align == align && b.bytes % size == 0)?;
        Some(self.blocks.remove(first + found))
    }

    fn give(&mut self, mut block: Block) {
        block.freed_in = self.runs;
        let at = self.blocks.partition_point(|b| b.bytes < block.bytes);
        self.blocks.insert(at, block);
        if self.blocks.len() > MAX_BLOCKS {
            self.blocks.remove(0);
        }
    }

    /// Ends a run: frees the blocks it did not use. A run repeated with the same
    /// shapes takes (and gives back) every block it needs, so what stays idle a whole
    /// run is surplus: buffers of tensors that some kernel allocated without the pool.
    fn end_run(&mut self) {
        let run = self.runs;
        self.blocks.retain(|b| b.freed_in == run);
        self.runs += 1;
    }
}

thread_local! {
    /// The pool of the run in progress on this thread, if any.
    static CURRENT: RefCell<Option<Pool>> = const { RefCell::new(None) };
}

/// The buffers a plan keeps between runs: one pool per run that was in progress at
/// the same time as others (one in all for a plan run by one thread at a time).
pub(crate) struct Arena {
    /// Tells this arena's pools from others'.
    id: u64,
    idle: Mutex<Vec<Pool>>,
}

impl Default for Arena {
    fn default() -> Arena {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Arena {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            idle: Mutex::new(Vec::new()),
        }
    }
}

impl Arena {
    /// Makes one of this arena's pools the calling thread's current pool until the
    /// guard is dropped (the pool then returns to the arena, and the thread's
    /// previous pool, of an enclosing run, becomes current again). Inside a run of
    /// the same arena on this thread, the guard does nothing: the enclosing run goes
    /// on with its pool.
    pub(crate) fn enter(&self) -> Entered<'_> {
        let inside = CURRENT.with(|c| c.borrow().as_ref().map(|p| p.owner)) == Some(self.id);
        let outer = if inside {
            None
        } else {
            let mut pool = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop()
                .unwrap_or_default();
            pool.owner = self.id;
            CURRENT.with(|c| c.replace(Some(pool)))
        };
        Entered {
            arena: self,
            outer,
            inside,
            _not_send: PhantomData,
        }
    }

    /// Bytes held for later runs.
    #[cfg(test)]
    fn kept_bytes(&self) -> usize {
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.iter().flat_map(|p| &p.blocks).map(|b| b.bytes).sum()
    }
}

/// A run's hold on a pool of its plan's [`Arena`] (see [`Arena::enter`]).
pub(crate) struct Entered<'a> {
    arena: &'a Arena,
    outer: Option<Pool>,
    /// Entered inside a run of the same arena: nothing to undo.
    inside: bool,
    /// The pool is the current one of the thread that entered.
    _not_send: PhantomData<*const ()>,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if self.inside {
            return;
        }
        let pool = CURRENT.with(|c| c.replace(self.outer.take()));
        if let Some(mut pool) = pool {
            pool.end_run();
            let mut idle = self
                .arena
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            idle.push(pool);
        }
    }
}

/// A vector of `len` elements to be written before it is read: a kept block of the
/// current run's pool when one fits, a new allocation otherwise.
pub(crate) fn take<T>(len: usize) -> Vec<MaybeUninit<T>> {
    let (size, align) = (size_of::<T>(), align_of::<T>());
    if let Some(bytes) = len.checked_mul(size).filter(|&b| b >= MIN_BYTES) {
        let block = CURRENT.with(|c| c.borrow_mut().as_mut()?.take(bytes, size, align));
        if let Some(block) = block {
            let block = ManuallyDrop::new(block);
            // SAFETY: the block was allocated by the global allocator for a `Vec` of
            // alignment `align` (that of `T`) and `block.bytes` bytes, a multiple of
            // `size`: a `Vec<T>` of capacity `bytes / size` has exactly that layout.
            // `len` elements fit (`bytes >= len * size`); `MaybeUninit` needs no
            // initialization. The block's ownership moves to the vector.
            return unsafe {
                Vec::from_raw_parts(block.ptr.as_ptr().cast(), len, block.bytes / size)
            };
        }
    }
    let mut out = Vec::with_capacity(len);
    // SAFETY: `MaybeUninit` needs no initialization.
    unsafe { out.set_len(len) };
    out
}

/// A vector of `len` copies of `value`, in a kept block where one fits ([`take`]).
pub(crate) fn filled<T: Copy>(len: usize, value: T) -> Vec<T> {
    let mut out = take(len);
    out.fill(MaybeUninit::new(value));
    // SAFETY: every element was just written.
    unsafe { crate::par::assume_written(out) }
}

/// Keeps `v`'s allocation for the current run's later kernels and next runs (frees
/// it when the thread runs no plan, or when it is small).
pub(crate) fn give<T: Copy>(v: Vec<T>) {
    let (size, align) = (size_of::<T>(), align_of::<T>());
    let bytes = v.capacity() * size;
    if bytes < MIN_BYTES {
        return;
    }
    CURRENT.with(|c| {
        if let Some(pool) = c.borrow_mut().as_mut() {
            let mut v = ManuallyDrop::new(v);
            let ptr = NonNull::new(v.as_mut_ptr().cast::<u8>()).expect("allocated vector");
            pool.give(Block {
                ptr,
                bytes,
                align,
                freed_in: 0,
            });
        }
    });
}

/// Keeps the storage of a tensor the run no longer needs (see [`give`]); a tensor
/// still shared (an observer kept it) is left to its last holder.
pub(crate) fn recycle(t: Arc<Tensor>) {
    if let Ok(t) = Arc::try_unwrap(t) {
        recycle_tensor(t);
    }
}

/// Keeps the storage of `t` for the current run's pool, if any (see
/// [`crate::Plan::with_buffers`]); frees it otherwise.
pub fn recycle_tensor(t: Tensor) {
    match t.into_data() {
        TensorData::F32(v) => give(v),
        TensorData::U8(v) => give(v),
        TensorData::I8(v) => give(v),
        TensorData::I32(v) => give(v),
        TensorData::I64(v) => give(v),
        TensorData::F16(v) => give(v),
        TensorData::BF16(v) => give(v),
        _ => {}
    }
}

/// `Tensor::from_le_bytes`, with float32 values in a block of the current run's pool
/// where one fits (a run's inputs, converted from the caller's bytes).
pub fn tensor_from_le_bytes(
    dtype: DType,
    shape: Vec<usize>,
    bytes: &[u8],
) -> Result<Tensor, rtq_ir::IrError> {
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if dtype != DType::F32 || count.and_then(|n| n.checked_mul(4)) != Some(bytes.len()) {
        return Tensor::from_le_bytes(dtype, shape, bytes);
    }
    let mut values = take::<f32>(bytes.len() / 4);
    for (v, b) in values.iter_mut().zip(bytes.chunks_exact(4)) {
        v.write(f32::from_le_bytes(b.try_into().expect("4 bytes")));
    }
    // SAFETY: one value was written per 4 bytes, `values.len()` in all.
    let values = unsafe { crate::par::assume_written(values) };
    Ok(Tensor::from_f32(shape, values))
}

/// `t`'s little-endian bytes (a new vector, for the caller to keep); `t`'s storage
/// goes back to the current run's pool ([`recycle_tensor`]).
pub fn into_le_bytes(t: Tensor) -> Vec<u8> {
    let bytes = t.to_le_bytes();
    recycle_tensor(t);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_gets_back_the_blocks_it_gave() {
        let arena = Arena::default();
        let address = {
            let _run = arena.enter();
            let v: Vec<f32> = filled(10_000, 1.5);
            let address = v.as_ptr() as usize;
            give(v);
            // Same size, other type of the same alignment: the same block.
            let w = take::<i32>(10_000);
            assert_eq!(w.as_ptr() as usize, address);
            give(w);
            address
        };
        assert_eq!(arena.kept_bytes(), 40_000);
        let _run = arena.enter();
        // A smaller request still fits; one of under half the size does not.
        let again = take::<f32>(6_000);
        assert_eq!(again.as_ptr() as usize, address);
        assert_eq!(arena.kept_bytes(), 0);
    }

    #[test]
    fn blocks_serve_only_their_alignment_and_sizes_up_to_twice_the_request() {
        let arena = Arena::default();
        let _run = arena.enter();
        give(vec![0u8; 40_000]);
        // Another alignment, then too big a block for a small request.
        let _ = take::<f32>(10_000);
        assert_eq!(take::<u8>(19_000).capacity(), 19_000);
        drop(_run);
        assert_eq!(arena.kept_bytes(), 40_000);
        let _run = arena.enter();
        assert_eq!(take::<u8>(20_000).capacity(), 40_000);
    }

    #[test]
    fn blocks_a_whole_run_left_idle_are_freed() {
        let arena = Arena::default();
        {
            let _run = arena.enter();
            give(vec![0f32; 2_000]);
            give(vec![0f32; 3_000]);
        }
        {
            let _run = arena.enter();
            let used = take::<f32>(3_000);
            give(used);
        }
        assert_eq!(arena.kept_bytes(), 12_000);
    }

    #[test]
    fn without_a_run_nothing_is_kept() {
        give(vec![0f32; 10_000]);
        assert_eq!(take::<f32>(10_000).capacity(), 10_000);
        let arena = Arena::default();
        {
            let _run = arena.enter();
            give(vec![1u8; 100]);
        }
        assert_eq!(arena.kept_bytes(), 0);
    }

    #[test]
    fn nested_runs_keep_their_own_pools() {
        let (outer, inner) = (Arena::default(), Arena::default());
        let _o = outer.enter();
        {
            let _i = inner.enter();
            give(vec![0f32; 2_000]);
        }
        give(vec![0f32; 3_000]);
        drop(_o);
        assert_eq!((outer.kept_bytes(), inner.kept_bytes()), (12_000, 8_000));
    }

    #[test]
    fn concurrent_runs_use_separate_pools() {
        let arena = Arena::default();
        let a = arena.enter();
        let b = std::thread::scope(|s| {
            s.spawn(|| {
                let _b = arena.enter();
                give(vec![0i8; 5_000]);
            })
            .join()
        });
        b.unwrap();
        give(vec![0i8; 6_000]);
        drop(a);
        assert_eq!(arena.idle.lock().unwrap().len(), 2);
        assert_eq!(arena.kept_bytes(), 11_000);
    }
}
