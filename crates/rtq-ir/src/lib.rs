//! rtq's intermediate representation.
//!
//! The graph is an arena: nodes and values live in vectors and refer to each
//! other through typed ids ([`NodeId`], [`ValueId`]). ONNX names are labels
//! carried along for diagnostics and emission, never the wiring itself.

#![warn(missing_docs)]

mod attr;
mod dim;
mod dtype;
mod dump;
mod error;
mod graph;
mod int4;
mod quant;
mod reduce_axes;
mod tensor;
mod topo;
mod verify;

pub use attr::{Attr, Subgraph};
pub use dim::{format_shape, known_shape, Dim, Shape};
pub use dtype::DType;
pub use dump::dump;
pub use error::IrError;
/// FP8 E4M3 scalar (OCP `E4M3FN`), re-exported so dependants need no `float8` dependency.
pub use float8::F8E4M3;
pub use graph::{unique_name, Graph, Node, NodeId, Value, ValueId};
pub use int4::{
    int4_from_f64, int4_from_nibble, int4_packed_len, pack_int4, unpack_int4, INT4_MAX, INT4_MIN,
};
pub use quant::{QuantGrid, QuantParams, ScaleFormat};
pub use reduce_axes::{reduce_axes_is_input, REDUCE_AXES_INPUT_SINCE};
pub use tensor::{Tensor, TensorData};
pub use verify::verify;

/// Result type of the IR crate.
pub type Result<T, E = IrError> = std::result::Result<T, E>;
