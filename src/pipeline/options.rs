//! What a compile is asked to do: [`CompileOptions`], with the build's [`Precision`] and
//! where `--stop-after` stops ([`StopAfter`]), both parsed once from the command line.

use anyhow::{bail, Result};
use rtq_calib::{CalibMethod, CalibOptions, DataOptions};
use rtq_ir::{DType, QuantGrid};
use rtq_passes::quant::{Int8Options, Int8QdqPass, NodeFilter, PRECISION_PASS_NAMES};
use rtq_passes::OptimizeOptions;
use std::path::PathBuf;
use std::str::FromStr;

/// The half type of a build: what runs where nothing is quantized (`--fp16`,
/// `--high-precision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HalfType {
    /// IEEE half precision.
    Fp16,
    /// bfloat16: FP32's range with 8 significant bits (no overflow to guard against).
    Bf16,
}

impl HalfType {
    /// The IR element type.
    pub fn dtype(self) -> DType {
        match self {
            HalfType::Fp16 => DType::F16,
            HalfType::Bf16 => DType::BF16,
        }
    }

    /// Name in reports and file names (`fp16`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            HalfType::Fp16 => "fp16",
            HalfType::Bf16 => "bf16",
        }
    }
}

/// The numeric precision of a build: what is quantized (INT8 or FP8 Q/DQ, INT4
/// weights, or nothing) and the type everything else computes in (FP32, or a half type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precision {
    /// The grid of the Q/DQ nodes, if the build quantizes activations and weights.
    pub grid: Option<QuantGrid>,
    /// MatMul/Gemm weights stored as INT4 (weight-only; `--int4-weights`).
    pub int4_weights: bool,
    /// The type of everything not quantized; `None`: FP32.
    pub half: Option<HalfType>,
}

impl Precision {
    /// Optimised FP32 (no precision transform).
    pub const FP32: Precision = Precision {
        grid: None,
        int4_weights: false,
        half: None,
    };

    /// The precision `--int8` / `--fp8` / `--fp16` ask for (`--int8` wins over `--fp8`;
    /// [`CompileOptions::validate`] refuses the pair).
    pub fn from_flags(int8: bool, fp8: bool, fp16: bool) -> Precision {
        let grid = match (int8, fp8) {
            (true, _) => Some(QuantGrid::Int8),
            (false, true) => Some(QuantGrid::Fp8E4M3),
            (false, false) => None,
        };
        Precision {
            grid,
            int4_weights: false,
            half: fp16.then_some(HalfType::Fp16),
        }
    }

    /// Name in reports and model metadata (`fp32`, `fp16`, `bf16`, `int8`,
    /// `int8+fp16`, `fp8`, `fp8+bf16`, `int4w+fp16` (INT4 weight-only), ...).
    pub fn name(self) -> String {
        let parts: Vec<&str> = [
            self.grid.map(QuantGrid::name),
            self.int4_weights.then_some("int4w"),
            self.half.map(HalfType::name),
        ]
        .into_iter()
        .flatten()
        .collect();
        match parts.is_empty() {
            true => "fp32".into(),
            false => parts.join("+"),
        }
    }

    /// Suffix of the emitted model's file name (`model_int8.onnx`, `model_int8_fp16.onnx`).
    pub fn file_suffix(self) -> String {
        match self == Precision::FP32 {
            true => "_opt".into(),
            false => format!("_{}", self.name().replace('+', "_")),
        }
    }

    /// The grid a quantized build's Q/DQ use (`None`: no quantization).
    pub fn grid(self) -> Option<QuantGrid> {
        self.grid
    }

    /// Whether the build inserts Q/DQ (INT8 or FP8), and so needs calibration data.
    pub fn is_quantized(self) -> bool {
        self.grid.is_some()
    }

    /// Whether the build inserts INT8 Q/DQ.
    pub fn is_int8(self) -> bool {
        self.grid == Some(QuantGrid::Int8)
    }

    /// Whether the build is INT8 with FP32 everywhere else (what bias correction corrects).
    pub fn is_int8_fp32(self) -> bool {
        self.is_int8() && self.half.is_none()
    }

