//! Per-node memory of work derived from constant inputs (for example a convolution's
//! transformed weights), kept by a [`crate::Plan`] across runs.

use std::any::Any;
use std::ops::Deref;
use std::sync::OnceLock;

/// A node's memo slot: filled by its kernel on the first run, read on later ones.
///
/// A plan hands a memo to a kernel only when every input but the first is a constant
/// of the plan, so whatever the kernel derives from those inputs stays valid, or when
/// the node has control-flow bodies, whose plans are what its kernel keeps there.
pub(crate) type Memo = OnceLock<Box<dyn Any + Send + Sync>>;

/// A value derived from a node's constant inputs: shared from the plan's memo, or
/// computed for this evaluation alone (no memo, as in constant folding).
pub(crate) enum Derived<'a, T> {
    /// Held by the plan.
    Shared(&'a T),
    /// Computed for this call.
    Owned(T),
}

impl<T> Deref for Derived<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            Derived::Shared(t) => t,
            Derived::Owned(t) => t,
        }
    }
}

/// The value `make` computes, taken from `memo` when it already holds one of type `T`
/// and stored there otherwise.
pub(crate) fn derived<'a, T: Any + Send + Sync>(
    memo: Option<&'a Memo>,
    make: impl Fn() -> T,
) -> Derived<'a, T> {
    let Some(memo) = memo else {
        return Derived::Owned(make());
    };
    match memo.get_or_init(|| Box::new(make())).downcast_ref::<T>() {
        Some(shared) => Derived::Shared(shared),
        // A kernel keeps one type in its memo; another type is a kernel bug, and
        // recomputing is still correct.
        None => Derived::Owned(make()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn computed_once_per_memo_and_every_time_without_one() {
        let calls = Cell::new(0);
        let make = || {
            calls.set(calls.get() + 1);
            vec![1.0f32, 2.0]
        };
        let memo = Memo::new();
        assert!(matches!(derived(Some(&memo), make), Derived::Shared(_)));
        assert_eq!(*derived(Some(&memo), make), vec![1.0, 2.0]);
        assert_eq!(calls.get(), 1);
        assert!(matches!(derived(None, make), Derived::Owned(_)));
        assert_eq!(calls.get(), 2);
        // Another type in the memo is recomputed, not misread.
        assert_eq!(*derived(Some(&memo), || 7u8), 7);
    }
}
