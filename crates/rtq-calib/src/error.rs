//! The crate's error type.

use std::path::PathBuf;
use thiserror::Error;

/// Everything that can go wrong while calibrating or loading calibration data.
///
/// Every variant names what it is about: the tensor, the file, the directory,
/// the option or the cache line. Errors raised by a [`crate::RangeCollector`]
/// do not know their tensor's name; callers attach it with
/// [`CalibError::for_tensor`].
#[derive(Debug, Error)]
pub enum CalibError {
    /// A batch handed to a collector holds NaN or infinite values.
    #[error("batch contains {count} NaN/Inf values out of {total}")]
    NonFinite {
        /// How many values are NaN or infinite.
        count: usize,
        /// How many values the batch has.
        total: usize,
    },
    /// A range was asked for before any value was observed.
    #[error("no values were observed, so no range can be computed")]
    NoData,
    /// An error about one tensor (wraps a collector error with the tensor's name).
    #[error("tensor `{tensor}`: {source}")]
    InTensor {
        /// The tensor's name.
        tensor: String,
        /// What went wrong.
        source: Box<CalibError>,
    },
    /// No calibrator is registered under this name.
    #[error("unknown calibrator `{name}`; known calibrators: {known}")]
    UnknownCalibrator {
        /// The name asked for.
        name: String,
        /// The registered names, comma separated.
        known: String,
    },
    /// An option value is out of its valid range.
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// The option's name.
        option: &'static str,
        /// Why the value is rejected.
        reason: String,
    },
    /// A TensorRT calibration cache line could not be parsed.
    #[error("calibration cache line {line}: {reason}")]
    CacheParse {
        /// 1-based line number.
        line: usize,
        /// What is wrong with the line.
        reason: String,
    },
    /// A calibration cache entry cannot be written.
    #[error("calibration cache entry `{tensor}`: {reason}")]
    CacheEntry {
        /// The tensor's name.
        tensor: String,
        /// Why it cannot be written.
        reason: String,
    },
    /// Reading a file or directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The calibration-data directory is unusable.
    #[error("calibration data directory {}: {reason}", dir.display())]
    DataDir {
        /// The directory.
        dir: PathBuf,
        /// Why it is unusable.
        reason: String,
    },
    /// The work reading the data was cancelled (see [`crate::CalibrationSet::cancel_with`]).
    #[error("cancelled")]
    Cancelled,
    /// A file index past the end of a calibration set.
    #[error("calibration data directory {}: file index {index} is out of range ({len} files)", dir.display())]
    IndexOutOfRange {
        /// The directory.
        dir: PathBuf,
        /// The index asked for.
        index: usize,
        /// How many files the set has.
        len: usize,
    },
    /// A loaded array's shape does not fit the model input.
    #[error("{}: shape {} does not match input `{input}` {expected}", file.display(), fmt_dims(actual))]
    ShapeMismatch {
        /// The data file.
        file: PathBuf,
        /// The model input.
        input: String,
        /// The array's shape.
        actual: Vec<usize>,
        /// The input's shape, `?` for dynamic dimensions.
        expected: String,
    },
    /// Loaded data holds NaN or infinite values.
    #[error("{}: tensor `{tensor}` contains {count} NaN/Inf values", file.display())]
    NonFiniteData {
        /// The data file.
        file: PathBuf,
        /// The array or input name.
        tensor: String,
        /// How many values are NaN or infinite.
        count: usize,
    },
    /// A loaded array's element type cannot feed the model input.
    #[error("{}: tensor `{tensor}`: {reason}", file.display())]
    DType {
        /// The data file.
        file: PathBuf,
        /// The array or input name.
        tensor: String,
        /// What is incompatible.
        reason: String,
    },
    /// The arrays in a file do not map onto the model inputs.
    #[error("{}: {reason}", file.display())]
    Inputs {
        /// The data file.
        file: PathBuf,
        /// Which inputs are missing, extra or ambiguous.
        reason: String,
    },
    /// A model input cannot be described to the data loader.
    #[error("model input `{input}`: {reason}")]
    ModelInput {
        /// The input's name.
        input: String,
        /// What is unknown or unsupported.
        reason: String,
    },
    /// A calibration statistics file is malformed or cannot be merged.
    #[error("calibration statistics: {reason}")]
    Stats {
        /// What is wrong.
        reason: String,
    },
    /// A file could not be decoded (corrupt npy/npz/image, unsupported content).
    #[error("{}: {reason}", file.display())]
    Decode {
        /// The data file.
        file: PathBuf,
        /// The decoder's complaint.
        reason: String,
    },
}

impl CalibError {
    /// Attaches the name of the tensor this error is about.
    pub fn for_tensor(self, tensor: impl Into<String>) -> CalibError {
        CalibError::InTensor {
            tensor: tensor.into(),
            source: Box::new(self),
        }
    }
}

/// Formats dimensions as `[1,3,224,224]`.
pub(crate) fn fmt_dims(dims: &[usize]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_tensor_names_the_tensor() {
        let e = CalibError::NonFinite {
            count: 3,
            total: 10,
        }
        .for_tensor("conv1_out");
        assert_eq!(
            e.to_string(),
            "tensor `conv1_out`: batch contains 3 NaN/Inf values out of 10"
        );
    }

    #[test]
    fn shape_mismatch_message() {
        let e = CalibError::ShapeMismatch {
            file: PathBuf::from("calib/img3.npy"),
            input: "data".into(),
            actual: vec![1, 3, 32, 32],
            expected: "[1,3,224,224]".into(),
        };
        assert_eq!(
            e.to_string(),
            "calib/img3.npy: shape [1,3,32,32] does not match input `data` [1,3,224,224]"
        );
    }
}