    /// Whether the build converts to a half type (FP16 or BF16).
    pub fn has_half(self) -> bool {
        self.half.is_some()
    }
}

/// The stages of a compile, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// ONNX decoded into the IR.
    Load,
    /// The optimisation passes.
    Optimize,
    /// Ranges observed on the calibration data.
    Calibrate,
    /// The precision transforms (INT8 Q/DQ, FP16).
    Quantize,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 4] = [
        Stage::Load,
        Stage::Optimize,
        Stage::Calibrate,
        Stage::Quantize,
    ];

    /// The stage's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Load => "load",
            Stage::Optimize => "optimize",
            Stage::Calibrate => "calibrate",
            Stage::Quantize => "quantize",
        }
    }
}

/// Where `--stop-after` stops: after a stage, or after the first run of a named pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopAfter {
    /// After a stage.
    Stage(Stage),
    /// After a pass (optimisation or precision).
    Pass(&'static str),
}

impl FromStr for StopAfter {
    type Err = String;

    fn from_str(name: &str) -> Result<StopAfter, String> {
        if let Some(stage) = Stage::ALL.into_iter().find(|s| s.name() == name) {
            return Ok(StopAfter::Stage(stage));
        }
        let passes = rtq_passes::PASS_NAMES.iter().chain(PRECISION_PASS_NAMES);
        if let Some(pass) = passes.clone().find(|p| **p == name) {
            return Ok(StopAfter::Pass(pass));
        }
        let stages: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
        let passes: Vec<&str> = passes.copied().collect();
        Err(format!(
            "`{name}` is not a stage ({}) or pass ({})",
            stages.join(", "),
            passes.join(", ")
        ))
    }
}

impl StopAfter {
    /// Fails when this build never reaches the stop: a stage or pass it does not run.
    pub fn check(self, opts: &CompileOptions) -> Result<()> {
        let precision = opts.precision();
        let reason = match self {
            StopAfter::Stage(Stage::Calibrate)
                if opts.calib_dir.is_none() && opts.stats.is_empty() =>
            {
                "this build calibrates nothing (no --calib)"
            }
            StopAfter::Stage(Stage::Quantize) if precision == Precision::FP32 => {
                "an FP32 build has no precision transform (add --int8 or --fp16)"
            }
            StopAfter::Pass(Int8QdqPass::NAME) if !precision.is_int8() => {
                "this build inserts no INT8 Q/DQ (add --int8)"
            }
            StopAfter::Pass(Int8QdqPass::FP8_NAME)
                if precision.grid() != Some(QuantGrid::Fp8E4M3) =>
            {
                "this build inserts no FP8 Q/DQ (add --fp8)"
            }
            StopAfter::Pass(rtq_passes::quant::EqualizePass::NAME) if !opts.equalizes() => {
                "this build does not equalize (add --int8 --equalize, or --calib-method auto)"
            }
            StopAfter::Pass(rtq_passes::quant::Int4WeightsPass::NAME)
                if !precision.int4_weights =>
            {
                "this build stores no INT4 weights (add --int4-weights)"
            }
            StopAfter::Pass(rtq_passes::quant::Fp16Pass::NAME) if !precision.has_half() => {
                "this build converts nothing to FP16 or BF16 (add --fp16 or --high-precision bf16)"
            }
            StopAfter::Pass(pass) if opts.optimize.is_disabled(pass) => "that pass is disabled",
            _ => return Ok(()),
        };
        bail!("--stop-after {}: {reason}", self.name())
    }

    /// The stage or pass name.
    pub fn name(self) -> &'static str {
        match self {
            StopAfter::Stage(stage) => stage.name(),
            StopAfter::Pass(pass) => pass,
        }
    }
}

