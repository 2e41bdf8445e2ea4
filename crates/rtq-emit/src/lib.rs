//! rtq's emitters. Every file is written to a temporary file in the destination
//! directory and renamed into place, so a failure never leaves a partial output.

#![warn(missing_docs)]

mod atomic;
mod error;
mod html;
mod onnx;
mod report;
mod target;

pub use atomic::{write_atomic, write_atomic_with};
pub use error::EmitError;
pub use html::render_html;
pub use onnx::{ir_version_for_opset, to_model_bytes, to_model_proto, write_onnx, EmitOptions};
pub use report::{
    AccuracyCheck, AccuracyReport, BiasCorrectionTrial, CompileReport, GraphSummary, LayerError,
    MethodTrial, OutputAccuracy, OutputScatter, PerLayerReport, QuantSummary, TensorHistogram,
    TensorRange,
};
pub use target::AccuracyTarget;
