//! Folding a per-output-channel affine map `y * scale[c] + shift[c]` into the linear
//! node producing `y` (Conv, ConvTranspose, Gemm or BatchNormalization).
//!
//! Both [`crate::FoldBatchNorm`] and [`crate::FoldChannelAffine`] reduce to this: the
//! producer's constant parameters are rewritten into new constants (tensors shared with
//! other nodes are never mutated) and the caller then removes the affine node.

use crate::util::{float_tensor, float_values, folded_name, only_read_by};
use rtq_ir::{Attr, DType, Graph, NodeId, Tensor, TensorData};

/// A per-channel affine map over the channel axis of a producer's output.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChannelAffine {
    /// Multiplier per output channel.
    pub scale: Vec<f64>,
    /// Addend per output channel, applied after the multiplier.
    pub shift: Vec<f64>,
}

impl ChannelAffine {
    /// The map `y * scale`.
    pub fn scaling(scale: Vec<f64>) -> ChannelAffine {
        let shift = vec![0.0; scale.len()];
        ChannelAffine { scale, shift }
    }

    /// The map `y + shift`.
    pub fn shifting(shift: Vec<f64>) -> ChannelAffine {
        let scale = vec![1.0; shift.len()];
        ChannelAffine { scale, shift }
    }

    fn channels(&self) -> usize {
        self.scale.len()
    }

    fn has_shift(&self) -> bool {
        self.shift.iter().any(|&t| t != 0.0)
    }
}

/// How many output channels `node` produces, read from its constant parameters, or
/// `None` if it is not a foldable producer (or its parameters are not constants).
pub(crate) fn output_channels(graph: &Graph, node: NodeId) -> Option<usize> {
    let n = graph.node(node);
    match n.op_type.as_str() {
        "Conv" => Some(*const_param(graph, node, 1)?.shape().first()?),
        "ConvTranspose" => {
            let w = const_param(graph, node, 1)?;
            let group = usize::try_from(n.attr_int("group", 1)).ok()?;
            w.shape().get(1)?.checked_mul(group)
        }
        "Gemm" => {
            let b = const_param(graph, node, 1)?;
            if b.rank() != 2 {
                return None;
            }
            Some(b.shape()[if n.attr_int("transB", 0) != 0 { 0 } else { 1 }])
        }
        "BatchNormalization" => Some(*const_param(graph, node, 1)?.shape().first()?),
        _ => None,
    }
}

/// The dtype of the producer's output channel parameters, if foldable.
pub(crate) fn param_dtype(graph: &Graph, node: NodeId) -> Option<DType> {
    let dtype = const_param(graph, node, 1)?.dtype();
    dtype.is_float().then_some(dtype)
}

fn const_param(graph: &Graph, node: NodeId, slot: usize) -> Option<&Tensor> {
    let v = graph.node(node).input(slot)?;
    graph.constant(v).map(|t| t.as_ref())
}

/// Rewrites the parameters of `node` so that its output becomes `affine(output)`.
/// Returns `false`, changing nothing, when the node is not a foldable producer, its
/// parameters are not float constants of matching sizes, or it is in training mode.
pub(crate) fn fold_into(graph: &mut Graph, node: NodeId, affine: &ChannelAffine) -> bool {
    if output_channels(graph, node) != Some(affine.channels()) {
        return false;
    }
    let op = graph.node(node).op_type.clone();
    let in_place = op == "Conv" && owns_f32_weights(graph, node);
    let rewritten = match op.as_str() {
        "Conv" | "ConvTranspose" => fold_conv(graph, node, affine, op == "ConvTranspose", in_place),
        "Gemm" => fold_gemm(graph, node, affine),
        "BatchNormalization" => fold_batch_norm(graph, node, affine),
        _ => None,
    };
    let Some(updates) = rewritten else {
        return false;
    };
    for update in updates {
        let base = match graph.node(node).input(update.slot) {
            Some(v) => graph.value(v).name.clone(),
            None => format!("{}_bias", graph.node(node).name),
        };
        let name = folded_name(graph, &base);
        let v = graph.add_constant(&name, update.tensor);
        let n = graph.node_mut(node);
        if n.inputs.len() <= update.slot {
            n.inputs.resize(update.slot + 1, None);
        }
        n.inputs[update.slot] = Some(v);
        for (attr, value) in update.attrs {
            n.attrs.insert(attr.to_string(), value);
        }
    }
    if in_place {
        scale_weights_in_place(graph, node, &affine.scale);
    }
    true
}

