//! Options and results of building a TensorRT engine.

use super::metadata::EngineMetadata;
use super::shapes::ShapeProfiles;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How [`build_engine`](super::build_engine) builds an engine from an ONNX model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineBuildOptions {
    /// Where to write the plan; default: the ONNX path with the extension `.plan`.
    pub output: Option<PathBuf>,
    /// Workspace memory pool limit in MiB (`None`: TensorRT's default, the device memory).
    pub workspace_mib: Option<u64>,
    /// Min/opt/max shapes of the dynamic inputs (trtexec's `--minShapes` etc.).
    pub shapes: ShapeProfiles,
    /// Timing cache file: read when it exists, written back after the build.
    pub timing_cache: Option<PathBuf>,
    /// Builder optimization level 0..=5 (`None`: TensorRT's default, 3).
    pub builder_optimization_level: Option<u8>,
    /// Build a strongly typed network (precisions from the model's Q/DQ and casts).
    /// Must stay `true` on TensorRT 11; `false` builds a weakly typed FP32 network on
    /// TensorRT 10.
    pub strongly_typed: bool,
    /// CUDA device ordinal to build for.
    pub device: usize,
}

impl Default for EngineBuildOptions {
    fn default() -> Self {
        EngineBuildOptions {
            output: None,
            workspace_mib: None,
            shapes: ShapeProfiles::new(),
            timing_cache: None,
            builder_optimization_level: None,
            strongly_typed: true,
            device: 0,
        }
    }
}

impl EngineBuildOptions {
    /// The plan path for `onnx_path`: [`EngineBuildOptions::output`] or `<onnx stem>.plan`.
    pub fn plan_path(&self, onnx_path: &Path) -> PathBuf {
        self.output
            .clone()
            .unwrap_or_else(|| onnx_path.with_extension("plan"))
    }

    /// Checks the options that do not need TensorRT.
    pub fn validate(&self) -> Result<(), crate::RuntimeError> {
        if let Some(level) = self.builder_optimization_level {
            if level > 5 {
                return Err(crate::RuntimeError::option(
                    "builder optimization level",
                    format!("{level} is out of range 0..=5"),
                ));
            }
        }
        if self.workspace_mib == Some(0) {
            return Err(crate::RuntimeError::option(
                "workspace size",
                "0 MiB; omit it to use TensorRT's default",
            ));
        }
        for (name, shapes) in self.shapes.iter() {
            shapes.validate(name)?;
        }
        Ok(())
    }
}

/// What [`build_engine`](super::build_engine) wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineArtifacts {
    /// The serialized engine.
    pub plan_path: PathBuf,
    /// The sidecar JSON describing it (`<plan>.json`).
    pub metadata_path: PathBuf,
    /// The sidecar's content.
    pub metadata: EngineMetadata,
    /// The timing cache written back, if one was requested.
    pub timing_cache_path: Option<PathBuf>,
    /// Wall time of the build.
    pub build_time: Duration,
    /// TensorRT's warnings during the build, one per line.
    pub warnings: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_path_defaults_next_to_the_model() {
        let opts = EngineBuildOptions::default();
        assert_eq!(
            opts.plan_path(Path::new("out/model.onnx")),
            PathBuf::from("out/model.plan")
        );
        let opts = EngineBuildOptions {
            output: Some("e/x.engine".into()),
            ..Default::default()
        };
        assert_eq!(
            opts.plan_path(Path::new("model.onnx")),
            PathBuf::from("e/x.engine")
        );
    }

    #[test]
    fn validation_names_the_option() {
        let opts = EngineBuildOptions {
            builder_optimization_level: Some(6),
            ..Default::default()
        };
        assert_eq!(
            opts.validate().unwrap_err().to_string(),
            "invalid builder optimization level: 6 is out of range 0..=5"
        );
        let opts = EngineBuildOptions {
            workspace_mib: Some(0),
            ..Default::default()
        };
        assert!(opts
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("invalid workspace size"));
        assert!(EngineBuildOptions::default().validate().is_ok());
    }
}
