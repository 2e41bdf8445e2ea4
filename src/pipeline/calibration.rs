//! The calibration stage: the calibration files split into calibration and held-out
//! sets, ranges observed on the former (every float activation: the Q/DQ plan needs a
//! subset, the TensorRT cache wants them all), and the cache.

use super::{Build, Flow, HalfType, Optimized, Stage};
use crate::calibrate::{calibrate, CalibrationResult};
use crate::calibrate_bodies::BodyCalibration;
use anyhow::{bail, Context, Result};
use rtq_calib::{AllMethodsCalibrator, CalibMethod, CalibrationCache, CalibrationSet};
use rtq_emit::TensorRange;
use rtq_ir::{DType, Graph, QuantGrid, QuantParams, ScaleFormat, ValueId};
use rtq_passes::quant::{plan_int8, weighted_ops_in_bodies, Int8Options, Int8Plan};
use std::collections::BTreeMap;

/// Where a build's ranges come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RangeSource {
    /// One calibration method's ranges for every tensor.
    Method(CalibMethod),
    /// Each tensor's range among the methods' by the error at its consumers
    /// ([`crate::range_choice`]).
    PerTensor,
    /// Ranges read from `--calib-cache`.
    Imported,
}

impl RangeSource {
    /// The name in reports: the method's, or `per-tensor`.
    pub fn name(self) -> &'static str {
        match self {
            RangeSource::Method(method) => method.name(),
            RangeSource::PerTensor => "per-tensor",
            RangeSource::Imported => "calib-cache",
        }
    }
}

/// The calibration data of a build and what was observed on it.
pub struct Calibrated {
    /// The calibration files; `None` when the build was given none.
    pub set: Option<CalibrationSet>,
    /// Indices of the files ranges were calibrated on.
    pub calib_files: Vec<usize>,
    /// Indices of the files held out for the accuracy check.
    pub held_out: Vec<usize>,
    /// Where the ranges `result.ranges` holds come from.
    pub method: RangeSource,
    /// Ranges and statistics observed; `None` when nothing was calibrated.
    pub result: Option<CalibrationResult>,
    /// What the INT8 transform will quantize (INT8 builds).
    pub plan: Option<Int8Plan>,
    /// What was observed inside control-flow bodies holding weighted ops (quantized
    /// builds calibrated on data).
    pub bodies: Option<BodyCalibration>,
    /// Nodes inside bodies the accuracy fallback keeps in float (by name).
    pub body_reverted: Vec<String>,
    /// MatMul/Gemm nodes the INT4 fallback keeps in high precision (by name).
    pub int4_reverted: Vec<String>,
    /// AWQ/GPTQ's choices for the INT4 weights, searched once per build.
    pub int4_tuning: Option<std::sync::Arc<Int4Search>>,
}

/// What the AWQ (and GPTQ) search chose per INT4 weight, and its per-layer record.
pub type Int4Search = (
    std::collections::HashMap<rtq_ir::NodeId, rtq_passes::quant::Int4Tuning>,
    Vec<crate::awq::AwqLayer>,
);

/// Splits the files of a calibration set into (calibration, held-out) index lists.
pub fn split_files(
    total: usize,
    holdout: Option<usize>,
    max_calib: Option<usize>,
) -> (Vec<usize>, Vec<usize>) {
    let held = holdout.unwrap_or_else(|| {
        if total >= 2 {
            (total / 5).clamp(1, 16)
        } else {
            0
        }
    });
    let held = held.min(total.saturating_sub(1));
    let calib_end = total - held;
    let mut calib: Vec<usize> = (0..calib_end).collect();
    if let Some(m) = max_calib {
        calib.truncate(m);
    }
    (calib, (calib_end..total).collect())
}

