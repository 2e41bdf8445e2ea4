use thiserror::Error;

/// Errors of the precision transforms; each names the node or tensor.
#[derive(Debug, Error)]
pub enum QuantError {
    /// An activation that the plan quantizes has no calibrated range.
    #[error("tensor `{0}` is quantized but has no calibration range")]
    MissingRange(String),
    /// A calibrated range is unusable (zero, negative, NaN or infinite).
    #[error("tensor `{tensor}`: calibration range {amax} is not a positive finite number")]
    BadRange {
        /// Tensor name.
        tensor: String,
        /// The range given.
        amax: f32,
    },
    /// The graph lacks a fact the transform needs.
    #[error("node `{node}` ({op}): {message}")]
    Node {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// What is missing or wrong.
        message: String,
    },
    /// The transform's options cannot work.
    #[error("{0}")]
    Options(String),
    /// A filter pattern is malformed.
    #[error("bad node filter `{0}`")]
    BadFilter(String),
}
