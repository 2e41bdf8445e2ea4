//! The compile pipeline: load -> optimise -> calibrate -> quantize / convert -> verify
//! -> evaluate -> emit. Every stage adds context to its errors; outputs are written
//! only after every stage has succeeded, each file atomically.

use crate::accuracy::OutputAgreement;
use crate::calibrate::{calibrate, CalibrationResult};
use anyhow::{bail, Context, Result};
use rtq_calib::{CalibOptions, CalibrationSet, DataOptions, RangeStats};
use rtq_emit::{
    AccuracyReport, CompileReport, EmitOptions, GraphSummary, QuantSummary, TensorRange,
};
use rtq_ir::{DType, Graph, ValueId};
use rtq_passes::quant::{
    apply_int8, convert_fp16, plan_int8, Fp16Options, Int8Options, NodeFilter, ScaleFormat,
};
use rtq_passes::{OptimizeOptions, PassManager};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Stages `--stop-after` accepts besides pass names.
pub const STAGES: &[&str] = &["load", "optimize", "calibrate", "quantize"];

/// Everything `rtq compile` needs to know.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// Source model.
    pub model: PathBuf,
    /// Output directory.
    pub out_dir: PathBuf,
    /// Convert to FP16.
    pub fp16: bool,
    /// Quantize to INT8 (needs calibration data).
    pub int8: bool,
    /// Calibration data directory.
    pub calib_dir: Option<PathBuf>,
    /// Calibrator name.
    pub calib_method: String,
    /// Calibrator options.
    pub calib: CalibOptions,
    /// How calibration files are read.
    pub data: DataOptions,
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
    pub stop_after: Option<String>,
    /// Show progress bars.
    pub progress: bool,
}

/// What a compile produced, in memory, before anything is written.
pub struct CompileOutput {
    /// The emitted model's file name (inside the output directory) and bytes.
    pub model: (String, Vec<u8>),
    /// Other files: (file name, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    /// The report.
    pub report: CompileReport,
}

/// `TRT-<NNNNNN>-EntropyCalibration2`-style numeric tag for a dotted TensorRT version.
pub fn trt_version_tag(version: &str) -> Result<String> {
    let parts: Vec<u32> = version
        .split('.')
        .map(|p| {
            p.parse::<u32>()
                .with_context(|| format!("bad TensorRT version `{version}`"))
        })
        .collect::<Result<_>>()?;
    let (major, minor, patch) = (
        parts[0],
        *parts.get(1).unwrap_or(&0),
        *parts.get(2).unwrap_or(&0),
    );
    // TensorRT 8 packs versions as MMmp (8601); TensorRT 10 as M*10000 + m*100 + p (100100).
    let n = if major >= 10 {
        major * 10000 + minor * 100 + patch
    } else {
        major * 1000 + minor * 100 + patch
    };
    Ok(n.to_string())
}

/// Bytes of the constants that the graph still reads, per element type.
pub fn weight_bytes_by_dtype(graph: &Graph) -> std::collections::BTreeMap<DType, usize> {
    let live = graph.live_values();
    let mut bytes = std::collections::BTreeMap::new();
    for (id, value) in graph.values() {
        if let (true, Some(t)) = (live.contains(&id), &value.constant) {
            *bytes.entry(t.dtype()).or_default() += t.byte_size();
        }
    }
    bytes
}

fn count_weight_bytes(graph: &Graph, float_only: bool) -> usize {
    weight_bytes_by_dtype(graph)
        .into_iter()
        .filter(|(dtype, _)| !float_only || dtype.is_float())
        .map(|(_, n)| n)
        .sum()
}

/// Splits the files of a calibration set into (calibration, held-out) index lists.
pub fn split_files(
    total: usize,
    holdout: Option<usize>,
    max_calib: Option<usize>,
) -> (Vec<usize>, Vec<usize>) {
    let held = holdout.unwrap_or_else(|| {
        if total >= 2 {
            (total / 5).clamp(1, 16)
        } else {
            0
        }
    });
    let held = held.min(total.saturating_sub(1));
    let calib_end = total - held;
    let mut calib: Vec<usize> = (0..calib_end).collect();
    if let Some(m) = max_calib {
        calib.truncate(m);
    }
    (calib, (calib_end..total).collect())
}

