//! A model's summary (`rtq inspect`): interface, op counts, weight bytes by element
//! type, and the precision an rtq build wrote in its metadata.

use anyhow::{Context, Result};
use rtq_ir::{format_shape, Graph};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

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
    crate::pipeline::weight_bytes_by_dtype(graph)
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