/// `--shard INDEX/COUNT`: this build calibrates on every COUNT-th calibration file,
/// starting at INDEX (0-based), and saves the statistics for a later merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 0-based index of this shard.
    pub index: usize,
    /// Number of shards.
    pub count: usize,
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let parsed = text
            .split_once('/')
            .and_then(|(i, n)| Some((i.trim().parse().ok()?, n.trim().parse().ok()?)));
        match parsed {
            Some((index, count)) if count > 0 && index < count => Ok(Shard { index, count }),
            _ => Err(format!(
                "`{text}` is not INDEX/COUNT with 0 <= INDEX < COUNT (e.g. 0/8, as a Slurm array \
                 task id or a Kubernetes completion index counts)"
            )),
        }
    }
}

impl Shard {
    /// This shard's share of `files`: every `count`-th one, from the `index`-th.
    pub fn select(self, files: &[usize]) -> Vec<usize> {
        files
            .iter()
            .copied()
            .skip(self.index)
            .step_by(self.count)
            .collect()
    }
}

/// How INT4 weights are rounded (`--int4-method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int4Method {
    /// Round to nearest with each block's full range.
    Rtn,
    /// AWQ: per-input-channel scales and per-block clip ratios searched on calibration
    /// activations, then round to nearest.
    Awq,
    /// AWQ's scales and clip ratios, then GPTQ's error-compensating rounding.
    Gptq,
}

impl Int4Method {
    /// The names `--int4-method` takes.
    pub const NAMES: [&'static str; 3] = ["rtn", "awq", "gptq"];

    /// The method called `name` (`rtn`, `awq`, `gptq`).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "rtn" => Some(Int4Method::Rtn),
            "awq" => Some(Int4Method::Awq),
            "gptq" => Some(Int4Method::Gptq),
            _ => None,
        }
    }

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Int4Method::Rtn => "rtn",
            Int4Method::Awq => "awq",
            Int4Method::Gptq => "gptq",
        }
    }

    /// Whether the method measures calibration activations.
    pub fn needs_calibration(self) -> bool {
        self != Int4Method::Rtn
    }
}

/// The TensorRT version written in calibration cache headers unless asked otherwise.
pub const DEFAULT_TRT_VERSION: &str = "10.1.0";

/// Everything `rtq compile` needs to know.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// Source model.
    pub model: PathBuf,
    /// Output directory.
    pub out_dir: PathBuf,
    /// Convert to FP16 (`--fp16`, `--high-precision fp16`).
    pub fp16: bool,
    /// Convert to BF16 (`--high-precision bf16`).
    pub bf16: bool,
    /// Store MatMul/Gemm weights as blockwise INT4 (`--int4-weights`).
    pub int4_weights: bool,
    /// INT4 block size (`--int4-block-size`: 32, 64 or 128).
    pub int4_block_size: usize,
    /// How INT4 weights are rounded (`--int4-method rtn|awq|gptq`); `None`: AWQ when
    /// calibration data is given, round to nearest otherwise.
    pub int4_method: Option<Int4Method>,
    /// Quantize to INT8 (needs calibration data).
    pub int8: bool,
    /// Quantize to FP8 E4M3 (needs calibration data).
    pub fp8: bool,
    /// Calibration data directory.
    pub calib_dir: Option<PathBuf>,
    /// How `--calib-method` chooses (the method a build starts from:
    /// [`CompileOptions::first_method`]).
    pub method_choice: MethodChoice,
    /// When an INT8 build misses `accuracy_target`, compare every method's ranges
    /// (from the same statistics) and keep the best (`--calib-method auto`).
    pub method_search: bool,
    /// Empirical bias correction of INT8 builds (`--bias-correction` /
    /// `--no-bias-correction`); `None`: with `--calib-method auto`, tried and kept where
    /// it brings the build closer to FP32 on calibration samples.
    pub bias_correction: Option<bool>,
    /// Equalize activation channels before calibration (`--equalize` / `--no-equalize`);
    /// `None`: with `--calib-method auto` only, see [`CompileOptions::equalizes`].
    pub equalize: Option<bool>,
    /// Pick each quantized activation's range among every method's by the error at its
    /// consumers (`--calib-method per-tensor`, see [`crate::range_choice`]).
    pub per_tensor_ranges: bool,
    /// The agreement with FP32 the build must keep on the held-out files.
    pub accuracy_target: rtq_emit::AccuracyTarget,
    /// Fail (after writing the outputs) when the target is missed.
    pub strict_accuracy: bool,
    /// Calibrator options.
    pub calib: CalibOptions,
    /// How calibration files are read.
    pub data: DataOptions,
    /// Save every observed tensor's calibration statistics here (`--save-stats`).
    pub save_stats: Option<PathBuf>,
    /// Calibrate from these saved statistics (merged) instead of forward passes.
    pub stats: Vec<PathBuf>,
    /// Take INT8 ranges from this TensorRT calibration cache or ranges JSON instead of
    /// calibrating (`--calib-cache`, see `cache_import.rs`).
    pub calib_cache: Option<PathBuf>,
    /// Calibrate on one shard of the calibration files and stop (`--shard`).
    pub shard: Option<Shard>,
    /// At most this many files for calibration (after the held-out ones).
    pub max_calib_files: Option<usize>,
    /// Files held out for the accuracy check (`None` = 20%, at most 16).
    pub holdout: Option<usize>,
    /// INT8 placement options.
    pub int8_opts: Int8Options,
    /// Nodes kept in FP32 by the FP16 pass.
    pub fp16_exclude: NodeFilter,
    /// Keep FP32 graph inputs/outputs in FP16 builds.
    pub fp16_keep_io: bool,
    /// Optimisation options (disabled passes, verification).
    pub optimize: OptimizeOptions,
    /// TensorRT version written in the calibration cache header (e.g. `10.1.0`).
    pub trt_version: String,
    /// Print the IR after every pass to stderr.
    pub dump_ir: bool,
    /// Stop after this pass or stage and write the graph as it is then.
    pub stop_after: Option<StopAfter>,
    /// Progress bars or observer, and the cancel flag.
    pub progress: crate::progress::Progress,
}

