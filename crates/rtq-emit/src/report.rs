//! The compile report: per-tensor ranges, quantization decisions, pass statistics and
//! accuracy of the FP16/INT8 outputs against FP32, as JSON and as terminal text.

use crate::AccuracyTarget;
use serde::Serialize;
use std::fmt::Write;

/// Everything `rtq compile` records about one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CompileReport {
    /// rtq version.
    pub rtq_version: String,
    /// Source model path.
    pub model: String,
    /// Source default-domain opset.
    pub source_opset: i64,
    /// Emitted default-domain opset.
    pub output_opset: i64,
    /// Precision of the emitted model: `fp32`, `fp16` or `int8`.
    pub precision: String,
    /// Graph size before and after.
    pub graph: GraphSummary,
    /// Pass statistics (from the pass manager), as JSON.
    pub passes: serde_json::Value,
    /// Quantization decisions, for INT8 builds.
    pub quantization: Option<QuantSummary>,
    /// Per-tensor calibration ranges, for INT8 builds.
    pub ranges: Vec<TensorRange>,
    /// Accuracy of each reduced-precision variant against FP32.
    pub accuracy: Vec<AccuracyReport>,
    /// The verdict against the accuracy target, and what was done to meet it.
    pub accuracy_check: Option<AccuracyCheck>,
    /// Things the user should know: checks skipped, targets missed.
    pub warnings: Vec<String>,
    /// Files written.
    pub outputs: Vec<String>,
    /// Wall time of each stage, in seconds, in order.
    pub timings: Vec<(String, f64)>,
    /// Calibration histograms of a few tensors, for the HTML report (not in the JSON).
    #[serde(skip)]
    pub histograms: Vec<TensorHistogram>,
}

/// Pairs of (FP32, reduced-precision) values of one output on one sample.
#[derive(Debug, Clone, Default)]
pub struct OutputScatter {
    /// Output name.
    pub output: String,
    /// The held-out file the sample came from.
    pub file: String,
    /// (FP32, candidate) pairs, an even subsample of the output's elements.
    pub points: Vec<(f32, f32)>,
}

/// One tensor's |x| histogram with every method's range, for the HTML report.
#[derive(Debug, Clone, Default)]
pub struct TensorHistogram {
    /// Tensor name.
    pub tensor: String,
    /// Upper end of the plotted range (the bars cover `[0, upper]` evenly).
    pub upper: f64,
    /// Count per bar.
    pub counts: Vec<u64>,
    /// The range each calibration method picks, by method name.
    pub thresholds: Vec<(String, f32)>,
    /// The range the build uses.
    pub chosen: f32,
}

/// Node counts and weight bytes before and after compilation.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GraphSummary {
    /// Nodes in the source model.
    pub nodes_in: usize,
    /// Nodes in the emitted model.
    pub nodes_out: usize,
    /// Bytes of FP32 weights (float constants) after optimisation, before precision changes.
    pub weight_bytes_fp32: usize,
    /// Bytes of all constants in the emitted model.
    pub weight_bytes_out: usize,
}

/// What the Q/DQ pass (INT8 or FP8) did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QuantSummary {
    /// The quantized type: `int8` or `fp8` (E4M3).
    pub grid: String,
    /// Calibration method.
    pub method: String,
    /// Calibration samples used.
    pub samples: usize,
    /// Nodes whose inputs were quantized.
    pub quantized_nodes: usize,
    /// Q/DQ pairs on activations.
    pub activation_qdq: usize,
    /// Weights quantized per channel.
    pub weight_qdq: usize,
    /// Share of the weighted ops' multiply-accumulates (Conv, ConvTranspose, Gemm,
    /// MatMul) that run quantized (INT8 or FP8, despite the name); `None` where shapes
    /// are unknown.
    pub int8_mac_share: Option<f64>,
    /// Nodes left in float, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// The calibrated range of one activation tensor.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TensorRange {
    /// Tensor name.
    pub tensor: String,
    /// Op type of the node producing it (`input` for graph inputs).
    pub producer: String,
    /// Smallest value observed.
    pub min: f32,
    /// Largest value observed.
    pub max: f32,
    /// Largest magnitude observed.
    pub absmax: f32,
    /// Chosen clipping threshold.
    pub amax: f32,
    /// INT8 scale = amax / 127.
    pub scale: f32,
}

