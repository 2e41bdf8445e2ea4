//! INT8/FP8 Q/DQ inside control-flow bodies (If branches, Loop and Scan bodies), at any
//! depth, by the same placement rules as the top graph: each body is planned
//! ([`plan_int8`]) and rewritten ([`apply_int8`]) on its own, with the ranges observed
//! inside it (calibration runs the bodies observed, see
//! `rtq_exec::Plan::run_observed_nested`).
//!
//! A body's weights are its own constants (the frontend gives every body a copy of the
//! outer initializers it reads), so they are quantized per channel like any weight. A
//! body that never ran on the calibration data (an If branch no sample takes) has no
//! ranges and stays in float.

use super::{apply_int8, plan_int8, Int8Options, QuantError, INT8_WEIGHTED_OPS};
use rtq_exec::BodyScope;
use rtq_ir::{Attr, Graph, NodeId, Subgraph, ValueId};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a body sits: the scopes from the top graph to it, outermost first.
pub type BodyPath = Vec<BodyScope>;

/// Calibrated ranges (amax per value of the body's graph) of every body that ran.
pub type BodyRanges = HashMap<BodyPath, HashMap<ValueId, f32>>;

/// What quantizing one body did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BodyQuantSummary {
    /// The body, as `node.attr/node.attr...` from the top graph.
    pub body: String,
    /// Nodes quantized, by name.
    pub quantized_nodes: Vec<String>,
    /// Q/DQ pairs inserted on activations.
    pub activation_qdq: usize,
    /// Weights stored quantized behind a DequantizeLinear.
    pub weight_qdq: usize,
    /// Weighted nodes left in float, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// What [`apply_int8_in_bodies`] did, body by body.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BodiesSummary {
    /// The bodies holding weighted ops, in graph order (nested ones after their parent).
    pub bodies: Vec<BodyQuantSummary>,
}

impl BodiesSummary {
    /// Weighted nodes quantized, over every body.
    pub fn quantized_nodes(&self) -> usize {
        self.bodies.iter().map(|b| b.quantized_nodes.len()).sum()
    }
}

/// Quantizes every body of `graph` (at any depth) that holds a weighted op and has
/// ranges in `ranges`, with `opts` as the top graph. Raises the top graph's opset to
/// what a body needs (FP8).
pub fn apply_int8_in_bodies(
    graph: &mut Graph,
    ranges: &BodyRanges,
    opts: &Int8Options,
) -> Result<BodiesSummary, QuantError> {
    let mut summary = BodiesSummary::default();
    let opset = quantize_bodies_of(graph, &[], ranges, opts, &mut summary)?;
    graph.opset = graph.opset.max(opset);
    Ok(summary)
}

/// Whether `graph` or a body inside it holds a weighted op.
pub fn holds_weighted_ops(graph: &Graph) -> bool {
    graph.nodes().any(|(_, n)| {
        INT8_WEIGHTED_OPS.contains(&n.op_type.as_str())
            || n.subgraphs().any(|(_, b)| holds_weighted_ops(b))
    })
}

/// How many weighted ops the control-flow bodies of `graph` hold, at any depth.
pub fn weighted_ops_in_bodies(graph: &Graph) -> usize {
    fn count(graph: &Graph, inside: bool) -> usize {
        graph
            .nodes()
            .map(|(_, n)| {
                let own = usize::from(inside && INT8_WEIGHTED_OPS.contains(&n.op_type.as_str()));
                own + n.subgraphs().map(|(_, b)| count(b, true)).sum::<usize>()
            })
            .sum()
    }
    count(graph, false)
}

/// The body of `graph` at `path`, if there is one.
pub fn body_at<'g>(graph: &'g Graph, path: &[BodyScope]) -> Option<&'g Graph> {
    let Some((first, rest)) = path.split_first() else {
        return Some(graph);
    };
    let (_, node) = graph.nodes().find(|(_, n)| n.name == first.node)?;
    let body = node.attr(&first.attr)?.as_graph()?;
    body_at(body, rest)
}

/// `path` as `node.attr/node.attr`.
pub fn body_label(path: &[BodyScope]) -> String {
    path.iter()
        .map(|s| format!("{}.{}", s.node, s.attr))
        .collect::<Vec<_>>()
        .join("/")
}