/// How the calibration method is chosen (`--calib-method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodChoice {
    /// Entropy; when the accuracy target is missed, the best method on the model.
    Auto,
    /// This method, as asked (no search).
    Fixed(CalibMethod),
    /// Each tensor's range among every method's, by the error at its consumers.
    PerTensor,
}

impl FromStr for MethodChoice {
    type Err = String;

    fn from_str(name: &str) -> Result<MethodChoice, String> {
        match name {
            "auto" => Ok(MethodChoice::Auto),
            "per-tensor" => Ok(MethodChoice::PerTensor),
            _ => name
                .parse::<CalibMethod>()
                .map(MethodChoice::Fixed)
                .map_err(|_| {
                    let methods: Vec<&str> = CalibMethod::ALL.iter().map(|m| m.name()).collect();
                    format!(
                        "unknown calibration method `{name}` (auto, {}, per-tensor)",
                        methods.join(", ")
                    )
                }),
        }
    }
}

impl CompileOptions {
    /// An FP32 build of `model` into `out_dir` with the command line's defaults
    /// (`--calib-method auto`, accuracy target `cosine=0.99,top1=0.99`, per-channel
    /// weights, residual Adds quantized, TensorRT 10.1.0 cache header, no progress).
    pub fn new(model: impl Into<PathBuf>, out_dir: impl Into<PathBuf>) -> CompileOptions {
        let mut opts = CompileOptions {
            model: model.into(),
            out_dir: out_dir.into(),
            fp16: false,
            bf16: false,
            int4_weights: false,
            int4_block_size: 128,
            int4_method: None,
            int8: false,
            fp8: false,
            calib_dir: None,
            method_choice: MethodChoice::Auto,
            method_search: false,
            bias_correction: None,
            equalize: None,
            per_tensor_ranges: false,
            accuracy_target: rtq_emit::AccuracyTarget::default(),
            strict_accuracy: false,
            calib: CalibOptions::default(),
            data: DataOptions::default(),
            save_stats: None,
            stats: Vec::new(),
            calib_cache: None,
            shard: None,
            max_calib_files: None,
            holdout: None,
            int8_opts: Int8Options::default(),
            fp16_exclude: NodeFilter::default(),
            fp16_keep_io: true,
            optimize: OptimizeOptions::default(),
            trt_version: DEFAULT_TRT_VERSION.to_string(),
            dump_ir: false,
            stop_after: None,
            progress: crate::progress::Progress::default(),
        };
        opts.set_method(MethodChoice::Auto);
        opts
    }

