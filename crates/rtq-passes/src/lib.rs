//! rtq's graph passes: the [`Pass`] trait and [`PassManager`], the optimisation passes
//! (identity removal, constant folding, BatchNormalization and channel-affine folding,
//! dead-code elimination) and shape inference.
//!
//! The standard pipeline is [`optimization_passes`]; [`optimize`] runs it to a fixed
//! point.

#![warn(missing_docs)]

mod affine;
mod constant_folding;
mod dce;
mod error;
mod fold_batch_norm;
mod fold_channel_affine;
mod fold_if;
mod macs;
mod manager;
mod options;
mod pass;
mod pipeline;
pub mod quant;
mod remove_identity;
mod shape_infer;
mod stats;
mod util;

pub use constant_folding::{ConstantFolding, DEFAULT_FOLD_SIZE_LIMIT};
pub use dce::DeadCodeElimination;
pub use error::{Conflict, HookError, PassError};
pub use fold_batch_norm::FoldBatchNorm;
pub use fold_channel_affine::FoldChannelAffine;
pub use fold_if::FoldIf;
pub use macs::node_macs;
pub use manager::{HookOutcome, PassEvent, PassHook, PassManager, DEFAULT_MAX_ITERATIONS};
pub use options::OptimizeOptions;
pub use pass::Pass;
pub use pipeline::{optimization_passes, optimize, PASS_NAMES};
pub use remove_identity::RemoveIdentity;
pub use shape_infer::{infer_shapes, shape_rule_ops, InferShapes};
pub use stats::{PassStat, PassStats};
