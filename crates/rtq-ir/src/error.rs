use thiserror::Error;

/// Errors raised while building, checking or reading the IR.
#[derive(Debug, Error)]
pub enum IrError {
    /// The graph breaks a structural invariant; the message names the node or value.
    #[error("invalid graph: {0}")]
    Invalid(String),
    /// A tensor's element count does not match its shape.
    #[error("tensor `{name}`: {len} elements do not fill shape {shape:?}")]
    ShapeMismatch {
        /// Tensor name.
        name: String,
        /// Elements present.
        len: usize,
        /// Declared shape.
        shape: Vec<usize>,
    },
    /// A tensor was read as a type it does not hold.
    #[error("tensor holds {actual:?}, expected {expected}")]
    WrongType {
        /// What the tensor holds.
        actual: crate::DType,
        /// What the caller asked for.
        expected: &'static str,
    },
    /// The graph has a cycle through the named node.
    #[error("graph has a cycle through node `{0}`")]
    Cycle(String),
}
