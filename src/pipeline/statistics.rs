//! Calibration statistics saved (`--save-stats`, `--shard`) and reused (`--stats`):
//! every observed tensor's histogram, so other methods, exclusions or targets cost no
//! new forward passes, and shards calibrated apart merge into exactly one calibration.

use super::Build;
use crate::calibrate::CalibrationResult;
use anyhow::{bail, Context, Result};
use rtq_calib::{AllMethodsCalibrator, CalibMethod, CalibrationSet, CalibrationStats};
use rtq_ir::{Graph, ValueId};
use std::path::Path;

/// Reads a statistics file.
pub fn read_stats(path: &Path) -> Result<CalibrationStats> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading calibration statistics {}", path.display()))?;
    CalibrationStats::from_json(&text).with_context(|| path.display().to_string())
}

/// Reads statistics files and merges them (in the order given; the result does not
/// depend on it).
pub fn read_and_merge(paths: &[impl AsRef<Path>]) -> Result<CalibrationStats> {
    let Some((first, rest)) = paths.split_first() else {
        bail!("no statistics files given");
    };
    let mut merged = read_stats(first.as_ref())?;
    for path in rest {
        let path = path.as_ref();
        merged
            .merge(&read_stats(path)?)
            .with_context(|| format!("merging {}", path.display()))?;
    }
    Ok(merged)
}

/// The name a calibration file is recorded under: its path inside the set's directory.
pub fn file_name(set: &CalibrationSet, index: usize) -> String {
    let path = &set.files()[index];
    path.strip_prefix(set.dir())
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

impl Build<'_> {
    /// The calibration the saved `--stats` describe, for `targets`, with `method`'s
    /// ranges. Says out loud when they were collected on other files than this
    /// build's calibration split, and refuses to judge on files they have seen.
    pub(super) fn load_stats(
        &mut self,
        graph: &Graph,
        targets: &[ValueId],
        method: CalibMethod,
        split: Option<(&CalibrationSet, &[usize], &[usize])>,
    ) -> Result<CalibrationResult> {
        let opts = self.opts;
        let stats = read_and_merge(&opts.stats)?;
        let calibrator = AllMethodsCalibrator::new(
            method,
            &rtq_calib::CalibOptions {
                num_bins: stats.num_bins,
                ..opts.calib.clone()
            },
        )?;
        let result = CalibrationResult::from_statistics(graph, targets, &stats, &calibrator)
            .with_context(|| format!("calibration statistics {}", describe(&opts.stats)))?;
        if let Some((set, calib_files, held_out)) = split {
            let seen = |i: &usize| stats.files.contains(&file_name(set, *i));
            if let Some(&leak) = held_out.iter().find(|i| seen(i)) {
                bail!(
                    "--stats: held-out file {} was part of the saved calibration; the accuracy \
                     check would judge on data the ranges have seen (use the --holdout and \
                     --calib-samples the statistics were collected with)",
                    file_name(set, leak)
                );
            }
            let mut expected: Vec<String> =
                calib_files.iter().map(|&i| file_name(set, i)).collect();
            expected.sort();
            if expected != stats.files {
                self.report.warnings.push(format!(
                    "the saved statistics cover {} file(s), not this build's {} calibration \
                     file(s) in {}: the model is not the one a calibration here would give",
                    stats.files.len(),
                    expected.len(),
                    set.dir().display()
                ));
            }
        }
        self.lap("load-stats");
        Ok(result)
    }

    /// Writes `--save-stats`: what calibration observed on `files` of `set`.
    pub(super) fn save_stats(
        &self,
        path: &Path,
        graph: &Graph,
        result: &CalibrationResult,
        set: &CalibrationSet,
        files: &[usize],
    ) -> Result<()> {
        let tensors = result
            .statistics(graph)
            .context("--save-stats: this calibrator keeps no histograms")?;
        let mut names: Vec<String> = files.iter().map(|&i| file_name(set, i)).collect();
        names.sort();
        let stats = CalibrationStats {
            model: self
                .opts
                .model
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            num_bins: self.opts.calib.num_bins,
            samples: result.samples as u64,
            files: names,
            tensors,
        };
        rtq_emit::write_atomic(path, stats.to_json().as_bytes())
            .with_context(|| format!("--save-stats {}", path.display()))?;
        Ok(())
    }
}

/// The statistics files, for messages.
fn describe(paths: &[std::path::PathBuf]) -> String {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    names.join(", ")
}
