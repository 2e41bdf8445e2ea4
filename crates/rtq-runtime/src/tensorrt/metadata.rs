//! The sidecar JSON written next to every engine rtq builds (`model.plan.json`).

use super::shapes::ShapeProfiles;
#[cfg(feature = "tensorrt")]
use crate::{fsutil::write_atomic, RuntimeError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What an engine was built with and for. A plan only loads with the same TensorRT
/// version on the same GPU model, so these facts travel with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineMetadata {
    /// TensorRT library version used to build (`10.3.0`).
    pub tensorrt_version: String,
    /// Compute capability of the build GPU (`8.9`).
    pub compute_capability: String,
    /// Name of the build GPU.
    pub gpu_name: String,
    /// rtq version that built the engine.
    pub rtq_version: String,
    /// Whether the network was strongly typed.
    pub strongly_typed: bool,
    /// Min/opt/max shapes of the dynamic inputs.
    pub shapes: ShapeProfiles,
    /// Workspace limit in MiB, when one was set.
    pub workspace_mib: Option<u64>,
    /// Builder optimization level, when one was set.
    pub builder_optimization_level: Option<u8>,
    /// The ONNX model the engine was built from.
    pub source_onnx: String,
    /// Size of the plan in bytes.
    pub plan_bytes: u64,
}

#[cfg(feature = "tensorrt")]
impl EngineMetadata {
    /// Writes the metadata as pretty JSON to `path`, atomically.
    pub(crate) fn write(&self, path: &Path) -> Result<(), RuntimeError> {
        let mut json = serde_json::to_string_pretty(self).map_err(|source| RuntimeError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        json.push('\n');
        write_atomic(path, json.as_bytes())
    }

    /// Reads the sidecar of an engine rtq built (feature `tensorrt`; without it, the
    /// type still deserializes with serde).
    pub fn read(path: &Path) -> Result<EngineMetadata, RuntimeError> {
        let text = std::fs::read_to_string(path).map_err(|e| RuntimeError::io(path, e))?;
        serde_json::from_str(&text).map_err(|source| RuntimeError::Json {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The sidecar path of a plan: the plan path with `.json` appended (`model.plan.json`).
pub fn sidecar_path(plan: &Path) -> PathBuf {
    let mut name = plan.as_os_str().to_os_string();
    name.push(".json");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> EngineMetadata {
        EngineMetadata {
            tensorrt_version: "10.3.0".into(),
            compute_capability: "8.9".into(),
            gpu_name: "NVIDIA L4".into(),
            rtq_version: "0.1.0".into(),
            strongly_typed: true,
            shapes: ShapeProfiles::from_trtexec(None, Some("x:1x3"), Some("x:4x3"), Some("x:8x3"))
                .unwrap(),
            workspace_mib: Some(1024),
            builder_optimization_level: None,
            source_onnx: "model.onnx".into(),
            plan_bytes: 1234,
        }
    }

    #[test]
    fn sidecar_path_appends_json() {
        assert_eq!(
            sidecar_path(Path::new("out/model.plan")),
            PathBuf::from("out/model.plan.json")
        );
    }

    #[test]
    fn json_field_names() {
        let json = serde_json::to_value(sample()).unwrap();
        assert_eq!(json["tensorrt_version"], "10.3.0");
        assert_eq!(json["compute_capability"], "8.9");
        assert_eq!(json["gpu_name"], "NVIDIA L4");
        assert_eq!(json["strongly_typed"], true);
        assert_eq!(json["shapes"]["x"]["opt"], serde_json::json!([4, 3]));
        let back: EngineMetadata = serde_json::from_value(json).unwrap();
        assert_eq!(back, sample());
    }

    #[cfg(feature = "tensorrt")]
    #[test]
    fn write_then_read_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.plan.json");
        sample().write(&path).unwrap();
        assert_eq!(EngineMetadata::read(&path).unwrap(), sample());
    }

    #[cfg(feature = "tensorrt")]
    #[test]
    fn read_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        std::fs::write(&path, "{").unwrap();
        let err = EngineMetadata::read(&path).unwrap_err();
        assert!(
            err.to_string().starts_with(&path.display().to_string()),
            "{err}"
        );
    }
}