/// Whether the f32 weights (input 1) of `node` may be rewritten where they lie: a
/// constant read by `node` alone, not a graph input or output, and held by nothing
/// else. ResNet-50's 100 MB of weights then fold without a second copy in memory.
fn owns_f32_weights(graph: &mut Graph, node: NodeId) -> bool {
    let Some(w) = graph.node(node).input(1) else {
        return false;
    };
    if graph.is_graph_input(w) || !only_read_by(graph, &graph.consumers(), w, node) {
        return false;
    }
    graph
        .unique_constant_mut(w)
        .is_some_and(|t| t.dtype() == DType::F32)
}

/// Scales the weights of `node` (see [`owns_f32_weights`]) by `scale` per output channel
/// in place, exactly as [`scale_runs`] would in a copy, and renames them as folded.
fn scale_weights_in_place(graph: &mut Graph, node: NodeId, scale: &[f64]) {
    let w = graph
        .node(node)
        .input(1)
        .expect("checked by owns_f32_weights");
    let name = folded_name(graph, &graph.value(w).name);
    graph
        .rename_value(w, &name)
        .expect("folded_name is not taken");
    let values = graph
        .unique_constant_mut(w)
        .and_then(|t| t.as_f32_mut().ok())
        .expect("checked by owns_f32_weights");
    let run = values.len() / scale.len().max(1);
    scale_f32_runs(values, run, scale);
}

