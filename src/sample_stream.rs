//! Streaming calibration samples through the FP32 graph on several forward workers
//! at once, each folding what it observes into a state of its own.
//!
//! Calibration is a long series of independent forward passes. Running them one at a
//! time with every kernel split over all cores pays a thread hand-off per node and
//! waits, at every node, for the slowest thread; on a shared VM that straggler is
//! often a core the hypervisor gave to another guest for a moment. Running one sample
//! per core avoids both (ResNet-50 at 224x224 on two cores: 64 vs 93 ms per sample on
//! two threads against one, so two samples at once on one thread each finish sooner).
//!
//! Each worker observes the tensors it computes while they are still in its caches,
//! into its own state (range collectors), and frees them into its own buffer pool at
//! once: memory is one sample's activations per worker, whatever the number of
//! samples. The caller combines the workers' states; calibration statistics are exact
//! integer counts and extremes, so the combination does not depend on which worker
//! saw which file.

use crate::progress::ProgressTask;
use anyhow::{Context, Result};
use rtq_calib::{CalibrationSet, InputSpec};
use rtq_ir::{Tensor, ValueId};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// At most this many forward workers: each holds one sample's activations, so more
/// would trade memory for little (each still splits its kernels over
/// `threads / workers` threads).
const MAX_WORKERS: usize = 4;

/// What each worker's state observes: `(state, file, value, tensor)` for every value
/// the executor computes (and every fed input), `file` indexing the calibration set.
pub(crate) type Observe<'a, S> =
    &'a (dyn Fn(&mut S, usize, ValueId, &Arc<Tensor>) -> Result<()> + Sync);

/// How many forward workers to run for `files` files on `threads` threads.
fn workers_for(files: usize, threads: usize) -> usize {
    threads.min(files).clamp(1, MAX_WORKERS)
}

/// The earliest failure so far, by position in the list of files.
struct FirstFailure {
    /// Position of the failed file (`usize::MAX`: none yet), for lock-free checks.
    position: AtomicUsize,
    error: Mutex<Option<anyhow::Error>>,
}

impl FirstFailure {
    /// Whether a file before `position` failed: its worker need not run it.
    fn before(&self, position: usize) -> bool {
        self.position.load(Ordering::Acquire) < position
    }

    /// Keeps `error` of the file at `position` if it is the earliest so far.
    fn record(&self, position: usize, error: anyhow::Error) {
        let mut kept = self.error.lock().unwrap_or_else(PoisonError::into_inner);
        if position < self.position.load(Ordering::Acquire) {
            *kept = Some(error);
            self.position.store(position, Ordering::Release);
        }
    }
}

