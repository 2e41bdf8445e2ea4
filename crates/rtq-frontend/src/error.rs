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
    /// Context added on the way out: which file the error came from. The message
    /// includes the underlying error's, which is therefore not also its `source` (an
    /// error chain would print it twice).
    #[error("{path}: {inner}")]
    InFile {
        /// The model file.
        path: PathBuf,
        /// The underlying error.
        inner: Box<FrontendError>,
    },
}

/// Ops of onnxruntime's integer ("QOperator") quantization format and ONNX's integer
/// ops: a model made of them is already quantized.
const INTEGER_QUANTIZED_OPS: &[&str] = &[
    "QLinearConv",
    "QLinearMatMul",
    "ConvInteger",
    "MatMulInteger",
    "QLinearAdd",
    "QLinearMul",
    "QLinearConcat",
    "QLinearGlobalAveragePool",
    "QLinearAveragePool",
    "QLinearLeakyRelu",
    "QLinearSigmoid",
    "QLinearSoftmax",
    "QGemm",
    "QAttention",
    "DynamicQuantizeMatMul",
    "MatMulIntegerToFloat",
];

/// One line per op (with its count and the first nodes), led by a sentence when the
/// model is already quantized with integer ops.
fn format_unsupported(list: &[(String, String, String)]) -> String {
    let mut by_op: Vec<(String, Vec<&str>)> = Vec::new();
    for (node, domain, op) in list {
        let name = if domain.is_empty() {
            op.clone()
        } else {
            format!("{domain}::{op}")
        };
        match by_op.iter_mut().find(|(n, _)| *n == name) {
            Some((_, nodes)) => nodes.push(node),
            None => by_op.push((name, vec![node])),
        }
    }
    let groups: Vec<String> = by_op
        .iter()
        .map(|(op, nodes)| {
            let shown: Vec<String> = nodes.iter().take(3).map(|n| format!("`{n}`")).collect();
            let more = if nodes.len() > 3 {
                format!(" and {} more", nodes.len() - 3)
            } else {
                String::new()
            };
            let plural = if nodes.len() > 1 { "s" } else { "" };
            format!(
                "`{op}` ({} node{plural}: {}{more})",
                nodes.len(),
                shown.join(", ")
            )
        })
        .collect();
    let integer = list
        .iter()
        .filter(|(_, _, op)| INTEGER_QUANTIZED_OPS.contains(&op.as_str()))
        .count();
    let lead = if integer > 0 {
        format!(
            "the model is already quantized with integer operators ({integer} node(s)): rtq \
             quantizes float models, and keeps the QuantizeLinear/DequantizeLinear of Q/DQ \
             models; compile the float original instead. "
        )
    } else {
        String::new()
    };
    format!("{lead}{}", groups.join("; "))
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
                inner: Box::new(other),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, domain: &str, op: &str) -> (String, String, String) {
        (name.into(), domain.into(), op.into())
    }

    #[test]
    fn unsupported_ops_are_grouped_by_op() {
        let mut list: Vec<_> = (0..40)
            .map(|i| node(&format!("qc{i}"), "", "QLinearConv"))
            .collect();
        list.push(node("m", "com.example", "Fancy"));
        let text = FrontendError::UnsupportedOps(list).to_string();
        assert!(text.starts_with("unsupported ops: the model is already quantized with integer operators (40 node(s))"), "{text}");
        assert!(
            text.contains("`QLinearConv` (40 nodes: `qc0`, `qc1`, `qc2` and 37 more)"),
            "{text}"
        );
        assert!(
            text.contains("`com.example::Fancy` (1 node: `m`)"),
            "{text}"
        );
        let plain = FrontendError::UnsupportedOps(vec![node("g", "", "Gelu2")]).to_string();
        assert_eq!(plain, "unsupported ops: `Gelu2` (1 node: `g`)");
    }
}
