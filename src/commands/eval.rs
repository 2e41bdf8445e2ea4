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
    let reference = rtq_frontend::load_model(&args.reference)
        .with_context(|| format!("loading {}", args.reference.display()))?;
    let candidate = rtq_frontend::load_model(&args.candidate)
        .with_context(|| format!("loading {}", args.candidate.display()))?;
    let set = CalibrationSet::open(&args.data, &args.data_args.to_options()?)
        .with_context(|| format!("reading samples in {}", args.data.display()))?;
    let files: Vec<usize> = (0..set.len().min(args.samples.unwrap_or(usize::MAX))).collect();
    let variant = candidate
        .metadata
        .iter()
        .find(|(k, _)| k == "rtq.precision")
        .map_or("candidate".to_string(), |(_, v)| v.clone());
    let report = rtq::pipeline::evaluate(&reference, &candidate, &set, &files, &variant)?;
    let per_layer = args
        .per_layer
        .then(|| per_layer(&reference, &candidate, &set, &files))
        .transpose()?;
    if args.json {
        let mut json = serde_json::to_value(&report)?;
        if let Some(layers) = &per_layer {
            json["per_layer"] = serde_json::to_value(layers)?;
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let wrapper = rtq_emit::CompileReport {
            accuracy: vec![report],
            model: args.candidate.display().to_string(),
            rtq_version: env!("CARGO_PKG_VERSION").into(),
            precision: variant,
            source_opset: reference.opset,
            output_opset: candidate.opset,
            graph: rtq_emit::GraphSummary {
                nodes_in: reference.node_count(),
                nodes_out: candidate.node_count(),
                ..Default::default()
            },
            ..Default::default()
        };
        print!("{}", wrapper.render_text(0));
        if let Some(layers) = &per_layer {
            print!("\n  per-layer comparison:\n{}", layers.render_text(60));
        }
    }
    Ok(())
}

/// The per-layer comparison. A candidate rtq built computes the tensors of the
/// *optimised* reference (folded BatchNorms keep the convolution's name), so the
/// reference goes through the same optimisation passes first.
fn per_layer(
    reference: &rtq_ir::Graph,
    candidate: &rtq_ir::Graph,
    set: &CalibrationSet,
    files: &[usize],
) -> Result<rtq_emit::PerLayerReport> {
    let built_by_rtq = candidate.metadata.iter().any(|(k, _)| k == "rtq.version");
    let mut reference = reference.clone();
    if built_by_rtq {
        rtq_passes::optimize(&mut reference, &rtq_passes::OptimizeOptions::default())
            .context("optimising the reference as rtq did")?;
    }
    rtq::diagnose::per_layer(&reference, candidate, set, files)
}
