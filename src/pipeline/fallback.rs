//! Accuracy-targeted fallback: when an INT8 build still misses its target, the fewest
//! quantized nodes (each with its input Q/DQ, as TensorRT fuses them) go back to high
//! precision. Nodes are ranked by their measured sensitivity: the error of the model
//! with that node alone quantized, judged against FP32 on calibration samples (one
//! judged model per node; ties go by the quantization noise of the node's inputs read
//! from the calibration histograms, then graph order). A bisection over "revert the k
//! most sensitive" then finds the smallest k that meets the target on calibration
//! samples, in about log2(nodes) more judged models. Deterministic.

use super::target::error_against_fp32;
use super::{Build, Transformed};
use anyhow::{Context, Result};
use rtq_emit::AccuracyCheck;
use rtq_ir::{Graph, NodeId};
use rtq_passes::quant::{plan_int8, Int8Plan};

impl Build<'_> {
    /// Reverts the fewest quantized nodes that bring the build to its target on
    /// calibration samples, then rebuilds and re-judges it on the held-out files.
    pub(super) fn fall_back(
        &mut self,
        transformed: Transformed,
        check: &mut AccuracyCheck,
    ) -> Result<Transformed> {
        let ranked = self.ranked_nodes(&transformed)?;
        if ranked.is_empty() {
            return Ok(transformed);
        }
        let graph = &transformed.reference.graph;
        check.sensitivity = ranked
            .iter()
            .map(|&(node, error)| (graph.node(node).name.clone(), error))
            .collect();
        self.lap("sensitivity");
        let ranked: Vec<NodeId> = ranked.into_iter().map(|(node, _)| node).collect();
        let (mut passing, mut failing) = (ranked.len(), 0);
        while passing - failing > 1 {
            let k = (passing + failing) / 2;
            let plan = self.plan_without(graph, &ranked[..k])?;
            let margin = self.selection_margin(&transformed, &plan)?;
            check.fallback_trials.push((k, margin));
            if margin >= 0.0 {
                passing = k;
            } else {
                failing = k;
            }
        }
        let reverted = &ranked[..passing];
        let plan = self.plan_without(graph, reverted)?;
        check.fallback = reverted
            .iter()
            .map(|&n| graph.node(n).name.clone())
            .collect();
        let planned = transformed
            .calibrated
            .plan
            .as_ref()
            .map_or(0, |p| p.quantized_nodes.len());
        check.quantized_nodes = (planned, plan.quantized_nodes.len());
        self.lap("fallback");
        let Transformed {
            reference,
            mut calibrated,
            ..
        } = transformed;
        calibrated.plan = Some(plan);
        self.rebuild(reference, calibrated)
    }

    /// The plan's quantized nodes with their sensitivity, most sensitive first.
    fn ranked_nodes(&self, transformed: &Transformed) -> Result<Vec<(NodeId, f64)>> {
        let calibrated = &transformed.calibrated;
        let (Some(plan), Some(result)) = (&calibrated.plan, &calibrated.result) else {
            return Ok(Vec::new());
        };
        let graph = &transformed.reference.graph;
        let noise = result.noise_ratios();
        let mut ranked = Vec::with_capacity(plan.quantized_nodes.len());
        for &node in &plan.quantized_nodes {
            let alone = plan.only(graph, node);
            let report = self.judge_on_calibration(
                transformed,
                &alone,
                &result.ranges,
                &format!("node `{}` alone", graph.node(node).name),
            )?;
            let noisiest = alone
                .activations
                .iter()
                .filter_map(|v| noise.get(v))
                .fold(0.0, |a: f64, &b| a.max(b));
            ranked.push((error_against_fp32(&report), noisiest, node));
        }
        ranked.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(b.1.total_cmp(&a.1))
                .then(a.2.cmp(&b.2))
        });
        Ok(ranked.into_iter().map(|(e, _, node)| (node, e)).collect())
    }

    /// The INT8 plan with `reverted` nodes kept in high precision.
    fn plan_without(&self, graph: &Graph, reverted: &[NodeId]) -> Result<Int8Plan> {
        let mut options = self.int8_options();
        options
            .exclude
            .names
            .extend(reverted.iter().map(|&n| graph.node(n).name.clone()));
        plan_int8(graph, &options).context("planning INT8 quantization with fallback")
    }

    /// How far the model quantized per `plan` is from the target on calibration samples.
    fn selection_margin(&self, transformed: &Transformed, plan: &Int8Plan) -> Result<f64> {
        let ranges = &transformed
            .calibrated
            .result
            .as_ref()
            .expect("an INT8 build has ranges")
            .ranges;
        let report = self.judge_on_calibration(transformed, plan, ranges, "fallback")?;
        Ok(self.opts.accuracy_target.margin(&report))
    }
}