    /// Applies `--calib-method`.
    pub fn set_method(&mut self, choice: MethodChoice) {
        self.per_tensor_ranges = choice == MethodChoice::PerTensor;
        self.method_search = choice == MethodChoice::Auto;
        self.method_choice = choice;
    }

    /// The calibration method the build starts from: the one `--calib-method` names;
    /// with `auto` or `per-tensor`, entropy for INT8 and max for FP8 (whose steps grow
    /// with the magnitude, so clipping outliers buys little precision near zero: NVIDIA
    /// ModelOpt calibrates FP8 by max too).
    pub fn first_method(&self) -> CalibMethod {
        match (self.method_choice, self.precision().grid()) {
            (MethodChoice::Fixed(method), _) => method,
            (_, Some(QuantGrid::Fp8E4M3)) => CalibMethod::Max,
            _ => CalibMethod::default(),
        }
    }

    /// The build's precision.
    pub fn precision(&self) -> Precision {
        let mut precision = Precision::from_flags(self.int8, self.fp8, self.fp16);
        if self.bf16 {
            precision.half = Some(HalfType::Bf16);
        }
        precision.int4_weights = self.int4_weights;
        precision
    }

    /// Fails on option combinations that cannot work, before any work is done.
    pub fn validate(&self) -> Result<()> {
        if self.int8 && self.fp8 {
            bail!("--int8 and --fp8 are two quantized precisions: pick one");
        }
        if self.fp16 && self.bf16 {
            bail!("--fp16 and --high-precision bf16 are two half types: pick one");
        }
        if self.int4_weights && (self.int8 || self.fp8) {
            bail!(
                "--int4-weights quantizes MatMul/Gemm weights only, with activations in high \
                 precision: it does not combine with --int8 or --fp8"
            );
        }
        if !rtq_passes::quant::INT4_BLOCK_SIZES.contains(&self.int4_block_size) {
            bail!(
                "--int4-block-size {}: use 32, 64 or 128",
                self.int4_block_size
            );
        }
        if let Some(method) = self.int4_method.filter(|m| m.needs_calibration()) {
            if self.calib_dir.is_none() {
                bail!(
                    "--int4-method {} measures calibration activations: pass --calib DIR",
                    method.name()
                );
            }
        }
        if self.int8
            && self.calib_dir.is_none()
            && self.stats.is_empty()
            && self.calib_cache.is_none()
        {
            bail!(
                "--int8 needs calibration data: pass --calib DIR (or saved --stats FILE, or a \
                 TensorRT --calib-cache FILE)"
            );
        }
        self.validate_statistics()?;
        self.validate_cache()?;
        if self.fp8 && self.calib_dir.is_none() && self.stats.is_empty() {
            bail!("--fp8 needs calibration data: pass --calib DIR (or saved --stats FILE)");
        }
        self.validate_equalize()?;
        if self.bias_correction == Some(true) && !self.precision().is_int8_fp32() {
            bail!(
                "--bias-correction corrects INT8 builds with FP32 elsewhere (use --int8 without \
                 --fp16 or --high-precision bf16)"
            );
        }
        let unknown = self.optimize.unknown_disabled();
        if !unknown.is_empty() {
            bail!(
                "--disable-pass: unknown pass {} (passes: {})",
                unknown.join(", "),
                rtq_passes::PASS_NAMES.join(", ")
            );
        }
        rtq_calib::trt_version_tag(&self.trt_version)?;
        if self.strict_accuracy && self.precision() == Precision::FP32 {
            bail!(
                "--strict-accuracy: an FP32 build has no accuracy to check (add --int8, --fp8 or \
                 --fp16)"
            );
        }
        match self.stop_after {
            Some(stop) => stop.check(self),
            None => Ok(()),
        }
    }

