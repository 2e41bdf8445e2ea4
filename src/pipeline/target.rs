//! The accuracy stage after the precision transforms: the build is judged against
//! its target on the held-out files, and never passes silently. An INT8 build that
//! misses it (with `--calib-method auto`) is rebuilt with the calibration method whose
//! ranges — taken from the statistics already collected, no new calibration pass —
//! agree best with FP32 on calibration samples; the held-out files then judge the
//! result. If it still misses, the fewest quantized nodes go back to high precision
//! (see `fallback.rs`). A miss that remains is a warning (an error with
//! `--strict-accuracy`).

use super::{Build, Calibrated, Flow, Optimized, Precision, RangeSource, Transformed};
use crate::accuracy::ReferenceOutputs;
use anyhow::{Context, Result};
use rtq_calib::CalibMethod;
use rtq_emit::{AccuracyCheck, AccuracyReport, MethodTrial};
use rtq_ir::ValueId;
use rtq_passes::quant::{Int8BodiesPass, Int8Plan, Int8QdqPass};
use rtq_passes::{InferShapes, Pass};
use std::collections::{BTreeMap, HashMap};

/// At most this many calibration files judge candidate builds (methods, fallbacks).
const SELECTION_FILES: usize = 8;

/// Bias correction measures on calibration files other than the judging ones: at
/// least this many (with fewer, `auto` does not try it), at most twice as many as judge.
const MIN_MEASURE_FILES: usize = 4;

