//! Splitting one tensor's values into chunks processed on rayon's threads.
//!
//! A calibration forward pass produces tensors from a few hundred values to
//! millions; scanning and histogramming the large ones on every core keeps the
//! collectors from dominating calibration time. Chunks are combined in a fixed
//! order, so the result does not depend on the thread count.

use rayon::prelude::*;

/// Values per chunk: large enough that per-chunk set-up is negligible.
pub(crate) const CHUNK: usize = 1 << 15;

/// Slices shorter than this are processed on the calling thread: waking the
/// pool costs more than it saves on them.
const PARALLEL_MIN: usize = 1 << 18;

/// Folds `values` a piece of at most [`CHUNK`] values at a time into accumulators
/// made by `init`, combined with `reduce`; on rayon's threads when `values` is long,
/// where each split of the work gets one accumulator (not one per piece). `values`
/// must not be empty.
///
/// Which pieces share an accumulator depends on rayon's splitting, so `fold` and
/// `reduce` must give the same result for any grouping and order of pieces (exact
/// integer counts and extremes do).
pub(crate) fn fold_reduce<T, I, F, R>(values: &[f32], init: I, fold: F, reduce: R) -> T
where
    T: Send,
    I: Fn() -> T + Sync + Send,
    F: Fn(T, &[f32]) -> T + Sync + Send,
    R: Fn(T, T) -> T + Sync + Send,
{
    if values.len() < PARALLEL_MIN {
        return values.chunks(CHUNK).fold(init(), &fold);
    }
    values
        .par_chunks(CHUNK)
        .fold(&init, &fold)
        .reduce_with(&reduce)
        .expect("at least one chunk")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_match_serial_for_any_length() {
        for len in [
            1,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            5 * CHUNK + 17,
            PARALLEL_MIN + 3,
        ] {
            let values: Vec<f32> = (0..len).map(|i| (i % 7) as f32).collect();
            let (total, pieces) = fold_reduce(
                &values,
                || (0u64, 0usize),
                |(sum, pieces), piece| {
                    assert!(piece.len() <= CHUNK, "piece of {} values", piece.len());
                    (
                        sum + piece.iter().map(|&x| x as u64).sum::<u64>(),
                        pieces + 1,
                    )
                },
                |a, b| (a.0 + b.0, a.1 + b.1),
            );
            let serial: u64 = values.iter().map(|&x| x as u64).sum();
            assert_eq!(total, serial, "length {len}");
            assert_eq!(pieces, len.div_ceil(CHUNK), "length {len}");
        }
    }
}
