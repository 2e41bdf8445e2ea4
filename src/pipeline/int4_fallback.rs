//! INT4 fallback: when an INT4 weight-only build misses its accuracy target, the fewest
//! INT4 weights go back to the build's high-precision type. Weights are ranked by their
//! measured sensitivity: the error of the model with that weight alone in INT4 (with
//! its AWQ/GPTQ choices, FP32 around it), judged against FP32 on calibration samples;
//! ties go by graph order. A bisection over "keep the k most sensitive in high
//! precision" then finds the smallest k that meets the target on calibration samples,
//! as the INT8 fallback does. The weight bytes grow by what the
//! reverted weights take in the high-precision type: the report says which they are.

use super::fallback::fewest_to_revert;
use super::target::error_against_fp32;
use super::{Build, Transformed};
use anyhow::{Context, Result};
use rtq_emit::{AccuracyCheck, AccuracyReport};
use rtq_passes::quant::{Int4Plan, Int4WeightsPass};
use rtq_passes::{InferShapes, Pass};

impl Build<'_> {
    /// Keeps the fewest INT4 weights in high precision that bring the build to its
    /// target on calibration samples, then rebuilds and re-judges it on the held-out
    /// files.
    pub(super) fn fall_back_int4(
        &mut self,
        transformed: Transformed,
        check: &mut AccuracyCheck,
    ) -> Result<Transformed> {
        let graph = &transformed.reference.graph;
        let plan = self.plan_int4(graph, &transformed.calibrated.int4_reverted)?;
        if plan.sites.is_empty() {
            return Ok(transformed);
        }
        let mut ranked = Vec::with_capacity(plan.sites.len());
        for (order, site) in plan.sites.iter().enumerate() {
            let alone = Int4Plan {
                sites: vec![site.clone()],
                skipped: Vec::new(),
            };
            let name = graph.node(site.node).name.clone();
            let report = self.judge_int4(&transformed, &alone, &format!("`{name}` alone"))?;
            ranked.push((error_against_fp32(&report), order, name));
        }
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        check.sensitivity = ranked.iter().map(|(e, _, n)| (n.clone(), *e)).collect();
        self.lap("int4-sensitivity");
        let ranked: Vec<String> = ranked.into_iter().map(|(_, _, n)| n).collect();
        let passing = fewest_to_revert(ranked.len(), &mut check.fallback_trials, |k| {
            let candidate = self.plan_int4(graph, &ranked[..k])?;
            let report = self.judge_int4(&transformed, &candidate, "fallback")?;
            Ok(self.opts.accuracy_target.margin(&report))
        })?;
        check.fallback = ranked[..passing].to_vec();
        check.quantized_nodes = (ranked.len(), ranked.len() - passing);
        self.lap("int4-fallback");
        let Transformed {
            reference,
            mut calibrated,
            ..
        } = transformed;
        calibrated.int4_reverted = ranked[..passing].to_vec();
        self.rebuild(reference, calibrated)
    }

    /// The FP32 graph with `plan`'s weights in INT4 (the build's AWQ/GPTQ choices), FP32
    /// elsewhere as the INT8 fallback judges (see `judge_on_calibration`), judged
    /// against FP32 on calibration samples.
    fn judge_int4(
        &self,
        transformed: &Transformed,
        plan: &Int4Plan,
        what: &str,
    ) -> Result<AccuracyReport> {
        let calibrated = &transformed.calibrated;
        let set = calibrated.set.as_ref().expect("judged builds have data");
        let no_tuning = Default::default();
        let tuning = calibrated.int4_tuning.as_ref().map_or(&no_tuning, |t| &t.0);
        let mut graph = transformed.reference.graph.clone();
        Int4WeightsPass::new(plan, self.int4_options(), tuning)
            .run(&mut graph)
            .and_then(|_| InferShapes.run(&mut graph))
            .with_context(|| format!("INT4 weights for {what}"))?;
        let outputs = self.selection_outputs(transformed)?;
        outputs.compare(&graph, set, what)
    }
}
