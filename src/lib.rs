//! rtq: an inference-optimization compiler. ONNX in; optimized FP16 or explicitly
//! quantized INT8 (Q/DQ) ONNX, a TensorRT calibration cache, a report and (with the
//! `tensorrt` feature) a TensorRT engine out.
//!
//! The workspace is laid out by stage: `rtq-frontend` (ONNX -> IR), `rtq-ir`,
//! `rtq-passes` (optimisation and precision transforms), `rtq-calib` (calibrators and
//! data), `rtq-exec` (CPU reference executor), `rtq-emit` (ONNX, cache, report),
//! `rtq-runtime` (embeddable runtime) and this crate (pipeline and CLI); see
//! ARCHITECTURE.md.

#![warn(missing_docs)]

pub mod accuracy;
pub mod awq;
pub mod bias_correction;
pub mod calibrate;
pub mod calibrate_bodies;
pub mod comparison;
pub mod diagnose;
pub mod gptq;
pub mod inspect;
pub mod pipeline;
pub mod progress;
pub mod range_choice;
mod sample_stream;

/// Build facts recorded by build.rs (git revision, enabled features).
pub mod build_info {
    /// Git revision the binary was built from, or `unknown`.
    pub const GIT_REVISION: &str = env!("RTQ_GIT_REVISION");
    /// Cargo features enabled in this build, comma separated.
    pub const FEATURES: &str = env!("RTQ_FEATURES");
}

/// An error as the command line prints it (after `error: `): the message, then one
/// `  caused by: ...` line per underlying cause. The Python package's exceptions
/// carry the same text.
pub fn error_message(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        text.push_str("\n  caused by: ");
        text.push_str(&cause.to_string());
    }
    text
}