/// Accuracy of one variant (FP16 or INT8) against FP32 on held-out samples.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AccuracyReport {
    /// `fp16` or `int8`.
    pub variant: String,
    /// Held-out samples compared.
    pub samples: usize,
    /// Per-output metrics.
    pub outputs: Vec<OutputAccuracy>,
    /// FP32 against reduced-precision values of the first output on the first sample,
    /// for the HTML report (not in the JSON).
    #[serde(skip)]
    pub scatter: Option<OutputScatter>,
}

/// The verdict of a build against its [`AccuracyTarget`] on the held-out samples.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AccuracyCheck {
    /// The target.
    pub target: AccuracyTarget,
    /// Whether every output meets it.
    pub met: bool,
    /// One line per missed metric (empty when met).
    pub misses: Vec<String>,
    /// The calibration methods compared when the first build missed the target
    /// (judged on calibration samples, not the held-out ones); empty when no search ran.
    pub method_search: Vec<MethodTrial>,
    /// The method whose ranges the emitted model uses.
    pub method: Option<String>,
    /// Per-layer diagnosis of the emitted model on the held-out files, when the target
    /// is missed.
    pub per_layer: Option<PerLayerReport>,
    /// Quantized nodes reverted to high precision (with their input Q/DQ) to meet the
    /// target, the most sensitive first; empty when no fallback ran.
    pub fallback: Vec<String>,
    /// Each quantized node's sensitivity, most sensitive first, where the fallback
    /// measured it: (node, error of the model with that node alone quantized, judged on
    /// calibration samples: `1 - cosine mean` plus `1 - top-1 agreement`, over outputs).
    pub sensitivity: Vec<(String, f64)>,
    /// Models judged during the fallback's bisection: (nodes reverted, margin).
    pub fallback_trials: Vec<(usize, f64)>,
    /// Nodes the INT8 plan quantized, and how many of them still are.
    pub quantized_nodes: (usize, usize),
    /// Empirical bias correction, where it was tried.
    pub bias_correction: Option<BiasCorrectionTrial>,
}

/// Empirical bias correction of an INT8 build, judged on calibration samples.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BiasCorrectionTrial {
    /// Weighted ops whose bias was corrected.
    pub nodes: usize,
    /// Samples the output means were measured on.
    pub samples: usize,
    /// Margin to the target on the judging samples without the correction.
    pub margin_before: f64,
    /// The same with it.
    pub margin_after: f64,
    /// Whether the emitted model keeps it (asked for, or better with `auto`).
    pub applied: bool,
}

/// Every tensor the FP32 and the quantized graph both compute, compared.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PerLayerReport {
    /// Cumulative cosine below which a tensor counts as diverged.
    pub diverged_cosine: f64,
    /// The first tensor (in graph order) below `diverged_cosine`.
    pub first_diverging: Option<String>,
    /// Quantized tensors whose own Q/DQ loses most (lowest local SQNR), worst first.
    pub most_sensitive: Vec<String>,
    /// Every compared tensor, in graph order.
    pub layers: Vec<LayerError>,
}

/// One tensor of a [`PerLayerReport`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct LayerError {
    /// Tensor name.
    pub tensor: String,
    /// Producing node (`input` for graph inputs).
    pub node: String,
    /// Its op type.
    pub op: String,
    /// Cosine of the quantized graph's value against FP32 (all Q/DQ upstream on).
    pub cosine: f64,
    /// SQNR of that value, in dB.
    pub sqnr_db: f64,
    /// SQNR of the FP32 value through this tensor's own Q/DQ only, in dB (quantized
    /// tensors only).
    pub local_sqnr_db: Option<f64>,
    /// Samples compared.
    pub samples: usize,
}

