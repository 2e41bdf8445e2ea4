//! ONNX protocol-buffer messages for rtq's frontend and emitter.
//!
//! The Rust code is generated once by `prost-build` and committed (see
//! `scripts/gen-onnx-proto.sh`), so building rtq never needs `protoc`.

#[allow(clippy::all, missing_docs, rustdoc::all)]
mod onnx;

pub use onnx::*;
pub use prost::Message;

/// `TensorProto.DataLocation::EXTERNAL`, re-exported under a short name.
pub const DATA_LOCATION_EXTERNAL: i32 = tensor_proto::DataLocation::External as i32;
