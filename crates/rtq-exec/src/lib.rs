//! rtq's CPU reference executor (skeleton: being written).

use rtq_ir::{Node, Tensor};
use thiserror::Error;

/// Errors of the executor; each names the node it arose in.
#[derive(Debug, Error)]
pub enum ExecError {
    /// The op is not implemented.
    #[error("node `{node}`: op `{op}` is not supported by the CPU executor")]
    Unsupported {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
    },
}

/// Evaluates one node on concrete inputs (`None` for omitted optional inputs).
pub fn eval_node(node: &Node, _inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, ExecError> {
    Err(ExecError::Unsupported {
        node: node.name.clone(),
        op: node.op_type.clone(),
    })
}
