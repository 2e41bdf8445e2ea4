//! A candidate model against its reference on sample files (`rtq eval`): the
//! accuracy of every output and, on request, the per-layer diagnosis.

use anyhow::{Context, Result};
use rtq_calib::CalibrationSet;
use rtq_emit::{AccuracyReport, PerLayerReport};
use std::path::Path;

/// What [`compare`] measured.
#[derive(Debug)]
pub struct Comparison {
    /// Agreement of every output with the reference's.
    pub accuracy: AccuracyReport,
    /// Every tensor both models compute, compared (with `per_layer`).
    pub per_layer: Option<PerLayerReport>,
    /// The candidate's precision as its rtq metadata names it, else `candidate`.
    pub variant: String,
    /// The reference's and the candidate's default-domain opsets.
    pub opsets: (i64, i64),
    /// The reference's and the candidate's node counts.
    pub nodes: (usize, usize),
}

impl Comparison {
    /// The accuracy report as JSON, with a `per_layer` member when measured.
    pub fn to_json(&self) -> Result<serde_json::Value> {
        let mut json = serde_json::to_value(&self.accuracy)?;
        if let Some(layers) = &self.per_layer {
            json["per_layer"] = serde_json::to_value(layers)?;
        }
        Ok(json)
    }
}

/// Runs `reference` and `candidate` on the first `samples` files of `set` (all by
/// default) and compares their outputs; with `per_layer`, every tensor both compute.
pub fn compare(
    reference: &Path,
    candidate: &Path,
    set: &CalibrationSet,
    samples: Option<usize>,
    per_layer: bool,
) -> Result<Comparison> {
    let reference_graph = rtq_frontend::load_model(reference)
        .with_context(|| format!("loading {}", reference.display()))?;
    let candidate_graph = rtq_frontend::load_model(candidate)
        .with_context(|| format!("loading {}", candidate.display()))?;
    let files: Vec<usize> = (0..set.len().min(samples.unwrap_or(usize::MAX))).collect();
    let variant = candidate_graph
        .metadata
        .iter()
        .find(|(k, _)| k == "rtq.precision")
        .map_or("candidate".to_string(), |(_, v)| v.clone());
    let accuracy =
        crate::accuracy::evaluate(&reference_graph, &candidate_graph, set, &files, &variant)?;
    let per_layer = per_layer
        .then(|| layers(&reference_graph, &candidate_graph, set, &files))
        .transpose()?;
    Ok(Comparison {
        accuracy,
        per_layer,
        variant,
        opsets: (reference_graph.opset, candidate_graph.opset),
        nodes: (reference_graph.node_count(), candidate_graph.node_count()),
    })
}

/// The per-layer comparison; a reference the candidate was built from by rtq is
/// optimised first, as rtq did, so that their tensors line up.
fn layers(
    reference: &rtq_ir::Graph,
    candidate: &rtq_ir::Graph,
    set: &CalibrationSet,
    files: &[usize],
) -> Result<PerLayerReport> {
    let built_by_rtq = candidate.metadata.iter().any(|(k, _)| k == "rtq.version");
    let mut reference = reference.clone();
    if built_by_rtq {
        rtq_passes::optimize(&mut reference, &rtq_passes::OptimizeOptions::default())
            .context("optimising the reference as rtq did")?;
    }
    crate::diagnose::per_layer(&reference, candidate, set, files)
}
