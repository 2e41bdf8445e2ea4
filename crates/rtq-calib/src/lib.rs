//! rtq's INT8 calibration.
//!
//! * **Calibrators** pick a symmetric range `amax` per tensor (int8 scale =
//!   `amax / 127`) from values streamed batch by batch through a
//!   [`RangeCollector`]: [`calibrator_by_name`] offers `entropy` (TensorRT
//!   `EntropyCalibration2`, the default), `max`, `percentile` and `mse`.
//!   Collectors use constant memory whatever the number of batches and are
//!   independent per tensor, so callers may update them in parallel.
//! * **TensorRT calibration caches**: [`CalibrationCache`] (checked) / [`parse_cache_text`].
//! * **Calibration data**: [`CalibrationSet`] reads `.npy`, `.npz` and image
//!   files from a directory into samples feeding a model's inputs.

#![warn(missing_docs)]

mod all_methods;
mod amax;
mod cache;
mod chunked;
mod collector;
pub mod dataset;
mod entropy;
mod error;
mod hist_collector;
mod histogram;
mod max;
mod mse;
mod observed;
mod options;
mod percentile;
mod registry;
mod scan;
mod split_histogram;
mod stats;

pub use all_methods::{AllMethodsCalibrator, MethodRule};
pub use amax::{MIN_AMAX, ZERO_RANGE_AMAX};
pub use cache::{
    checked_cache_text, parse_cache_text, scale_to_cache_hex, trt_version_tag, write_cache_text,
    CalibrationCache, CACHE_ALGORITHM,
};
pub use collector::{Calibrator, RangeCollector, RangeStats};
pub use dataset::{
    load_file, CalibrationSet, DataOptions, InputSpec, Layout, PackWriter, PackedKind, Sample,
    PACK_EXTENSION,
};
pub use entropy::{
    entropy_threshold, entropy_threshold_from, kl_divergences, level_zero_bin, EntropyCalibrator,
    EntropyChoice, EntropyRule, INT8_LEVELS, KL_EPSILON,
};
pub use error::CalibError;
pub use hist_collector::{HistogramCollector, HistogramRule};
pub use histogram::AbsHistogram;
pub use max::{MaxCalibrator, MaxCollector};
pub use mse::{histogram_mse, mse_threshold, MseCalibrator, MseChoice, MseRule};
pub use options::{CalibOptions, MAX_BINS, MIN_BINS};
pub use percentile::{histogram_percentile, PercentileCalibrator, PercentileRule};
pub use registry::{calibrator_by_name, calibrator_names, CalibMethod, DEFAULT_CALIBRATOR};
pub use scan::largest_magnitude;
pub use split_histogram::SplitHistogram;
pub use stats::{CalibrationStats, TensorStats, STATS_FORMAT, STATS_VERSION};
