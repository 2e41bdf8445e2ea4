//! Graph patterns the INT8 placement rules look for, beyond "this op is weighted":
//! the fusible backbone behind a residual Add's input, GEMV MatMuls, the batched
//! MatMuls of attention, and Concats whose inputs must share one scale. They follow
//! TensorRT's Q/DQ placement guide and NVIDIA ModelOpt's ONNX INT8 rules.

use rtq_ir::{Dim, Graph, NodeId, ValueId};
use std::collections::HashMap;

/// Ops whose inputs are quantized and whose epilogue TensorRT fuses.
pub const INT8_WEIGHTED_OPS: &[&str] = &["Conv", "ConvTranspose", "Gemm", "MatMul"];

/// Longest epilogue chain looked through (bias, scale, batch norm, activation).
const MAX_EPILOGUE: usize = 4;

/// Attention longer than this many keys keeps its batched MatMuls in high precision:
/// TensorRT's fused INT8 attention kernels stop at 512 (ModelOpt's INT8 rule).
pub const INT8_ATTENTION_MAX_KEYS: usize = 512;

/// Whether `v` is a constant.
fn is_constant(graph: &Graph, v: ValueId) -> bool {
    graph.constant(v).is_some()
}

/// Whether `v` is a constant weight: a constant, or one behind a DequantizeLinear (a
/// model quantized before).
fn is_constant_weight(graph: &Graph, v: ValueId) -> bool {
    is_constant(graph, v)
        || producer(graph, v).is_some_and(|(dq, op)| {
            op == "DequantizeLinear"
                && graph
                    .node(dq)
                    .input(0)
                    .is_some_and(|q| is_constant(graph, q))
        })
}

/// The node that `v` comes out of, with its op type.
fn producer(graph: &Graph, v: ValueId) -> Option<(NodeId, &str)> {
    let (n, _) = graph.value(v).producer?;
    Some((n, graph.node(n).op_type.as_str()))
}

/// The weighted op whose output reaches `v` through an epilogue TensorRT fuses into
/// it (`v` itself, or a constant bias Add, a constant scale Mul, BatchNormalization
/// or Relu after it), or `None`. Behind an epilogue only a layer with a constant weight
/// counts: an attention MatMul followed by a scale is not a residual branch.
pub(super) fn fusible_backbone(graph: &Graph, v: ValueId) -> Option<NodeId> {
    let (node, op) = producer(graph, v)?;
    if INT8_WEIGHTED_OPS.contains(&op) {
        return Some(node);
    }
    let mut v = v;
    for _ in 0..MAX_EPILOGUE {
        let (node, op) = producer(graph, v)?;
        let n = graph.node(node);
        if INT8_WEIGHTED_OPS.contains(&op) {
            return is_constant_weight(graph, n.input(1)?).then_some(node);
        }
        v = match op {
            "BatchNormalization" | "Relu" => n.input(0)?,
            "Add" | "Mul" => {
                let (a, b) = (n.input(0)?, n.input(1)?);
                match (is_constant(graph, a), is_constant(graph, b)) {
                    (false, true) => a,
                    (true, false) => b,
                    _ => return None,
                }
            }
            _ => return None,
        };
    }
    None
}

/// Why MatMul/Gemm `node` is a GEMV (a matrix-vector product: its output has one
/// row or one column), or `None`. TensorRT runs those memory-bound products faster
/// without Q/DQ, which would only cost accuracy. Only dimensions known to be 1 count:
/// in the graph, or in `sample` (the output's concrete shape on calibration data).
pub(super) fn gemv_reason(
    graph: &Graph,
    node: NodeId,
    sample: &HashMap<String, Vec<usize>>,
) -> Option<String> {
    let n = graph.node(node);
    if !matches!(n.op_type.as_str(), "MatMul" | "Gemm") {
        return None;
    }
    let value = graph.value(*n.outputs.first()?);
    let observed: Option<Vec<Dim>> = sample
        .get(&value.name)
        .map(|s| s.iter().map(|&d| Dim::Known(d)).collect());
    let shape = observed.as_ref().or(value.shape.as_ref())?;
    let (last, rows) = shape.split_last()?;
    let one = |d: &Dim| d.known() == Some(1);
    let single_row = !rows.is_empty() && rows.iter().all(one);
    (single_row || one(last)).then(|| {
        let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
        let seen = if observed.is_some() {
            " on calibration data"
        } else {
            ""
        };
        format!(
            "GEMV (output [{}]{seen}): memory-bound, faster and exact without Q/DQ",
            dims.join(", ")
        )
    })
}

