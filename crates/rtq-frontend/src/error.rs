use std::path::{Path, PathBuf};
use thiserror::Error;

/// Errors raised while reading or lowering an ONNX model; each names the file, node or tensor.
#[derive(Debug, Error)]
pub enum FrontendError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The bytes are not a valid ONNX `ModelProto` (truncated, garbage or another format).
    #[error("{origin}: not a valid ONNX model: {reason}")]
    NotOnnx {
        /// File name, or `<memory>`.
        origin: String,
        /// What the decoder saw.
        reason: String,
    },
    /// The model uses ops rtq cannot import; every offending node is listed.
    #[error("unsupported ops: {}", format_unsupported(.0))]
    UnsupportedOps(Vec<(String, String, String)>),
    /// The model's opset is outside what rtq supports.
    #[error("default-domain opset {0} is not supported (rtq reads opsets {1})")]
    UnsupportedOpset(i64, String),
    /// A node is malformed (missing input, bad attribute, ...).
    #[error("node `{node}` ({op}): {message}")]
    BadNode {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// What is wrong.
        message: String,
    },
    /// A tensor (initializer, constant or external data) is malformed.
    #[error("tensor `{tensor}`: {message}")]
    BadTensor {
        /// Tensor name.
        tensor: String,
        /// What is wrong.
        message: String,
    },
    /// The graph is malformed (dangling names, duplicate outputs, cycles).
    #[error("invalid graph: {0}")]
    BadGraph(String),
    /// Context added on the way out: which file the error came from.
    #[error("{path}: {source}")]
    InFile {
        /// The model file.
        path: PathBuf,
        /// The underlying error.
        source: Box<FrontendError>,
    },
}

fn format_unsupported(list: &[(String, String, String)]) -> String {
    list.iter()
        .map(|(node, domain, op)| {
            if domain.is_empty() {
                format!("`{op}` (node `{node}`)")
            } else {
                format!("`{domain}::{op}` (node `{node}`)")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl FrontendError {
    /// Wraps the error with the model file it came from (errors that name it already stay as they are).
    pub fn in_file(self, path: &Path) -> FrontendError {
        match self {
            e @ (FrontendError::Io { .. }
            | FrontendError::NotOnnx { .. }
            | FrontendError::InFile { .. }) => e,
            other => FrontendError::InFile {
                path: path.to_path_buf(),
                source: Box::new(other),
            },
        }
    }

    pub(crate) fn bad_node(node: &str, op: &str, message: impl Into<String>) -> FrontendError {
        FrontendError::BadNode {
            node: node.to_string(),
            op: op.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn bad_tensor(tensor: &str, message: impl Into<String>) -> FrontendError {
        FrontendError::BadTensor {
            tensor: tensor.to_string(),
            message: message.into(),
        }
    }
}
