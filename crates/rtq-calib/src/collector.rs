//! The calibrator and range-collector traits and the per-tensor report.

use crate::CalibError;
use serde::Serialize;

/// A calibration algorithm, chosen by name from the registry
/// ([`crate::calibrator_by_name`]): `entropy` (default), `max`, `percentile`, `mse`.
pub trait Calibrator: Send + Sync {
    /// The registry name (`entropy`, `max`, ...).
    fn name(&self) -> &'static str;
    /// A fresh per-tensor range collector.
    fn collector(&self) -> Box<dyn RangeCollector>;
}

/// Streams one tensor's values over many batches and then picks its range.
///
/// Memory stays constant in the number of batches. Collectors of different
/// tensors are independent, so a caller may update them in parallel.
pub trait RangeCollector: Send {
    /// Observes one batch.
    ///
    /// Fails with [`CalibError::NonFinite`] if the batch holds NaN or Inf; the
    /// collector is then left unchanged. The caller adds the tensor and file
    /// names (see [`CalibError::for_tensor`]).
    fn observe(&mut self, values: &[f32]) -> Result<(), CalibError>;
    /// Folds in everything `other` (a collector of the same calibrator) observed, as
    /// if this collector had observed it too: the ranges then depend only on the
    /// values the two saw together, not on how they were split between them, so
    /// calibration files can be observed on several threads and the collectors merged.
    ///
    /// Fails with [`CalibError::Stats`] if `other` keeps other statistics (another
    /// calibrator, another bin count); this collector is then left unchanged.
    fn merge(&mut self, other: &dyn RangeCollector) -> Result<(), CalibError>;
    /// The final symmetric range `amax` (finite and > 0); the int8 scale is `amax / 127`.
    ///
    /// Fails with [`CalibError::NoData`] if nothing was observed.
    fn amax(&self) -> Result<f32, CalibError>;
    /// Statistics for reports.
    fn stats(&self) -> RangeStats;
    /// The range `method` would pick from what was observed, where the collector keeps
    /// enough to tell (see [`crate::AllMethodsCalibrator`]); `None` otherwise.
    fn amax_for(&self, method: crate::CalibMethod) -> Option<Result<f32, CalibError>> {
        let _ = method;
        None
    }
    /// A collector holding exactly what this one would have collected from `Relu` of
    /// every value it observed, where it keeps enough to tell (then a `Relu`'s output
    /// need not be observed apart from its input); `None` otherwise.
    fn relu_image(&self) -> Option<Box<dyn RangeCollector>> {
        None
    }
    /// Everything observed, where the collector keeps a histogram (to save and merge,
    /// see [`crate::CalibrationStats`]); `None` otherwise.
    fn statistics(&self) -> Option<crate::TensorStats> {
        None
    }
    /// The quantization noise of the range `amax` relative to the signal,
    /// `E[(x - q(x))^2] / E[x^2]` over what was observed, where the collector keeps a
    /// histogram to tell; `None` otherwise. Ranks tensors by how much INT8 hurts them.
    fn noise_ratio(&self, amax: f32) -> Option<f64> {
        let _ = amax;
        None
    }
}

/// What a collector saw and what it chose, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RangeStats {
    /// Smallest observed value (0 when nothing was observed).
    pub min: f32,
    /// Largest observed value (0 when nothing was observed).
    pub max: f32,
    /// Largest observed |x| (0 when nothing was observed).
    pub absmax: f32,
    /// Number of values observed.
    pub count: u64,
    /// The chosen range, as [`RangeCollector::amax`] returns it (0 when nothing was observed).
    pub amax: f32,
}