/// Whether `v` reaches a Softmax through at most three elementwise ops (the scale,
/// the mask, a cast): `v` is then the score matrix of attention.
fn feeds_softmax(
    graph: &Graph,
    consumers: &[Vec<(NodeId, usize)>],
    v: ValueId,
    hops: usize,
) -> bool {
    consumers[v.index()].iter().any(|&(c, _)| {
        let n = graph.node(c);
        match n.op_type.as_str() {
            "Softmax" => true,
            "Div" | "Mul" | "Add" | "Sub" | "Where" | "Cast" if hops > 0 => n
                .outputs
                .first()
                .is_some_and(|&o| feeds_softmax(graph, consumers, o, hops - 1)),
            _ => false,
        }
    })
}

/// Why the activation-by-activation MatMul `node` stays in high precision as part of
/// an attention block too long for TensorRT's INT8 attention kernels, or `None`.
pub(super) fn long_attention_reason(
    graph: &Graph,
    consumers: &[Vec<(NodeId, usize)>],
    node: NodeId,
) -> Option<String> {
    let n = graph.node(node);
    if n.op_type != "MatMul" {
        return None;
    }
    let dim = |v: ValueId, from_end: usize| -> Option<usize> {
        let shape = graph.value(v).shape.as_ref()?;
        shape
            .len()
            .checked_sub(from_end)
            .and_then(|i| shape[i].known())
    };
    let out = *n.outputs.first()?;
    // Scores = Q·Kᵀ (keys along the last axis), or context = softmax·V (keys along
    // the probabilities' last axis).
    let keys = if feeds_softmax(graph, consumers, out, 3) {
        dim(out, 1)?
    } else if producer(graph, n.input(0)?).is_some_and(|(_, op)| op == "Softmax") {
        dim(n.input(0)?, 1)?
    } else {
        return None;
    };
    (keys > INT8_ATTENTION_MAX_KEYS).then(|| {
        format!(
            "attention over {keys} keys (> {INT8_ATTENTION_MAX_KEYS}): TensorRT has no fused INT8 kernel for it"
        )
    })
}