    /// Whether the build equalizes activation channels: asked for, or by default in
    /// INT8 builds with `--calib-method auto` that calibrate from data (saved statistics
    /// describe the graph as it was, so builds that save, shard or reuse them do not).
    pub fn equalizes(&self) -> bool {
        self.equalize.unwrap_or(
            self.method_search
                && self.precision().is_quantized()
                && self.calib_dir.is_some()
                && !self.keeps_statistics()
                && self.calib_cache.is_none(),
        )
    }

    /// Whether the build saves, shards or reuses calibration statistics.
    fn keeps_statistics(&self) -> bool {
        !self.stats.is_empty() || self.save_stats.is_some() || self.shard.is_some()
    }

    /// Whether the build tries bias correction, and whether it must keep it.
    pub fn bias_correction(&self) -> (bool, bool) {
        match self.bias_correction {
            Some(forced) => (forced, forced),
            None => (self.method_search && self.precision().is_int8_fp32(), false),
        }
    }

    /// The checks of `--calib-cache`: it replaces calibration, so it goes with `--int8`
    /// and nothing that calibrates or equalizes.
    fn validate_cache(&self) -> Result<()> {
        let Some(cache) = &self.calib_cache else {
            return Ok(());
        };
        let cache = cache.display();
        if !self.int8 {
            bail!("--calib-cache {cache}: the cache gives INT8 ranges (add --int8)");
        }
        if self.fp8 {
            bail!("--calib-cache {cache}: TensorRT caches hold INT8 scales, not FP8 ones");
        }
        let conflicts = [
            (!self.stats.is_empty(), "--stats"),
            (self.save_stats.is_some(), "--save-stats"),
            (self.shard.is_some(), "--shard"),
            (self.equalize == Some(true), "--equalize"),
            (self.per_tensor_ranges, "--calib-method per-tensor"),
            (self.bias_correction == Some(true), "--bias-correction"),
        ];
        if let Some((_, flag)) = conflicts.iter().find(|(set, _)| *set) {
            bail!(
                "--calib-cache {cache} replaces calibration: {flag} does not apply to its ranges"
            );
        }
        Ok(())
    }

    /// The checks of `--equalize`.
    fn validate_equalize(&self) -> Result<()> {
        if self.equalize != Some(true) {
            return Ok(());
        }
        if !self.precision().is_quantized() {
            bail!("--equalize: equalization prepares quantization (add --int8 or --fp8)");
        }
        if self.calib_dir.is_none() {
            bail!("--equalize measures channel ranges on calibration data: pass --calib DIR");
        }
        if self.keeps_statistics() {
            bail!(
                "--equalize cannot be combined with --stats, --save-stats or --shard: saved \
                 statistics describe the graph before equalization, which rescales the tensors \
                 they were collected on"
            );
        }
        Ok(())
    }

    /// The checks of `--save-stats`, `--stats` and `--shard`.
    fn validate_statistics(&self) -> Result<()> {
        let flag = if !self.stats.is_empty() {
            "--stats"
        } else if self.save_stats.is_some() {
            "--save-stats"
        } else if self.shard.is_some() {
            "--shard"
        } else {
            return Ok(());
        };
        if !self.precision().is_quantized() {
            bail!("{flag}: statistics are calibration's (add --int8 or --fp8)");
        }
        if !self.stats.is_empty() && (self.save_stats.is_some() || self.shard.is_some()) {
            bail!(
                "--stats: calibration statistics are read, not collected: --save-stats and \
                 --shard need calibration forward passes (merge saved files with `rtq stats merge`)"
            );
        }
        if let Some(shard) = self.shard {
            if self.save_stats.is_none() {
                bail!(
                    "--shard {}/{}: a shard's statistics are only useful saved: add --save-stats FILE",
                    shard.index,
                    shard.count
                );
            }
            if self.calib_dir.is_none() {
                bail!("--shard: pass the calibration data with --calib DIR");
            }
            if let Some(stop) = self
                .stop_after
                .filter(|s| *s != StopAfter::Stage(Stage::Calibrate))
            {
                bail!(
                    "--shard stops after calibration (the statistics are partial); it cannot \
                     --stop-after {}",
                    stop.name()
                );
            }
        }
        Ok(())
    }

