//! The `rtq` command line.

mod commands;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compile(args) => commands::compile::run(*args),
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Bench(args) => commands::bench::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}