/// A new constant for one input slot of the producer, plus attributes to set.
struct Update {
    slot: usize,
    tensor: Tensor,
    attrs: Vec<(&'static str, Attr)>,
}

/// Conv: `W[o, ...] *= s[o]`, `b[o] = b[o] * s[o] + t[o]`. ConvTranspose weights are
/// laid out `[C_in, M/group, k...]`, so output channel `o` of input channel `c` is
/// `(c / (C_in/group)) * (M/group) + j`.
fn fold_conv(
    graph: &Graph,
    node: NodeId,
    affine: &ChannelAffine,
    transposed: bool,
    weights_in_place: bool,
) -> Option<Vec<Update>> {
    let n = graph.node(node);
    let w = const_param(graph, node, 1)?;
    let dtype = w.dtype();
    let shape = w.shape().to_vec();
    let channels = affine.channels();
    if shape.len() < 2 || channels == 0 || !dtype.is_float() {
        return None;
    }
    let inner: usize = shape[2..].iter().product();
    let weights = if weights_in_place {
        None
    } else if transposed {
        let group = usize::try_from(n.attr_int("group", 1)).ok()?.max(1);
        let per_group_out = shape[1];
        let per_group_in = shape[0] / group;
        if per_group_in == 0 || shape[0] % group != 0 {
            return None;
        }
        let mut weights = float_values(w)?;
        for (i, w) in weights.iter_mut().enumerate() {
            let c = i / (shape[1] * inner);
            let j = (i / inner) % shape[1];
            *w *= affine.scale[(c / per_group_in) * per_group_out + j];
        }
        Some(float_tensor(dtype, shape, weights)?)
    } else {
        Some(scale_runs(w, w.len() / channels, &affine.scale)?)
    };
    let mut updates: Vec<Update> = weights
        .into_iter()
        .map(|tensor| Update {
            slot: 1,
            tensor,
            attrs: Vec::new(),
        })
        .collect();
    let bias = match n.input(2) {
        Some(b) => {
            let b = graph.constant(b)?;
            if b.dtype() != dtype || b.len() != channels {
                return None;
            }
            Some(float_values(b)?)
        }
        None => None,
    };
    if bias.is_some() || affine.has_shift() {
        let bias: Vec<f64> = (0..channels)
            .map(|o| bias.as_ref().map_or(0.0, |b| b[o]) * affine.scale[o] + affine.shift[o])
            .collect();
        updates.push(Update {
            slot: 2,
            tensor: float_tensor(dtype, vec![channels], bias)?,
            attrs: Vec::new(),
        });
    }
    Some(updates)
}

/// `w` with its elements scaled run by run: element `i` by `scale[i / run]`, in f64
/// and rounded back to `w`'s float dtype (f32 weights are scaled in place of a copy,
/// without an f64 buffer: ResNet-50's 25 M weights are folded in milliseconds).
fn scale_runs(w: &Tensor, run: usize, scale: &[f64]) -> Option<Tensor> {
    let run = run.max(1);
    if let TensorData::F32(values) = w.data() {
        let mut scaled = values.clone();
        scale_f32_runs(&mut scaled, run, scale);
        return Tensor::new(w.shape().to_vec(), TensorData::F32(scaled)).ok();
    }
    let mut values = float_values(w)?;
    for (chunk, &s) in values.chunks_mut(run).zip(scale) {
        for x in chunk {
            *x *= s;
        }
    }
    float_tensor(w.dtype(), w.shape().to_vec(), values)
}

/// Scales element `i` of `values` by `scale[i / run]` in f64, rounding back to f32.
fn scale_f32_runs(values: &mut [f32], run: usize, scale: &[f64]) {
    for (chunk, &s) in values.chunks_mut(run.max(1)).zip(scale) {
        for x in chunk {
            *x = (f64::from(*x) * s) as f32;
        }
    }
}

/// Gemm `Y = alpha * A' B' + beta * C`: scale the columns of `B'` and replace `C` by
/// `s * beta * C + t` (broadcast over output columns), setting `beta = 1`.
fn fold_gemm(graph: &Graph, node: NodeId, affine: &ChannelAffine) -> Option<Vec<Update>> {
    let n = graph.node(node);
    let b = const_param(graph, node, 1)?;
    let dtype = b.dtype();
    let trans_b = n.attr_int("transB", 0) != 0;
    let mut weights = float_values(b)?;
    let (rows, cols) = (b.shape()[0], b.shape()[1]);
    for (i, w) in weights.iter_mut().enumerate() {
        let out = if trans_b { i / cols } else { i % cols };
        *w *= affine.scale[out];
    }
    let mut updates = vec![Update {
        slot: 1,
        tensor: float_tensor(dtype, vec![rows, cols], weights)?,
        attrs: Vec::new(),
    }];
    let features = affine.channels();
    let beta = f64::from(n.attr_float("beta", 1.0));
    let c = match n.input(2) {
        Some(c) => Some(graph.constant(c)?),
        None => None,
    };
    if c.is_none() && !affine.has_shift() {
        return Some(updates);
    }
    // C broadcasts unidirectionally to [M, N]; keep its row extent (1 or M).
    let (c_rows, c_cols, c_vals) = match c {
        None => (1, 1, vec![0.0]),
        Some(c) => {
            if c.dtype() != dtype {
                return None;
            }
            let vals = float_values(c)?;
            match *c.shape() {
                [] => (1, 1, vals),
                [cols] => (1, cols, vals),
                [rows, cols] => (rows, cols, vals),
                _ => return None,
            }
        }
    };
    if c_cols != 1 && c_cols != features {
        return None;
    }
    let mut out = Vec::with_capacity(c_rows * features);
    for r in 0..c_rows {
        for f in 0..features {
            let cv = c_vals[r * c_cols + if c_cols == 1 { 0 } else { f }];
            out.push(affine.scale[f] * beta * cv + affine.shift[f]);
        }
    }
    let shape = if c.is_some_and(|c| c.rank() == 2) {
        vec![c_rows, features]
    } else {
        vec![features]
    };
    updates.push(Update {
        slot: 2,
        tensor: float_tensor(dtype, shape, out)?,
        attrs: vec![("beta", Attr::Float(1.0))],
    });
    Some(updates)
}

/// BatchNormalization `scale * x_hat + B`: `scale *= s`, `B = B * s + t`.
fn fold_batch_norm(graph: &Graph, node: NodeId, affine: &ChannelAffine) -> Option<Vec<Update>> {
    let n = graph.node(node);
    if n.attr_int("training_mode", 0) != 0 {
        return None;
    }
    let scale = const_param(graph, node, 1)?;
    let bias = const_param(graph, node, 2)?;
    let channels = affine.channels();
    if scale.len() != channels || bias.len() != channels {
        return None;
    }
    let new_scale: Vec<f64> = float_values(scale)?
        .iter()
        .zip(&affine.scale)
        .map(|(a, s)| a * s)
        .collect();
    let new_bias: Vec<f64> = float_values(bias)?
        .iter()
        .enumerate()
        .map(|(c, b)| b * affine.scale[c] + affine.shift[c])
        .collect();
    Some(vec![
        Update {
            slot: 1,
            tensor: float_tensor(scale.dtype(), vec![channels], new_scale)?,
            attrs: Vec::new(),
        },
        Update {
            slot: 2,
            tensor: float_tensor(bias.dtype(), vec![channels], new_bias)?,
            attrs: Vec::new(),
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_test_support::attrs;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn values(graph: &Graph, node: NodeId, slot: usize) -> Vec<f32> {
        graph
            .constant(graph.node(node).input(slot).unwrap())
            .unwrap()
            .to_f32_vec()
    }

    #[test]
    fn conv_weights_scale_per_output_channel_and_bias_is_created() {
        for weights_held_elsewhere in [true, false] {
            conv_fold_case(weights_held_elsewhere);
        }
    }

    /// Folds a 2-channel affine map into a Conv whose weights are (or are not) also
    /// held outside the graph: held ones are copied, sole ones scaled in place, with
    /// the same results and the same new name.
    fn conv_fold_case(weights_held_elsewhere: bool) {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        // W: [2 out, 1 in, 1x2 kernel].
        let w = g.add_constant(
            "w",
            Tensor::from_f32(vec![2, 1, 1, 2], vec![1.0, 2.0, 3.0, 4.0]),
        );
        let y = g.add_value("y", None, None);
        let conv = g.add_node(
            "c",
            "Conv",
            vec![Some(x), Some(w)],
            vec![y],
            BTreeMap::new(),
        );
        let affine = ChannelAffine {
            scale: vec![2.0, -1.0],
            shift: vec![0.5, 0.25],
        };
        let held = weights_held_elsewhere.then(|| Arc::clone(g.constant(w).unwrap()));
        assert!(fold_into(&mut g, conv, &affine));
        assert_eq!(values(&g, conv, 1), vec![2.0, 4.0, -3.0, -4.0]);
        assert_eq!(values(&g, conv, 2), vec![0.5, 0.25]);
        assert_eq!(g.value(g.node(conv).input(1).unwrap()).name, "w_folded");
        let folded_in_place = g.node(conv).input(1) == Some(w);
        assert_eq!(folded_in_place, !weights_held_elsewhere);
        if let Some(held) = held {
            // The shared tensor is untouched.
            assert_eq!(held.to_f32_vec(), vec![1.0, 2.0, 3.0, 4.0]);
            assert_eq!(
                g.constant(w).unwrap().to_f32_vec(),
                vec![1.0, 2.0, 3.0, 4.0]
            );
        }
        rtq_ir::verify(&g).unwrap();
    }

    #[test]
    fn pure_scaling_does_not_invent_a_bias() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        let w = g.add_constant("w", Tensor::from_f32(vec![2, 1, 1, 1], vec![1.0, 2.0]));
        let y = g.add_value("y", None, None);
        let conv = g.add_node(
            "c",
            "Conv",
            vec![Some(x), Some(w)],
            vec![y],
            BTreeMap::new(),
        );
        assert!(fold_into(
            &mut g,
            conv,
            &ChannelAffine::scaling(vec![3.0, 4.0])
        ));
        assert_eq!(values(&g, conv, 1), vec![3.0, 8.0]);
        assert_eq!(g.node(conv).input(2), None);
    }

    #[test]
    fn conv_transpose_groups_map_channels() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        // C_in = 2, group = 2, M/group = 2 -> M = 4; 1x1 kernel.
        // W[c, j]: c=0 -> outputs 0,1; c=1 -> outputs 2,3.
        let w = g.add_constant("w", Tensor::from_f32(vec![2, 2, 1, 1], vec![1.0; 4]));
        let y = g.add_value("y", None, None);
        let conv = g.add_node(
            "ct",
            "ConvTranspose",
            vec![Some(x), Some(w)],
            vec![y],
            attrs(&[("group", Attr::Int(2))]),
        );
        assert_eq!(output_channels(&g, conv), Some(4));
        assert!(fold_into(
            &mut g,
            conv,
            &ChannelAffine::scaling(vec![1.0, 2.0, 3.0, 4.0])
        ));
        assert_eq!(values(&g, conv, 1), vec![1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn gemm_columns_and_bias_fold_for_both_layouts() {
        for trans_b in [0, 1] {
            let mut g = Graph::new("g", 13);
            let a = g.add_input("a", DType::F32, vec![]);
            // B' = [[1, 2], [3, 4]] (K = 2 rows, N = 2 columns).
            let data = if trans_b == 1 {
                vec![1.0, 3.0, 2.0, 4.0]
            } else {
                vec![1.0, 2.0, 3.0, 4.0]
            };
            let b = g.add_constant("b", Tensor::from_f32(vec![2, 2], data));
            let c = g.add_constant("c", Tensor::from_f32(vec![2], vec![10.0, 20.0]));
            let y = g.add_value("y", None, None);
            let gemm = g.add_node(
                "fc",
                "Gemm",
                vec![Some(a), Some(b), Some(c)],
                vec![y],
                attrs(&[("transB", Attr::Int(trans_b)), ("beta", Attr::Float(0.5))]),
            );
            let affine = ChannelAffine {
                scale: vec![2.0, 10.0],
                shift: vec![1.0, -1.0],
            };
            assert!(fold_into(&mut g, gemm, &affine));
            // B' * diag(2, 10) = [[2, 20], [6, 40]], stored transposed when transB = 1.
            let expect_b = if trans_b == 1 {
                vec![2.0, 6.0, 20.0, 40.0]
            } else {
                vec![2.0, 20.0, 6.0, 40.0]
            };
            assert_eq!(values(&g, gemm, 1), expect_b, "transB={trans_b}");
            // 2 * 0.5 * 10 + 1, 10 * 0.5 * 20 - 1
            assert_eq!(values(&g, gemm, 2), vec![11.0, 99.0]);
            assert_eq!(g.node(gemm).attr_float("beta", 0.0), 1.0);
        }
    }

    #[test]
    fn batch_norm_parameters_absorb_the_map() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        let s = g.add_constant("s", Tensor::from_f32(vec![2], vec![1.0, 2.0]));
        let b = g.add_constant("b", Tensor::from_f32(vec![2], vec![0.5, -0.5]));
        let m = g.add_constant("m", Tensor::from_f32(vec![2], vec![0.0, 0.0]));
        let v = g.add_constant("v", Tensor::from_f32(vec![2], vec![1.0, 1.0]));
        let y = g.add_value("y", None, None);
        let bn = g.add_node(
            "bn",
            "BatchNormalization",
            vec![Some(x), Some(s), Some(b), Some(m), Some(v)],
            vec![y],
            BTreeMap::new(),
        );
        let affine = ChannelAffine {
            scale: vec![3.0, 4.0],
            shift: vec![1.0, 1.0],
        };
        assert!(fold_into(&mut g, bn, &affine));
        assert_eq!(values(&g, bn, 1), vec![3.0, 8.0]);
        assert_eq!(values(&g, bn, 2), vec![2.5, -1.0]);
    }

    #[test]
    fn refuses_mismatched_or_non_constant_parameters() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        let w_in = g.add_input("w", DType::F32, vec![]);
        let y = g.add_value("y", None, None);
        let conv = g.add_node(
            "c",
            "Conv",
            vec![Some(x), Some(w_in)],
            vec![y],
            BTreeMap::new(),
        );
        assert!(!fold_into(&mut g, conv, &ChannelAffine::scaling(vec![1.0])));
        let w = g.add_constant("wc", Tensor::from_f32(vec![2, 1, 1, 1], vec![1.0, 2.0]));
        g.node_mut(conv).inputs[1] = Some(w);
        // Three channels do not match a two-channel weight.
        assert!(!fold_into(
            &mut g,
            conv,
            &ChannelAffine::scaling(vec![1.0; 3])
        ));
        assert_eq!(g.node(conv).input(1), Some(w));
    }
}
