//! Accuracy-targeted fallback: when an INT8 build still misses its target, the fewest
//! quantized nodes (each with its input Q/DQ, as TensorRT fuses them) go back to high
//! precision. Nodes are ranked by the quantization noise of their activation inputs
//! relative to the signal, read from the calibration histograms (no forward pass);
//! a bisection over "revert the k noisiest" finds the smallest k that meets the target
//! on calibration samples, in about log2(nodes) judged models. Deterministic: ties go
//! by graph order.

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
        let ranked = self.ranked_nodes(&transformed);
        if ranked.is_empty() {
            return Ok(transformed);
        }
        let graph = &transformed.reference.graph;
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

    /// The plan's quantized nodes, noisiest input first (graph order on ties).
    fn ranked_nodes(&self, transformed: &Transformed) -> Vec<NodeId> {
        let calibrated = &transformed.calibrated;
        let (Some(plan), Some(result)) = (&calibrated.plan, &calibrated.result) else {
            return Vec::new();
        };
        let graph = &transformed.reference.graph;
        let noise = result.noise_ratios();
        let mut ranked: Vec<(f64, NodeId)> = plan
            .quantized_nodes
            .iter()
            .map(|&node| {
                let worst = plan
                    .edges
                    .iter()
                    .filter(|(n, _)| *n == node)
                    .filter_map(|&(n, slot)| noise.get(&graph.node(n).input(slot)?))
                    .fold(0.0, |a: f64, &b| a.max(b));
                (worst, node)
            })
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        ranked.into_iter().map(|(_, node)| node).collect()
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
