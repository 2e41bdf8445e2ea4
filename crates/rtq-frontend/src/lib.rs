//! ONNX frontend (skeleton: being written).

use std::path::Path;

/// Errors of the frontend.
#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    /// Placeholder while the frontend is written.
    #[error("{0}")]
    Other(String),
}

/// Loads an ONNX model file (with external data next to it) into rtq's IR.
pub fn load_model(path: &Path) -> Result<rtq_ir::Graph, FrontendError> {
    Err(FrontendError::Other(format!("{}: frontend not written yet", path.display())))
}
