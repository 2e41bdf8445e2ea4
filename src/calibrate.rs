//! Calibration driver: streams samples through the FP32 graph on the CPU executor and
//! feeds every observed tensor to its range collector.

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use rtq_calib::{CalibrationSet, Calibrator, InputSpec, RangeCollector, RangeStats};
use rtq_ir::{Graph, ValueId};
use std::collections::HashMap;
use std::time::Instant;

/// Ranges and statistics gathered by [`calibrate`].
#[derive(Debug, Default)]
pub struct CalibrationResult {
    /// Chosen amax per observed tensor.
    pub ranges: HashMap<ValueId, f32>,
    /// Statistics per observed tensor, in the order the tensors were requested.
    pub stats: Vec<(ValueId, RangeStats)>,
    /// Samples streamed through the graph.
    pub samples: usize,
    /// Wall time in seconds.
    pub seconds: f64,
}

/// Streams the files `files` (indices into `set`) through `graph`, observing `targets`.
/// Memory stays flat: one sample's activations at a time, histograms of fixed size.
pub fn calibrate(
    graph: &Graph,
    set: &CalibrationSet,
    files: &[usize],
    targets: &[ValueId],
    calibrator: &dyn Calibrator,
    show_progress: bool,
) -> Result<CalibrationResult> {
    let start = Instant::now();
    let plan = rtq_exec::Plan::new(graph).context("preparing the FP32 graph for calibration")?;
    let specs = InputSpec::from_graph(graph)?;
    let slot_of: HashMap<ValueId, usize> =
        targets.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    let mut collectors: Vec<Box<dyn RangeCollector>> =
        targets.iter().map(|_| calibrator.collector()).collect();
    let bar = progress_bar(
        files.len() as u64,
        show_progress,
        &format!("calibrating ({})", calibrator.name()),
    );
    let mut samples = 0usize;
    for &file in files {
        let batch = set.load(file, &specs)?;
        for sample in batch {
            let mut observed: Vec<Option<Vec<f32>>> = vec![None; targets.len()];
            plan.run_observed(&sample, &mut |v, t| {
                if let Some(&slot) = slot_of.get(&v) {
                    observed[slot] = Some(t.to_f32_vec());
                }
            })
            .with_context(|| {
                format!(
                    "running calibration sample from {}",
                    set.files()[file].display()
                )
            })?;
            let results: Vec<Result<(), String>> = collectors
                .par_iter_mut()
                .zip(observed.par_iter())
                .enumerate()
                .map(|(slot, (collector, data))| match data {
                    Some(d) => collector.observe(d).map_err(|e| {
                        format!(
                            "{}: tensor `{}`: {e}",
                            set.files()[file].display(),
                            graph.value(targets[slot]).name
                        )
                    }),
                    None => Ok(()),
                })
                .collect();
            if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
                anyhow::bail!(e);
            }
            samples += 1;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if samples == 0 {
        anyhow::bail!("calibration saw no samples");
    }
    let mut result = CalibrationResult {
        samples,
        ..Default::default()
    };
    for (slot, collector) in collectors.iter().enumerate() {
        let v = targets[slot];
        let amax = collector
            .amax()
            .with_context(|| format!("tensor `{}`", graph.value(v).name))?;
        result.ranges.insert(v, amax);
        result.stats.push((v, collector.stats()));
    }
    result.seconds = start.elapsed().as_secs_f64();
    Ok(result)
}

/// A progress bar on stderr, hidden when `show` is false or stderr is not a terminal.
pub fn progress_bar(len: u64, show: bool, message: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} files {elapsed_precise} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}
