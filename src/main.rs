//! The `rtq` command line.

mod commands;

/// Executor buffers come and go at every node; mimalloc (with purging off, see
/// [`keep_freed_memory`]) reuses freed pages instead of returning them to the OS,
/// which saves a page fault per page per node.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (the sys crate names no
/// constant for it; mimalloc keeps option numbers stable and appends new ones).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Never hand freed memory back to the OS during a run. A calibration pass frees and
/// reallocates the same activation sizes for every sample; purging them after the
/// default delay made a third of ResNet-50's calibration time page faults. Peak
/// memory is unchanged (freed blocks are reused, not accumulated).
fn keep_freed_memory() {
    // SAFETY: plain option setter, called before any other thread exists.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

use clap::{Parser, Subcommand};
use std::process::ExitCode;

const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("RTQ_GIT_REVISION"),
    ", features: ",
    env!("RTQ_FEATURES"),
    ")"
);

/// rtq: ONNX -> optimized FP16 / INT8 (explicit Q/DQ) ONNX, TensorRT calibration cache and engine.
#[derive(Debug, Parser)]
#[command(name = "rtq", version, long_version = LONG_VERSION, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Optimize a model and emit FP32/FP16/INT8 ONNX, calibration cache and report.
    Compile(Box<commands::compile::CompileArgs>),
    /// Summarise a model: interface, ops, weight bytes by precision.
    Inspect(commands::inspect::InspectArgs),
    /// Compare a model's outputs against a reference model on sample data.
    Eval(commands::eval::EvalArgs),
    /// Measure latency and throughput like trtexec (CPU, or CUDA/TensorRT when built in).
    Bench(commands::bench::BenchArgs),
    /// Merge or summarise saved calibration statistics (`rtq compile --save-stats`).
    #[command(subcommand)]
    Stats(commands::stats::StatsCommand),
}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compile(args) => commands::compile::run(*args),
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Stats(command) => commands::stats::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", rtq::error_message(&err));
            ExitCode::FAILURE
        }
    }
}