impl PerLayerReport {
    /// A table for the terminal: the first diverging tensor, the most sensitive ones
    /// and up to `max_rows` tensors in graph order.
    pub fn render_text(&self, max_rows: usize) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "  first diverging tensor (cumulative cosine < {}): {}",
            self.diverged_cosine,
            self.first_diverging.as_deref().unwrap_or("none")
        );
        if !self.most_sensitive.is_empty() {
            let _ = writeln!(
                s,
                "  most sensitive (own Q/DQ): {}",
                self.most_sensitive.join(", ")
            );
        }
        let _ = writeln!(
            s,
            "\n  {:<40} {:<16} {:>10} {:>10} {:>12}",
            "tensor", "op", "cosine", "SQNR dB", "local dB"
        );
        for l in self.layers.iter().take(max_rows) {
            let local = l
                .local_sqnr_db
                .map_or(String::from("-"), |d| format!("{d:.1}"));
            let _ = writeln!(
                s,
                "  {:<40} {:<16} {:>10.5} {:>10.1} {:>12}",
                ellipsize(&l.tensor, 40),
                ellipsize(&l.op, 16),
                l.cosine,
                l.sqnr_db,
                local
            );
        }
        if self.layers.len() > max_rows {
            let _ = writeln!(s, "  ... {} more (--json)", self.layers.len() - max_rows);
        }
        s
    }
}

/// One calibration method's result in the method search.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MethodTrial {
    /// The method.
    pub method: String,
    /// Samples it was judged on.
    pub samples: usize,
    /// Worst metric's distance to its target (negative: missed).
    pub margin: f64,
    /// Lowest cosine mean over the outputs.
    pub cosine_mean: f64,
    /// Lowest top-1 agreement over the outputs that have one.
    pub top1_agreement: Option<f64>,
}

/// Agreement of one output tensor with FP32.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OutputAccuracy {
    /// Output name.
    pub output: String,
    /// Mean cosine similarity over samples.
    pub cosine_mean: f64,
    /// Worst cosine similarity over samples.
    pub cosine_min: f64,
    /// Largest absolute difference seen.
    pub max_abs_error: f64,
    /// Mean absolute difference.
    pub mean_abs_error: f64,
    /// Share of arg-max agreement where the output has a class axis: rows of
    /// `[N, classes]` / `[N, classes, 1, 1]`, positions of `[N, T, classes]` sequences.
    pub top1_agreement: Option<f64>,
}

impl CompileReport {
    /// One line on the equalization pass, where it ran: how many activations were
    /// rescaled and the median spread of their channel ranges before and after.
    pub fn equalization_line(&self) -> Option<String> {
        let tensors = self.passes.get("equalize")?.get("tensors")?.as_array()?;
        let median = |key: &str| {
            let mut v: Vec<f64> = tensors
                .iter()
                .filter_map(|t| t.get(key)?.as_f64())
                .collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(1.0)
        };
        Some(format!(
            "{} activation(s) rescaled per channel; median channel-range spread {:.1} -> {:.1}",
            tensors.len(),
            median("spread_before"),
            median("spread_after")
        ))
    }

