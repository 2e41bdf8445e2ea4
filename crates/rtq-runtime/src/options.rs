//! Options of [`Engine::load`](crate::Engine::load).

use crate::tensorrt::EngineBuildOptions;
use std::path::Path;

/// Which backend [`Engine::load`](crate::Engine::load) should use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// Pick from the file: `.onnx` on the CPU, `.plan`/`.engine` on TensorRT.
    #[default]
    Auto,
    /// rtq's CPU executor (`.onnx` only; feature `cpu`).
    Cpu,
    /// A CUDA GPU. rtq executes on GPUs through TensorRT, so this behaves like
    /// [`Backend::TensorRt`], but first checks the CUDA driver and device (feature
    /// `cuda`), reporting a missing driver or device before anything else.
    Cuda,
    /// TensorRT (feature `tensorrt`): `.plan`/`.engine` files are deserialized, `.onnx`
    /// files are built into an engine in memory with [`LoadOptions::build`].
    TensorRt,
}

impl std::str::FromStr for Backend {
    type Err = crate::RuntimeError;

    /// Parses `auto`, `cpu`, `cuda`, `tensorrt` (or `trt`), case-insensitively.
    fn from_str(s: &str) -> Result<Backend, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "cpu" => Ok(Backend::Cpu),
            "cuda" | "gpu" => Ok(Backend::Cuda),
            "tensorrt" | "trt" => Ok(Backend::TensorRt),
            _ => Err(crate::RuntimeError::option(
                "backend",
                format!("`{s}` is not one of auto, cpu, cuda, tensorrt"),
            )),
        }
    }
}

/// Options of [`Engine::load`](crate::Engine::load).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Backend choice.
    pub backend: Backend,
    /// CUDA device ordinal for the GPU backends.
    pub device: usize,
    /// Replay inference through a captured CUDA graph (TensorRT backend; falls back to
    /// plain enqueueing when the engine cannot be captured).
    pub cuda_graph: bool,
    /// How to build an engine when an `.onnx` file is loaded on TensorRT.
    pub build: EngineBuildOptions,
    /// CPU backend: run the INT8 Q/DQ patterns of a quantized model (DequantizeLinear
    /// into Conv, MatMul, Gemm) as integer kernels (INT32 accumulation, VNNI or AVX2
    /// chosen at run time) instead of float emulation. On by default; ignored on CPUs
    /// with neither instruction set, where the float emulation is faster.
    pub integer_kernels: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            backend: Backend::Auto,
            device: 0,
            cuda_graph: false,
            build: EngineBuildOptions::default(),
            integer_kernels: true,
        }
    }
}

/// The kind of model file, told by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelFormat {
    /// An ONNX model (`.onnx`).
    Onnx,
    /// A serialized TensorRT engine (`.plan`, `.engine`, `.trt`).
    TensorRtPlan,
}

impl ModelFormat {
    /// The format of `path` from its extension (case-insensitive).
    pub fn from_path(path: &Path) -> Option<ModelFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "onnx" => Some(ModelFormat::Onnx),
            "plan" | "engine" | "trt" => Some(ModelFormat::TensorRtPlan),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_from_extensions() {
        assert_eq!(
            ModelFormat::from_path(Path::new("a/m.onnx")),
            Some(ModelFormat::Onnx)
        );
        assert_eq!(
            ModelFormat::from_path(Path::new("m.ONNX")),
            Some(ModelFormat::Onnx)
        );
        assert_eq!(
            ModelFormat::from_path(Path::new("m.plan")),
            Some(ModelFormat::TensorRtPlan)
        );
        assert_eq!(
            ModelFormat::from_path(Path::new("m.engine")),
            Some(ModelFormat::TensorRtPlan)
        );
        assert_eq!(ModelFormat::from_path(Path::new("m.pt")), None);
        assert_eq!(ModelFormat::from_path(Path::new("model")), None);
    }

    #[test]
    fn backend_names_parse() {
        assert_eq!("TensorRT".parse::<Backend>().unwrap(), Backend::TensorRt);
        assert_eq!("cpu".parse::<Backend>().unwrap(), Backend::Cpu);
        assert_eq!("cuda".parse::<Backend>().unwrap(), Backend::Cuda);
        let err = "tpu".parse::<Backend>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid backend: `tpu` is not one of auto, cpu, cuda, tensorrt"
        );
    }
}
