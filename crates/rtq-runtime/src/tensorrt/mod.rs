//! TensorRT: building engines from ONNX (`build_engine`, what `rtq compile --engine`
//! calls) and running them (the TensorRT backend of [`Engine`](crate::Engine)).
//!
//! rtq's compiler emits explicit Q/DQ ONNX; TensorRT builds it as a strongly typed
//! network through its ONNX parser (TensorRT 10 and 11; implicit INT8 calibration is
//! not used). Everything here is compiled in every build; without the `tensorrt`
//! feature the entry points return [`RuntimeError::TensorRtNotBuilt`].

mod metadata;
mod options;
mod shapes;

#[cfg(feature = "tensorrt")]
mod backend;
#[cfg(feature = "tensorrt")]
mod builder;

pub use metadata::{sidecar_path, EngineMetadata};
pub use options::{EngineArtifacts, EngineBuildOptions};
pub use shapes::{format_shape_list, parse_shape_list, InputShapes, ShapeProfiles};

#[cfg(feature = "tensorrt")]
pub use backend::TensorRtBackend;

use crate::backend::InferBackend;
use crate::{LoadOptions, RuntimeError};
use std::path::Path;

/// Whether this build can build and run TensorRT engines (the `tensorrt` feature).
pub const AVAILABLE: bool = cfg!(feature = "tensorrt");

/// Builds a TensorRT engine from the ONNX model at `onnx_path`.
///
/// Writes the plan (default `<model>.plan`, see [`EngineBuildOptions::plan_path`]) and
/// the sidecar `<plan>.json` ([`EngineMetadata`]) atomically, and the timing cache when
/// [`EngineBuildOptions::timing_cache`] is set. Without the `tensorrt` feature this
/// returns [`RuntimeError::TensorRtNotBuilt`].
pub fn build_engine(
    onnx_path: &Path,
    options: &EngineBuildOptions,
) -> Result<EngineArtifacts, RuntimeError> {
    #[cfg(feature = "tensorrt")]
    {
        builder::build_engine(onnx_path, options)
    }
    #[cfg(not(feature = "tensorrt"))]
    {
        let _ = (onnx_path, options);
        Err(RuntimeError::TensorRtNotBuilt)
    }
}

/// Version of the TensorRT library in use (`None` without the `tensorrt` feature).
pub fn tensorrt_version() -> Option<String> {
    #[cfg(feature = "tensorrt")]
    {
        Some(rtq_tensorrt_sys::library_version().to_string())
    }
    #[cfg(not(feature = "tensorrt"))]
    {
        None
    }
}

/// Loads a serialized engine for [`Engine::load`](crate::Engine::load).
pub(crate) fn load_plan(
    path: &Path,
    options: &LoadOptions,
) -> Result<Box<dyn InferBackend>, RuntimeError> {
    #[cfg(feature = "tensorrt")]
    {
        Ok(Box::new(TensorRtBackend::load_plan(path, options)?))
    }
    #[cfg(not(feature = "tensorrt"))]
    {
        let _ = (path, options);
        Err(RuntimeError::TensorRtNotBuilt)
    }
}

/// Builds an `.onnx` model into an engine in memory for [`Engine::load`](crate::Engine::load).
pub(crate) fn load_onnx(
    path: &Path,
    options: &LoadOptions,
) -> Result<Box<dyn InferBackend>, RuntimeError> {
    #[cfg(feature = "tensorrt")]
    {
        Ok(Box::new(TensorRtBackend::build_from_onnx(path, options)?))
    }
    #[cfg(not(feature = "tensorrt"))]
    {
        let _ = (path, options);
        Err(RuntimeError::TensorRtNotBuilt)
    }
}

#[cfg(all(test, not(feature = "tensorrt")))]
mod tests {
    use super::*;

    #[test]
    fn build_engine_without_the_feature_says_how_to_rebuild() {
        let err =
            build_engine(Path::new("model.onnx"), &EngineBuildOptions::default()).unwrap_err();
        assert!(matches!(err, RuntimeError::TensorRtNotBuilt));
        const { assert!(!AVAILABLE) };
        assert_eq!(tensorrt_version(), None);
    }
}
