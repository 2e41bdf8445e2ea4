//! `rtq compile`.

use super::data_args::DataArgs;
use super::engine_args::EngineArgs;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use rtq::pipeline::{compile, prepare_out_dir, write_outputs, CompileOptions};
use rtq_calib::CalibOptions;
use rtq_passes::quant::{Int8Options, NodeFilter};
use rtq_passes::OptimizeOptions;
use std::path::PathBuf;

/// Calibration methods.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CalibMethod {
    /// KL-divergence threshold (TensorRT EntropyCalibration2).
    Entropy,
    /// Largest magnitude seen.
    Max,
    /// Percentile of magnitudes (see --percentile).
    Percentile,
    /// Threshold minimising the quantization mean squared error.
    Mse,
}

impl CalibMethod {
    fn name(self) -> &'static str {
        match self {
            CalibMethod::Entropy => "entropy",
            CalibMethod::Max => "max",
            CalibMethod::Percentile => "percentile",
            CalibMethod::Mse => "mse",
        }
    }
}

/// Arguments of `rtq compile`.
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// Output directory (created if missing).
    #[arg(short, long, default_value = "out")]
    pub out: PathBuf,
    /// Convert weights and activations to FP16. With --int8: a mixed INT8/FP16 build,
    /// where everything not quantized to INT8 (activations, biases, Q/DQ scales) is FP16
    /// (ONNX opset 19), as TensorRT's strongly typed networks run it.
    #[arg(long)]
    pub fp16: bool,
    /// Quantize to INT8 with explicit Q/DQ nodes (needs --calib).
    #[arg(long)]
    pub int8: bool,
    /// Directory of calibration samples (.npy, .npz, .png, .jpg).
    #[arg(long, value_name = "DIR")]
    pub calib: Option<PathBuf>,
    /// Calibration method.
    #[arg(long, value_enum, default_value = "entropy")]
    pub calib_method: CalibMethod,
    /// Percentile for --calib-method percentile.
    #[arg(long, default_value_t = 99.99)]
    pub percentile: f64,
    /// Use at most this many calibration files.
    #[arg(long, value_name = "N")]
    pub calib_samples: Option<usize>,
    /// Files held out of calibration for the accuracy check (default 20%, at most 16).
    #[arg(long, value_name = "N")]
    pub holdout: Option<usize>,
    #[command(flatten)]
    pub data: DataArgs,
    /// Node-name patterns (`*` wildcard) kept out of quantization / FP16.
    #[arg(long, value_delimiter = ',', value_name = "PATTERN")]
    pub exclude_nodes: Vec<String>,
    /// Op types kept out of quantization / FP16.
    #[arg(long, value_delimiter = ',', value_name = "OP")]
    pub exclude_ops: Vec<String>,
    /// Extra op types whose activation inputs get Q/DQ (e.g. AveragePool,GlobalAveragePool,MaxPool,Concat).
    #[arg(long, value_delimiter = ',', value_name = "OP")]
    pub quantize_ops: Vec<String>,
    /// Quantize weights per tensor instead of per output channel.
    #[arg(long)]
    pub per_tensor_weights: bool,
    /// Leave residual Adds unquantized.
    #[arg(long)]
    pub no_residual_add: bool,
    /// In FP16 builds, make graph inputs/outputs FP16 too (default keeps them FP32).
    #[arg(long)]
    pub fp16_io: bool,
    /// Optimisation passes to skip (by name).
    #[arg(long, value_delimiter = ',', value_name = "PASS")]
    pub disable_pass: Vec<String>,
    /// Verify the graph after every pass.
    #[arg(long)]
    pub verify_each: bool,
    /// TensorRT version for the calibration cache header.
    #[arg(long, default_value = "10.1.0")]
    pub trt_version: String,
    /// Print the IR after every pass (stderr).
    #[arg(long)]
    pub dump_ir: bool,
    /// Stop after a pass or a stage (load, optimize, calibrate) and write the graph then.
    #[arg(long, value_name = "STAGE")]
    pub stop_after: Option<String>,
    /// Print the report as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// No progress bars or report on the terminal.
    #[arg(short, long)]
    pub quiet: bool,
    /// Also build a TensorRT engine (`<model>.plan` + `.plan.json`); needs the `tensorrt` feature.
    #[arg(long)]
    pub engine: bool,
    #[command(flatten)]
    pub engine_args: EngineArgs,
    /// Also export a Triton model repository here (`<name>/config.pbtxt`, `<name>/1/model.plan`,
    /// or `model.onnx` without --engine).
    #[arg(long, value_name = "DIR")]
    pub triton_repo: Option<PathBuf>,
    /// Model name in the Triton repository (default: the model file's stem).
    #[arg(long, value_name = "NAME")]
    pub triton_name: Option<String>,
    /// Triton max_batch_size (0 = the model's batch dimension is not managed by Triton).
    #[arg(long, default_value_t = 0)]
    pub max_batch_size: u32,
    /// Triton instance count.
    #[arg(long, default_value_t = 1)]
    pub instances: u32,
    /// Triton dynamic batching with these preferred batch sizes (e.g. 4,8).
    #[arg(long, value_delimiter = ',', value_name = "N")]
    pub dynamic_batching: Option<Vec<u32>>,
    /// Triton dynamic batching queue delay in microseconds.
    #[arg(long, default_value_t = 100)]
    pub max_queue_delay_us: u64,
}

