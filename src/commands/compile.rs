//! `rtq compile`.

use super::data_args::DataArgs;
use super::engine_args::EngineArgs;
use anyhow::{Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Args;
use rtq::pipeline::{
    compile, prepare_out_dir, write_outputs, write_report, CompileOptions, CompileOutput,
    Int4Method, MethodChoice, Shard, StopAfter, DEFAULT_TRT_VERSION,
};
use rtq::progress::Progress;
use rtq_calib::{CalibMethod, CalibOptions};
use rtq_emit::AccuracyTarget;
use rtq_passes::quant::{Int8Options, NodeFilter};
use rtq_passes::OptimizeOptions;
use std::path::PathBuf;

/// `--calib-method`: `auto` and the calibrators' names, each with its description.
fn calib_method_parser() -> impl TypedValueParser<Value = MethodChoice> {
    let auto = PossibleValue::new("auto").help(
        "entropy; if the accuracy target is missed, the method whose ranges agree best \
         with FP32 (same statistics, no new calibration pass)",
    );
    let fixed = CalibMethod::ALL.map(|m| PossibleValue::new(m.name()).help(m.description()));
    let per_tensor = PossibleValue::new("per-tensor").help(
        "each activation's range among the methods' by the error it causes in the outputs \
         of the nodes that read it (measured on 8 calibration files)",
    );
    let names = std::iter::once(auto).chain(fixed).chain([per_tensor]);
    PossibleValuesParser::new(names).map(|name| {
        name.parse::<MethodChoice>()
            .expect("every possible value is a method choice")
    })
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
    #[arg(long, conflicts_with = "high_precision")]
    pub fp16: bool,
    /// The type of everything not quantized (ModelOpt's `high_precision_dtype`):
    /// `fp32` (default), `fp16` (same as --fp16) or `bf16` (FP32's range with 8
    /// significant bits: no FP16 overflow, where FP16 would need guards; opset 19 for
    /// BF16 Q/DQ scales in --int8/--fp8 builds). BF16 builds run in rtq's runtime and on
    /// TensorRT; onnxruntime's CPU provider has BF16 kernels for few ops.
    #[arg(long, value_name = "TYPE", value_parser = ["fp32", "fp16", "bf16"])]
    pub high_precision: Option<String>,
    /// Quantize to INT8 with explicit Q/DQ nodes (needs --calib).
    #[arg(long, conflicts_with = "fp8")]
    pub int8: bool,
    /// Quantize to FP8 E4M3 with explicit Q/DQ nodes (FLOAT8E4M3FN, opset 19; scales
    /// amax / 448; TensorRT on GPUs of compute capability 8.9 and later). Same placement
    /// as --int8; with --fp16 everything else is FP16, as TensorRT runs FP8 fastest.
    /// No calibration cache is written (TensorRT's caches are INT8 only). Needs --calib.
    #[arg(long)]
    pub fp8: bool,
    /// Store MatMul/Gemm weights as INT4 (weight-only: activations stay in FP32, or in
    /// FP16/BF16 with --fp16 / --high-precision bf16, as TensorRT's weight-only GEMMs
    /// and ModelOpt's `int4` mode do): one scale per --int4-block-size input channels
    /// and output channel, behind a DequantizeLinear with `block_size` (opset 21).
    #[arg(long, conflicts_with_all = ["int8", "fp8"])]
    pub int4_weights: bool,
    /// Input channels per INT4 scale: 32, 64 or 128.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 128,
        requires = "int4_weights"
    )]
    pub int4_block_size: usize,
    /// How INT4 weights are rounded: `awq` tunes per-input-channel scales and clip
    /// ratios on calibration activations, `gptq` (the default with --calib) then rounds
    /// with GPTQ's error compensation, `rtn` rounds to nearest (the default without).
    #[arg(long, value_name = "METHOD", value_parser = Int4Method::NAMES, requires = "int4_weights")]
    pub int4_method: Option<String>,
    /// Directory of calibration samples (.npy, .npz, .png, .jpg), or a .rtqpack sample pack.
    #[arg(long, value_name = "DIR")]
    pub calib: Option<PathBuf>,
    /// Calibration method.
    #[arg(long, default_value = "auto", value_parser = calib_method_parser())]
    pub calib_method: MethodChoice,
    /// Agreement with FP32 the build must keep on the held-out files, per output:
    /// `cosine=F` (mean cosine) and/or `top1=F` (arg-max agreement where the output
    /// has a class axis). Missing it is a warning, or an error with --strict-accuracy.
    #[arg(long, value_name = "METRIC=VALUE,...", default_value = "cosine=0.99,top1=0.99",
          value_parser = str::parse::<AccuracyTarget>)]
    pub accuracy_target: AccuracyTarget,
    /// Exit non-zero (after writing the outputs) when the accuracy target is missed or
    /// could not be checked.
    #[arg(long)]
    pub strict_accuracy: bool,
    /// Rescale the channels of quantized activations first (cross-layer equalization
    /// and SmoothQuant-style migration into producers and readers; one more pass over
    /// the calibration files). On by default with --calib-method auto.
    #[arg(long, conflicts_with = "no_equalize")]
    pub equalize: bool,
    /// Do not equalize activation channels (the default for a named --calib-method).
    #[arg(long)]
    pub no_equalize: bool,
    /// Subtract the mean shift quantization causes in each quantized Conv/Gemm/MatMul
    /// output from its bias (measured on calibration samples, layer after layer).
    /// Tried by default with --calib-method auto, and kept where it helps.
    #[arg(long, conflicts_with = "no_bias_correction")]
    pub bias_correction: bool,
    /// Never correct biases.
    #[arg(long)]
    pub no_bias_correction: bool,
    /// Percentile for --calib-method percentile.
    #[arg(long, default_value_t = 99.99)]
    pub percentile: f64,
    /// Save every observed tensor's calibration statistics (|x| histograms and
    /// extremes, a versioned JSON file) to FILE, to rebuild later with --stats.
    #[arg(long, value_name = "FILE")]
    pub save_stats: Option<PathBuf>,
    /// Calibrate from saved statistics instead of new forward passes (repeat to merge
    /// shards); --calib DIR still gives the held-out files for the accuracy check.
    #[arg(long, value_name = "FILE")]
    pub stats: Vec<PathBuf>,
    /// Take the INT8 ranges from an existing TensorRT calibration cache (any
    /// `TRT-<version>-<algorithm>` header: EntropyCalibration2, MinMaxCalibration, ...)
    /// or a JSON object of tensor name -> amax, instead of calibrating: the migration
    /// path from TensorRT <= 10's implicit INT8 to an explicit Q/DQ model. --calib DIR
    /// then only gives the files the accuracy check runs on.
    #[arg(long, value_name = "FILE")]
    pub calib_cache: Option<PathBuf>,
    /// Calibrate only shard INDEX of COUNT (every COUNT-th calibration file, 0-based;
    /// e.g. $SLURM_ARRAY_TASK_ID/8), save its statistics (--save-stats) and stop; merge
    /// the shards with `rtq stats merge` or repeated --stats.
    #[arg(long, value_name = "INDEX/COUNT", value_parser = str::parse::<Shard>)]
    pub shard: Option<Shard>,
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
    /// Quantize GEMV MatMul/Gemm nodes too (an output of one row or column, e.g. a
    /// batch-1 classifier head), which TensorRT runs faster without Q/DQ.
    #[arg(long)]
    pub quantize_gemv: bool,
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
    #[arg(long, default_value = DEFAULT_TRT_VERSION)]
    pub trt_version: String,
    /// Print the IR after every pass (stderr).
    #[arg(long)]
    pub dump_ir: bool,
    /// Stop after a stage (load, optimize, calibrate, quantize) or a pass (e.g.
    /// fold-batch-norm, int8-qdq, fp16) and write the graph as it is then.
    #[arg(long, value_name = "STAGE|PASS", value_parser = str::parse::<StopAfter>)]
    pub stop_after: Option<StopAfter>,
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
    let engine_build = args
        .engine
        .then(|| args.engine_args.build_options(None))
        .transpose()?;
    let opts = compile_options(&args)?;
    opts.validate()?;
    prepare_out_dir(&args.out)?;
    if let Some(repo) = &args.triton_repo {
        prepare_out_dir(repo)?;
    }
    let mut output = compile(&opts)?;
    let written = write_outputs(&args.out, &mut output).context("writing outputs")?;
    write_deployment(&args, engine_build, &written[0], &mut output)?;
    write_report(&args.out, &mut output.report).context("writing the report")?;
    if args.json {
        println!("{}", output.report.to_json()?);
    } else if !args.quiet {
        print!("{}", output.report.render_text(40));
    }
    for warning in &output.report.warnings {
        // The text report shows them already; --json and --quiet runs still hear them.
        if args.json || args.quiet {
            eprintln!("warning: {warning}");
        }
    }
    if args.strict_accuracy && !output.report.warnings.is_empty() {
        anyhow::bail!(
            "--strict-accuracy: {} (outputs written to {})",
            output.report.warnings.join("; "),
            args.out.display()
        );
    }
    Ok(())
}

