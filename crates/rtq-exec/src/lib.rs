//! rtq's CPU reference executor.
//!
//! It is the referee of the compiler: calibration observes every intermediate tensor
//! through [`Plan::run_observed`], accuracy checks run FP16 graphs and Q/DQ graphs
//! (per-tensor and per-axis) through [`Plan::run`], and constant folding evaluates single
//! nodes with [`eval_node`].
//!
//! Ops follow the default ONNX domain with opset-13 semantics (the frontend canonicalises
//! other opsets). Float kernels accept f32, f16, bf16 and f64 tensors, compute in f32 and
//! write their outputs in the input's float type, so an FP16 graph is emulated with a
//! rounding to half precision at every op boundary. Integer tensors are supported where
//! ONNX models use them (shape arithmetic, indices, comparisons, Q/DQ). FP8 E4M3
//! (`FLOAT8E4M3FN`) and INT4 tensors go through Cast, QuantizeLinear, DequantizeLinear
//! (INT4 per tensor, per axis and in blocks) and the data-movement ops, as ONNX allows.
//!
//! Convolutions (im2col, or Winograd F(2x2, 3x3) for 3x3 stride-1 ones) and matrix
//! products run on the `gemm` crate's SGEMM; elementwise, pooling and data-movement
//! kernels use rayon for big tensors.

#![warn(missing_docs)]

mod arena;
mod broadcast;
mod conv_tail;
mod ctx;
mod elem;
mod error;
mod feeds;
mod float;
mod fp8;
mod fuse;
mod gemm;
mod hoist;
pub mod igemm;
mod int4;
mod lower;
mod math;
mod memo;
mod nested;
mod ops;
mod par;
mod plan;
#[cfg(test)]
mod probe;
mod registry;
mod simd;
mod strided;

pub use arena::{into_le_bytes, recycle_tensor, tensor_from_le_bytes};
pub use conv_tail::fuse_conv_tails;
pub use error::ExecError;
pub use fuse::{fuse_activations, fuse_chains};
pub use hoist::hoist_quantize;
pub use lower::lower_to_integer;
pub use nested::{BodyScope, NestedObserver};
pub use ops::integer::INTEGER_DOMAIN;
pub use plan::{Observer, Plan};
pub use registry::{eval_node, supported_ops, supports, supports_node};