    /// The INT4 weight-only line of the text report: weights quantized, block size,
    /// method, median and worst per-layer output error (from `passes.int4_weights`).
    pub fn int4_line(&self) -> Option<String> {
        let int4 = self.passes.get("int4_weights")?;
        let layers = int4.get("layers")?.as_array()?;
        let awq = int4.get("awq").and_then(|a| a.as_array());
        let mut line = format!(
            "{} MatMul/Gemm weight(s) in blocks of {}, {}",
            layers.len(),
            int4.get("block_size")?.as_u64()?,
            int4.get("method")?.as_str()?,
        );
        if let Some(awq) = awq.filter(|a| !a.is_empty()) {
            let mut errors: Vec<(f64, f64)> = awq
                .iter()
                .filter_map(|l| Some((l.get("rtn_error")?.as_f64()?, l.get("error")?.as_f64()?)))
                .collect();
            errors.sort_by(|a, b| a.1.total_cmp(&b.1));
            let median = errors[errors.len() / 2];
            let worst = errors.last().copied().unwrap_or_default();
            line += &format!(
                "; layer output error median {:.2}% (round-to-nearest {:.2}%), worst {:.2}%",
                100.0 * median.1,
                100.0 * median.0,
                100.0 * worst.1
            );
        }
        let skipped = int4
            .get("skipped")
            .and_then(|s| s.as_array())
            .map_or(0, Vec::len);
        if skipped > 0 {
            line += &format!("; {skipped} left in float");
        }
        Some(line)
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> Result<String, crate::EmitError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// A readable summary for the terminal; `max_ranges` limits the per-tensor table.
    pub fn render_text(&self, max_ranges: usize) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "rtq {} — {}", self.rtq_version, self.model);
        let _ = writeln!(
            s,
            "  precision {}  opset {} -> {}  nodes {} -> {}",
            self.precision,
            self.source_opset,
            self.output_opset,
            self.graph.nodes_in,
            self.graph.nodes_out
        );
        if self.graph.weight_bytes_fp32 > 0 {
            let ratio = self.graph.weight_bytes_out as f64 / self.graph.weight_bytes_fp32 as f64;
            let _ = writeln!(
                s,
                "  weights {} -> {} ({:.1}% of FP32)",
                human_bytes(self.graph.weight_bytes_fp32),
                human_bytes(self.graph.weight_bytes_out),
                100.0 * ratio
            );
        }
        if let Some(q) = &self.quantization {
            let _ = writeln!(
                s,
                "  {}: {} calibration on {} samples; {} nodes quantized ({} activation Q/DQ, {} per-channel weights), {} left in float{}",
                q.grid, q.method, q.samples, q.quantized_nodes, q.activation_qdq, q.weight_qdq, q.skipped.len(),
                q.int8_mac_share.map_or(String::new(), |m| format!("; {:.1}% of MACs quantized", 100.0 * m))
            );
        }
        if let Some(line) = self.int4_line() {
            let _ = writeln!(s, "  int4 weights: {line}");
        }
        if let Some(line) = self.equalization_line() {
            let _ = writeln!(s, "  equalization: {line}");
        }
        if !self.ranges.is_empty() {
            let _ = writeln!(
                s,
                "\n  {:<48} {:<18} {:>11} {:>11} {:>11} {:>11}",
                "tensor", "producer", "min", "max", "amax", "scale"
            );
            for r in self.ranges.iter().take(max_ranges) {
                let _ = writeln!(
                    s,
                    "  {:<48} {:<18} {:>11.4} {:>11.4} {:>11.4} {:>11.6}",
                    ellipsize(&r.tensor, 48),
                    ellipsize(&r.producer, 18),
                    r.min,
                    r.max,
                    r.amax,
                    r.scale
                );
            }
            if self.ranges.len() > max_ranges {
                let _ = writeln!(
                    s,
                    "  ... {} more in report.json",
                    self.ranges.len() - max_ranges
                );
            }
        }
        for acc in &self.accuracy {
            let _ = writeln!(
                s,
                "\n  accuracy of {} vs fp32 on {} held-out samples:",
                acc.variant, acc.samples
            );
            for o in &acc.outputs {
                let top1 = o.top1_agreement.map_or(String::new(), |t| {
                    format!("  top-1 agreement {:.1}%", 100.0 * t)
                });
                let _ = writeln!(
                    s,
                    "    {:<32} cosine mean {:.5} min {:.5}  max |err| {:.4e}  mean |err| {:.4e}{top1}",
                    ellipsize(&o.output, 32),
                    o.cosine_mean,
                    o.cosine_min,
                    o.max_abs_error,
                    o.mean_abs_error
                );
            }
        }
        if let Some(check) = &self.accuracy_check {
            render_check(&mut s, check);
        }
        for w in &self.warnings {
            let _ = writeln!(s, "\n  warning: {w}");
        }
        if !self.outputs.is_empty() {
            let _ = writeln!(s, "\n  wrote:");
            for o in &self.outputs {
                let _ = writeln!(s, "    {o}");
            }
        }
        s
    }
}

