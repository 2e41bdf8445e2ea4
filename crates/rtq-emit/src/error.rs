use std::path::PathBuf;
use thiserror::Error;

/// Errors of the emitters; each names the file or node involved.
#[derive(Debug, Error)]
pub enum EmitError {
    /// Writing the named file failed; nothing was left at its path.
    #[error("{path}: cannot write: {source}")]
    Io {
        /// Destination file.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
    /// The graph cannot be expressed in ONNX as it is.
    #[error("cannot emit ONNX: {0}")]
    Graph(String),
    /// Serialising a report failed.
    #[error("cannot serialise report: {0}")]
    Json(#[from] serde_json::Error),
}
