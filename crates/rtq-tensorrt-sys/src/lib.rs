//! Bindings to rtq's TensorRT shim (`shim/rtq_trt.h`), plus a small safe wrapper.
//!
//! * [`ffi`] holds the bindgen-generated declarations, committed in the crate (the
//!   header is pure C and changes rarely, so a build needs neither bindgen nor
//!   libclang). The symbols only exist when the `link` feature compiled the shim
//!   against TensorRT.
//! * The types in [`types`] and the error type [`TrtError`] are plain Rust and always
//!   available.
//! * With the `link` feature: [`Builder`] (ONNX -> serialized plan), [`Engine`]
//!   (deserialized plan, I/O introspection) and [`Context`] (shapes, addresses, enqueue).
//!
//! Every shim call needs a CUDA context current on the calling thread (the device's
//! primary context, as the CUDA runtime and cudarc use).

#![warn(missing_docs)]

pub mod ffi;
pub mod types;

mod error;

#[cfg(feature = "link")]
mod builder;
#[cfg(feature = "link")]
mod context;
#[cfg(feature = "link")]
mod engine;
#[cfg(feature = "link")]
mod version;

pub use error::{Status, TrtError};
pub use types::{DataType, IoMode, Location, ProfileSelector, Severity, TrtVersion};

#[cfg(feature = "link")]
pub use builder::{BuildOptions, BuildOutput, Builder, InputProfile};
#[cfg(feature = "link")]
pub use context::Context;
#[cfg(feature = "link")]
pub use engine::{Engine, TensorDesc};
#[cfg(feature = "link")]
pub use version::{header_version, library_version};

/// Whether this build links TensorRT (the `link` feature).
pub const LINKED: bool = cfg!(feature = "link");
