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

/// What the fallback may revert: a quantized node of the top graph, or one inside a
/// control-flow body (by name: the bodies are planned again on every build).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Candidate {
    Top(NodeId),
    Body(String),
}

/// The smallest `k` in `0..=n` for which reverting the `k` most sensitive candidates
/// meets the target (`margin(k) >= 0`), by bisection, assuming `k = n` does; every
/// judged `(k, margin)` is recorded in `trials`.
pub(super) fn fewest_to_revert(
    n: usize,
    trials: &mut Vec<(usize, f64)>,
    mut margin: impl FnMut(usize) -> Result<f64>,
) -> Result<usize> {
    let (mut passing, mut failing) = (n, 0);
    while passing - failing > 1 {
        let k = (passing + failing) / 2;
        let m = margin(k)?;
        trials.push((k, m));
        if m >= 0.0 {
            passing = k;
        } else {
            failing = k;
        }
    }
    Ok(passing)
}

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
        let name = |c: &Candidate| match c {
            Candidate::Top(node) => graph.node(*node).name.clone(),
            Candidate::Body(name) => name.clone(),
        };
        check.sensitivity = ranked.iter().map(|(c, error)| (name(c), *error)).collect();
        self.lap("sensitivity");
        let ranked: Vec<Candidate> = ranked.into_iter().map(|(c, _)| c).collect();
        let passing = fewest_to_revert(ranked.len(), &mut check.fallback_trials, |k| {
            let (plan, bodies) = self.plan_without(graph, &ranked[..k])?;
            self.selection_margin(&transformed, &plan, &bodies)
        })?;
        let reverted = &ranked[..passing];
        let (plan, body_reverted) = self.plan_without(graph, reverted)?;
        check.fallback = reverted.iter().map(name).collect();
        let planned = transformed
            .calibrated
            .plan
            .as_ref()
            .map_or(0, |p| p.quantized_nodes.len());
        let in_bodies = ranked
            .iter()
            .filter(|c| matches!(c, Candidate::Body(_)))
            .count();
        check.quantized_nodes = (
            planned + in_bodies,
            plan.quantized_nodes.len() + in_bodies - body_reverted.len(),
        );
        self.lap("fallback");
        let Transformed {
            reference,
            mut calibrated,
            ..
        } = transformed;
        calibrated.plan = Some(plan);
        calibrated.body_reverted = body_reverted;
        self.rebuild(reference, calibrated)
    }

    /// The plan's quantized nodes, and those of the bodies, with their sensitivity,
    /// most sensitive first.
    fn ranked_nodes(&self, transformed: &Transformed) -> Result<Vec<(Candidate, f64)>> {
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
                None,
                &format!("node `{}` alone", graph.node(node).name),
            )?;
            let noisiest = alone
                .activations
                .iter()
                .filter_map(|v| noise.get(v))
                .fold(0.0, |a: f64, &b| a.max(b));
            ranked.push((error_against_fp32(&report), noisiest, Candidate::Top(node)));
        }
        // A body node alone: nothing quantized outside the bodies, every other body
        // node in float.
        let in_bodies = self.body_nodes(transformed)?;
        let nothing = Int8Plan {
            scale_format: plan.scale_format,
            grid: plan.grid,
            ..Default::default()
        };
        for node in &in_bodies {
            let others: Vec<String> = in_bodies.iter().filter(|n| *n != node).cloned().collect();
            let report = self.judge_on_calibration(
                transformed,
                &nothing,
                &result.ranges,
                Some(&others),
                &format!("node `{node}` alone"),
            )?;
            ranked.push((
                error_against_fp32(&report),
                0.0,
                Candidate::Body(node.clone()),
            ));
        }
        ranked.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(b.1.total_cmp(&a.1))
                .then(a.2.cmp(&b.2))
        });
        Ok(ranked.into_iter().map(|(e, _, c)| (c, e)).collect())
    }

    /// The nodes the build quantizes inside control-flow bodies, by name.
    fn body_nodes(&self, transformed: &Transformed) -> Result<Vec<String>> {
        let calibrated = &transformed.calibrated;
        let Some(ranges) = self.body_ranges(calibrated)? else {
            return Ok(Vec::new());
        };
        let mut graph = transformed.reference.graph.clone();
        let summary = rtq_passes::quant::apply_int8_in_bodies(
            &mut graph,
            &ranges,
            &self.body_options(&calibrated.body_reverted),
        )?;
        Ok(summary
            .bodies
            .into_iter()
            .flat_map(|b| b.quantized_nodes)
            .collect())
    }

    /// The INT8 plan with the `reverted` top-graph nodes kept in high precision, and
    /// the body nodes to keep in float.
    fn plan_without(
        &self,
        graph: &Graph,
        reverted: &[Candidate],
    ) -> Result<(Int8Plan, Vec<String>)> {
        let mut options = self.int8_options();
        let mut bodies = Vec::new();
        for c in reverted {
            match c {
                Candidate::Top(n) => options.exclude.names.push(graph.node(*n).name.clone()),
                Candidate::Body(name) => bodies.push(name.clone()),
            }
        }
        let plan =
            plan_int8(graph, &options).context("planning INT8 quantization with fallback")?;
        Ok((plan, bodies))
    }

    /// How far the model quantized per `plan` (and in the bodies, but for `bodies`)
    /// is from the target on calibration samples.
    fn selection_margin(
        &self,
        transformed: &Transformed,
        plan: &Int8Plan,
        bodies: &[String],
    ) -> Result<f64> {
        let ranges = &transformed
            .calibrated
            .result
            .as_ref()
            .expect("an INT8 build has ranges")
            .ranges;
        let report =
            self.judge_on_calibration(transformed, plan, ranges, Some(bodies), "fallback")?;
        Ok(self.opts.accuracy_target.margin(&report))
    }
}