/// Groups of activations that must share one scale: the quantized inputs of each
/// Concat (so TensorRT can drop the Concat and write each input in place), merged
/// where groups overlap.
pub(super) fn shared_scale_groups(graph: &Graph, edges: &[(NodeId, usize)]) -> Vec<Vec<ValueId>> {
    let mut groups: Vec<Vec<ValueId>> = Vec::new();
    let mut concats: Vec<NodeId> = edges
        .iter()
        .map(|&(n, _)| n)
        .filter(|&n| graph.node(n).op_type == "Concat")
        .collect();
    concats.dedup();
    for node in concats {
        let mut group: Vec<ValueId> = edges
            .iter()
            .filter(|&&(n, _)| n == node)
            .filter_map(|&(n, slot)| graph.node(n).input(slot))
            .collect();
        group.sort();
        group.dedup();
        if group.len() < 2 {
            continue;
        }
        // Merge with every group sharing a tensor.
        let mut merged = group;
        groups.retain(|g| {
            if g.iter().any(|v| merged.contains(v)) {
                merged.extend_from_slice(g);
                false
            } else {
                true
            }
        });
        merged.sort();
        merged.dedup();
        groups.push(merged);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{DType, Tensor};
    use rtq_test_support::add_op;

    fn dims(d: &[usize]) -> Vec<Dim> {
        d.iter().map(|&n| Dim::Known(n)).collect()
    }

    #[test]
    fn backbone_through_a_bias_add_but_not_through_an_attention_scale() {
        let mut g = Graph::new("g", 17);
        let x = g.add_input("x", DType::F32, dims(&[1, 4, 8]));
        let w = g.add_constant("w", Tensor::from_f32(vec![8, 8], vec![0.1; 64]));
        let b = g.add_constant("b", Tensor::from_f32(vec![8], vec![0.0; 8]));
        let k = g.add_constant("k", Tensor::scalar_f32(0.5));
        let mm = add_op(&mut g, "mm", "MatMul", &[Some(x), Some(w)], &[]);
        let biased = add_op(&mut g, "bias", "Add", &[Some(mm), Some(b)], &[]);
        let relu = add_op(&mut g, "relu", "Relu", &[Some(biased)], &[]);
        let linear = g.value(mm).producer.unwrap().0;
        assert_eq!(fusible_backbone(&g, biased), Some(linear));
        assert_eq!(fusible_backbone(&g, relu), Some(linear));
        // x·xᵀ scaled: a MatMul of two activations behind an epilogue is no backbone.
        let t = add_op(&mut g, "t", "Transpose", &[Some(x)], &[]);
        let scores = add_op(&mut g, "scores", "MatMul", &[Some(x), Some(t)], &[]);
        let scaled = add_op(&mut g, "scaled", "Mul", &[Some(scores), Some(k)], &[]);
        assert!(fusible_backbone(&g, scores).is_some());
        assert_eq!(fusible_backbone(&g, scaled), None);
        // Two activations added: not an epilogue.
        let sum = add_op(&mut g, "sum", "Add", &[Some(biased), Some(x)], &[]);
        assert_eq!(fusible_backbone(&g, sum), None);
    }

    #[test]
    fn gemv_needs_a_dimension_known_to_be_one() {
        let mut g = Graph::new("g", 17);
        let x = g.add_input("x", DType::F32, dims(&[1, 8]));
        let w = g.add_constant("w", Tensor::from_f32(vec![8, 8], vec![0.1; 64]));
        let y = add_op(&mut g, "y", "MatMul", &[Some(x), Some(w)], &[]);
        g.value_mut(y).shape = Some(dims(&[1, 8]));
        let node = g.value(y).producer.unwrap().0;
        let none = HashMap::new();
        assert!(gemv_reason(&g, node, &none).unwrap().contains("[1, 8]"));
        g.value_mut(y).shape = Some(vec![Dim::Sym("batch".into()), Dim::Known(8)]);
        assert_eq!(gemv_reason(&g, node, &none), None);
        // A batch of 1 in the calibration data makes it one.
        let seen = HashMap::from([("y".to_string(), vec![1, 8])]);
        assert!(gemv_reason(&g, node, &seen)
            .unwrap()
            .contains("on calibration data"));
        g.value_mut(y).shape = Some(dims(&[1, 1, 1, 8]));
        assert!(gemv_reason(&g, node, &none).is_some());
        g.value_mut(y).shape = Some(dims(&[1, 2, 8]));
        assert_eq!(gemv_reason(&g, node, &none), None);
    }

    #[test]
    fn long_attention_is_found_on_both_matmuls() {
        let mut g = Graph::new("g", 17);
        let q = g.add_input("q", DType::F32, dims(&[1, 4, 600, 16]));
        let k = g.add_input("k", DType::F32, dims(&[1, 4, 16, 600]));
        let v = g.add_input("v", DType::F32, dims(&[1, 4, 600, 16]));
        let c = g.add_constant("c", Tensor::scalar_f32(0.25));
        let s = add_op(&mut g, "s", "MatMul", &[Some(q), Some(k)], &[]);
        g.value_mut(s).shape = Some(dims(&[1, 4, 600, 600]));
        let d = add_op(&mut g, "d", "Mul", &[Some(s), Some(c)], &[]);
        let p = add_op(&mut g, "p", "Softmax", &[Some(d)], &[]);
        g.value_mut(p).shape = Some(dims(&[1, 4, 600, 600]));
        let o = add_op(&mut g, "o", "MatMul", &[Some(p), Some(v)], &[]);
        let consumers = g.consumers();
        for t in [s, o] {
            let node = g.value(t).producer.unwrap().0;
            let why = long_attention_reason(&g, &consumers, node).unwrap();
            assert!(why.contains("600 keys"), "{why}");
        }
        g.value_mut(s).shape = Some(dims(&[1, 4, 600, 512]));
        let node = g.value(s).producer.unwrap().0;
        assert_eq!(long_attention_reason(&g, &g.consumers(), node), None);
    }
}
