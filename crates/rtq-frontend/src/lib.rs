//! rtq's ONNX frontend: `ModelProto` bytes in, [`rtq_ir::Graph`] out.
//!
//! Decoding uses the prost messages of `rtq-onnx-proto`. Lowering canonicalises every
//! op to opset-13 semantics (attributes that later opsets turned into inputs become
//! constant inputs, old `Softmax` coercion is made explicit, `Upsample` becomes
//! `Resize`, ...) so passes, the executor and the emitter see one form per op.

#![warn(missing_docs)]

mod canonicalize;
mod decode;
mod error;
mod import;
mod registry;
mod tensor;
mod types;

pub use decode::{decode_model_proto, read_model_proto};
pub use error::FrontendError;
pub use import::{import_model, ImportOptions};
pub use registry::{imported_ops, is_known_op, rewritten_ops, SUPPORTED_OPSETS};
pub use tensor::tensor_from_proto;

use std::path::Path;

/// Loads the ONNX model at `path` (external data resolved next to it) into rtq's IR.
pub fn load_model(path: &Path) -> Result<rtq_ir::Graph, FrontendError> {
    let model = read_model_proto(path)?;
    let base = path.parent().unwrap_or_else(|| Path::new("."));
    import_model(&model, &ImportOptions::with_base_dir(base)).map_err(|e| e.in_file(path))
}

/// Lowers an in-memory ONNX model (no external data) into rtq's IR.
pub fn load_model_bytes(bytes: &[u8]) -> Result<rtq_ir::Graph, FrontendError> {
    let model = decode_model_proto(bytes)?;
    import_model(&model, &ImportOptions::default())
}
