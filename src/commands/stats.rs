//! `rtq stats`: merge and summarise saved calibration statistics.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use rtq_calib::{AllMethodsCalibrator, CalibMethod, CalibOptions, CalibrationStats};
use std::path::PathBuf;

/// `rtq stats` subcommands.
#[derive(Debug, Subcommand)]
pub enum StatsCommand {
    /// Merge the statistics of calibration shards (`rtq compile --shard I/N
    /// --save-stats`) into one file: exactly what one calibration over all their
    /// files gives, in any order.
    Merge(MergeArgs),
    /// Print what a statistics file holds and the range every method picks per tensor.
    Show(ShowArgs),
}

/// Arguments of `rtq stats merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Statistics files (one per shard).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The merged file.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Arguments of `rtq stats show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A statistics file.
    pub file: PathBuf,
    /// Show at most this many tensors (those whose methods disagree most first).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Percentile for the percentile column.
    #[arg(long, default_value_t = 99.99)]
    pub percentile: f64,
}

/// Runs `rtq stats`.
pub fn run(command: StatsCommand) -> Result<()> {
    match command {
        StatsCommand::Merge(args) => {
            let merged = rtq::pipeline::read_and_merge(&args.inputs)?;
            rtq_emit::write_atomic(&args.output, merged.to_json().as_bytes())
                .with_context(|| format!("writing {}", args.output.display()))?;
            println!(
                "{}: {} shard(s), {} sample(s) from {} file(s), {} tensor(s)",
                args.output.display(),
                args.inputs.len(),
                merged.samples,
                merged.files.len(),
                merged.tensors.len()
            );
            Ok(())
        }
        StatsCommand::Show(args) => {
            let stats = rtq::pipeline::read_stats(&args.file)?;
            print!("{}", summary(&stats, args.top, args.percentile)?);
            Ok(())
        }
    }
}

/// The text `rtq stats show` prints: the header, then per tensor the range of every
/// method, ordered by how far apart the methods' ranges are.
fn summary(stats: &CalibrationStats, top: usize, percentile: f64) -> Result<String> {
    use rtq_calib::RangeCollector;
    let options = CalibOptions {
        num_bins: stats.num_bins,
        percentile,
    };
    let calibrator = AllMethodsCalibrator::new(CalibMethod::default(), &options)?;
    let mut rows = Vec::with_capacity(stats.tensors.len());
    for (name, s) in &stats.tensors {
        let collector: Box<dyn RangeCollector> = calibrator.restore(s)?;
        let amax: Vec<f32> = CalibMethod::ALL
            .iter()
            .map(|&m| collector.amax_for(m).expect("histogram collector"))
            .collect::<Result<_, _>>()
            .with_context(|| format!("tensor `{name}`"))?;
        let (lo, hi) = amax
            .iter()
            .fold((f32::MAX, 0f32), |(lo, hi), &a| (lo.min(a), hi.max(a)));
        rows.push((hi / lo.max(f32::MIN_POSITIVE), name, s, amax));
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let mut out = format!(
        "{} statistics of {}: {} sample(s) from {} file(s), {} tensor(s), {}-bin histograms\n",
        rtq_calib::STATS_FORMAT,
        stats.model,
        stats.samples,
        stats.files.len(),
        stats.tensors.len(),
        stats.num_bins
    );
    let methods: Vec<String> = CalibMethod::ALL
        .iter()
        .map(|m| format!("{:>11}", m.name()))
        .collect();
    out += &format!(
        "{:<40} {:>11} {:>11}{}\n",
        "tensor",
        "min",
        "max",
        methods.join("")
    );
    for (_, name, s, amax) in rows.iter().take(top) {
        let cols: Vec<String> = amax.iter().map(|a| format!("{a:>11.5}")).collect();
        out += &format!(
            "{:<40} {:>11.5} {:>11.5}{}\n",
            name,
            s.min,
            s.max,
            cols.join("")
        );
    }
    if rows.len() > top {
        out += &format!("... {} more (--top N)\n", rows.len() - top);
    }
    Ok(out)
}
