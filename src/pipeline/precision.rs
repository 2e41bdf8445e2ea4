//! The precision stage: INT8 Q/DQ insertion and FP16 conversion, run as passes (so
//! `--dump-ir`, `--verify-each`, `--stop-after <pass>` and per-pass statistics apply),
//! then shape inference and verification of the result.

use super::calibration::Int4Search;
use super::passes::{run_passes, Iterations};
use super::{Build, Calibrated, Flow, Int4Method, Optimized, Stage};
use anyhow::{Context, Result};
use rtq_calib::RangeStats;
use rtq_emit::QuantSummary;
use rtq_ir::{DType, Graph, NodeId, ValueId};
use rtq_passes::quant::{
    plan_int4, weighted_ops_in_bodies, BodiesSummary, BodyRanges, Fp16Options, Fp16Pass,
    Int4Options, Int4Plan, Int4Tuning, Int4WeightsPass, Int8BodiesPass, Int8QdqPass,
};
use std::collections::HashMap;
use std::sync::Arc;

/// The warning about weighted ops left in float inside bodies, after the counts.
const BODIES_KEPT_IN_FLOAT: &str =
    "Conv/ConvTranspose/Gemm/MatMul node(s) inside If/Loop/Scan bodies are kept in float";

/// At most this many calibration files feed the AWQ search.
const AWQ_FILES: usize = 16;
/// At most this many calibration files feed GPTQ's second moments.
const GPTQ_FILES: usize = 128;
use rtq_passes::{InferShapes, Pass};

/// The model in its target precision, with the FP32 reference it came from.
pub struct Transformed {
    /// The FP32 (optimised) graph.
    pub reference: Optimized,
    /// The graph in the build's precision.
    pub graph: Graph,
    /// The calibration data and what was observed on it.
    pub calibrated: Calibrated,
}

