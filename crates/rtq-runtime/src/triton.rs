//! Export to a Triton Inference Server model repository:
//! `<repo>/<model>/config.pbtxt` and `<repo>/<model>/<version>/model.plan` (TensorRT,
//! platform `tensorrt_plan`) or `model.onnx` (platform `onnxruntime_onnx`).

mod pbtxt;

pub use pbtxt::render_config;

use crate::fsutil::write_atomic;
use crate::{RuntimeError, TensorInfo};
use std::path::{Path, PathBuf};

/// The Triton platform (backend) serving the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TritonPlatform {
    /// A serialized TensorRT engine (`tensorrt_plan`, file `model.plan`).
    TensorRtPlan,
    /// An ONNX model served by onnxruntime (`onnxruntime_onnx`, file `model.onnx`).
    OnnxRuntime,
}

impl TritonPlatform {
    /// The `platform:` value of config.pbtxt.
    pub fn platform_name(self) -> &'static str {
        match self {
            TritonPlatform::TensorRtPlan => "tensorrt_plan",
            TritonPlatform::OnnxRuntime => "onnxruntime_onnx",
        }
    }

    /// The default model file name inside the version directory.
    pub fn model_file_name(self) -> &'static str {
        match self {
            TritonPlatform::TensorRtPlan => "model.plan",
            TritonPlatform::OnnxRuntime => "model.onnx",
        }
    }
}

/// Where Triton runs model instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum InstanceKind {
    /// On GPUs (`KIND_GPU`).
    #[default]
    Gpu,
    /// On CPUs (`KIND_CPU`; not valid for TensorRT plans).
    Cpu,
}

impl InstanceKind {
    /// The `kind:` value of config.pbtxt.
    pub fn pbtxt_name(self) -> &'static str {
        match self {
            InstanceKind::Gpu => "KIND_GPU",
            InstanceKind::Cpu => "KIND_CPU",
        }
    }
}

/// Triton's dynamic batcher settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DynamicBatching {
    /// Batch sizes the batcher prefers to form (each 1..=max_batch_size).
    pub preferred_batch_sizes: Vec<u32>,
    /// How long a request may wait for a batch to fill, in microseconds.
    pub max_queue_delay_us: u64,
}

/// How Triton should serve the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TritonOptions {
    /// Largest batch Triton forms; 0 disables Triton batching (dims are then the full
    /// shapes). When > 0 every input and output must have a dynamic first dimension,
    /// which config.pbtxt leaves out.
    pub max_batch_size: u32,
    /// Instances per device.
    pub instance_count: u32,
    /// Where instances run.
    pub kind: InstanceKind,
    /// Dynamic batching, if wanted (needs `max_batch_size > 0`).
    pub dynamic_batching: Option<DynamicBatching>,
    /// Model version directory (Triton versions are positive integers).
    pub version: u32,
}

impl Default for TritonOptions {
    fn default() -> Self {
        TritonOptions {
            max_batch_size: 0,
            instance_count: 1,
            kind: InstanceKind::Gpu,
            dynamic_batching: None,
            version: 1,
        }
    }
}

/// Where the model bytes come from.
#[derive(Debug, Clone, Copy)]
pub enum ModelSource<'a> {
    /// Bytes in memory.
    Bytes(&'a [u8]),
    /// A file to copy (an ONNX model with external data must be self-contained).
    File(&'a Path),
}

/// The model to export: platform, bytes and I/O.
#[derive(Debug, Clone, Copy)]
pub struct TritonModel<'a> {
    /// Platform serving it.
    pub platform: TritonPlatform,
    /// The serialized model.
    pub source: ModelSource<'a>,
    /// Model inputs.
    pub inputs: &'a [TensorInfo],
    /// Model outputs.
    pub outputs: &'a [TensorInfo],
    /// Largest batch the model accepts, when known (a TensorRT engine's profile max of
    /// the first dimension); checked against `max_batch_size`.
    pub max_model_batch: Option<u64>,
}

/// The files [`write_triton_repository`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TritonLayout {
    /// `<repo>/<model>`.
    pub model_dir: PathBuf,
    /// `<repo>/<model>/config.pbtxt`.
    pub config_path: PathBuf,
    /// `<repo>/<model>/<version>/model.plan` (or `model.onnx`).
    pub model_path: PathBuf,
}

/// Checks that `name` can be a Triton model name and a directory name.
pub fn validate_model_name(name: &str) -> Result<(), RuntimeError> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(RuntimeError::Triton {
            model: name.to_string(),
            message: "model names must be non-empty, use only ASCII letters, digits, `_`, `-` and \
                      `.`, and not start with `.`"
                .to_string(),
        })
    }
}

/// Writes `model` into the Triton repository at `repo_dir` as `model_name`: the model
/// file in version directory `options.version` and `config.pbtxt`, each atomically.
/// Other version directories of the model are left alone.
pub fn write_triton_repository(
    repo_dir: &Path,
    model_name: &str,
    model: &TritonModel<'_>,
    options: &TritonOptions,
) -> Result<TritonLayout, RuntimeError> {
    let config = render_config(model_name, model, options)?;
    let owned;
    let bytes: &[u8] = match model.source {
        ModelSource::Bytes(bytes) => bytes,
        ModelSource::File(path) => {
            owned = std::fs::read(path).map_err(|e| RuntimeError::io(path, e))?;
            &owned
        }
    };
    if bytes.is_empty() {
        return Err(RuntimeError::Triton {
            model: model_name.to_string(),
            message: "the model file is empty".to_string(),
        });
    }
    let model_dir = repo_dir.join(model_name);
    let model_path = model_dir
        .join(options.version.to_string())
        .join(model.platform.model_file_name());
    let config_path = model_dir.join("config.pbtxt");
    write_atomic(&model_path, bytes)?;
    write_atomic(&config_path, config.as_bytes())?;
    Ok(TritonLayout {
        model_dir,
        config_path,
        model_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_are_checked() {
        assert!(validate_model_name("resnet50_int8-v2.1").is_ok());
        for bad in ["", ".hidden", "a/b", "a b", "..", "x\\y", "模型"] {
            let err = validate_model_name(bad).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("Triton model `{bad}`")),
                "{err}"
            );
        }
    }

    #[test]
    fn platform_names() {
        assert_eq!(
            TritonPlatform::TensorRtPlan.platform_name(),
            "tensorrt_plan"
        );
        assert_eq!(TritonPlatform::TensorRtPlan.model_file_name(), "model.plan");
        assert_eq!(
            TritonPlatform::OnnxRuntime.platform_name(),
            "onnxruntime_onnx"
        );
        assert_eq!(TritonPlatform::OnnxRuntime.model_file_name(), "model.onnx");
    }
}
