//! `rtq bench` (wired to rtq-runtime's benchmark).

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `rtq bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Model (.onnx for the CPU backend, .plan for TensorRT).
    pub model: PathBuf,
}

/// Runs `rtq bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    anyhow::bail!("{}: rtq bench is not wired yet", args.model.display())
}
