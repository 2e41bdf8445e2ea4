//! The executor's error type.

use thiserror::Error;

/// Errors of the executor. Every variant names the node (and its op), the graph input or
/// the value involved.
#[derive(Debug, Error)]
pub enum ExecError {
    /// The op is not implemented by the CPU executor.
    #[error("node `{node}`: op `{op}` is not supported by the CPU executor")]
    Unsupported {
        /// Node name.
        node: String,
        /// Op type (prefixed by its domain when not the default one).
        op: String,
    },
    /// Several nodes use ops the executor does not implement; lists all of them as
    /// (node name, op type).
    #[error("{} node(s) use ops the CPU executor does not support: {}", .0.len(), format_nodes(.0))]
    UnsupportedMany(Vec<(String, String)>),
    /// A node's inputs or attributes are invalid for its op.
    #[error("node `{node}` ({op}): {message}")]
    BadInput {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// What is wrong.
        message: String,
    },
    /// A graph input was not fed.
    #[error("graph input `{input}` was not fed")]
    MissingFeed {
        /// Graph input name.
        input: String,
    },
    /// A feed names no graph input.
    #[error("feed `{input}` is not a graph input (inputs: {known})")]
    UnknownFeed {
        /// The fed name.
        input: String,
        /// The graph's input names, comma separated.
        known: String,
    },
    /// The same input was fed twice.
    #[error("graph input `{input}` is fed more than once")]
    DuplicateFeed {
        /// Graph input name.
        input: String,
    },
    /// A feed's element type or shape does not match the graph input's declaration.
    #[error("graph input `{input}`: expected {expected}, got {got}")]
    FeedMismatch {
        /// Graph input name.
        input: String,
        /// What the graph declares, e.g. `float[N,3,224,224]`.
        expected: String,
        /// What was fed, e.g. `float[1,3,256,256]`.
        got: String,
    },
    /// A node reads a value that nothing defines.
    #[error("node `{node}` ({op}) reads `{value}`, which is neither a graph input, a constant nor a node output")]
    Undefined {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// The value's name.
        value: String,
    },
    /// A graph output is not defined by any node, input or constant.
    #[error("graph output `{output}` is not produced by any node, input or constant")]
    UndefinedOutput {
        /// The output's name.
        output: String,
    },
    /// The graph is structurally invalid; the message names the node or value.
    #[error("invalid graph: {0}")]
    InvalidGraph(String),
    /// The graph has a cycle through the named node.
    #[error("graph has a cycle through node `{node}`")]
    Cycle {
        /// A node on the cycle.
        node: String,
    },
}

fn format_nodes(nodes: &[(String, String)]) -> String {
    nodes
        .iter()
        .map(|(node, op)| format!("`{node}` ({op})"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_many_lists_every_node() {
        let err = ExecError::UnsupportedMany(vec![
            ("a".into(), "Foo".into()),
            ("b".into(), "com.x.Bar".into()),
        ]);
        let text = err.to_string();
        assert!(text.starts_with("2 node(s)"), "{text}");
        assert!(
            text.contains("`a` (Foo)") && text.contains("`b` (com.x.Bar)"),
            "{text}"
        );
    }

    #[test]
    fn bad_input_names_node_and_op() {
        let err = ExecError::BadInput {
            node: "conv1".into(),
            op: "Conv".into(),
            message: "weights must be 4-D".into(),
        };
        assert_eq!(err.to_string(), "node `conv1` (Conv): weights must be 4-D");
    }
}