/// Every float activation of `graph` (graph inputs and node outputs), in topological order.
pub fn float_activations(graph: &Graph) -> Vec<ValueId> {
    let mut out: Vec<ValueId> = graph
        .inputs
        .iter()
        .copied()
        .filter(|&v| graph.value(v).dtype == Some(DType::F32))
        .collect();
    for id in graph.topo_order().unwrap_or_default() {
        for &o in &graph.node(id).outputs {
            if graph.value(o).dtype == Some(DType::F32) && graph.value(o).constant.is_none() {
                out.push(o);
            }
        }
    }
    out
}

/// Runs the pipeline; writes nothing.
pub fn compile(opts: &CompileOptions) -> Result<CompileOutput> {
    let mut timings: Vec<(String, f64)> = Vec::new();
    let mut clock = Instant::now();
    let mut lap = |name: &str, timings: &mut Vec<(String, f64)>| {
        timings.push((name.to_string(), clock.elapsed().as_secs_f64()));
        clock = Instant::now();
    };
    if opts.int8 && opts.calib_dir.is_none() {
        bail!("--int8 needs calibration data: pass --calib DIR");
    }
    let stem = opts
        .model
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("model")
        .to_string();

    // Load.
    let mut graph = rtq_frontend::load_model(&opts.model)
        .with_context(|| format!("loading {}", opts.model.display()))?;
    let source_opset = graph.opset;
    let nodes_in = graph.node_count();
    lap("load", &mut timings);
    let stop = opts.stop_after.as_deref();
    if let Some(name) = stop {
        if !STAGES.contains(&name) && !rtq_passes::PASS_NAMES.contains(&name) {
            bail!(
                "--stop-after `{name}`: not a stage ({}) or pass ({})",
                STAGES.join(", "),
                rtq_passes::PASS_NAMES.join(", ")
            );
        }
    }
    let finish = |graph: &Graph, report: CompileReport, suffix: &str| -> Result<CompileOutput> {
        let bytes =
            rtq_emit::to_model_bytes(graph, &EmitOptions::default()).context("emitting ONNX")?;
        Ok(CompileOutput {
            model: (format!("{stem}{suffix}.onnx"), bytes),
            files: Vec::new(),
            report,
        })
    };
    let mut report = CompileReport {
        rtq_version: env!("CARGO_PKG_VERSION").to_string(),
        model: opts.model.display().to_string(),
        source_opset,
        output_opset: source_opset.max(13),
        precision: "fp32".into(),
        ..Default::default()
    };
    if stop == Some("load") {
        return finish(&graph, report, "_load");
    }

    // Optimise.
    let unknown = opts.optimize.unknown_disabled();
    if !unknown.is_empty() {
        bail!(
            "--disable-pass: unknown pass {} (passes: {})",
            unknown.join(", "),
            rtq_passes::PASS_NAMES.join(", ")
        );
    }
    let mut manager = PassManager::new();
    manager.extend(rtq_passes::optimization_passes(&opts.optimize));
    manager.verify_each(opts.optimize.verify_each);
    let dump = opts.dump_ir;
    let stop_pass = stop.map(str::to_string);
    let stopped = std::rc::Rc::new(std::cell::Cell::new(false));
    let stopped_hook = stopped.clone();
    manager.on_pass(move |event| {
        if dump {
            eprintln!(
                "=== after {} ===\n{}",
                event.pass,
                rtq_ir::dump(event.graph)
            );
        }
        if stop_pass.as_deref() == Some(event.pass) {
            stopped_hook.set(true);
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(())
    });
    let stats = manager.run(&mut graph).context("optimising")?;
    report.passes = serde_json::to_value(&stats)?;
    lap("optimize", &mut timings);
    if stop == Some("optimize") || stopped.get() {
        report.graph.nodes_in = nodes_in;
        report.graph.nodes_out = graph.node_count();
        return finish(&graph, report, "_optimized");
    }
    let fp32_graph = graph.clone();
    let weight_bytes_fp32 = count_weight_bytes(&graph, true);

    // Calibration data.
    let set = match &opts.calib_dir {
        Some(dir) => Some(
            CalibrationSet::open(dir, &opts.data)
                .with_context(|| format!("reading calibration data in {}", dir.display()))?,
        ),
        None => None,
    };
    let (calib_files, held_out) = match &set {
        Some(s) => split_files(s.len(), opts.holdout, opts.max_calib_files),
        None => (Vec::new(), Vec::new()),
    };
    if let Some(s) = &set {
        if calib_files.is_empty() {
            bail!(
                "{}: no calibration files left after holding out {} for evaluation",
                s.dir().display(),
                held_out.len()
            );
        }
    }

    let mut cache_entries: Vec<(String, f32)> = Vec::new();
    let mut suffix = "_opt";
    if opts.int8 {
        let set = set.as_ref().expect("checked above");
        let mut int8_opts = opts.int8_opts.clone();
        if opts.fp16 {
            // The FP16 conversion below stores the scales in half precision: make them
            // exact there, and quantize the weights against those values.
            int8_opts.scale_format = ScaleFormat::F16;
        }
        let plan = plan_int8(&graph, &int8_opts).context("planning INT8 quantization")?;
        // Calibrate every float activation: the Q/DQ plan needs a subset, the TensorRT
        // cache wants them all.
        let targets = float_activations(&graph);
        let calibrator = rtq_calib::calibrator_by_name(&opts.calib_method, &opts.calib)?;
        let result: CalibrationResult = calibrate(
            &graph,
            set,
            &calib_files,
            &targets,
            calibrator.as_ref(),
            opts.progress,
        )?;
        lap("calibrate", &mut timings);
        for (v, stats) in &result.stats {
            let value = graph.value(*v);
            let amax = result.ranges[v];
            cache_entries.push((value.name.clone(), amax));
            report.ranges.push(TensorRange {
                tensor: value.name.clone(),
                producer: value
                    .producer
                    .map_or("input".to_string(), |(n, _)| graph.node(n).op_type.clone()),
                min: stats.min,
                max: stats.max,
                absmax: stats.absmax,
                amax,
                scale: amax / 127.0,
            });
        }
        if stop == Some("calibrate") {
            let mut out = finish(&graph, report, "_optimized")?;
            out.files
                .push(cache_file(&stem, &opts.trt_version, &cache_entries)?);
            return Ok(out);
        }
        let summary =
            apply_int8(&mut graph, &plan, &result.ranges).context("inserting Q/DQ nodes")?;
        report.quantization = Some(QuantSummary {
            method: calibrator.name().to_string(),
            samples: result.samples,
            quantized_nodes: summary.quantized_nodes,
            activation_qdq: summary.activation_qdq,
            weight_qdq: summary.weight_qdq,
            skipped: summary.skipped,
        });
        report.precision = "int8".into();
        suffix = "_int8";
        lap("quantize", &mut timings);
        if opts.fp16 {
            // Mixed INT8/FP16: what is not INT8 runs in half precision, Q/DQ included;
            // the calibration run already tells which activations would overflow it.
            let fp16 = fp16_options(opts, &result.stats, true);
            let summary = convert_fp16(&mut graph, &fp16).context("converting to FP16")?;
            report.passes["fp16"] = serde_json::to_value(&summary)?;
            report.precision = "int8+fp16".into();
            suffix = "_int8_fp16";
            lap("fp16", &mut timings);
        }
    } else if opts.fp16 {
        let mut observed = Vec::new();
        if let Some(set) = &set {
            // An FP32 run on the calibration data tells which activations would overflow FP16.
            let targets = float_activations(&graph);
            let max = rtq_calib::calibrator_by_name("max", &opts.calib)?;
            let result = calibrate(
                &graph,
                set,
                &calib_files,
                &targets,
                max.as_ref(),
                opts.progress,
            )?;
            observed = result.stats;
            lap("observe-ranges", &mut timings);
        }
        let fp16 = fp16_options(opts, &observed, false);
        let summary = convert_fp16(&mut graph, &fp16).context("converting to FP16")?;
        report.passes["fp16"] = serde_json::to_value(&summary)?;
        report.precision = "fp16".into();
        suffix = "_fp16";
        lap("fp16", &mut timings);
    }
    rtq_passes::infer_shapes(&mut graph).context("inferring shapes after precision transforms")?;
    rtq_ir::verify(&graph).context("verifying the final graph")?;

    // Evaluate on held-out samples.
    if let (Some(set), true, false) = (&set, opts.int8 || opts.fp16, held_out.is_empty()) {
        let acc = evaluate(&fp32_graph, &graph, set, &held_out, &report.precision)?;
        report.accuracy.push(acc);
        lap("evaluate", &mut timings);
    }

    let emit_opts = EmitOptions {
        metadata: vec![
            ("rtq.precision".into(), report.precision.clone()),
            ("rtq.version".into(), env!("CARGO_PKG_VERSION").into()),
        ],
        ..Default::default()
    };
    let bytes = rtq_emit::to_model_bytes(&graph, &emit_opts).context("emitting ONNX")?;
    report.graph = GraphSummary {
        nodes_in,
        nodes_out: graph.node_count(),
        weight_bytes_fp32,
        weight_bytes_out: count_weight_bytes(&graph, false),
    };
    report.output_opset = graph.opset.max(13);
    lap("emit", &mut timings);
    report.timings = timings;
    let mut files = Vec::new();
    if opts.int8 {
        files.push(cache_file(&stem, &opts.trt_version, &cache_entries)?);
    }
    Ok(CompileOutput {
        model: (format!("{stem}{suffix}.onnx"), bytes),
        files,
        report,
    })
}

/// The FP16 transform's options: the CLI's exclusions and interface choice, the
/// largest |x| each activation reached on the calibration data (empty when none ran)
/// and whether Q/DQ go to FP16 too (mixed INT8/FP16 builds).
fn fp16_options(
    opts: &CompileOptions,
    observed: &[(ValueId, RangeStats)],
    half_qdq: bool,
) -> Fp16Options {
    Fp16Options {
        exclude: opts.fp16_exclude.clone(),
        keep_io_types: opts.fp16_keep_io,
        observed_absmax: observed.iter().map(|(v, s)| (*v, s.absmax)).collect(),
        half_qdq,
        ..Default::default()
    }
}

fn cache_file(
    stem: &str,
    trt_version: &str,
    entries: &[(String, f32)],
) -> Result<(String, Vec<u8>)> {
    let tag = trt_version_tag(trt_version)?;
    let text = rtq_calib::write_cache_text(&tag, entries);
    Ok((format!("{stem}_calibration.cache"), text.into_bytes()))
}

/// Runs `reference` and `candidate` on the held-out files and compares their outputs.
pub fn evaluate(
    reference: &Graph,
    candidate: &Graph,
    set: &CalibrationSet,
    files: &[usize],
    variant: &str,
) -> Result<AccuracyReport> {
    let ref_plan =
        rtq_exec::Plan::new(reference).context("preparing the FP32 graph for evaluation")?;
    let cand_plan = rtq_exec::Plan::new(candidate)
        .with_context(|| format!("preparing the {variant} graph for evaluation"))?;
    let specs = rtq_calib::InputSpec::from_graph(reference)?;
    let names = ref_plan.output_names();
    let mut agreements: Vec<OutputAgreement> =
        names.iter().map(|n| OutputAgreement::new(n)).collect();
    let mut samples = 0;
    for &file in files {
        for sample in set.load(file, &specs)? {
            let r = ref_plan
                .run(&sample)
                .with_context(|| format!("FP32 run on {}", set.files()[file].display()))?;
            let c = cand_plan
                .run(&sample)
                .with_context(|| format!("{variant} run on {}", set.files()[file].display()))?;
            for ((agg, rt), ct) in agreements.iter_mut().zip(&r).zip(&c) {
                agg.add(&rt.to_f32_vec(), &ct.to_f32_vec(), rt.shape());
            }
            samples += 1;
        }
    }
    Ok(AccuracyReport {
        variant: variant.to_string(),
        samples,
        outputs: agreements.iter().map(OutputAgreement::summary).collect(),
    })
}

/// Writes the outputs into `dir` (created if needed): the model, the other files and
/// `report.json`, each atomically. Returns the paths written.
pub fn write_outputs(dir: &Path, out: &mut CompileOutput) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{}: cannot create output directory", dir.display()))?;
    let mut written = Vec::new();
    let mut all: Vec<(String, Vec<u8>)> = vec![out.model.clone()];
    all.extend(out.files.iter().cloned());
    for (name, _) in &all {
        out.report
            .outputs
            .push(dir.join(name).display().to_string());
    }
    out.report
        .outputs
        .push(dir.join("report.json").display().to_string());
    all.push(("report.json".into(), out.report.to_json()?.into_bytes()));
    for (name, bytes) in &all {
        let path = dir.join(name);
        rtq_emit::write_atomic(&path, bytes)?;
        written.push(path);
    }
    Ok(written)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_tags_follow_tensorrt() {
        assert_eq!(trt_version_tag("10.1.0").unwrap(), "100100");
        assert_eq!(trt_version_tag("8.6.1").unwrap(), "8601");
        assert!(trt_version_tag("ten").is_err());
    }

    #[test]
    fn holdout_split() {
        assert_eq!(split_files(10, None, None), ((0..8).collect(), vec![8, 9]));
        assert_eq!(split_files(1, None, None), (vec![0], vec![]));
        assert_eq!(split_files(5, Some(10), None), (vec![0], vec![1, 2, 3, 4]));
        assert_eq!(split_files(10, Some(0), Some(3)), (vec![0, 1, 2], vec![]));
    }
}