/// Quantizes the bodies of `graph`'s control-flow nodes (`graph` sits at `path`);
/// returns the highest opset a quantized body needs.
fn quantize_bodies_of(
    graph: &mut Graph,
    path: &[BodyScope],
    ranges: &BodyRanges,
    opts: &Int8Options,
    summary: &mut BodiesSummary,
) -> Result<i64, QuantError> {
    let mut opset = 0;
    let nodes: Vec<NodeId> = graph
        .nodes()
        .filter(|(_, n)| n.subgraphs().any(|(_, b)| holds_weighted_ops(b)))
        .map(|(id, _)| id)
        .collect();
    for id in nodes {
        let scope_of = |attr: &str| {
            let mut p = path.to_vec();
            p.push(BodyScope {
                node: graph.node(id).name.clone(),
                attr: attr.to_string(),
            });
            p
        };
        let bodies: Vec<(String, Graph)> = graph
            .node(id)
            .subgraphs()
            .map(|(attr, b)| (attr.to_string(), (*b.0).clone()))
            .collect();
        let paths: Vec<BodyPath> = bodies.iter().map(|(a, _)| scope_of(a)).collect();
        let quantized: Vec<bool> = bodies
            .iter()
            .zip(&paths)
            .map(|((_, b), p)| ranges.contains_key(p) && holds_weighted_ops(b))
            .collect();
        let mut bodies = bodies;
        for (i, (attr, body)) in bodies.iter_mut().enumerate() {
            let label = body_label(&paths[i]);
            let mut record = BodyQuantSummary {
                body: label,
                ..Default::default()
            };
            if quantized[i] {
                type_captures(graph, id, body);
                let body_ranges = &ranges[&paths[i]];
                quantize_body(body, body_ranges, opts, &mut record)?;
                opset = opset.max(body.opset);
                opset = opset.max(quantize_bodies_of(body, &paths[i], ranges, opts, summary)?);
            } else if holds_weighted_ops(body) {
                let why = "the body never ran on the calibration data";
                record.skipped = weighted_nodes(body)
                    .into_iter()
                    .map(|n| (n, why.to_string()))
                    .collect();
            }
            if holds_weighted_ops(body) {
                summary.bodies.push(record);
            }
            graph
                .node_mut(id)
                .attrs
                .insert(attr.clone(), Attr::Graph(Subgraph(Arc::new(body.clone()))));
        }
    }
    Ok(opset)
}

/// Plans and applies the Q/DQ of one body (its own nodes; nested bodies are the
/// caller's).
fn quantize_body(
    body: &mut Graph,
    ranges: &HashMap<ValueId, f32>,
    opts: &Int8Options,
    record: &mut BodyQuantSummary,
) -> Result<(), QuantError> {
    let plan = plan_int8(body, opts)?;
    // Every value of a body that ran was computed; one without a range means the
    // ranges belong to another version of the body: nothing is quantized.
    if let Some(v) = plan.activations.iter().find(|v| !ranges.contains_key(v)) {
        let why = format!("no range for `{}`", body.value(*v).name);
        record.skipped = weighted_nodes(body)
            .into_iter()
            .map(|n| (n, why.clone()))
            .collect();
        return Ok(());
    }
    let names: Vec<String> = plan
        .quantized_nodes
        .iter()
        .map(|&n| body.node(n).name.clone())
        .collect();
    let done = apply_int8(body, &plan, ranges)?;
    record.quantized_nodes = names;
    record.activation_qdq = done.activation_qdq;
    record.weight_qdq = done.weight_qdq;
    record.skipped.extend(
        done.skipped
            .into_iter()
            .filter(|(n, _)| weighted_nodes(body).contains(n)),
    );
    Ok(())
}

/// The names of `body`'s own weighted nodes.
fn weighted_nodes(body: &Graph) -> Vec<String> {
    body.nodes()
        .filter(|(_, n)| INT8_WEIGHTED_OPS.contains(&n.op_type.as_str()))
        .map(|(_, n)| n.name.clone())
        .collect()
}

/// Gives `body`'s captured inputs the element type and shape of the outer values
/// node `id` feeds them, so the body's own types can be inferred.
fn type_captures(graph: &Graph, id: NodeId, body: &mut Graph) {
    let outer: Vec<Option<ValueId>> = graph.node(id).captured_inputs().to_vec();
    let inner: Vec<ValueId> = body.captured_inputs().to_vec();
    for (v, o) in inner.into_iter().zip(outer) {
        if let Some(o) = o {
            let (dtype, shape) = (graph.value(o).dtype, graph.value(o).shape.clone());
            let value = body.value_mut(v);
            value.dtype = value.dtype.or(dtype);
            value.shape = value.shape.take().or(shape);
        }
    }
    // Best effort: a body whose types cannot all be inferred is planned with what is
    // known (a node with an untyped input is skipped, with the reason).
    let _ = crate::infer_shapes(body);
}
