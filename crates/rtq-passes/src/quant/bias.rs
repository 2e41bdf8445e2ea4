//! Where a quantized weighted op's output bias lives, and moving it: what empirical
//! bias correction needs from the graph (the correction itself is measured on data by
//! the pipeline).

use super::QuantError;
use rtq_ir::{Graph, NodeId, Tensor, ValueId};

/// A quantized weighted op whose output channels have a bias to correct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BiasSite {
    /// The op's output, where its channel means are measured.
    pub output: ValueId,
    /// The channel axis of `output`.
    pub axis: usize,
    /// Output channels.
    pub channels: usize,
    place: Place,
}

/// Where the bias is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Conv input 2 (created when absent).
    ConvBias,
    /// Gemm input C (created when absent), scaled by `beta`.
    GemmC,
    /// The constant operand (`slot`) of the Add that alone reads a MatMul's output.
    AddConstant { add: NodeId, slot: usize },
}

/// The constant behind a DequantizeLinear feeding input `slot` of `node`, if any.
fn dequantized_constant(graph: &Graph, node: NodeId, slot: usize) -> Option<&Tensor> {
    let v = graph.node(node).input(slot)?;
    let (dq, _) = graph.value(v).producer?;
    let dq = graph.node(dq);
    (dq.op_type == "DequantizeLinear")
        .then(|| graph.constant(dq.input(0)?).map(|t| t.as_ref()))
        .flatten()
}

/// The bias site of `node`: a Conv, Gemm or MatMul that reads Q/DQ, with a constant
/// quantized weight; `None` otherwise.
pub fn bias_site(graph: &Graph, node: NodeId) -> Option<BiasSite> {
    let n = graph.node(node);
    let output = *n.outputs.first()?;
    let float_constant = |slot: usize, len: usize| {
        n.input(slot).is_none_or(|v| {
            graph
                .constant(v)
                .is_some_and(|t| t.as_f32().is_ok() && t.len() == len)
        })
    };
    match n.op_type.as_str() {
        "Conv" => {
            let w = dequantized_constant(graph, node, 1)?;
            let channels = *w.shape().first()?;
            float_constant(2, channels).then_some(BiasSite {
                output,
                axis: 1,
                channels,
                place: Place::ConvBias,
            })
        }
        "Gemm" if n.attr_int("transA", 0) == 0 => {
            let b = dequantized_constant(graph, node, 1)?;
            let channels = *b
                .shape()
                .get(if n.attr_int("transB", 0) != 0 { 0 } else { 1 })?;
            float_constant(2, channels).then_some(BiasSite {
                output,
                axis: 1,
                channels,
                place: Place::GemmC,
            })
        }
        "MatMul" => {
            let w = dequantized_constant(graph, node, 1)?;
            let channels = *w.shape().last()?;
            let rank = graph.value(output).shape.as_ref()?.len();
            let consumers = graph.consumers();
            let [(add, slot)] = consumers[output.index()][..] else {
                return None;
            };
            let a = graph.node(add);
            let other = 1 - slot;
            let k = graph.constant(a.input(other)?)?;
            let per_channel = k.as_f32().is_ok()
                && k.len() == channels
                && k.shape().last() == Some(&channels)
                && k.rank() <= rank;
            (a.op_type == "Add" && per_channel && !graph.is_graph_output(output)).then_some(
                BiasSite {
                    output,
                    axis: rank - 1,
                    channels,
                    place: Place::AddConstant { add, slot: other },
                },
            )
        }
        _ => None,
    }
}

/// Subtracts each `(node name, shift per output channel)` from that node's bias (new
/// constants: shared tensors are never changed). Returns how many nodes changed.
pub fn apply_bias_shifts(
    graph: &mut Graph,
    shifts: &[(String, Vec<f32>)],
) -> Result<usize, QuantError> {
    let by_name: std::collections::HashMap<String, NodeId> =
        graph.nodes().map(|(id, n)| (n.name.clone(), id)).collect();
    for (name, shift) in shifts {
        let error = |message: &str| QuantError::Node {
            node: name.clone(),
            op: "bias correction".into(),
            message: message.into(),
        };
        let &node = by_name.get(name).ok_or_else(|| error("no such node"))?;
        let site = bias_site(graph, node).ok_or_else(|| error("no bias to correct"))?;
        if shift.len() != site.channels {
            return Err(error("shift and channel counts differ"));
        }
        let (holder, slot, scale) = match site.place {
            Place::ConvBias => (node, 2, 1.0),
            Place::GemmC => (node, 2, 1.0 / graph.node(node).attr_float("beta", 1.0)),
            Place::AddConstant { add, slot } => (add, slot, 1.0),
        };
        let old = graph.node(holder).input(slot);
        let (shape, values) = match old.and_then(|v| graph.constant(v)) {
            Some(t) => (
                t.shape().to_vec(),
                t.as_f32().expect("checked f32").to_vec(),
            ),
            None => (vec![site.channels], vec![0.0; site.channels]),
        };
        let corrected: Vec<f32> = values
            .iter()
            .zip(shift)
            .map(|(&b, &s)| b - s * scale)
            .collect();
        let base = old.map_or(format!("{name}_bias"), |v| graph.value(v).name.clone());
        let fresh = graph.fresh_value_name(&format!("{base}_corrected"));
        let v = graph.add_constant(&fresh, Tensor::from_f32(shape, corrected));
        let inputs = &mut graph.node_mut(holder).inputs;
        if inputs.len() <= slot {
            inputs.resize(slot + 1, None);
        }
        inputs[slot] = Some(v);
    }
    Ok(shifts.len())
}
