//! Timing helper of the ignored timing probes (`cargo test --release -p rtq-exec
//! speed -- --ignored --nocapture`).

use std::time::Instant;

/// The fastest mean time of `f` in milliseconds over 15 batches of `iters` calls: the
/// minimum filters out the noise of other processes on a shared machine.
pub(crate) fn best_ms(iters: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..15)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_secs_f64() * 1e3 / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
}
