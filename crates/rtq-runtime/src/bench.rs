//! Latency and throughput benchmarking of an [`Engine`], in the manner of trtexec.
//!
//! [`run_benchmark`] warms up, then times inferences until both the minimum number of
//! iterations and the minimum duration are reached. Host latency is the wall time of
//! one [`Engine::infer`] call (for GPU backends: input copies + compute + output
//! copies, trtexec's "Latency"); GPU backends also report device compute time measured
//! with CUDA events (trtexec's "GPU Compute Time").

mod inputs;
mod memory;
mod profile;
mod report;
mod stats;

pub use inputs::{make_inputs, make_inputs_for, resolve_shape, InputFill, InputSpec};
pub use memory::HostMemory;
pub use profile::{LayerProfile, Profile};
pub use report::BenchReport;
pub use stats::{percentile, LatencyStats};

use crate::{Engine, HostTensor, RuntimeError};
use std::time::{Duration, Instant};

/// How long to warm up and measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchOptions {
    /// Minimum warm-up inferences (not measured).
    pub warmup_iterations: u32,
    /// Minimum warm-up time; warm-up runs until both minimums are met.
    pub warmup_time: Duration,
    /// Minimum measured inferences.
    pub iterations: u32,
    /// Minimum measured time; measurement runs until both minimums are met.
    pub min_duration: Duration,
    /// Samples per inference (the batch dimension), for samples/s.
    pub batch_size: usize,
    /// Profiled runs after the timed ones (per-layer times, trtexec's `--dumpProfile`
    /// with `--separateProfileRun`); 0: none.
    pub profile_runs: u32,
}

impl Default for BenchOptions {
    /// trtexec's defaults: 200 ms warm-up, at least 10 iterations and 3 s.
    fn default() -> Self {
        BenchOptions {
            warmup_iterations: 1,
            warmup_time: Duration::from_millis(200),
            iterations: 10,
            min_duration: Duration::from_secs(3),
            batch_size: 1,
            profile_runs: 0,
        }
    }
}

impl BenchOptions {
    /// Checks the options.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        if self.iterations == 0 {
            return Err(RuntimeError::option("iterations", "must be at least 1"));
        }
        if self.batch_size == 0 {
            return Err(RuntimeError::option("batch size", "must be at least 1"));
        }
        Ok(())
    }
}

/// Benchmarks `engine` on `inputs` (see the module docs) and summarizes the timings.
pub fn run_benchmark(
    engine: &Engine,
    inputs: &[HostTensor],
    options: &BenchOptions,
) -> Result<BenchReport, RuntimeError> {
    options.validate()?;

    let warmup_start = Instant::now();
    let mut warmup_iterations = 0u32;
    while warmup_iterations < options.warmup_iterations
        || warmup_start.elapsed() < options.warmup_time
    {
        engine.infer(inputs)?;
        warmup_iterations += 1;
    }
    let warmup_time = warmup_start.elapsed();
    let resident_after_warmup = memory::resident();

    let mut host_ms = Vec::with_capacity(options.iterations as usize);
    let mut device_ms = Vec::with_capacity(options.iterations as usize);
    let start = Instant::now();
    while host_ms.len() < options.iterations as usize || start.elapsed() < options.min_duration {
        let t0 = Instant::now();
        engine.infer(inputs)?;
        host_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        if let Some(ms) = engine.last_device_time_ms() {
            device_ms.push(ms);
        }
    }
    let total = start.elapsed().as_secs_f64();
    let host_memory = resident_after_warmup
        .zip(memory::resident())
        .map(|(warm, run)| HostMemory::of(warm, run));

    let latency_ms =
        LatencyStats::from_samples(&host_ms).ok_or_else(|| RuntimeError::Execution {
            model: engine.source().display().to_string(),
            message: "no latency sample was measured".into(),
        })?;
    let mut profiled = Vec::new();
    for _ in 0..options.profile_runs {
        match engine.profile(inputs)? {
            Some(layers) => profiled.push(layers),
            None => break,
        }
    }
    let throughput = if total > 0.0 {
        host_ms.len() as f64 / total
    } else {
        f64::INFINITY
    };
    Ok(BenchReport {
        model: engine.source().display().to_string(),
        backend: engine.backend_kind(),
        backend_description: engine.description(),
        batch_size: options.batch_size,
        warmup_iterations,
        warmup_time_s: warmup_time.as_secs_f64(),
        iterations: host_ms.len(),
        total_time_s: total,
        throughput_inferences_per_s: throughput,
        throughput_samples_per_s: throughput * options.batch_size as f64,
        latency_ms,
        device_compute_ms: (device_ms.len() == host_ms.len())
            .then(|| LatencyStats::from_samples(&device_ms))
            .flatten(),
        profile: Profile::from_runs(&profiled),
        host_memory,
    })
}
