//! `rtq eval`: compares a candidate model against a reference on sample files.

use super::data_args::DataArgs;
use anyhow::{Context, Result};
use clap::Args;
use rtq_calib::CalibrationSet;
use std::path::PathBuf;

/// Arguments of `rtq eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Reference model (usually the FP32 source).
    pub reference: PathBuf,
    /// Candidate model (an FP16/INT8 build).
    pub candidate: PathBuf,
    /// Directory of sample files (.npy, .npz, .png, .jpg).
    #[arg(long, value_name = "DIR")]
    pub data: PathBuf,
    /// Use at most this many files.
    #[arg(long, value_name = "N")]
    pub samples: Option<usize>,
    #[command(flatten)]
    pub data_args: DataArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also compare every tensor both models compute: cumulative and local (own Q/DQ
    /// only) error, the first diverging tensor and the most sensitive ones.
    #[arg(long)]
    pub per_layer: bool,
}

/// Runs `rtq eval`.
pub fn run(args: EvalArgs) -> Result<()> {
    let set = CalibrationSet::open(&args.data, &args.data_args.to_options()?)
        .with_context(|| format!("reading samples in {}", args.data.display()))?;
    let comparison = rtq::comparison::compare(
        &args.reference,
        &args.candidate,
        &set,
        args.samples,
        args.per_layer,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&comparison.to_json()?)?);
        return Ok(());
    }
    let wrapper = rtq_emit::CompileReport {
        model: args.candidate.display().to_string(),
        rtq_version: env!("CARGO_PKG_VERSION").into(),
        precision: comparison.variant.clone(),
        source_opset: comparison.opsets.0,
        output_opset: comparison.opsets.1,
        graph: rtq_emit::GraphSummary {
            nodes_in: comparison.nodes.0,
            nodes_out: comparison.nodes.1,
            ..Default::default()
        },
        accuracy: vec![comparison.accuracy],
        ..Default::default()
    };
    print!("{}", wrapper.render_text(0));
    if let Some(layers) = &comparison.per_layer {
        print!("\n  per-layer comparison:\n{}", layers.render_text(60));
    }
    Ok(())
}