impl Build<'_> {
    /// Judges the build against the accuracy target, searching for a better method
    /// where allowed; records the verdict (and any warning) in the report.
    pub fn meet_target(&mut self, transformed: Transformed) -> Result<Transformed> {
        let precision = self.opts.precision();
        if precision == Precision::FP32 {
            return Ok(transformed);
        }
        let Some(accuracy) = self.report.accuracy.last().cloned() else {
            let why = match &transformed.calibrated.set {
                None => "no calibration data (--calib DIR) to check it on".to_string(),
                Some(_) if self.opts.holdout == Some(0) => "--holdout 0".to_string(),
                Some(set) => format!(
                    "{} calibration file(s): none left to hold out (pass more files or --holdout)",
                    set.len()
                ),
            };
            self.report.warnings.push(format!(
                "the {} model's accuracy was not checked: {why}",
                precision.name()
            ));
            return Ok(transformed);
        };
        let target = self.opts.accuracy_target;
        let mut check = AccuracyCheck {
            target,
            misses: target.misses(&accuracy),
            method: precision
                .is_quantized()
                .then(|| transformed.calibrated.method.name().to_string()),
            ..Default::default()
        };
        let mut transformed = transformed;
        let searchable = precision.is_quantized()
            && self.opts.method_search
            && transformed
                .calibrated
                .result
                .as_ref()
                .is_some_and(|r| r.has_all_methods());
        if !check.misses.is_empty() && searchable {
            let mut candidates = all_ranges(&mut transformed)?;
            let (trials, best) = self.compare_methods(&transformed, &candidates)?;
            self.lap("method-search");
            check.method_search = trials;
            if best != transformed.calibrated.method {
                let ranges = candidates.remove(&best).expect("a compared method");
                transformed = self.rebuild_with(transformed, best, ranges)?;
                let accuracy = self.report.accuracy.last().expect("re-evaluated");
                check.misses = target.misses(accuracy);
                check.method = Some(best.name().to_string());
            }
        }
        let remedied = !check.method_search.is_empty();
        if !check.misses.is_empty() && searchable {
            transformed = self.fall_back(transformed, &mut check)?;
            let accuracy = self.report.accuracy.last().expect("re-evaluated");
            check.misses = target.misses(accuracy);
        }
        if !check.misses.is_empty() && precision.int4_weights && self.opts.method_search {
            transformed = self.fall_back_int4(transformed, &mut check)?;
            let accuracy = self.report.accuracy.last().expect("re-evaluated");
            check.misses = target.misses(accuracy);
        }
        let (try_bias, forced) = self.opts.bias_correction();
        if precision.is_int8_fp32() && try_bias && (forced || remedied) {
            transformed = self.correct_biases(transformed, &mut check, forced)?;
            let accuracy = self.report.accuracy.last().expect("evaluated");
            check.misses = target.misses(accuracy);
        }
        check.met = check.misses.is_empty();
        if !check.met {
            let mut warning = format!(
                "the {} model misses the accuracy target on {} held-out samples: {}",
                precision.name(),
                accuracy.samples,
                check.misses.join("; ")
            );
            if precision.is_quantized() {
                let layers = self.diagnose(&transformed)?;
                if !layers.most_sensitive.is_empty() {
                    let worst: Vec<&str> = layers
                        .most_sensitive
                        .iter()
                        .take(3)
                        .map(String::as_str)
                        .collect();
                    warning += &format!(
                        "; most sensitive tensors: {}; first diverging: {} (report.json \
                         accuracy_check.per_layer)",
                        worst.join(", "),
                        layers.first_diverging.as_deref().unwrap_or("none")
                    );
                }
                check.per_layer = Some(layers);
            }
            self.report.warnings.push(warning);
        }
        self.report.accuracy_check = Some(check);
        Ok(transformed)
    }

    /// Every candidate's ranges applied to the FP32 graph and judged on calibration
    /// samples; returns the trials and the best candidate (the current one on a tie).
    fn compare_methods(
        &self,
        transformed: &Transformed,
        candidates: &BTreeMap<RangeSource, HashMap<ValueId, f32>>,
    ) -> Result<(Vec<MethodTrial>, RangeSource)> {
        let calibrated = &transformed.calibrated;
        let plan = calibrated.plan.as_ref().expect("an INT8 build has a plan");
        let target = self.opts.accuracy_target;
        let mut trials = Vec::new();
        let mut best = (calibrated.method, f64::NEG_INFINITY);
        // The current method first, so that it wins ties.
        let order = std::iter::once(calibrated.method).chain(
            candidates
                .keys()
                .copied()
                .filter(|m| *m != calibrated.method),
        );
        for method in order {
            let report = self.judge_on_calibration(
                transformed,
                plan,
                &candidates[&method],
                None,
                method.name(),
            )?;
            let trial = trial(method, &report, target.margin(&report));
            if trial.margin > best.1 {
                best = (method, trial.margin);
            }
            trials.push(trial);
        }
        Ok((trials, best.0))
    }

    /// The build again with `method`'s ranges: Q/DQ, cache, report ranges and the
    /// held-out accuracy all follow them.
    fn rebuild_with(
        &mut self,
        transformed: Transformed,
        method: RangeSource,
        ranges: HashMap<ValueId, f32>,
    ) -> Result<Transformed> {
        let Transformed {
            reference,
            mut calibrated,
            ..
        } = transformed;
        let result = calibrated.result.as_mut().expect("INT8 builds calibrate");
        result.ranges = ranges;
        calibrated.method = method;
        let result = calibrated.result.as_ref().expect("INT8 builds calibrate");
        self.report.ranges = self.tensor_ranges(&reference.graph, result);
        if self.opts.precision().is_int8() {
            self.files = vec![self.cache_file(&reference.graph, result)?];
        }
        self.rebuild(reference, calibrated)
    }

    /// The precision transforms again on `reference` with `calibrated`'s (changed)
    /// ranges or plan, judged anew on the held-out files.
    pub(super) fn rebuild(
        &mut self,
        reference: Optimized,
        calibrated: Calibrated,
    ) -> Result<Transformed> {
        let Flow::Next(rebuilt) = self.transform(reference, calibrated)? else {
            unreachable!("--stop-after stops before the accuracy stage");
        };
        self.report.accuracy.clear();
        self.evaluate(&rebuilt)?;
        Ok(rebuilt)
    }

    /// The FP32 graph quantized per `plan` with `ranges` (and inside the bodies but for
    /// the nodes in `bodies`; `None`: bodies in float), FP32 elsewhere even in mixed
    /// builds (judged with their half type, a candidate inherits the half type's own
    /// error: where that alone misses the target on the judging files, every node would
    /// be reverted for nothing), judged against FP32 on the last [`SELECTION_FILES`]
    /// calibration files: how the method search and the fallback compare candidates
    /// without touching the held-out files.
    pub(super) fn judge_on_calibration(
        &self,
        transformed: &Transformed,
        plan: &Int8Plan,
        ranges: &HashMap<ValueId, f32>,
        bodies: Option<&[String]>,
        what: &str,
    ) -> Result<AccuracyReport> {
        let calibrated = &transformed.calibrated;
        let set = calibrated
            .set
            .as_ref()
            .expect("an INT8 build has calibration data");
        let files = selection_files(calibrated);
        let reference = &transformed.reference.graph;
        let mut graph = reference.clone();
        Int8QdqPass::new(plan, ranges)
            .run(&mut graph)
            .and_then(|_| InferShapes.run(&mut graph))
            .with_context(|| format!("quantizing with the {what} ranges"))?;
        if let (Some(reverted), Some(body_ranges)) = (bodies, self.body_ranges(calibrated)?) {
            Int8BodiesPass::new(&body_ranges, self.body_options(reverted))
                .run(&mut graph)
                .with_context(|| format!("quantizing the bodies with the {what} ranges"))?;
        }
        let outputs = self.selection_outputs(transformed)?;
        debug_assert_eq!(outputs.files(), files);
        outputs.compare(&graph, set, what)
    }

    /// FP32 outputs on the judging files, computed at the first judgement (the
    /// reference graph does not change within a build).
    pub(super) fn selection_outputs(&self, transformed: &Transformed) -> Result<&ReferenceOutputs> {
        if let Some(outputs) = self.selection_reference.get() {
            return Ok(outputs);
        }
        let calibrated = &transformed.calibrated;
        let set = calibrated.set.as_ref().expect("judged builds have data");
        let outputs = ReferenceOutputs::compute(
            &transformed.reference.graph,
            set,
            selection_files(calibrated),
        )?;
        Ok(self.selection_reference.get_or_init(|| outputs))
    }
}

