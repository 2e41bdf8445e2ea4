//! The error type of every pass and of the pass manager.

use rtq_exec::ExecError;
use rtq_ir::IrError;
use thiserror::Error;

/// Error a hook registered with [`crate::PassManager::on_pass`] may return.
pub type HookError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Two facts about a node's tensors that contradict each other: input shapes that cannot
/// be combined, or a declared output type/shape that differs from the inferred one.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("pass `{pass}`, node `{node}` ({op}): {reason}: {first} vs {second}")]
pub struct Conflict {
    /// The pass that found the conflict.
    pub pass: &'static str,
    /// Node name.
    pub node: String,
    /// Node op type.
    pub op: String,
    /// What is wrong, e.g. `shapes are not broadcastable`.
    pub reason: String,
    /// The first fact, naming its tensor, e.g. ``input `a`: float[3]``.
    pub first: String,
    /// The second fact, naming its tensor.
    pub second: String,
}

/// Errors raised by passes; each names the pass and, where one is involved, the node.
#[derive(Debug, Error)]
pub enum PassError {
    /// Contradicting facts about a node's tensors (boxed to keep results small).
    #[error("{0}")]
    Conflict(Box<Conflict>),
    /// A node is malformed (missing input, bad attribute) in a way the pass cannot skip.
    #[error("pass `{pass}`, node `{node}` ({op}): {reason}")]
    InvalidNode {
        /// The pass.
        pass: &'static str,
        /// Node name.
        node: String,
        /// Node op type.
        op: String,
        /// What is wrong.
        reason: String,
    },
    /// Evaluating a node on constant inputs failed for a reason other than an
    /// unsupported op (unsupported ops are simply left in the graph).
    #[error("pass `{pass}`, node `{node}` ({op}): evaluation on constant inputs failed: {source}")]
    Eval {
        /// The pass.
        pass: &'static str,
        /// Node name.
        node: String,
        /// Node op type.
        op: String,
        /// The executor's error.
        #[source]
        source: Box<ExecError>,
    },
    /// The graph is structurally broken (e.g. has a cycle) so the pass cannot run.
    #[error("pass `{pass}`: {source}")]
    Ir {
        /// The pass.
        pass: &'static str,
        /// The IR error, which names the node or value involved.
        #[source]
        source: IrError,
    },
    /// A precision transform (INT8 Q/DQ, FP16) failed.
    #[error("pass `{pass}`: {source}")]
    Precision {
        /// The pass.
        pass: &'static str,
        /// The transform's error, which names the node or tensor.
        #[source]
        source: crate::quant::QuantError,
    },
    /// The graph handed to the pass manager fails verification before any pass ran.
    #[error("input graph is invalid: {source}")]
    InvalidInput {
        /// The verifier's error, which names the node or value involved.
        #[source]
        source: IrError,
    },
    /// The graph failed verification right after the named pass ran.
    #[error("graph is invalid after pass `{pass}`: {source}")]
    Verify {
        /// The pass that just ran.
        pass: String,
        /// The verifier's error, which names the node or value involved.
        #[source]
        source: IrError,
    },
    /// A pass name given by the user (e.g. in [`crate::OptimizeOptions::disabled`]) does
    /// not name any pass.
    #[error("unknown pass `{name}` (known passes: {known})")]
    UnknownPass {
        /// The name given.
        name: String,
        /// The known pass names, comma-separated.
        known: String,
    },
    /// The hook registered with the pass manager failed after the named pass.
    #[error("pass hook failed after pass `{pass}`: {source}")]
    Hook {
        /// The pass that just ran.
        pass: String,
        /// The hook's error.
        #[source]
        source: HookError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_message_names_node_and_both_facts() {
        let e = PassError::Conflict(Box::new(Conflict {
            pass: "infer-shapes",
            node: "add0".into(),
            op: "Add".into(),
            reason: "shapes are not broadcastable".into(),
            first: "input `a`: float[3]".into(),
            second: "input `b`: float[4]".into(),
        }));
        let msg = e.to_string();
        assert!(msg.contains("infer-shapes"), "{msg}");
        assert!(msg.contains("add0") && msg.contains("Add"), "{msg}");
        assert!(
            msg.contains("float[3]") && msg.contains("float[4]"),
            "{msg}"
        );
    }

    #[test]
    fn errors_stay_small() {
        assert!(std::mem::size_of::<PassError>() <= 128);
    }

    #[test]
    fn eval_error_keeps_its_source() {
        let e = PassError::Eval {
            pass: "constant-folding",
            node: "n".into(),
            op: "Foo".into(),
            source: Box::new(ExecError::Unsupported {
                node: "n".into(),
                op: "Foo".into(),
            }),
        };
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.to_string().contains("constant-folding"));
    }
}
