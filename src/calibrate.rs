//! Calibration driver: streams samples through the FP32 graph on the CPU executor and
//! feeds every observed tensor to its range collector.

use crate::progress::Progress;
use crate::sample_stream::stream_samples;
use anyhow::{Context, Result};
use rayon::prelude::*;
use rtq_calib::{CalibMethod, CalibrationSet, Calibrator, InputSpec, RangeCollector, RangeStats};
use rtq_ir::{Graph, Tensor, ValueId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Ranges and statistics gathered by [`calibrate`].
#[derive(Default)]
pub struct CalibrationResult {
    /// Chosen amax per observed tensor.
    pub ranges: HashMap<ValueId, f32>,
    /// The collectors (in the order of `stats`), kept for [`CalibrationResult::ranges_for`].
    collectors: Vec<Box<dyn RangeCollector>>,
    /// Statistics per observed tensor, in the order the tensors were requested.
    pub stats: Vec<(ValueId, RangeStats)>,
    /// Samples streamed through the graph.
    pub samples: usize,
    /// Wall time in seconds.
    pub seconds: f64,
}

impl CalibrationResult {
    /// Ranges given rather than observed (`--calib-cache`): no statistics, so no other
    /// method's ranges.
    pub fn from_ranges(ranges: HashMap<ValueId, f32>) -> CalibrationResult {
        CalibrationResult {
            ranges,
            collectors: Vec::new(),
            stats: Vec::new(),
            samples: 0,
            seconds: 0.0,
        }
    }

    /// Every observed tensor's range as `method` picks it from the same statistics,
    /// where the calibrator kept them ([`rtq_calib::AllMethodsCalibrator`]); `None`
    /// otherwise. The threshold searches run on every core.
    pub fn ranges_for(
        &mut self,
        graph: &Graph,
        method: CalibMethod,
    ) -> Option<Result<HashMap<ValueId, f32>>> {
        if !self.has_all_methods() {
            return None;
        }
        let ranges = self
            .collectors
            .par_iter_mut()
            .zip(&self.stats)
            .map(|(collector, (v, _))| {
                let amax = collector
                    .amax_for(method)
                    .expect("the same calibrator made every collector")
                    .with_context(|| format!("tensor `{}`", graph.value(*v).name))?;
                Ok((*v, amax))
            })
            .collect();
        Some(ranges)
    }

    /// Each observed tensor's quantization noise relative to its signal at its
    /// current range (see [`RangeCollector::noise_ratio`]), where known.
    pub fn noise_ratios(&self) -> HashMap<ValueId, f64> {
        self.collectors
            .iter()
            .zip(&self.stats)
            .filter_map(|(c, (v, _))| Some((*v, c.noise_ratio(self.ranges[v])?)))
            .collect()
    }

    /// Every observed tensor's statistics, by name (collectors that keep histograms
    /// only: [`rtq_calib::AllMethodsCalibrator`]'s); `None` otherwise.
    pub fn statistics(&self, graph: &Graph) -> Option<Vec<(String, rtq_calib::TensorStats)>> {
        self.collectors
            .iter()
            .zip(&self.stats)
            .map(|(c, (v, _))| Some((graph.value(*v).name.clone(), c.statistics()?)))
            .collect()
    }

    /// The result of a calibration that observed what `stats` describes, for `targets`
    /// (each must be in `stats`, and nothing else), with `calibrator`'s ranges.
    pub fn from_statistics(
        graph: &Graph,
        targets: &[ValueId],
        stats: &rtq_calib::CalibrationStats,
        calibrator: &rtq_calib::AllMethodsCalibrator,
    ) -> Result<CalibrationResult> {
        let start = Instant::now();
        let by_name: HashMap<&str, &rtq_calib::TensorStats> =
            stats.tensors.iter().map(|(n, s)| (n.as_str(), s)).collect();
        let mut collectors = Vec::with_capacity(targets.len());
        for &v in targets {
            let name = &graph.value(v).name;
            let observed = by_name.get(name.as_str()).with_context(|| {
                format!(
                    "no statistics for tensor `{name}`: they were collected on another model \
                     or with other optimization options"
                )
            })?;
            collectors.push(calibrator.restore(observed)?);
        }
        if stats.tensors.len() != targets.len() {
            let wanted: std::collections::HashSet<&str> = targets
                .iter()
                .map(|&v| graph.value(v).name.as_str())
                .collect();
            let extra = stats
                .tensors
                .iter()
                .find(|(n, _)| !wanted.contains(n.as_str()))
                .map_or("", |(n, _)| n.as_str());
            anyhow::bail!(
                "the statistics have tensor `{extra}`, which this model does not compute: they \
                 were collected on another model or with other optimization options"
            );
        }
        let mut result = choose_ranges(graph, targets, &mut collectors)?;
        result.samples = stats.samples as usize;
        result.collectors = collectors;
        result.seconds = start.elapsed().as_secs_f64();
        Ok(result)
    }

    /// Whether [`CalibrationResult::ranges_for`] can give other methods' ranges.
    pub fn has_all_methods(&self) -> bool {
        self.collectors
            .first()
            .is_some_and(|c| c.amax_for(CalibMethod::Max).is_some())
    }
}

/// For each of `targets`, the slot of the target it is `Relu` of, when its statistics
/// are derived from that one's instead of observed ([`RangeCollector::relu_image`]:
/// exactly what observing it would give): a `Relu` output whose input is observed
/// itself (not derived in turn), when `calibrator`'s collectors can tell.
fn relu_sources(
    graph: &Graph,
    targets: &[ValueId],
    slot_of: &HashMap<ValueId, usize>,
    calibrator: &dyn Calibrator,
) -> Vec<Option<usize>> {
    let mut sources = vec![None; targets.len()];
    if calibrator.collector().relu_image().is_none() {
        return sources;
    }
    for (slot, &v) in targets.iter().enumerate() {
        let Some((node, _)) = graph.value(v).producer else {
            continue;
        };
        let node = graph.node(node);
        if node.op_type != "Relu" || !matches!(node.domain.as_str(), "" | "ai.onnx") {
            continue;
        }
        let source = node.inputs.first().copied().flatten();
        if let Some(&from) = source.and_then(|u| slot_of.get(&u)) {
            // Targets come in topological order: the input's entry is final.
            if from < slot && sources[from].is_none() {
                sources[slot] = Some(from);
            }
        }
    }
    sources
}

/// Streams the files `files` (indices into `set`) through `graph`, observing `targets`.
///
/// The forward passes run on several workers at once ([`stream_samples`]), each
/// feeding the tensors it computes to collectors of its own; the workers' collectors
/// are then merged. Collected statistics are exact counts and extremes, so the ranges
/// depend neither on the timing nor on the number of threads. Memory stays flat: one
/// sample's activations per worker, histograms of fixed size.
pub fn calibrate(
    graph: &Graph,
    set: &CalibrationSet,
    files: &[usize],
    targets: &[ValueId],
    calibrator: &dyn Calibrator,
    progress: &Progress,
) -> Result<CalibrationResult> {
    let start = Instant::now();
    let plan = rtq_exec::Plan::new(graph).context("preparing the FP32 graph for calibration")?;
    let specs = InputSpec::from_graph(graph)?;
    let slot_of: HashMap<ValueId, usize> =
        targets.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    let bar = progress.task(
        &format!("calibrating ({})", calibrator.name()),
        files.len() as u64,
    );
    let new_collectors = || -> Vec<Box<dyn RangeCollector>> {
        targets.iter().map(|_| calibrator.collector()).collect()
    };
    let relu_of = relu_sources(graph, targets, &slot_of, calibrator);
    let observe = |collectors: &mut Vec<Box<dyn RangeCollector>>,
                   file: usize,
                   v: ValueId,
                   t: &Arc<Tensor>|
     -> Result<()> {
        let Some(&slot) = slot_of.get(&v) else {
            return Ok(());
        };
        if relu_of[slot].is_some() {
            return Ok(());
        }
        collectors[slot].observe(&f32_values(t)).map_err(|e| {
            anyhow::anyhow!(
                "{}: tensor `{}`: {e}",
                set.files()[file].display(),
                graph.value(v).name
            )
        })
    };
    let streamed = stream_samples(&plan, set, files, &specs, &new_collectors, &observe, &bar);
    bar.finish();
    let (mut per_worker, samples) = streamed?;
    for collectors in &mut per_worker {
        for (slot, source) in relu_of.iter().enumerate() {
            if let Some(source) = *source {
                collectors[slot] = collectors[source]
                    .relu_image()
                    .context("a Relu output's statistics from its input's")?;
            }
        }
    }
    let mut per_worker = per_worker.into_iter();
    let mut collectors = per_worker.next().unwrap_or_else(new_collectors);
    for more in per_worker {
        for (slot, (mine, theirs)) in collectors.iter_mut().zip(&more).enumerate() {
            mine.merge(theirs.as_ref())
                .with_context(|| format!("tensor `{}`", graph.value(targets[slot]).name))?;
        }
    }
    if samples == 0 {
        anyhow::bail!("calibration saw no samples");
    }
    let mut result = choose_ranges(graph, targets, &mut collectors)?;
    result.samples = samples;
    result.collectors = collectors;
    result.seconds = start.elapsed().as_secs_f64();
    Ok(result)
}

/// Each target's range, chosen by its collector, with the statistics behind it. The
/// threshold searches are independent: one per tensor, on every core.
fn choose_ranges(
    graph: &Graph,
    targets: &[ValueId],
    collectors: &mut [Box<dyn RangeCollector>],
) -> Result<CalibrationResult> {
    let chosen: Vec<(f32, RangeStats)> = collectors
        .par_iter_mut()
        .enumerate()
        .map(|(slot, collector)| {
            let amax = collector
                .amax()
                .with_context(|| format!("tensor `{}`", graph.value(targets[slot]).name))?;
            Ok((amax, collector.stats()))
        })
        .collect::<Result<_>>()?;
    let mut result = CalibrationResult::default();
    for (&v, (amax, stats)) in targets.iter().zip(chosen) {
        result.ranges.insert(v, amax);
        result.stats.push((v, stats));
    }
    Ok(result)
}

/// Each target's per-channel largest magnitude over the samples of
/// `files`: what equalization scales channels by. Targets are `(tensor, channel axis,
/// channels)`. One forward pass per sample, on several workers at once
/// ([`stream_samples`]) whose maxima are then combined (the same whatever the number of
/// workers); memory is one sample's activations per worker.
pub fn channel_ranges(
    graph: &Graph,
    set: &CalibrationSet,
    files: &[usize],
    targets: &[(ValueId, usize, usize)],
    progress: &Progress,
) -> Result<HashMap<ValueId, Vec<f32>>> {
    let plan = rtq_exec::Plan::new(graph).context("preparing the FP32 graph for equalization")?;
    let specs = InputSpec::from_graph(graph)?;
    let wanted: HashMap<ValueId, (usize, usize)> =
        targets.iter().map(|&(v, a, c)| (v, (a, c))).collect();
    let new_ranges = || -> HashMap<ValueId, Vec<f32>> {
        targets.iter().map(|&(v, _, c)| (v, vec![0.0; c])).collect()
    };
    let observe = |ranges: &mut HashMap<ValueId, Vec<f32>>,
                   file: usize,
                   v: ValueId,
                   t: &Arc<Tensor>|
     -> Result<()> {
        let Some(&(axis, channels)) = wanted.get(&v) else {
            return Ok(());
        };
        if !observe_channels(t, axis, channels, ranges.get_mut(&v).expect("target")) {
            anyhow::bail!(
                "{}: tensor `{}` has values that are not finite, or not {channels} channels \
                 on axis {axis}",
                set.files()[file].display(),
                graph.value(v).name,
            );
        }
        Ok(())
    };
    let bar = progress.task("observing channel ranges", files.len() as u64);
    let streamed = stream_samples(&plan, set, files, &specs, &new_ranges, &observe, &bar);
    bar.finish();
    let (per_worker, _) = streamed?;
    let mut per_worker = per_worker.into_iter();
    let mut ranges = per_worker.next().unwrap_or_else(new_ranges);
    for more in per_worker {
        for (v, theirs) in more {
            let mine = ranges.get_mut(&v).expect("every worker holds every target");
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m = m.max(t);
            }
        }
    }
    Ok(ranges)
}

