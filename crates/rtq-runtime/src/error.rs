//! The runtime's error type. Every variant names the file, tensor, option or
//! operation involved, and the "not built" variants say how to rebuild.

use std::path::PathBuf;
use thiserror::Error;

/// Errors of loading, running, benchmarking and exporting models.
///
/// Non-exhaustive: features add variants (`tensorrt` adds `RuntimeError::Json`).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A TensorRT path was requested from a build without the `tensorrt` feature.
    #[error(
        "rtq was built without the `tensorrt` feature: rebuild with `--features tensorrt` and \
         TENSORRT_ROOT=<dir with include/NvInfer.h and lib/libnvinfer.so>"
    )]
    TensorRtNotBuilt,
    /// A CUDA path was requested from a build without the `cuda` feature.
    #[error(
        "rtq was built without the `cuda` feature: rebuild with `--features cuda` (or \
         `--features tensorrt`, which includes it)"
    )]
    CudaNotBuilt,
    /// An ONNX model was to run on the CPU from a build without the `cpu` feature.
    #[error("rtq was built without the `cpu` feature: rebuild with `--features cpu` to run ONNX models on the CPU")]
    CpuNotBuilt,
    /// The CUDA driver library could not be loaded.
    #[error(
        "no CUDA driver found (libcuda.so.1 could not be loaded): install the NVIDIA driver or \
         run on a machine with an NVIDIA GPU"
    )]
    NoCudaDriver,
    /// The driver loaded but the requested device is not usable.
    #[error("no CUDA device {ordinal}: {detail}")]
    NoCudaDevice {
        /// Requested device ordinal.
        ordinal: usize,
        /// What the driver said.
        detail: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA error during {op}: {message}")]
    Cuda {
        /// The operation, naming the tensor or buffer involved.
        op: String,
        /// The driver's error.
        message: String,
    },
    /// A TensorRT call failed.
    #[error("TensorRT error during {op}: {message}")]
    TensorRt {
        /// The operation, naming the file or tensor involved.
        op: String,
        /// TensorRT's (or rtq's shim's) message.
        message: String,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The model file's extension names no format rtq runs.
    #[error(
        "{}: cannot tell the model format from the file extension: expected .onnx, or .plan / .engine for TensorRT",
        path.display()
    )]
    UnknownModelFormat {
        /// The model file.
        path: PathBuf,
    },
    /// The requested backend cannot run this model file.
    #[error("{}: {reason}", path.display())]
    BackendMismatch {
        /// The model file.
        path: PathBuf,
        /// Why, and what to use instead.
        reason: String,
    },
    /// The model file could not be loaded (parsed, planned or deserialized).
    #[error("{}: {message}", path.display())]
    ModelLoad {
        /// The model file.
        path: PathBuf,
        /// The loader's message.
        message: String,
    },
    /// A tensor given to or produced by a model is unusable.
    #[error("tensor `{name}`: {message}")]
    InvalidTensor {
        /// Tensor name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// Running the model failed.
    #[error("{model}: {message}")]
    Execution {
        /// The model (its file).
        model: String,
        /// The executor's message.
        message: String,
    },
    /// An option value is invalid.
    #[error("invalid {option}: {message}")]
    InvalidOption {
        /// The option.
        option: String,
        /// What is wrong.
        message: String,
    },
    /// A trtexec-style shape list could not be parsed.
    #[error("shape spec `{spec}`: {message}")]
    ShapeSpec {
        /// The spec text.
        spec: String,
        /// What is wrong.
        message: String,
    },
    /// A Triton model repository could not be written as asked.
    #[error("Triton model `{model}`: {message}")]
    Triton {
        /// The model name.
        model: String,
        /// What is wrong.
        message: String,
    },
    /// A JSON file (a TensorRT engine's sidecar) could not be read or written
    /// (feature `tensorrt`).
    #[cfg(feature = "tensorrt")]
    #[error("{}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

impl RuntimeError {
    /// An [`RuntimeError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> RuntimeError {
        RuntimeError::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`RuntimeError::InvalidTensor`] for tensor `name`.
    pub fn tensor(name: impl Into<String>, message: impl Into<String>) -> RuntimeError {
        RuntimeError::InvalidTensor {
            name: name.into(),
            message: message.into(),
        }
    }

    /// An [`RuntimeError::InvalidOption`] for `option`.
    pub fn option(option: impl Into<String>, message: impl Into<String>) -> RuntimeError {
        RuntimeError::InvalidOption {
            option: option.into(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_is_involved() {
        let e = RuntimeError::io(
            "/x/model.plan",
            std::io::Error::new(std::io::ErrorKind::NotFound, "No such file"),
        );
        assert_eq!(e.to_string(), "/x/model.plan: No such file");
        let e = RuntimeError::tensor("images", "expected float32, got int64");
        assert_eq!(
            e.to_string(),
            "tensor `images`: expected float32, got int64"
        );
        let e = RuntimeError::Cuda {
            op: "copying input `x` to the device".into(),
            message: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        };
        assert_eq!(
            e.to_string(),
            "CUDA error during copying input `x` to the device: CUDA_ERROR_ILLEGAL_ADDRESS"
        );
    }
}
