//! `rtq inspect`.

use anyhow::{Context, Result};
use clap::Args;
use rtq_ir::{format_shape, Graph};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Arguments of `rtq inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also print the IR.
    #[arg(long)]
    pub dump_ir: bool,
    /// Compare weight bytes against this FP32 model (e.g. the source of an FP16/INT8 build).
    #[arg(long, value_name = "MODEL")]
    pub baseline: Option<PathBuf>,
}

/// A model's summary.
#[derive(Debug, Serialize)]
pub struct Inspection {
    /// Model path.
    pub model: String,
    /// Default-domain opset.
    pub opset: i64,
    /// Producer name.
    pub producer: String,
    /// Inputs as (name, type and shape).
    pub inputs: Vec<(String, String)>,
    /// Outputs as (name, type and shape).
    pub outputs: Vec<(String, String)>,
    /// Node count.
    pub nodes: usize,
    /// Nodes per op type.
    pub ops: BTreeMap<String, usize>,
    /// Bytes of constants per element type.
    pub weight_bytes: BTreeMap<String, usize>,
    /// Total constant bytes.
    pub weight_bytes_total: usize,
    /// Constant bytes relative to the baseline model's (when given).
    pub weight_ratio_vs_baseline: Option<f64>,
    /// Precision rtq recorded, if it built the model.
    pub precision: Option<String>,
}

fn describe(graph: &Graph, v: rtq_ir::ValueId) -> String {
    let value = graph.value(v);
    let dtype = value.dtype.map_or("?".to_string(), |d| d.to_string());
    let shape = value
        .shape
        .as_deref()
        .map_or("[?]".to_string(), format_shape);
    format!("{dtype}{shape}")
}

/// Bytes of live constants per element type name.
pub fn weight_bytes(graph: &Graph) -> BTreeMap<String, usize> {
    rtq::pipeline::weight_bytes_by_dtype(graph)
        .into_iter()
        .map(|(dtype, n)| (dtype.to_string(), n))
        .collect()
}

/// Summarises the model at `path`.
pub fn inspect(path: &Path, baseline: Option<&Path>) -> Result<Inspection> {
    let graph =
        rtq_frontend::load_model(path).with_context(|| format!("loading {}", path.display()))?;
    let mut ops: BTreeMap<String, usize> = BTreeMap::new();
    for (_, node) in graph.nodes() {
        *ops.entry(node.op_type.clone()).or_default() += 1;
    }
    let weight_bytes = weight_bytes(&graph);
    let total: usize = weight_bytes.values().sum();
    let ratio = match baseline {
        Some(b) => {
            let base = rtq_frontend::load_model(b)
                .with_context(|| format!("loading baseline {}", b.display()))?;
            let base_total: usize = self::weight_bytes(&base).values().sum();
            (base_total > 0).then(|| total as f64 / base_total as f64)
        }
        None => None,
    };
    Ok(Inspection {
        model: path.display().to_string(),
        opset: graph.opset,
        producer: graph.producer.clone(),
        inputs: graph
            .inputs
            .iter()
            .map(|&i| (graph.value(i).name.clone(), describe(&graph, i)))
            .collect(),
        outputs: graph
            .outputs
            .iter()
            .map(|&o| (graph.value(o).name.clone(), describe(&graph, o)))
            .collect(),
        nodes: graph.node_count(),
        ops,
        weight_bytes,
        weight_bytes_total: total,
        weight_ratio_vs_baseline: ratio,
        precision: graph
            .metadata
            .iter()
            .find(|(k, _)| k == "rtq.precision")
            .map(|(_, v)| v.clone()),
    })
}

/// Runs `rtq inspect`.
pub fn run(args: InspectArgs) -> Result<()> {
    let report = inspect(&args.model, args.baseline.as_deref())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{}  (opset {}, producer {:?})",
            report.model, report.opset, report.producer
        );
        if let Some(p) = &report.precision {
            println!("  built by rtq, precision {p}");
        }
        for (name, ty) in &report.inputs {
            println!("  input  {name}: {ty}");
        }
        for (name, ty) in &report.outputs {
            println!("  output {name}: {ty}");
        }
        println!("  {} nodes", report.nodes);
        for (op, n) in &report.ops {
            println!("    {op:<24} {n}");
        }
        println!("  weights: {} bytes", report.weight_bytes_total);
        for (dtype, n) in &report.weight_bytes {
            println!("    {dtype:<10} {n} bytes");
        }
        if let Some(r) = report.weight_ratio_vs_baseline {
            println!("  weights are {:.1}% of the baseline's", 100.0 * r);
        }
    }
    if args.dump_ir {
        let graph = rtq_frontend::load_model(&args.model)?;
        print!("{}", rtq_ir::dump(&graph));
    }
    Ok(())
}
