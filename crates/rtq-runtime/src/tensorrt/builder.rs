//! Building engines with TensorRT (feature `tensorrt`).

use super::metadata::{sidecar_path, EngineMetadata};
use super::options::{EngineArtifacts, EngineBuildOptions};
use super::shapes::ShapeProfiles;
use crate::cuda::{CudaDevice, DeviceInfo};
use crate::fsutil::write_atomic;
use crate::RuntimeError;
use rtq_tensorrt_sys as trt;
use std::path::Path;
use std::time::Instant;

/// A plan built in memory, with the facts the sidecar records.
pub(crate) struct BuiltPlan {
    pub(crate) plan: Vec<u8>,
    pub(crate) timing_cache: Option<Vec<u8>>,
    pub(crate) warnings: Vec<String>,
    pub(crate) device: CudaDevice,
}

/// Profiles of the sys crate from rtq's shape profiles.
fn to_trt_profiles(shapes: &ShapeProfiles) -> Vec<trt::InputProfile> {
    let dims = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<i64>>();
    shapes
        .iter()
        .map(|(name, s)| trt::InputProfile {
            name: name.to_string(),
            min: dims(&s.min),
            opt: dims(&s.opt),
            max: dims(&s.max),
        })
        .collect()
}

/// Parses and builds `onnx_path` on the device `options` select.
pub(crate) fn build_plan(
    onnx_path: &Path,
    options: &EngineBuildOptions,
) -> Result<BuiltPlan, RuntimeError> {
    options.validate()?;
    let onnx = std::fs::read(onnx_path).map_err(|e| RuntimeError::io(onnx_path, e))?;
    let device = CudaDevice::new(options.device)?;
    device.bind()?;
    let timing_cache = match &options.timing_cache {
        Some(path) if path.exists() => {
            Some(std::fs::read(path).map_err(|e| RuntimeError::io(path, e))?)
        }
        _ => None,
    };
    let model_path = std::fs::canonicalize(onnx_path).unwrap_or_else(|_| onnx_path.to_path_buf());
    let build_options = trt::BuildOptions {
        workspace_bytes: options
            .workspace_mib
            .map_or(0, |mib| mib.saturating_mul(1 << 20)),
        strongly_typed: options.strongly_typed,
        fp16: false,
        int8: false,
        builder_optimization_level: options.builder_optimization_level,
        profiles: to_trt_profiles(&options.shapes),
        timing_cache,
        model_path: Some(model_path),
    };
    let trt_error = |e: trt::TrtError| RuntimeError::TensorRt {
        op: format!("building an engine from {}", onnx_path.display()),
        message: e.to_string(),
    };
    let mut builder = trt::Builder::new(trt::Severity::Warning).map_err(trt_error)?;
    let output = builder.build(&onnx, &build_options).map_err(trt_error)?;
    let warnings = builder
        .log()
        .lines()
        .filter_map(|l| l.strip_prefix("[W] "))
        .map(str::to_string)
        .collect();
    Ok(BuiltPlan {
        plan: output.plan,
        timing_cache: output.timing_cache,
        warnings,
        device,
    })
}

/// The sidecar content for a plan built from `onnx_path` on `device`.
fn metadata(
    onnx_path: &Path,
    options: &EngineBuildOptions,
    device: &DeviceInfo,
    plan_bytes: usize,
) -> EngineMetadata {
    EngineMetadata {
        tensorrt_version: trt::library_version().to_string(),
        compute_capability: device.compute_capability_string(),
        gpu_name: device.name.clone(),
        rtq_version: env!("CARGO_PKG_VERSION").to_string(),
        strongly_typed: options.strongly_typed,
        shapes: options.shapes.clone(),
        workspace_mib: options.workspace_mib,
        builder_optimization_level: options.builder_optimization_level,
        source_onnx: onnx_path.display().to_string(),
        plan_bytes: plan_bytes as u64,
    }
}

/// Builds the engine and writes the plan, its sidecar and the timing cache.
pub(crate) fn build_engine(
    onnx_path: &Path,
    options: &EngineBuildOptions,
) -> Result<EngineArtifacts, RuntimeError> {
    let started = Instant::now();
    let built = build_plan(onnx_path, options)?;
    let build_time = started.elapsed();

    let plan_path = options.plan_path(onnx_path);
    write_atomic(&plan_path, &built.plan)?;
    let metadata = metadata(onnx_path, options, built.device.info(), built.plan.len());
    let metadata_path = sidecar_path(&plan_path);
    metadata.write(&metadata_path)?;
    let timing_cache_path = match (&options.timing_cache, &built.timing_cache) {
        (Some(path), Some(bytes)) => {
            write_atomic(path, bytes)?;
            Some(path.clone())
        }
        _ => None,
    };
    Ok(EngineArtifacts {
        plan_path,
        metadata_path,
        metadata,
        timing_cache_path,
        build_time,
        warnings: built.warnings,
    })
}
