//! `rtq bench`: trtexec-style latency and throughput measurement.

use super::engine_args::EngineArgs;
use anyhow::{Context, Result};
use clap::Args;
use rtq_runtime::bench::{make_inputs, run_benchmark, BenchOptions, InputFill, InputSpec};
use rtq_runtime::{Backend, Engine, LoadOptions};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `rtq bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Model: `.onnx` (CPU, or TensorRT built in memory) or `.plan`/`.engine` (TensorRT).
    pub model: PathBuf,
    /// Backend: auto, cpu, cuda, tensorrt.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Extent of a dynamic batch dimension (and the samples per inference).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Minimum warm-up time in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub warmup_ms: u64,
    /// Minimum measured inferences.
    #[arg(long, default_value_t = 10)]
    pub iterations: u32,
    /// Minimum measured time in seconds.
    #[arg(long, default_value_t = 3.0)]
    pub duration: f64,
    /// Fill inputs with zeros instead of seeded random values.
    #[arg(long)]
    pub zeros: bool,
    /// Replay inference through a CUDA graph (TensorRT).
    #[arg(long)]
    pub cuda_graph: bool,
    /// CPU: execute Q/DQ patterns as written (float emulation) instead of integer
    /// kernels, e.g. to measure what the integer kernels gain.
    #[arg(long)]
    pub float_qdq: bool,
    /// After the timed runs, profile every layer over separate runs (CPU backend) and
    /// print the times by op type and the slowest layers (trtexec's --dumpProfile).
    #[arg(long)]
    pub profile: bool,
    /// Profiled runs with --profile.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub profile_runs: u32,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Runs `rtq bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    let backend: Backend = args.backend.parse()?;
    let options = LoadOptions {
        backend,
        device: args.engine.device,
        cuda_graph: args.cuda_graph,
        build: args.engine.build_options(None)?,
        integer_kernels: !args.float_qdq,
    };
    let engine = Engine::load(&args.model, &options)
        .with_context(|| format!("loading {}", args.model.display()))?;
    let shapes = match &args.engine.shapes {
        Some(s) => rtq_runtime::tensorrt::parse_shape_list(s)?
            .into_iter()
            .collect(),
        None => Default::default(),
    };
    let spec = InputSpec {
        shapes,
        batch_size: Some(args.batch),
        fill: if args.zeros {
            InputFill::Zeros
        } else {
            InputFill::Random { seed: 0 }
        },
    };
    let inputs = make_inputs(&engine, &spec)?;
    if !args.duration.is_finite() || args.duration < 0.0 {
        anyhow::bail!("--duration must be a non-negative number of seconds");
    }
    let bench = BenchOptions {
        warmup_iterations: 1,
        warmup_time: Duration::from_millis(args.warmup_ms),
        iterations: args.iterations,
        min_duration: Duration::from_secs_f64(args.duration),
        batch_size: args.batch,
        profile_runs: if args.profile { args.profile_runs } else { 0 },
    };
    let report = run_benchmark(&engine, &inputs, &bench)?;
    if let Some(path) = &args.export_json {
        rtq_emit::write_atomic(path, report.to_json().as_bytes())?;
    }
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}
