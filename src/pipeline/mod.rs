//! The compile pipeline as a sequence of typed stages:
//! [`Loaded`] -> [`Optimized`] (-> equalized [`Optimized`]) -> [`Calibrated`] -> [`Transformed`] -> [`CompileOutput`].
//!
//! Each stage is a method of [`Build`] that takes the previous stage's state and
//! returns the next one, or — where `--stop-after` ends the compile there — the
//! output as it stands ([`Flow::Stop`]). Every stage adds context to its errors;
//! nothing is written until every stage has succeeded (see [`output`]).

mod cache_import;
mod calibration;
mod equalize;
mod fallback;
mod histograms;
mod int4_fallback;
mod optimize;
mod options;
pub mod output;
mod passes;
mod precision;
mod sample_shapes;
mod statistics;
mod target;

pub use calibration::{float_activations, split_files, Calibrated, RangeSource};
pub use optimize::{Loaded, Optimized};
pub use options::{
    CompileOptions, HalfType, Int4Method, MethodChoice, Precision, Shard, Stage, StopAfter,
    DEFAULT_TRT_VERSION,
};
pub use output::{prepare_out_dir, weight_bytes_by_dtype, write_outputs, write_report};
pub use precision::Transformed;
pub use statistics::{read_and_merge, read_stats};

/// The accuracy check of a built model against FP32 (also `rtq eval`).
pub use crate::accuracy::evaluate;

use anyhow::Result;
use rtq_emit::CompileReport;
use std::time::Instant;

/// What a compile produced, in memory, before anything is written.
pub struct CompileOutput {
    /// The emitted model's file name (inside the output directory) and bytes.
    pub model: (String, Vec<u8>),
    /// Other files: (file name, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    /// The report.
    pub report: CompileReport,
}

/// What a stage hands on: the next stage's input, or the finished output when
/// `--stop-after` stops the compile there.
pub enum Flow<T> {
    /// Go on with this state.
    Next(T),
    /// Stop here with this output (boxed: it is large, and rare).
    Stop(Box<CompileOutput>),
}

/// A compile in progress: its options, the report filled in stage by stage and the
/// stage timings.
pub struct Build<'a> {
    opts: &'a CompileOptions,
    stem: String,
    report: CompileReport,
    /// Files produced by a stage for the output (the calibration cache).
    files: Vec<(String, Vec<u8>)>,
    timings: Vec<(String, f64)>,
    clock: Instant,
    /// FP32 outputs on the calibration files that judge candidate builds, computed
    /// at the first judgement (the reference graph does not change within a build).
    selection_reference: std::cell::OnceCell<crate::accuracy::ReferenceOutputs>,
    /// Every value name of the source model (`--calib-cache` entries must be among them).
    source_names: std::collections::HashSet<String>,
    /// Value shapes on a calibration sample (see `sample_shapes.rs`).
    sample_shapes:
        std::cell::OnceCell<std::sync::Arc<std::collections::HashMap<String, Vec<usize>>>>,
}

impl<'a> Build<'a> {
    /// A compile of `opts`, checked before any work is done.
    pub fn new(opts: &'a CompileOptions) -> Result<Build<'a>> {
        opts.validate()?;
        Ok(Build {
            opts,
            stem: opts.stem(),
            report: CompileReport {
                rtq_version: env!("CARGO_PKG_VERSION").to_string(),
                model: opts.model.display().to_string(),
                precision: Precision::FP32.name(),
                ..Default::default()
            },
            files: Vec::new(),
            timings: Vec::new(),
            clock: Instant::now(),
            selection_reference: std::cell::OnceCell::new(),
            sample_shapes: std::cell::OnceCell::new(),
            source_names: std::collections::HashSet::new(),
        })
    }

    /// Records the time since the previous lap under `name` and tells the progress
    /// observer.
    fn lap(&mut self, name: &str) {
        self.timings
            .push((name.to_string(), self.clock.elapsed().as_secs_f64()));
        self.clock = Instant::now();
        self.opts.progress.stage_done(name);
    }
}

/// Unwraps a stage's [`Flow`], returning the output early when it stopped, and fails
/// when the compile was cancelled meanwhile.
macro_rules! next {
    ($opts:ident, $stage:expr) => {
        match $stage? {
            Flow::Next(state) => {
                $opts.progress.check()?;
                state
            }
            Flow::Stop(output) => return Ok(*output),
        }
    };
}

/// Runs the pipeline; writes nothing.
pub fn compile(opts: &CompileOptions) -> Result<CompileOutput> {
    let mut build = Build::new(opts)?;
    let loaded = next!(opts, build.load());
    let optimized = next!(opts, build.optimize(loaded));
    let optimized = next!(opts, build.equalize(optimized));
    let calibrated = next!(opts, build.calibrate(&optimized));
    let transformed = next!(opts, build.transform(optimized, calibrated));
    build.evaluate(&transformed)?;
    let transformed = build.meet_target(transformed)?;
    build.emit(transformed)
}
