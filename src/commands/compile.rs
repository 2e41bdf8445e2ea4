//! `rtq compile`.

use super::data_args::DataArgs;
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
    /// Convert weights and activations to FP16.
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
}

/// Runs `rtq compile`.
pub fn run(args: CompileArgs) -> Result<()> {
    prepare_out_dir(&args.out)?;
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
    write_outputs(&args.out, &mut output).context("writing outputs")?;
    if args.json {
        println!("{}", output.report.to_json()?);
    } else if !args.quiet {
        print!("{}", output.report.render_text(40));
    }
    Ok(())
}