impl Build<'_> {
    /// Empirical bias correction of the build (see [`crate::bias_correction`]): output
    /// means measured on calibration files other than the judging ones, the corrected
    /// model judged on those against the uncorrected one; kept when `forced` or better.
    fn correct_biases(
        &mut self,
        mut transformed: Transformed,
        check: &mut AccuracyCheck,
        forced: bool,
    ) -> Result<Transformed> {
        let calibrated = &transformed.calibrated;
        let set = calibrated.set.as_ref().expect("an INT8 build has data");
        let judging = selection_files(calibrated);
        let others = &calibrated.calib_files[..calibrated.calib_files.len() - judging.len()];
        let measure_on = match others.len() {
            n if n >= MIN_MEASURE_FILES => &others[n.saturating_sub(SELECTION_FILES * 2)..],
            _ if forced => &calibrated.calib_files[..],
            _ => return Ok(transformed),
        };
        let reference = &transformed.reference.graph;
        let shifts =
            crate::bias_correction::measure_shifts(reference, &transformed.graph, set, measure_on)
                .context("measuring bias shifts")?;
        if shifts.shifts.is_empty() {
            return Ok(transformed);
        }
        let mut corrected = transformed.graph.clone();
        rtq_passes::quant::apply_bias_shifts(&mut corrected, &shifts.shifts)
            .context("correcting biases")?;
        let outputs = self.selection_outputs(&transformed)?;
        let before = outputs.compare(&transformed.graph, set, "int8")?;
        let after = outputs.compare(&corrected, set, "bias-corrected int8")?;
        // Kept by `auto` only for a clear gain: the error against FP32 down by a tenth.
        let applied = forced || error_against_fp32(&after) < 0.9 * error_against_fp32(&before);
        let target = self.opts.accuracy_target;
        check.bias_correction = Some(rtq_emit::BiasCorrectionTrial {
            nodes: shifts.shifts.len(),
            samples: shifts.samples,
            margin_before: target.margin(&before),
            margin_after: target.margin(&after),
            applied,
        });
        self.lap("bias-correction");
        if applied {
            transformed.graph = corrected;
            self.report.accuracy.clear();
            self.evaluate(&transformed)?;
        }
        Ok(transformed)
    }

    /// The per-layer comparison of the emitted graph with FP32 on the held-out files.
    fn diagnose(&mut self, transformed: &Transformed) -> Result<rtq_emit::PerLayerReport> {
        let calibrated = &transformed.calibrated;
        let set = calibrated.set.as_ref().expect("judged builds have data");
        let layers = crate::diagnose::per_layer(
            &transformed.reference.graph,
            &transformed.graph,
            set,
            &calibrated.held_out,
        )?;
        self.lap("per-layer");
        Ok(layers)
    }
}

/// The calibration files that judge candidate builds: the last [`SELECTION_FILES`].
fn selection_files(calibrated: &Calibrated) -> &[usize] {
    judging_files(&calibrated.calib_files)
}

/// The last [`SELECTION_FILES`] of `calib_files`: where candidate builds are judged and
/// where `--calib-method per-tensor` measures its errors.
pub(super) fn judging_files(calib_files: &[usize]) -> &[usize] {
    &calib_files[calib_files.len().saturating_sub(SELECTION_FILES)..]
}

/// Every method's ranges from the statistics the calibration kept.
fn all_ranges(
    transformed: &mut Transformed,
) -> Result<BTreeMap<RangeSource, HashMap<ValueId, f32>>> {
    let graph = &transformed.reference.graph;
    let result = transformed
        .calibrated
        .result
        .as_mut()
        .expect("INT8 builds calibrate");
    CalibMethod::ALL
        .into_iter()
        .map(|method| {
            let ranges = result
                .ranges_for(graph, method)
                .expect("checked: every method's statistics were kept")?;
            Ok((RangeSource::Method(method), ranges))
        })
        .collect()
}

/// A judged model's distance from FP32: `1 - cosine mean` plus `1 - top-1 agreement`
/// (where the output has a class axis), summed over outputs.
pub(super) fn error_against_fp32(report: &AccuracyReport) -> f64 {
    report
        .outputs
        .iter()
        .map(|o| (1.0 - o.cosine_mean) + o.top1_agreement.map_or(0.0, |t| 1.0 - t))
        .map(|e| if e.is_nan() { f64::INFINITY } else { e })
        .sum()
}

/// The search's record of one method.
fn trial(method: RangeSource, report: &AccuracyReport, margin: f64) -> MethodTrial {
    MethodTrial {
        method: method.name().to_string(),
        samples: report.samples,
        margin,
        cosine_mean: report
            .outputs
            .iter()
            .map(|o| o.cosine_mean)
            .fold(f64::INFINITY, f64::min),
        top1_agreement: report
            .outputs
            .iter()
            .filter_map(|o| o.top1_agreement)
            .reduce(f64::min),
    }
}