/// The pipeline's options from the command line.
fn compile_options(args: &CompileArgs) -> Result<CompileOptions> {
    let filter = NodeFilter {
        names: args.exclude_nodes.clone(),
        op_types: args.exclude_ops.clone(),
    };
    let mut opts = CompileOptions::new(&args.model, &args.out);
    opts.set_method(args.calib_method);
    Ok(CompileOptions {
        fp16: args.fp16 || args.high_precision.as_deref() == Some("fp16"),
        bf16: args.high_precision.as_deref() == Some("bf16"),
        int4_weights: args.int4_weights,
        int4_block_size: args.int4_block_size,
        int4_method: args.int4_method.as_deref().and_then(Int4Method::parse),
        int8: args.int8,
        fp8: args.fp8,
        calib_dir: args.calib.clone(),
        bias_correction: flag_pair(args.bias_correction, args.no_bias_correction),
        equalize: flag_pair(args.equalize, args.no_equalize),
        accuracy_target: args.accuracy_target,
        strict_accuracy: args.strict_accuracy,
        calib: CalibOptions {
            percentile: args.percentile,
            ..CalibOptions::default()
        },
        data: args.data.to_options()?,
        save_stats: args.save_stats.clone(),
        stats: args.stats.clone(),
        calib_cache: args.calib_cache.clone(),
        shard: args.shard,
        max_calib_files: args.calib_samples,
        holdout: args.holdout,
        int8_opts: Int8Options {
            exclude: filter.clone(),
            extra_ops: args.quantize_ops.clone(),
            per_channel: !args.per_tensor_weights,
            residual_add: !args.no_residual_add,
            quantize_gemv: args.quantize_gemv,
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
        stop_after: args.stop_after,
        progress: Progress::terminal(!args.quiet && !args.json),
        ..opts
    })
}

/// `--X` / `--no-X`: forced on, forced off, or the build's default.
fn flag_pair(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

/// Builds the TensorRT engine (`--engine`) from the written model and exports the
/// Triton repository entry (`--triton-repo`), listing both in the report.
fn write_deployment(
    args: &CompileArgs,
    engine_build: Option<rtq_runtime::tensorrt::EngineBuildOptions>,
    onnx_path: &std::path::Path,
    output: &mut CompileOutput,
) -> Result<()> {
    let mut plan_path = None;
    if let Some(mut build) = engine_build {
        let plan = onnx_path.with_extension("plan");
        build.output = Some(plan.clone());
        let artifacts = rtq_runtime::tensorrt::build_engine(onnx_path, &build)
            .with_context(|| format!("building a TensorRT engine from {}", onnx_path.display()))?;
        let outputs = &mut output.report.outputs;
        outputs.push(artifacts.plan_path.display().to_string());
        outputs.push(artifacts.metadata_path.display().to_string());
        plan_path = Some(artifacts.plan_path);
    }
    if let Some(repo) = &args.triton_repo {
        let layout = export_triton(args, repo, onnx_path, plan_path.as_deref())?;
        let outputs = &mut output.report.outputs;
        outputs.push(layout.config_path.display().to_string());
        outputs.push(layout.model_path.display().to_string());
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