/// Folds `t`'s per-channel largest magnitudes into `ranges`; false when `t` has
/// non-finite values or another channel count.
fn observe_channels(t: &Tensor, axis: usize, channels: usize, ranges: &mut [f32]) -> bool {
    let shape = t.shape();
    if shape.get(axis) != Some(&channels) {
        return false;
    }
    let mut finite = true;
    for_each_channel_run(t, axis, |c, run| match rtq_calib::largest_magnitude(run) {
        Some(m) => ranges[c] = ranges[c].max(m),
        None => finite = false,
    });
    finite
}

/// `t`'s values as f32: borrowed where they are, converted otherwise.
pub(crate) fn f32_values(t: &Tensor) -> std::borrow::Cow<'_, [f32]> {
    match t.as_f32() {
        Ok(values) => std::borrow::Cow::Borrowed(values),
        Err(_) => std::borrow::Cow::Owned(t.to_f32_vec()),
    }
}

/// Calls `f(channel, run)` for every contiguous run of `t`'s values that share one
/// index along `axis` (the runs of channel `c` of an NCHW tensor along axis 1).
pub fn for_each_channel_run(t: &Tensor, axis: usize, mut f: impl FnMut(usize, &[f32])) {
    let shape = t.shape();
    let channels = shape.get(axis).copied().unwrap_or(1).max(1);
    let inner: usize = shape.get(axis + 1..).map_or(1, |s| s.iter().product());
    for (i, run) in f32_values(t).chunks(inner.max(1)).enumerate() {
        f(i % channels, run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_calib::{CalibOptions, EntropyCalibrator, MaxCalibrator};
    use rtq_ir::DType;

    #[test]
    fn channel_maxima_on_outer_and_inner_axes_and_non_finite_values() {
        // Channels on axis 1 of NCHW: runs of 100 values (the vector scan).
        let mut values: Vec<f32> = (0..300).map(|i| (i % 100) as f32 * 0.25).collect();
        values[150] = -70.0;
        let t = Tensor::from_f32(vec![1, 3, 10, 10], values);
        let mut ranges = vec![0.5, 0.0, 0.0];
        assert!(observe_channels(&t, 1, 3, &mut ranges));
        assert_eq!(ranges, [24.75, 70.0, 24.75]);
        // Channels on the last axis: runs of one value.
        let t = Tensor::from_f32(
            vec![2, 2, 3],
            vec![1., -2., 3., -4., 5., 0., 0., 0., 9., 1., 1., 1.],
        );
        let mut ranges = vec![0.0; 3];
        assert!(observe_channels(&t, 2, 3, &mut ranges));
        assert_eq!(ranges, [4.0, 5.0, 9.0]);
        assert!(!observe_channels(&t, 2, 4, &mut [0.0; 4]), "channel count");
        for bad in [f32::NAN, f32::INFINITY] {
            let mut values = vec![1.0f32; 200];
            values[130] = bad;
            let t = Tensor::from_f32(vec![1, 2, 100], values.clone());
            assert!(!observe_channels(&t, 1, 2, &mut [0.0; 2]));
            let t = Tensor::from_f32(vec![100, 2], values);
            assert!(!observe_channels(&t, 1, 2, &mut [0.0; 2]));
        }
    }

    #[test]
    fn relu_outputs_of_observed_inputs_are_derived_once() {
        // x -> Relu -> a -> Relu -> b, x -> Abs -> c, and a Relu of another domain.
        let mut g = Graph::new("g", 17);
        let x = g.add_input("x", DType::F32, vec![4.into()]);
        let value = |g: &mut Graph, name: &str| g.add_value(name, Some(DType::F32), None);
        let (a, b, c, d) = (
            value(&mut g, "a"),
            value(&mut g, "b"),
            value(&mut g, "c"),
            value(&mut g, "d"),
        );
        g.add_node("r1", "Relu", vec![Some(x)], vec![a], Default::default());
        g.add_node("r2", "Relu", vec![Some(a)], vec![b], Default::default());
        g.add_node("abs", "Abs", vec![Some(x)], vec![c], Default::default());
        let custom = g.add_node("r3", "Relu", vec![Some(x)], vec![d], Default::default());
        g.node_mut(custom).domain = "com.example".into();
        let targets = [x, a, b, c, d];
        let slot_of = targets.iter().enumerate().map(|(i, &v)| (v, i)).collect();
        let entropy = EntropyCalibrator::new(&CalibOptions::default());
        assert_eq!(
            relu_sources(&g, &targets, &slot_of, &entropy),
            [None, Some(0), None, None, None]
        );
        assert_eq!(
            relu_sources(&g, &targets, &slot_of, &MaxCalibrator),
            [None, Some(0), None, None, None]
        );
        // An input that is not observed: the Relu output is observed itself.
        let observed_a: HashMap<ValueId, usize> = [(a, 0), (b, 1)].into();
        assert_eq!(
            relu_sources(&g, &[a, b], &observed_a, &entropy),
            [None, Some(0)]
        );
    }
}
