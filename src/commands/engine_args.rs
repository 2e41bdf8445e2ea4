//! Options shared by commands that build or load TensorRT engines (trtexec's names).

use anyhow::Result;
use clap::Args;
use rtq_runtime::tensorrt::{EngineBuildOptions, ShapeProfiles};
use std::path::PathBuf;

/// TensorRT engine-building options.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Workspace memory pool limit in MiB.
    #[arg(long, value_name = "MIB")]
    pub workspace: Option<u64>,
    /// Fixed input shapes, e.g. `input:1x3x224x224`.
    #[arg(long, value_name = "SPEC")]
    pub shapes: Option<String>,
    /// Minimum shapes of dynamic inputs for the optimization profile.
    #[arg(long, value_name = "SPEC")]
    pub min_shapes: Option<String>,
    /// Optimal shapes of dynamic inputs.
    #[arg(long, value_name = "SPEC")]
    pub opt_shapes: Option<String>,
    /// Maximum shapes of dynamic inputs.
    #[arg(long, value_name = "SPEC")]
    pub max_shapes: Option<String>,
    /// Timing cache file (read if present, written after the build).
    #[arg(long, value_name = "FILE")]
    pub timing_cache: Option<PathBuf>,
    /// Builder optimization level 0..=5.
    #[arg(long, value_name = "LEVEL")]
    pub builder_optimization_level: Option<u8>,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
}

impl EngineArgs {
    /// The build options, writing the plan to `output`.
    pub fn build_options(&self, output: Option<PathBuf>) -> Result<EngineBuildOptions> {
        let shapes = ShapeProfiles::from_trtexec(
            self.shapes.as_deref(),
            self.min_shapes.as_deref(),
            self.opt_shapes.as_deref(),
            self.max_shapes.as_deref(),
        )?;
        let opts = EngineBuildOptions {
            output,
            workspace_mib: self.workspace,
            shapes,
            timing_cache: self.timing_cache.clone(),
            builder_optimization_level: self.builder_optimization_level,
            strongly_typed: true,
            device: self.device,
        };
        opts.validate()?;
        Ok(opts)
    }
}