/// Runs `rtq compile`.
pub fn run(args: CompileArgs) -> Result<()> {
    // Fail before any work when a requested output cannot be produced.
    if args.engine && !rtq_runtime::tensorrt::AVAILABLE {
        return Err(rtq_runtime::RuntimeError::TensorRtNotBuilt).context("--engine");
    }
    let build_options = if args.engine {
        Some(args.engine_args.build_options(None)?)
    } else {
        None
    };
    prepare_out_dir(&args.out)?;
    if let Some(repo) = &args.triton_repo {
        prepare_out_dir(repo)?;
    }
    let filter = NodeFilter {
        names: args.exclude_nodes.clone(),
        op_types: args.exclude_ops.clone(),
    };
    let opts = CompileOptions {
        model: args.model.clone(),
        out_dir: args.out.clone(),
        fp16: args.fp16,
        int8: args.int8,
        calib_dir: args.calib.clone(),
        calib_method: args.calib_method.name().to_string(),
        calib: CalibOptions {
            percentile: args.percentile,
            ..CalibOptions::default()
        },
        data: args.data.to_options()?,
        max_calib_files: args.calib_samples,
        holdout: args.holdout,
        int8_opts: Int8Options {
            exclude: filter.clone(),
            extra_ops: args.quantize_ops.clone(),
            per_channel: !args.per_tensor_weights,
            residual_add: !args.no_residual_add,
            ..Int8Options::default()
        },
        fp16_exclude: filter,
        fp16_keep_io: !args.fp16_io,
        optimize: OptimizeOptions {
            disabled: args.disable_pass.clone(),
            verify_each: args.verify_each,
            ..OptimizeOptions::default()
        },
        trt_version: args.trt_version.clone(),
        dump_ir: args.dump_ir,
        stop_after: args.stop_after.clone(),
        progress: !args.quiet && !args.json,
    };
    let mut output = compile(&opts)?;
    let written = write_outputs(&args.out, &mut output).context("writing outputs")?;
    let onnx_path = written[0].clone();
    let mut plan_path = None;
    if let Some(mut build) = build_options {
        let plan = onnx_path.with_extension("plan");
        build.output = Some(plan.clone());
        let artifacts = rtq_runtime::tensorrt::build_engine(&onnx_path, &build)
            .with_context(|| format!("building a TensorRT engine from {}", onnx_path.display()))?;
        output
            .report
            .outputs
            .push(artifacts.plan_path.display().to_string());
        output
            .report
            .outputs
            .push(artifacts.metadata_path.display().to_string());
        plan_path = Some(artifacts.plan_path);
    }
    if let Some(repo) = &args.triton_repo {
        let layout = export_triton(&args, repo, &onnx_path, plan_path.as_deref())?;
        output
            .report
            .outputs
            .push(layout.config_path.display().to_string());
        output
            .report
            .outputs
            .push(layout.model_path.display().to_string());
    }
    if args.engine || args.triton_repo.is_some() {
        // Record the extra files in the report written with the model.
        rtq_emit::write_atomic(
            &args.out.join("report.json"),
            output.report.to_json()?.as_bytes(),
        )?;
    }
    if args.json {
        println!("{}", output.report.to_json()?);
    } else if !args.quiet {
        print!("{}", output.report.render_text(40));
    }
    Ok(())
}

/// Writes a Triton model repository entry for the built model (TensorRT plan when an
/// engine was built, else the ONNX for Triton's onnxruntime backend).
fn export_triton(
    args: &CompileArgs,
    repo: &std::path::Path,
    onnx: &std::path::Path,
    plan: Option<&std::path::Path>,
) -> Result<rtq_runtime::triton::TritonLayout> {
    use rtq_runtime::triton::{
        write_triton_repository, DynamicBatching, InstanceKind, ModelSource, TritonModel,
        TritonOptions, TritonPlatform,
    };
    // The engine's I/O are the ONNX model's; read them through the CPU backend.
    let engine = rtq_runtime::Engine::load(
        onnx,
        &rtq_runtime::LoadOptions {
            backend: rtq_runtime::Backend::Cpu,
            ..Default::default()
        },
    )
    .with_context(|| format!("reading the interface of {}", onnx.display()))?;
    let (platform, source, kind) = match plan {
        Some(p) => (
            TritonPlatform::TensorRtPlan,
            ModelSource::File(p),
            InstanceKind::Gpu,
        ),
        None => (
            TritonPlatform::OnnxRuntime,
            ModelSource::File(onnx),
            InstanceKind::Cpu,
        ),
    };
    let name = args.triton_name.clone().unwrap_or_else(|| {
        args.model
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("model")
            .to_string()
    });
    let model = TritonModel {
        platform,
        source,
        inputs: engine.inputs(),
        outputs: engine.outputs(),
        max_model_batch: None,
    };
    let options = TritonOptions {
        max_batch_size: args.max_batch_size,
        instance_count: args.instances,
        kind,
        dynamic_batching: args.dynamic_batching.as_ref().map(|sizes| DynamicBatching {
            preferred_batch_sizes: sizes.clone(),
            max_queue_delay_us: args.max_queue_delay_us,
        }),
        version: 1,
    };
    write_triton_repository(repo, &name, &model, &options)
        .with_context(|| format!("exporting to the Triton repository {}", repo.display()))
}