/// Runs every sample of `files` (indices into `set`) through `plan`, handing each
/// computed value to `observe` with the state of the worker that computed it. Returns
/// the workers' states (in worker order) and the number of samples.
///
/// The first file runs alone with every thread, so that the work a plan derives from
/// its constants on a first run (packed and transformed weights) is done once, by
/// whichever thread reaches each node, instead of by one worker while the others wait
/// for it at the same node. The other files run on up to
/// [`MAX_WORKERS`] workers (as many as rayon's pool has threads, and files), each on a
/// rayon pool of its own holding its share of the threads and taking the next file
/// not yet taken when it is free (a worker slowed down by a busy core takes fewer).
/// If files fail (loading, running, observing, or a cancelled `bar`), every file
/// before the first failing one is still run and that file's error is returned: the
/// same error whatever the number of workers.
pub(crate) fn stream_samples<S: Send>(
    plan: &rtq_exec::Plan,
    set: &CalibrationSet,
    files: &[usize],
    specs: &[InputSpec],
    new_state: &(dyn Fn() -> S + Sync),
    observe: Observe<'_, S>,
    bar: &ProgressTask,
) -> Result<(Vec<S>, usize)> {
    let threads = rayon::current_num_threads().max(1);
    let workers = workers_for(files.len(), threads);
    let failure = FirstFailure {
        position: AtomicUsize::new(usize::MAX),
        error: Mutex::new(None),
    };
    let next = AtomicUsize::new(0);
    let worker = || Worker {
        plan,
        set,
        files,
        specs,
        observe,
        bar,
        failure: &failure,
        next: &next,
    };
    // The first file, on the caller's pool; its state becomes worker 0's.
    let mut first = new_state();
    let mut first_samples = 0;
    if workers > 1 {
        next.store(1, Ordering::Relaxed);
        first_samples = worker().run_file(&mut first, 0)?;
    }
    let mut first = Some((first, first_samples));
    let outcomes: Vec<Result<(S, usize)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|index| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads / workers + usize::from(index < threads % workers))
                    .thread_name(move |i| format!("rtq-calib-{index}.{i}"))
                    .build()
                    .context("starting the calibration threads");
                let worker = worker();
                let (state, samples) = match index {
                    0 => first.take().expect("worker 0 starts once"),
                    _ => (new_state(), 0),
                };
                scope.spawn(move || -> Result<(S, usize)> {
                    // On one of its pool's threads, the kernels' parallel loops start
                    // as local work instead of being injected into the pool and
                    // waited for.
                    let (state, more) = pool?.install(|| worker.run(state));
                    Ok((state, samples + more))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut states = Vec::with_capacity(workers);
    let mut samples = 0;
    for outcome in outcomes {
        let (state, count) = outcome?;
        states.push(state);
        samples += count;
    }
    let error = failure.error.into_inner();
    if let Some(error) = error.unwrap_or_else(PoisonError::into_inner) {
        return Err(error);
    }
    Ok((states, samples))
}

/// One forward worker of [`stream_samples`].
struct Worker<'a, S> {
    plan: &'a rtq_exec::Plan,
    set: &'a CalibrationSet,
    files: &'a [usize],
    specs: &'a [InputSpec],
    observe: Observe<'a, S>,
    bar: &'a ProgressTask,
    failure: &'a FirstFailure,
    /// Position of the next file no worker has taken.
    next: &'a AtomicUsize,
}

impl<S> Worker<'_, S> {
    /// Runs files into `state`, taking the next untaken one until none is left or a
    /// file before it failed; returns the state and the samples run.
    fn run(&self, mut state: S) -> (S, usize) {
        let mut samples = 0;
        loop {
            let position = self.next.fetch_add(1, Ordering::Relaxed);
            if position >= self.files.len() || self.failure.before(position) {
                break;
            }
            match self.run_file(&mut state, position) {
                Ok(count) => samples += count,
                Err(error) => {
                    self.failure.record(position, error);
                    break;
                }
            }
        }
        (state, samples)
    }

    /// Runs the samples of the file at `position`; returns how many it held.
    fn run_file(&self, state: &mut S, position: usize) -> Result<usize> {
        let file = self.files[position];
        let batch = self.set.load(file, self.specs)?;
        let samples = batch.len();
        for sample in batch {
            let mut failed = None;
            self.plan
                .run_observed(&sample, &mut |value, tensor| {
                    if failed.is_none() {
                        failed = (self.observe)(state, file, value, tensor).err();
                    }
                })
                .with_context(|| {
                    format!(
                        "running calibration sample from {}",
                        self.set.files()[file].display()
                    )
                })?;
            if let Some(error) = failed {
                return Err(error);
            }
        }
        self.bar.inc()?;
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_follow_threads_within_bounds() {
        assert_eq!(workers_for(64, 1), 1);
        assert_eq!(workers_for(64, 2), 2);
        assert_eq!(workers_for(64, 64), MAX_WORKERS);
        assert_eq!(workers_for(1, 8), 1);
        assert_eq!(workers_for(0, 8), 1);
    }

    #[test]
    fn the_earliest_failure_wins_whatever_the_order() {
        let failure = FirstFailure {
            position: AtomicUsize::new(usize::MAX),
            error: Mutex::new(None),
        };
        assert!(!failure.before(1000));
        failure.record(5, anyhow::anyhow!("file 5"));
        failure.record(9, anyhow::anyhow!("file 9"));
        failure.record(2, anyhow::anyhow!("file 2"));
        assert!(failure.before(3) && !failure.before(2));
        let kept = failure.error.into_inner().unwrap().unwrap();
        assert_eq!(kept.to_string(), "file 2");
    }
}