/// Every float activation of `graph` (graph inputs and node outputs), in topological order.
pub fn float_activations(graph: &Graph) -> Vec<ValueId> {
    let mut out: Vec<ValueId> = graph
        .inputs
        .iter()
        .copied()
        .filter(|&v| graph.value(v).dtype == Some(DType::F32))
        .collect();
    for id in graph.topo_order().unwrap_or_default() {
        for &o in &graph.node(id).outputs {
            if graph.value(o).dtype == Some(DType::F32) && graph.value(o).constant.is_none() {
                out.push(o);
            }
        }
    }
    out
}

impl Build<'_> {
    /// The grid the build quantizes to (INT8 where it quantizes nothing).
    pub(super) fn grid(&self) -> QuantGrid {
        self.opts.precision().grid().unwrap_or_default()
    }

    /// The format the INT8 scales are stored in: FP16 in mixed builds, whose FP16
    /// conversion then stores them without rounding.
    pub(super) fn scale_format(&self) -> ScaleFormat {
        match self.opts.precision().half {
            Some(HalfType::Fp16) => ScaleFormat::F16,
            Some(HalfType::Bf16) => ScaleFormat::BF16,
            None => ScaleFormat::F32,
        }
    }

    /// The Q/DQ transform's options: the user's, with the build's grid and scale format.
    pub(super) fn int8_options(&self) -> Int8Options {
        Int8Options {
            scale_format: self.scale_format(),
            grid: self.grid(),
            sample_shapes: self.sample_shapes.get().cloned().unwrap_or_default(),
            ..self.opts.int8_opts.clone()
        }
    }

    /// Opens the calibration data and observes ranges: the build's calibrator for INT8
    /// (or the saved `--stats`), the largest magnitudes (for FP16's overflow guard) for
    /// FP16. Saves the statistics with `--save-stats`.
    pub fn calibrate(&mut self, optimized: &Optimized) -> Result<Flow<Calibrated>> {
        let opts = self.opts;
        let (set, calib_files, held_out) = match &opts.calib_dir {
            Some(dir) => {
                let (set, calib, held) = self.open_data(dir)?;
                (Some(set), calib, held)
            }
            None => (None, Vec::new(), Vec::new()),
        };
        let graph = &optimized.graph;
        let precision = opts.precision();
        let nothing_to_observe = !precision.is_quantized() && !precision.has_half();
        if nothing_to_observe
            || (set.is_none() && opts.stats.is_empty() && opts.calib_cache.is_none())
        {
            // An FP32 build does not use calibration data; without data there is none.
            return Ok(Flow::Next(Calibrated {
                set,
                calib_files,
                held_out,
                method: RangeSource::Method(opts.first_method()),
                result: None,
                plan: None,
                bodies: None,
                body_reverted: Vec::new(),
                int4_reverted: Vec::new(),
                int4_tuning: None,
            }));
        }
        if let (true, Some(set), Some(&first)) =
            (precision.is_quantized(), &set, calib_files.first())
        {
            self.note_sample_shapes(graph, set, first);
        }
        let (plan, method, mut result) = if let Some(cache) = &opts.calib_cache {
            // The cache's coverage decides the plan (validated: cache builds are INT8).
            let (ranges, covered) = self.imported_ranges(graph, cache)?;
            let result = CalibrationResult::from_ranges(ranges);
            (Some(covered), opts.first_method(), result)
        } else {
            let plan = if precision.is_quantized() {
                let what = format!("planning {} quantization", precision.name());
                Some(plan_int8(graph, &self.int8_options()).context(what)?)
            } else {
                None
            };
            let (method, result) = if opts.stats.is_empty() {
                let set = set.as_ref().expect("checked above");
                self.observe(graph, set, &calib_files)?
            } else {
                let targets = float_activations(graph);
                let split = set.as_ref().map(|s| (s, &calib_files[..], &held_out[..]));
                let method = opts.first_method();
                (method, self.load_stats(graph, &targets, method, split)?)
            };
            (plan, method, result)
        };
        let method = if opts.calib_cache.is_some() {
            RangeSource::Imported
        } else if opts.per_tensor_ranges && precision.is_quantized() {
            let plan = plan.as_ref().expect("quantized builds plan");
            self.per_tensor_ranges(graph, plan, set.as_ref(), &calib_files, &mut result)?;
            RangeSource::PerTensor
        } else {
            RangeSource::Method(method)
        };
        if let (Some(path), Some(set)) = (&opts.save_stats, &set) {
            self.save_stats(path, graph, &result, set, &calib_files)?;
        }
        let mut files = Vec::new();
        if precision.is_quantized() {
            self.report.ranges = self.tensor_ranges(graph, &result);
        }
        // TensorRT's calibration caches hold INT8 scales only (implicit quantization,
        // TensorRT <= 10): FP8 builds carry their scales in the graph alone.
        if precision.is_int8() {
            files.push(self.cache_file(graph, &result)?);
        }
        if opts.stops_after(Stage::Calibrate) {
            self.report.graph.nodes_out = graph.node_count();
            return self
                .stop(graph, "_optimized", files)
                .map(|out| Flow::Stop(Box::new(out)));
        }
        self.files = files;
        let bodies = match (&set, precision.is_quantized() && opts.calib_cache.is_none()) {
            (Some(set), true) if weighted_ops_in_bodies(graph) > 0 => {
                let observed = BodyCalibration::observe(
                    graph,
                    set,
                    &calib_files,
                    opts.first_method(),
                    &opts.calib,
                )
                .context("calibrating inside If/Loop/Scan bodies")?;
                self.lap("calibrate-bodies");
                Some(observed)
            }
            _ => None,
        };
        Ok(Flow::Next(Calibrated {
            set,
            calib_files,
            held_out,
            method,
            result: Some(result),
            plan,
            bodies,
            body_reverted: Vec::new(),
            int4_reverted: Vec::new(),
            int4_tuning: None,
        }))
    }

    /// Opens the calibration data in `dir` and splits its files into (calibration,
    /// held-out) index lists; with `--shard`, this shard's share of the former.
    pub(super) fn open_data(
        &self,
        dir: &std::path::Path,
    ) -> Result<(CalibrationSet, Vec<usize>, Vec<usize>)> {
        let opts = self.opts;
        let set = CalibrationSet::open(dir, &opts.data)
            .with_context(|| format!("reading calibration data in {}", dir.display()))?
            .cancel_with(opts.progress.cancel_flag());
        if let Some(n) = opts.holdout.filter(|&n| n > 0 && n >= set.len()) {
            bail!(
                "--holdout {n}: {} has only {} calibration file(s), and at least one must be left \
                 for calibration",
                set.dir().display(),
                set.len()
            );
        }
        let (mut calib_files, held_out) =
            split_files(set.len(), opts.holdout, opts.max_calib_files);
        if calib_files.is_empty() {
            bail!(
                "{}: no calibration files left after holding out {} for evaluation",
                set.dir().display(),
                held_out.len()
            );
        }
        if let Some(shard) = opts.shard {
            let total = calib_files.len();
            calib_files = shard.select(&calib_files);
            if calib_files.is_empty() {
                bail!(
                    "--shard {}/{}: {} has only {total} calibration file(s), none for this shard",
                    shard.index,
                    shard.count,
                    set.dir().display()
                );
            }
        }
        Ok((set, calib_files, held_out))
    }

    /// Streams the calibration files through `graph`: the build's method for INT8 (every
    /// method's statistics with the method search or `--save-stats`), the largest
    /// magnitudes (for FP16's overflow guard) otherwise.
    fn observe(
        &mut self,
        graph: &Graph,
        set: &CalibrationSet,
        files: &[usize],
    ) -> Result<(CalibMethod, CalibrationResult)> {
        let opts = self.opts;
        let int8 = opts.precision().is_quantized();
        let method = if int8 {
            opts.first_method()
        } else {
            CalibMethod::Max
        };
        let keep_histograms =
            opts.method_search || opts.per_tensor_ranges || opts.save_stats.is_some();
        let calibrator: Box<dyn rtq_calib::Calibrator> = if keep_histograms && int8 {
            Box::new(AllMethodsCalibrator::new(method, &opts.calib)?)
        } else {
            method.calibrator(&opts.calib)?
        };
        let targets = float_activations(graph);
        let result = calibrate(
            graph,
            set,
            files,
            &targets,
            calibrator.as_ref(),
            &opts.progress,
        )?;
        self.lap(if int8 { "calibrate" } else { "observe-ranges" });
        Ok((method, result))
    }

    /// `--calib-method per-tensor`: each quantized activation's range among every
    /// method's by the error at its consumers, measured on the calibration files that
    /// judge candidate builds (`target::judging_files`).
    fn per_tensor_ranges(
        &mut self,
        graph: &Graph,
        plan: &Int8Plan,
        set: Option<&CalibrationSet>,
        calib_files: &[usize],
        result: &mut CalibrationResult,
    ) -> Result<()> {
        let Some(set) = set else {
            bail!(
                "--calib-method per-tensor measures errors on calibration files: pass --calib DIR"
            );
        };
        let mut candidates = BTreeMap::new();
        for method in CalibMethod::ALL {
            let ranges = result
                .ranges_for(graph, method)
                .expect("per-tensor builds keep every method's statistics")?;
            candidates.insert(method, ranges);
        }
        let first = self.opts.first_method();
        let order: Vec<CalibMethod> = std::iter::once(first)
            .chain(CalibMethod::ALL.into_iter().filter(|m| *m != first))
            .collect();
        let files = super::target::judging_files(calib_files);
        let choice = crate::range_choice::choose_per_tensor(
            graph,
            plan,
            &candidates,
            &order,
            set,
            files,
            self.scale_format(),
        )
        .context("choosing ranges per tensor")?;
        result.ranges = choice.ranges;
        self.lap("per-tensor-ranges");
        Ok(())
    }

    /// The report's per-tensor ranges, with the scale as the graph stores it.
    pub(super) fn tensor_ranges(
        &self,
        graph: &Graph,
        result: &CalibrationResult,
    ) -> Vec<TensorRange> {
        let format = self.scale_format();
        result
            .stats
            .iter()
            .map(|(v, stats)| {
                let value = graph.value(*v);
                let amax = result.ranges[v];
                TensorRange {
                    tensor: value.name.clone(),
                    producer: value
                        .producer
                        .map_or("input".to_string(), |(n, _)| graph.node(n).op_type.clone()),
                    min: stats.min,
                    max: stats.max,
                    absmax: stats.absmax,
                    amax,
                    scale: QuantParams::new(self.grid(), amax).stored_scale(format),
                }
            })
            .collect()
    }

    /// The TensorRT calibration cache of every observed tensor.
    pub(super) fn cache_file(
        &self,
        graph: &Graph,
        result: &CalibrationResult,
    ) -> Result<(String, Vec<u8>)> {
        let mut cache = CalibrationCache::for_trt_version(&self.opts.trt_version)?;
        for (v, _) in &result.stats {
            cache.push(&graph.value(*v).name, QuantParams::int8(result.ranges[v]));
        }
        if result.stats.is_empty() {
            // Imported ranges (`--calib-cache`): the ones this graph has, in its order.
            for (v, value) in graph.values() {
                if let Some(&amax) = result.ranges.get(&v).filter(|a| a.is_finite() && **a > 0.0) {
                    cache.push(&value.name, QuantParams::int8(amax));
                }
            }
        }
        let text = cache.to_text().context("writing the calibration cache")?;
        Ok((
            format!("{}_calibration.cache", self.stem),
            text.into_bytes(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holdout_split() {
        assert_eq!(split_files(10, None, None), ((0..8).collect(), vec![8, 9]));
        assert_eq!(split_files(1, None, None), (vec![0], vec![]));
        assert_eq!(split_files(5, Some(10), None), (vec![0], vec![1, 2, 3, 4]));
        assert_eq!(split_files(10, Some(0), Some(3)), (vec![0, 1, 2], vec![]));
    }
}
