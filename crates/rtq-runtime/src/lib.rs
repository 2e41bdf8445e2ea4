//! rtq's embeddable inference runtime.
//!
//! * [`Engine::load`] opens a model with a backend: rtq's CPU executor for `.onnx`
//!   (feature `cpu`, default), TensorRT for `.plan`/`.engine` (feature `tensorrt`), on a
//!   CUDA device managed through cudarc (feature `cuda`, implied by `tensorrt`).
//! * [`Engine::infer`] runs on host tensors ([`HostTensor`]); [`Engine::inputs`] and
//!   [`Engine::outputs`] describe the model ([`TensorInfo`], -1 for dynamic dimensions).
//! * [`tensorrt::build_engine`] builds a strongly typed TensorRT engine from rtq's Q/DQ
//!   ONNX, writing the plan and a JSON sidecar.
//! * [`bench::run_benchmark`] measures latency percentiles and throughput like trtexec.
//! * [`triton::write_triton_repository`] exports a Triton model repository entry.
//!
//! Every path that needs a GPU, a driver or a feature missing from the build returns a
//! [`RuntimeError`] that says what is missing; none panics.

#![warn(missing_docs)]

pub mod bench;
pub mod cuda;
pub mod tensorrt;
pub mod triton;

#[cfg(feature = "cpu")]
pub mod cpu;

mod backend;
mod dtype;
mod engine;
mod error;
mod fsutil;
mod info;
mod options;
mod tensor;
mod validate;

pub use backend::{BackendKind, InferBackend};
pub use dtype::DataType;
pub use engine::Engine;
pub use error::RuntimeError;
pub use fsutil::write_atomic;
pub use info::TensorInfo;
pub use options::{Backend, LoadOptions, ModelFormat};
pub use tensor::HostTensor;
pub use validate::match_inputs;

/// The runtime's version (the rtq workspace version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
