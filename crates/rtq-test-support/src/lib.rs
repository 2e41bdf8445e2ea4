//! Helpers shared by rtq's tests; a dev-dependency only, never a dependency.
//!
//! It depends on rtq-ir alone, so that every crate above rtq-ir (rtq-exec included) can
//! use it in its own unit tests without seeing two copies of its types.

#![warn(missing_docs)]

mod fixtures;
mod graph;
mod node;
mod npy;
mod python;
mod rng;

pub use fixtures::{light_models, pp_ocr_models, python_package_path};
pub use graph::add_op;
pub use node::{attrs, node};
pub use npy::write_npy_f32;
pub use python::{run_python, run_python_inline, skip_python};
pub use rng::Rng;