impl Build<'_> {
    /// Applies the build's precision transforms to a copy of the optimised graph.
    pub fn transform(
        &mut self,
        optimized: Optimized,
        calibrated: Calibrated,
    ) -> Result<Flow<Transformed>> {
        let precision = self.opts.precision();
        let mut calibrated = calibrated;
        let no_tuning = HashMap::new();
        let int4_plan = match precision.int4_weights {
            true => Some(self.plan_int4(&optimized.graph, &calibrated.int4_reverted)?),
            false => None,
        };
        let int4_search = match &int4_plan {
            Some(_) => Some(self.int4_search(&optimized.graph, &mut calibrated)?),
            None => None,
        };
        let mut graph = optimized.graph.clone();
        let observed = calibrated.result.as_ref().map_or(&[][..], |r| &r.stats[..]);
        let mut int8 = match (&calibrated.plan, &calibrated.result) {
            (Some(plan), Some(result)) => Some(Int8QdqPass::new(plan, &result.ranges)),
            _ => None,
        };
        let mut fp16 = precision
            .has_half()
            .then(|| Fp16Pass::new(self.fp16_options(observed)));
        let (int4_tuning, awq_layers) = match &int4_search {
            Some(found) => (&found.0, &found.1[..]),
            None => (&no_tuning, &[][..]),
        };
        let mut int4 = int4_plan
            .as_ref()
            .map(|plan| Int4WeightsPass::new(plan, self.int4_options(), int4_tuning));
        let body_ranges = match int8 {
            Some(_) => self.body_ranges(&calibrated)?,
            None => None,
        };
        let mut bodies_pass = body_ranges.as_ref().map(|ranges| {
            Int8BodiesPass::new(ranges, self.body_options(&calibrated.body_reverted))
        });
        let mut passes: Vec<Box<dyn Pass + '_>> = Vec::new();
        if let Some(pass) = int8.as_mut() {
            passes.push(Box::new(pass));
        }
        if let Some(pass) = bodies_pass.as_mut() {
            passes.push(Box::new(pass));
        }
        if let Some(pass) = int4.as_mut() {
            passes.push(Box::new(pass));
        }
        if let Some(pass) = fp16.as_mut() {
            passes.push(Box::new(pass));
        }
        passes.push(Box::new(InferShapes));
        let stats = run_passes(&mut graph, passes, Iterations::Once, self.opts)
            .with_context(|| format!("converting to {}", precision.name()))?;
        self.report.passes["precision"] = serde_json::to_value(&stats)?;
        let last_ran = stats.stopped_after.clone();
        if let (Some(pass), Some(result)) = (int8.as_ref(), calibrated.result.as_ref()) {
            let summary = pass.summary().expect("the INT8 pass runs first");
            let bodies: Option<BodiesSummary> = bodies_pass
                .as_ref()
                .and_then(Int8BodiesPass::summary)
                .cloned();
            let in_bodies = |f: fn(&rtq_passes::quant::BodyQuantSummary) -> usize| {
                bodies.as_ref().map_or(0, |b| b.bodies.iter().map(f).sum())
            };
            self.report.quantization = Some(QuantSummary {
                grid: precision.grid().unwrap_or_default().name().to_string(),
                method: calibrated.method.name().to_string(),
                samples: result.samples,
                quantized_nodes: summary.quantized_nodes + in_bodies(|b| b.quantized_nodes.len()),
                activation_qdq: summary.activation_qdq + in_bodies(|b| b.activation_qdq),
                weight_qdq: summary.weight_qdq + in_bodies(|b| b.weight_qdq),
                int8_mac_share: calibrated
                    .plan
                    .as_ref()
                    .and_then(|plan| int8_mac_share(&optimized.graph, plan)),
                skipped: summary.skipped.clone(),
            });
            self.report.precision = precision.grid().unwrap_or_default().name().into();
            let in_bodies = weighted_ops_in_bodies(&optimized.graph);
            let quantized = bodies.as_ref().map_or(0, |b| b.quantized_nodes());
            if in_bodies > quantized {
                let why = bodies
                    .as_ref()
                    .and_then(|b| b.bodies.iter().flat_map(|b| &b.skipped).next())
                    .map_or(
                        "no calibration data reached them".to_string(),
                        |(node, why)| format!("e.g. `{node}`: {why}"),
                    );
                // A rebuild (method search, fallback) says it again, up to date.
                self.report
                    .warnings
                    .retain(|w| !w.contains(BODIES_KEPT_IN_FLOAT));
                self.report.warnings.push(format!(
                    "{} of the {in_bodies} {BODIES_KEPT_IN_FLOAT} ({why})",
                    in_bodies - quantized
                ));
            }
            if let Some(bodies) = bodies {
                self.report.passes["qdq_in_bodies"] = serde_json::to_value(bodies)?;
            }
        }
        if let Some(summary) = int4.as_ref().and_then(Int4WeightsPass::summary) {
            let mut json = serde_json::to_value(summary)?;
            json["method"] = match (awq_layers.is_empty(), self.int4_method()) {
                (true, _) => "round-to-nearest".into(),
                (false, Int4Method::Gptq) => {
                    "gptq (awq's input-channel scales and clip ratios, then error-compensating \
                     rounding)"
                        .into()
                }
                (false, _) => "awq (input-channel scales and clip ratios)".into(),
            };
            // The layers the build stores in INT4 (the fallback's are in high precision).
            let stored: Vec<&crate::awq::AwqLayer> = awq_layers
                .iter()
                .filter(|l| summary.layers.iter().any(|s| s.node == l.node))
                .collect();
            json["awq"] = serde_json::to_value(&stored)?;
            self.report.passes["int4_weights"] = json;
            self.report.precision = precision.name();
        }
        if let Some(summary) = fp16.as_ref().and_then(Fp16Pass::summary) {
            self.report.passes["fp16"] = serde_json::to_value(summary)?;
            self.report.precision = precision.name();
        }
        self.lap("quantize");
        if self.opts.stops_after(Stage::Quantize) || last_ran.is_some() {
            self.report.graph.nodes_out = graph.node_count();
            let suffix = match last_ran.as_deref() {
                Some(Int8QdqPass::NAME) => "_int8".to_string(),
                Some(Int8QdqPass::FP8_NAME) => "_fp8".to_string(),
                Some(Int4WeightsPass::NAME) => "_int4w".to_string(),
                _ => precision.file_suffix(),
            };
            let files = std::mem::take(&mut self.files);
            return self
                .stop(&graph, &suffix, files)
                .map(|out| Flow::Stop(Box::new(out)));
        }
        rtq_ir::verify(&graph).context("verifying the final graph")?;
        Ok(Flow::Next(Transformed {
            reference: optimized,
            graph,
            calibrated,
        }))
    }

    /// The ranges observed inside control-flow bodies, as the build's method picks
    /// them (its first method where ranges were chosen per tensor); `None` when no
    /// body holding a weighted op ran on the calibration data.
    pub(super) fn body_ranges(
        &self,
        calibrated: &Calibrated,
    ) -> Result<Option<std::sync::Arc<BodyRanges>>> {
        let Some(bodies) = calibrated.bodies.as_ref().filter(|b| !b.is_empty()) else {
            return Ok(None);
        };
        let method = match calibrated.method {
            super::calibration::RangeSource::Method(method) => method,
            _ => self.opts.first_method(),
        };
        Ok(Some(bodies.ranges(method)?))
    }

    /// The Q/DQ options inside bodies: the build's, with `reverted` body nodes kept in
    /// float.
    pub(super) fn body_options(&self, reverted: &[String]) -> rtq_passes::quant::Int8Options {
        let mut options = self.int8_options();
        options.exclude.names.extend(reverted.iter().cloned());
        options
    }

    /// The INT4 weight-only transform's options: the CLI's block size and exclusions,
    /// scales exact in the build's half type.
    pub(super) fn int4_options(&self) -> Int4Options {
        Int4Options {
            block_size: self.opts.int4_block_size,
            exclude: self.opts.int8_opts.exclude.clone(),
            scale_format: self.scale_format(),
        }
    }

    /// Which MatMul/Gemm weights become INT4, but for the `reverted` nodes.
    pub(super) fn plan_int4(&self, graph: &Graph, reverted: &[String]) -> Result<Int4Plan> {
        let mut options = self.int4_options();
        options.exclude.names.extend(reverted.iter().cloned());
        plan_int4(graph, &options).context("planning INT4 weights")
    }

    /// AWQ/GPTQ's choices for every INT4 weight of `graph`, searched at the build's
    /// first transform and kept in `calibrated` for its rebuilds.
    pub(super) fn int4_search(
        &mut self,
        graph: &Graph,
        calibrated: &mut Calibrated,
    ) -> Result<Arc<Int4Search>> {
        if let Some(found) = &calibrated.int4_tuning {
            return Ok(Arc::clone(found));
        }
        let plan = self.plan_int4(graph, &[])?;
        let found = Arc::new(self.tune_int4(graph, &plan, calibrated)?);
        calibrated.int4_tuning = Some(Arc::clone(&found));
        Ok(found)
    }

    /// The INT4 method: the user's, or GPTQ (which keeps AWQ's rounding on the layers
    /// where it does not lower the output error, or sees too few activation rows).
    fn int4_method(&self) -> Int4Method {
        self.opts.int4_method.unwrap_or(Int4Method::Gptq)
    }

    /// AWQ's per-node input scales and clip ratios, measured on the calibration files,
    /// and with `--int4-method gptq` GPTQ's values (none: round to nearest, without data
    /// or with `--int4-method rtn`).
    fn tune_int4(
        &mut self,
        graph: &Graph,
        plan: &Int4Plan,
        calibrated: &Calibrated,
    ) -> Result<(HashMap<NodeId, Int4Tuning>, Vec<crate::awq::AwqLayer>)> {
        let Some(set) = calibrated.set.as_ref() else {
            return Ok((HashMap::new(), Vec::new()));
        };
        let method = self.int4_method();
        if method == Int4Method::Rtn || calibrated.calib_files.is_empty() {
            return Ok((HashMap::new(), Vec::new()));
        }
        let files = &calibrated.calib_files[..calibrated.calib_files.len().min(AWQ_FILES)];
        // GPTQ's H = X^T X is K x K whatever the rows: it takes every calibration file
        // (up to GPTQ_FILES), since with fewer rows than input channels it is singular
        // and the rounding fits the calibration rows rather than the layer.
        let hessian_files = &calibrated.calib_files[..calibrated.calib_files.len().min(GPTQ_FILES)];
        let found = crate::awq::search(
            graph,
            plan,
            self.opts.int4_block_size,
            self.scale_format(),
            set,
            files,
            (method == Int4Method::Gptq).then_some(hessian_files),
        )
        .context("AWQ search for INT4 weights")?;
        self.lap(method.name());
        Ok(found)
    }

    /// The FP16 transform's options: the CLI's exclusions and interface choice, the
    /// largest |x| each activation reached on the calibration data (empty when none ran)
    /// and whether Q/DQ go to FP16 too (mixed INT8/FP16 builds).
    pub(super) fn fp16_options(&self, observed: &[(ValueId, RangeStats)]) -> Fp16Options {
        Fp16Options {
            exclude: self.opts.fp16_exclude.clone(),
            keep_io_types: self.opts.fp16_keep_io,
            observed_absmax: observed.iter().map(|(v, s)| (*v, s.absmax)).collect(),
            half_qdq: self.opts.precision().is_quantized() || self.opts.int4_weights,
            half: self.opts.precision().half.map_or(DType::F16, |h| h.dtype()),
            ..Default::default()
        }
    }
}

/// The share of the weighted ops' multiply-accumulates that `plan` quantizes; `None`
/// where the graph has none with known shapes.
fn int8_mac_share(graph: &Graph, plan: &rtq_passes::quant::Int8Plan) -> Option<f64> {
    let quantized: std::collections::HashSet<_> = plan.quantized_nodes.iter().collect();
    let (mut total, mut int8) = (0u64, 0u64);
    for (id, _) in graph.nodes() {
        if let Some(macs) = rtq_passes::node_macs(graph, id) {
            total += macs;
            if quantized.contains(&id) {
                int8 += macs;
            }
        }
    }
    (total > 0).then(|| int8 as f64 / total as f64)
}