    /// The model file's stem, which names the outputs.
    pub fn stem(&self) -> String {
        self.model
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("model")
            .to_string()
    }

    /// Whether `--stop-after` names `stage`.
    pub fn stops_after(&self, stage: Stage) -> bool {
        self.stop_after == Some(StopAfter::Stage(stage))
            || (stage == Stage::Calibrate && self.shard.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_follows_the_flags() {
        assert_eq!(Precision::from_flags(false, false, false), Precision::FP32);
        assert_eq!(Precision::FP32.file_suffix(), "_opt");
        let mixed = Precision::from_flags(true, false, true);
        assert_eq!(mixed.name(), "int8+fp16");
        assert_eq!(mixed.file_suffix(), "_int8_fp16");
        assert!(mixed.is_int8() && mixed.has_half());
        let fp16 = Precision::from_flags(false, false, true);
        assert!(!fp16.is_int8() && fp16.grid().is_none() && fp16.name() == "fp16");
        assert!(!Precision::from_flags(true, false, false).has_half());
        let fp8 = Precision::from_flags(false, true, true);
        assert_eq!(
            (fp8.name().as_str(), fp8.file_suffix().as_str()),
            ("fp8+fp16", "_fp8_fp16")
        );
        assert!(fp8.is_quantized() && !fp8.is_int8() && fp8.has_half());
        assert_eq!(fp8.grid(), Some(QuantGrid::Fp8E4M3));
        let bf16 = Precision {
            grid: Some(QuantGrid::Fp8E4M3),
            half: Some(HalfType::Bf16),
            int4_weights: false,
        };
        let int4 = Precision {
            int4_weights: true,
            ..Precision::from_flags(false, false, true)
        };
        assert_eq!(
            (int4.name().as_str(), int4.file_suffix().as_str()),
            ("int4w+fp16", "_int4w_fp16")
        );
        assert_eq!(
            (bf16.name().as_str(), bf16.file_suffix().as_str()),
            ("fp8+bf16", "_fp8_bf16")
        );
    }

    #[test]
    fn fp8_starts_from_max_unless_a_method_is_named() {
        let mut opts =
            CompileOptions::new(std::path::Path::new("m.onnx"), std::path::Path::new("o"));
        opts.fp8 = true;
        assert_eq!(opts.first_method(), CalibMethod::Max);
        opts.set_method(MethodChoice::Fixed(CalibMethod::Entropy));
        assert_eq!(opts.first_method(), CalibMethod::Entropy);
        opts.fp8 = false;
        opts.int8 = true;
        opts.set_method(MethodChoice::Auto);
        assert_eq!(opts.first_method(), CalibMethod::Entropy);
        opts.fp8 = true;
        opts.calib_dir = Some("d".into());
        let err = opts.validate().unwrap_err().to_string();
        assert!(err.contains("--int8 and --fp8"), "{err}");
    }

    #[test]
    fn shards_parse_and_split_files_without_overlap() {
        assert_eq!("2/8".parse(), Ok(Shard { index: 2, count: 8 }));
        for bad in ["8/8", "1/0", "x/2", "3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        let files: Vec<usize> = (0..10).collect();
        let parts: Vec<Vec<usize>> = (0..3)
            .map(|index| Shard { index, count: 3 }.select(&files))
            .collect();
        assert_eq!(parts, [vec![0, 3, 6, 9], vec![1, 4, 7], vec![2, 5, 8]]);
    }

    #[test]
    fn stop_after_parses_stages_and_passes() {
        assert_eq!("load".parse(), Ok(StopAfter::Stage(Stage::Load)));
        assert_eq!("quantize".parse(), Ok(StopAfter::Stage(Stage::Quantize)));
        assert_eq!(
            "fold-batch-norm".parse(),
            Ok(StopAfter::Pass("fold-batch-norm"))
        );
        assert_eq!("int8-qdq".parse(), Ok(StopAfter::Pass("int8-qdq")));
        let err = "fold-bn".parse::<StopAfter>().unwrap_err();
        assert!(
            err.contains("calibrate") && err.contains("fold-batch-norm") && err.contains("fp16")
        );
    }
}
