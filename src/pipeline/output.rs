//! The last stages — the accuracy check and emission — and writing the outputs:
//! every file atomically, `report.json` last, only after every stage has succeeded.

use super::{Build, CompileOutput, Precision, Transformed};
use anyhow::{bail, Context, Result};
use rtq_emit::{CompileReport, EmitOptions};
use rtq_ir::{DType, Graph};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bytes of the constants that the graph still reads, per element type.
pub fn weight_bytes_by_dtype(graph: &Graph) -> BTreeMap<DType, usize> {
    let live = graph.live_values();
    let mut bytes = BTreeMap::new();
    for (id, value) in graph.values() {
        if let (true, Some(t)) = (live.contains(&id), &value.constant) {
            *bytes.entry(t.dtype()).or_default() += t.byte_size();
        }
    }
    bytes
}

/// Bytes of the live constants, all of them or only the float ones.
pub(super) fn count_weight_bytes(graph: &Graph, float_only: bool) -> usize {
    weight_bytes_by_dtype(graph)
        .into_iter()
        // FP8 is a quantized storage type here, not one of the float originals.
        .filter(|(dtype, _)| !float_only || (dtype.is_float() && *dtype != DType::F8E4M3))
        .map(|(_, n)| n)
        .sum()
}

impl Build<'_> {
    /// Judges the transformed graph against FP32 on the held-out files.
    pub fn evaluate(&mut self, transformed: &Transformed) -> Result<()> {
        let calibrated = &transformed.calibrated;
        let (Some(set), false) = (&calibrated.set, calibrated.held_out.is_empty()) else {
            return Ok(());
        };
        if self.opts.precision() == Precision::FP32 {
            return Ok(());
        }
        let accuracy = crate::accuracy::evaluate(
            &transformed.reference.graph,
            &transformed.graph,
            set,
            &calibrated.held_out,
            &self.report.precision,
        )?;
        self.report.accuracy.push(accuracy);
        self.lap("evaluate");
        Ok(())
    }

    /// Emits the finished model, with the files earlier stages produced.
    pub fn emit(mut self, mut transformed: Transformed) -> Result<CompileOutput> {
        let calibrated = &mut transformed.calibrated;
        if let (Some(result), Some(plan)) = (calibrated.result.as_mut(), &calibrated.plan) {
            self.report.histograms =
                super::histograms::report_histograms(&transformed.reference.graph, result, plan);
        }
        let graph = &transformed.graph;
        let emit_opts = EmitOptions {
            metadata: vec![
                ("rtq.precision".into(), self.report.precision.clone()),
                ("rtq.version".into(), env!("CARGO_PKG_VERSION").into()),
            ],
            ..Default::default()
        };
        let bytes = rtq_emit::to_model_bytes(graph, &emit_opts).context("emitting ONNX")?;
        self.report.graph.nodes_out = graph.node_count();
        self.report.graph.weight_bytes_fp32 = transformed.reference.weight_bytes_fp32;
        self.report.graph.weight_bytes_out = count_weight_bytes(graph, false);
        self.report.output_opset = graph.opset.max(13);
        self.lap("emit");
        self.report.timings = self.timings;
        let suffix = self.opts.precision().file_suffix();
        Ok(CompileOutput {
            model: (format!("{}{suffix}.onnx", self.stem), bytes),
            files: self.files,
            report: self.report,
        })
    }

    /// The output of a compile that `--stop-after` ends early: `graph` as it stands
    /// (`<stem><suffix>.onnx`), `files` and the report so far.
    pub(super) fn stop(
        &mut self,
        graph: &Graph,
        suffix: &str,
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<CompileOutput> {
        let bytes =
            rtq_emit::to_model_bytes(graph, &EmitOptions::default()).context("emitting ONNX")?;
        Ok(CompileOutput {
            model: (format!("{}{suffix}.onnx", self.stem), bytes),
            files,
            report: std::mem::take(&mut self.report),
        })
    }
}

/// Writes the model and the other files into `dir` (created if needed), each
/// atomically, and lists them (with the `report.json` to come) in the report. Returns
/// the paths written, the model first. Write the report with [`write_report`] once
/// every other output (engine, Triton repository) exists.
pub fn write_outputs(dir: &Path, out: &mut CompileOutput) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{}: cannot create output directory", dir.display()))?;
    let mut written = Vec::new();
    for (name, bytes) in std::iter::once(&out.model).chain(&out.files) {
        let path = dir.join(name);
        rtq_emit::write_atomic(&path, bytes)?;
        out.report.outputs.push(path.display().to_string());
        written.push(path);
    }
    Ok(written)
}

/// Writes `report` as `dir/report.json` and `dir/report.html` (each atomically, the
/// JSON last), listing both among the outputs.
pub fn write_report(dir: &Path, report: &mut CompileReport) -> Result<PathBuf> {
    let html = dir.join("report.html");
    let path = dir.join("report.json");
    report.outputs.push(html.display().to_string());
    report.outputs.push(path.display().to_string());
    rtq_emit::write_atomic(&html, rtq_emit::render_html(report).as_bytes())?;
    rtq_emit::write_atomic(&path, report.to_json()?.as_bytes())?;
    Ok(path)
}

/// Checks, before any long computation, that `dir` can be written: it must be a
/// writable directory, or not exist yet under a writable ancestor. Nothing is created.
pub fn prepare_out_dir(dir: &Path) -> Result<()> {
    let mut probe_in = dir;
    while !probe_in.exists() {
        match probe_in.parent() {
            Some(p) if !p.as_os_str().is_empty() => probe_in = p,
            _ => {
                probe_in = Path::new(".");
                break;
            }
        }
    }
    if !probe_in.is_dir() {
        bail!(
            "{}: output path is not a directory ({} is a file)",
            dir.display(),
            probe_in.display()
        );
    }
    tempfile::Builder::new()
        .prefix(".rtq-probe-")
        .tempfile_in(probe_in)
        .with_context(|| format!("{}: output directory is not writable", dir.display()))?;
    Ok(())
}
