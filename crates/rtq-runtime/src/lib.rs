//! rtq's embeddable inference runtime: load a model, describe it, run it on host
//! tensors.
//!
//! The crate root is the whole API a service needs:
//!
//! * [`Engine::load`] opens a model with [`LoadOptions`]: a [`Backend`] choice and the
//!   CUDA device; the file's [`ModelFormat`] comes from its extension.
//! * [`Engine::infer`] runs on [`HostTensor`]s (name, [`DataType`], shape, bytes);
//!   [`Engine::inputs`] and [`Engine::outputs`] describe the model ([`TensorInfo`], -1
//!   for dynamic dimensions); [`Engine::backend_kind`] says which [`BackendKind`] runs it.
//! * [`InferBackend`] plugs a custom executor in ([`Engine::from_backend`]).
//! * Every failure is a [`RuntimeError`] naming the file, tensor or option involved;
//!   paths that need a GPU, a driver or a feature missing from the build say what is
//!   missing, and none panics. [`VERSION`] is the runtime's version.
//!
//! Cargo features:
//!
//! * `cpu` (default): `.onnx` models on rtq's CPU executor.
//! * `cuda`: [`Backend::Cuda`] checks the driver and device first ([`cuda::probe`]),
//!   through cudarc, which loads `libcuda` at run time (builds without CUDA).
//! * `tensorrt` (implies `cuda`): `.plan`/`.engine` files, and `.onnx` built in memory,
//!   on TensorRT; [`tensorrt::build_engine`] writes a plan and its JSON sidecar.
//!   Without it, [`tensorrt`] keeps the build options ([`LoadOptions::build`]) and its
//!   entry points return [`RuntimeError::TensorRtNotBuilt`].
//! * `bench`: `bench::run_benchmark`, trtexec-style latency percentiles and throughput.
//! * `triton`: `triton::write_triton_repository`, a Triton model repository entry.

#![warn(missing_docs)]

#[cfg(feature = "bench")]
pub mod bench;
pub mod cuda;
pub mod tensorrt;
#[cfg(feature = "triton")]
pub mod triton;

mod backend;
#[cfg(feature = "cpu")]
mod cpu;
mod dtype;
mod engine;
mod error;
#[cfg(any(feature = "triton", feature = "tensorrt"))]
mod fsutil;
mod info;
mod options;
mod profile;
mod tensor;
#[cfg(any(feature = "cpu", feature = "tensorrt"))]
mod validate;

pub use backend::{BackendKind, InferBackend};
pub use dtype::DataType;
pub use engine::Engine;
pub use error::RuntimeError;
pub use info::TensorInfo;
pub use options::{Backend, LoadOptions, ModelFormat};
pub use profile::LayerTime;
pub use tensor::HostTensor;

/// The runtime's version (the rtq workspace version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