/// The accuracy verdict and the method search, for the terminal.
fn render_check(s: &mut String, check: &AccuracyCheck) {
    let t = &check.target;
    let verdict = if check.met { "met" } else { "NOT MET" };
    let _ = writeln!(
        s,
        "\n  accuracy target (cosine mean >= {}, top-1 >= {:.1}%): {verdict}",
        t.cosine,
        100.0 * t.top1
    );
    for m in &check.misses {
        let _ = writeln!(s, "    {m}");
    }
    if !check.method_search.is_empty() {
        let _ = writeln!(s, "  calibration methods compared on calibration samples:");
        for trial in &check.method_search {
            let top1 = trial
                .top1_agreement
                .map_or(String::new(), |t| format!("  top-1 {:.2}%", 100.0 * t));
            let chosen = if check.method.as_deref() == Some(trial.method.as_str()) {
                "  <- chosen"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "    {:<11} cosine mean {:.5}{top1}  margin {:+.4}{chosen}",
                trial.method, trial.cosine_mean, trial.margin
            );
        }
    }
    render_fallback(s, check);
}

/// The fallback's outcome, for the terminal.
fn render_fallback(s: &mut String, check: &AccuracyCheck) {
    if check.fallback.is_empty() {
        return;
    }
    let (planned, kept) = check.quantized_nodes;
    let _ = writeln!(
        s,
        "  fallback: {} of {planned} quantized nodes back to high precision ({kept} still quantized), \
         {} models judged:",
        check.fallback.len(),
        check.fallback_trials.len()
    );
    for name in check.fallback.iter().take(12) {
        let _ = writeln!(s, "    {name}");
    }
    if check.fallback.len() > 12 {
        let _ = writeln!(
            s,
            "    ... {} more in report.json",
            check.fallback.len() - 12
        );
    }
}

fn ellipsize(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(width - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}

/// Formats a byte count as KiB/MiB.
pub(crate) fn human_bytes(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{:.2} MiB", n as f64 / (1 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_report_lists_ranges_and_accuracy() {
        let report = CompileReport {
            rtq_version: "0.1.0".into(),
            model: "m.onnx".into(),
            precision: "int8".into(),
            ranges: vec![TensorRange {
                tensor: "conv1_out".into(),
                producer: "Conv".into(),
                min: -1.0,
                max: 2.0,
                absmax: 2.0,
                amax: 1.5,
                scale: 1.5 / 127.0,
            }],
            accuracy: vec![AccuracyReport {
                variant: "int8".into(),
                samples: 4,
                scatter: None,
                outputs: vec![OutputAccuracy {
                    output: "prob".into(),
                    cosine_mean: 0.999,
                    cosine_min: 0.99,
                    max_abs_error: 0.01,
                    mean_abs_error: 0.001,
                    top1_agreement: Some(1.0),
                }],
            }],
            ..Default::default()
        };
        let text = report.render_text(10);
        assert!(
            text.contains("conv1_out") && text.contains("1.5000"),
            "{text}"
        );
        assert!(text.contains("top-1 agreement 100.0%"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
        assert_eq!(json["ranges"][0]["amax"], 1.5);
    }

    #[test]
    fn long_names_are_shortened_from_the_left() {
        assert_eq!(ellipsize("abcdef", 4), "…def");
        assert_eq!(human_bytes(2048), "2.0 KiB");
    }
}
