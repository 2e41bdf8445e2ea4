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

/// `map` over pieces of `values` of at most [`CHUNK`] values, combined in order
/// with `merge`; on rayon's threads when `values` is long. `values` must not be
/// empty.
pub(crate) fn map_reduce<T, M, R>(values: &[f32], map: M, merge: R) -> T
where
    T: Send,
    M: Fn(&[f32]) -> T + Sync,
    R: Fn(T, T) -> T + Sync,
{
    if values.len() < PARALLEL_MIN {
        return values
            .chunks(CHUNK)
            .map(&map)
            .reduce(&merge)
            .expect("at least one chunk");
    }
    values
        .par_chunks(CHUNK)
        .map(&map)
        .reduce_with(&merge)
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
            let total: f64 =
                map_reduce(&values, |c| c.iter().map(|&x| x as f64).sum(), |a, b| a + b);
            let serial: f64 = values.iter().map(|&x| x as f64).sum();
            assert_eq!(total, serial, "length {len}");
        }
    }
}
