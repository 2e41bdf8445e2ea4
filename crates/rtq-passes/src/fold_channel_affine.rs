//! [`FoldChannelAffine`]: folds per-channel constant Mul/Add/Sub/Div that follow a
//! Conv, ConvTranspose, Gemm or BatchNormalization into its parameters.

use crate::affine::{fold_into, output_channels, param_dtype, ChannelAffine};
use crate::util::{absorb_facts, float_values, is_unused, only_read_by};
use crate::{Pass, PassError};
use rtq_ir::{Graph, NodeId, Tensor, ValueId};

/// Folds `Mul(y, k)`, `Add(y, k)`, `Sub(y, k)` and `Div(y, k)` (either operand order for
/// Mul and Add) where `y` is the only-read output of a Conv, ConvTranspose, Gemm or
/// inference BatchNormalization and `k` is a float constant that is constant along every
/// axis but the channel axis: a scalar, `[C]`-shaped for Gemm, or `[C,1,1]` /
/// `[1,C,1,1]`-shaped for a 2-D convolution (in general: broadcastable to the output,
/// with extent 1 everywhere except the channel axis 1, where it is 1 or `C`).
///
/// Mul/Div scale the weights (and bias) of each output channel; Add/Sub shift the bias
/// (created when absent). New parameters are new constants.
#[derive(Debug, Clone, Copy, Default)]
pub struct FoldChannelAffine;

impl FoldChannelAffine {
    /// The pass name.
    pub const NAME: &'static str = "fold-channel-affine";
}

impl Pass for FoldChannelAffine {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let order = graph.topo_order().map_err(|source| PassError::Ir {
            pass: Self::NAME,
            source,
        })?;
        let mut changed = false;
        for id in order {
            if !graph.is_live(id) {
                continue;
            }
            let Some((producer, y, out, affine)) = match_affine(graph, id) else {
                continue;
            };
            if fold_into(graph, producer, &affine) {
                let bypassed = graph.bypass(out, y);
                debug_assert!(bypassed, "y is a node output read only by this node");
                absorb_facts(graph, out, y);
                graph.remove_node(id);
                changed = true;
            }
        }
        Ok(changed)
    }
}

/// Checks the pattern at `id`: returns the producer, its output `y`, the output of the
/// Mul/Add/Sub/Div and the equivalent per-channel map.
fn match_affine(graph: &Graph, id: NodeId) -> Option<(NodeId, ValueId, ValueId, ChannelAffine)> {
    let node = graph.node(id);
    let op = node.op_type.as_str();
    if !matches!(op, "Mul" | "Add" | "Sub" | "Div")
        || !matches!(node.domain.as_str(), "" | "ai.onnx")
        || node.inputs.len() != 2
        || node.outputs.len() != 1
    {
        return None;
    }
    let (a, b) = (node.input(0)?, node.input(1)?);
    let commutative = matches!(op, "Mul" | "Add");
    let (y, k) = if graph.constant(b).is_some() {
        (a, graph.constant(b)?)
    } else if commutative && graph.constant(a).is_some() {
        (b, graph.constant(a)?)
    } else {
        return None;
    };
    let (producer, 0) = graph.value(y).producer? else {
        return None;
    };
    if !graph.is_live(producer) || !matches!(graph.node(producer).domain.as_str(), "" | "ai.onnx") {
        return None;
    }
    let channels = output_channels(graph, producer)?;
    // Only now pay for the reader table.
    let consumers = graph.consumers();
    let p = graph.node(producer);
    if !only_read_by(graph, &consumers, y, id)
        || !p.outputs[1..]
            .iter()
            .all(|&o| is_unused(graph, &consumers, o))
    {
        return None;
    }
    if param_dtype(graph, producer)? != k.dtype() {
        return None;
    }
    let rank = match p.op_type.as_str() {
        "Conv" | "ConvTranspose" => graph.constant(p.input(1)?)?.rank(),
        "Gemm" => 2,
        "BatchNormalization" => graph.value(p.input(0)?).shape.as_ref()?.len(),
        _ => return None,
    };
    let v = channel_vector(k, rank, channels)?;
    let affine = match op {
        "Mul" => ChannelAffine::scaling(v),
        "Div" => {
            let inv: Vec<f64> = v.iter().map(|x| 1.0 / x).collect();
            if !inv.iter().all(|x| x.is_finite()) {
                return None;
            }
            ChannelAffine::scaling(inv)
        }
        "Add" => ChannelAffine::shifting(v),
        _ => ChannelAffine::shifting(v.iter().map(|x| -x).collect()),
    };
    Some((producer, y, node.outputs[0], affine))
}

/// The per-channel values of `k` broadcast against an output of rank `rank` whose
/// channel axis is 1 with `channels` channels; `None` if `k` varies along another axis
/// or would grow the output.
fn channel_vector(k: &Tensor, rank: usize, channels: usize) -> Option<Vec<f64>> {
    let values = float_values(k)?;
    let shape = k.shape();
    if shape.len() > rank || rank < 2 {
        return None;
    }
    let offset = rank - shape.len();
    for (i, &d) in shape.iter().enumerate() {
        let axis = offset + i;
        let ok = d == 1 || (axis == 1 && d == channels);
        if !ok {
            return None;
        }
    }
    match values.len() {
        1 => Some(vec![values[0]; channels]),
        n if n == channels => Some(values),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{DType, Dim};
    use std::collections::BTreeMap;

    /// x[1,2,4,4] -> Conv(w = ones[2,2,1,1], no bias) -> c
    fn conv() -> (Graph, NodeId, ValueId) {
        let mut g = Graph::new("g", 13);
        let x = g.add_input(
            "x",
            DType::F32,
            vec![
                Dim::Sym("N".into()),
                Dim::Known(2),
                Dim::Known(4),
                Dim::Known(4),
            ],
        );
        let w = g.add_constant("w", Tensor::from_f32(vec![2, 2, 1, 1], vec![1.0; 4]));
        let c = g.add_value("c", Some(DType::F32), None);
        let conv = g.add_node(
            "conv",
            "Conv",
            vec![Some(x), Some(w)],
            vec![c],
            BTreeMap::new(),
        );
        (g, conv, c)
    }

    fn binary(g: &mut Graph, op: &str, a: ValueId, b: ValueId, out: &str) -> ValueId {
        let y = g.add_value(out, None, None);
        g.add_node(op, op, vec![Some(a), Some(b)], vec![y], BTreeMap::new());
        y
    }

    fn param(g: &Graph, node: NodeId, slot: usize) -> Vec<f32> {
        g.constant(g.node(node).input(slot).unwrap())
            .unwrap()
            .to_f32_vec()
    }

    #[test]
    fn folds_mul_then_add_chain_in_one_run() {
        let (mut g, conv, c) = conv();
        let m = g.add_constant("m", Tensor::from_f32(vec![2, 1, 1], vec![2.0, 3.0]));
        let a = g.add_constant("a", Tensor::from_f32(vec![1, 2, 1, 1], vec![0.5, -0.5]));
        let t = binary(&mut g, "Mul", m, c, "t"); // constant first: commutative
        let y = binary(&mut g, "Add", t, a, "y");
        g.outputs.push(y);
        assert!(FoldChannelAffine.run(&mut g).unwrap());
        rtq_ir::verify(&g).unwrap();
        assert_eq!(g.node_count(), 1);
        assert_eq!(param(&g, conv, 1), vec![2.0, 2.0, 3.0, 3.0]);
        assert_eq!(param(&g, conv, 2), vec![0.5, -0.5]);
        assert_eq!(g.value(g.outputs[0]).name, "y");
        assert!(!FoldChannelAffine.run(&mut g).unwrap());
    }

    #[test]
    fn folds_sub_and_div_with_scalar_constants() {
        let (mut g, conv, c) = conv();
        let four = g.add_constant("four", Tensor::scalar_f32(4.0));
        let one = g.add_constant("one", Tensor::from_f32(vec![1], vec![1.0]));
        let t = binary(&mut g, "Div", c, four, "t");
        let y = binary(&mut g, "Sub", t, one, "y");
        g.outputs.push(y);
        assert!(FoldChannelAffine.run(&mut g).unwrap());
        assert_eq!(g.node_count(), 1);
        assert_eq!(param(&g, conv, 1), vec![0.25; 4]);
        assert_eq!(param(&g, conv, 2), vec![-1.0, -1.0]);
    }

    #[test]
    fn rejects_non_channel_constants_and_reversed_sub() {
        // Varies along W: not per-channel.
        let (mut g, _, c) = conv();
        let k = g.add_constant("k", Tensor::from_f32(vec![1, 1, 1, 4], vec![1.0; 4]));
        let y = binary(&mut g, "Mul", c, k, "y");
        g.outputs.push(y);
        assert!(!FoldChannelAffine.run(&mut g).unwrap());
        // Rank 1 [C] on a 4-D output aligns with W, not C.
        let (mut g, _, c) = conv();
        let k = g.add_constant("k", Tensor::from_f32(vec![2], vec![1.0, 2.0]));
        let y = binary(&mut g, "Mul", c, k, "y");
        g.outputs.push(y);
        assert!(!FoldChannelAffine.run(&mut g).unwrap());
        // Would grow the output rank.
        let (mut g, _, c) = conv();
        let k = g.add_constant("k", Tensor::from_f32(vec![1, 1, 2, 1, 1], vec![1.0, 2.0]));
        let y = binary(&mut g, "Add", c, k, "y");
        g.outputs.push(y);
        assert!(!FoldChannelAffine.run(&mut g).unwrap());
        // k - conv is not conv + (-k).
        let (mut g, _, c) = conv();
        let k = g.add_constant("k", Tensor::scalar_f32(1.0));
        let y = binary(&mut g, "Sub", k, c, "y");
        g.outputs.push(y);
        assert!(!FoldChannelAffine.run(&mut g).unwrap());
        // Division by zero is not folded.
        let (mut g, _, c) = conv();
        let k = g.add_constant("k", Tensor::from_f32(vec![2, 1, 1], vec![1.0, 0.0]));
        let y = binary(&mut g, "Div", c, k, "y");
        g.outputs.push(y);
        assert!(!FoldChannelAffine.run(&mut g).unwrap());
    }

    #[test]
    fn folds_into_gemm_and_batch_norm() {
        // Gemm: a[1,3] x B[3,2] -> Add [2].
        let mut g = Graph::new("g", 13);
        let a = g.add_input("a", DType::F32, vec![Dim::Known(1), Dim::Known(3)]);
        let b = g.add_constant("b", Tensor::from_f32(vec![3, 2], vec![1.0; 6]));
        let c = g.add_value("c", None, None);
        let gemm = g.add_node(
            "fc",
            "Gemm",
            vec![Some(a), Some(b)],
            vec![c],
            BTreeMap::new(),
        );
        let k = g.add_constant("k", Tensor::from_f32(vec![2], vec![5.0, 6.0]));
        let y = binary(&mut g, "Add", c, k, "y");
        g.outputs.push(y);
        assert!(FoldChannelAffine.run(&mut g).unwrap());
        assert_eq!(param(&g, gemm, 2), vec![5.0, 6.0]);

        // BatchNormalization followed by Mul [C,1,1] (DenseNet's pre-activation form).
        let mut g = Graph::new("g", 13);
        let x = g.add_input(
            "x",
            DType::F32,
            vec![Dim::Known(1), Dim::Known(2), Dim::Known(3), Dim::Known(3)],
        );
        let p = |g: &mut Graph, n: &str, v: [f32; 2]| {
            Some(g.add_constant(n, Tensor::from_f32(vec![2], v.to_vec())))
        };
        let ins = vec![
            Some(x),
            p(&mut g, "s", [1.0, 2.0]),
            p(&mut g, "t", [0.0, 1.0]),
            p(&mut g, "mu", [0.0, 0.0]),
            p(&mut g, "var", [1.0, 1.0]),
        ];
        let bn_out = g.add_value("bn_out", None, None);
        let bn = g.add_node(
            "bn",
            "BatchNormalization",
            ins,
            vec![bn_out],
            BTreeMap::new(),
        );
        let k = g.add_constant("k", Tensor::from_f32(vec![2, 1, 1], vec![3.0, 4.0]));
        let y = binary(&mut g, "Mul", bn_out, k, "y");
        g.outputs.push(y);
        assert!(FoldChannelAffine.run(&mut g).unwrap());
        assert_eq!(param(&g, bn, 1), vec![3.0, 8.0]);
        assert_eq!(param(&g, bn, 2), vec![0.0, 4.0]);
    }

    #[test]
    fn channel_vector_shapes() {
        let t = |shape: Vec<usize>, n: usize| Tensor::from_f32(shape, vec![1.0; n]);
        assert_eq!(channel_vector(&t(vec![], 1), 4, 3), Some(vec![1.0; 3]));
        assert!(channel_vector(&t(vec![3, 1, 1], 3), 4, 3).is_some());
        assert!(channel_vector(&t(vec![1, 3, 1, 1], 3), 4, 3).is_some());
        assert!(channel_vector(&t(vec![1, 1, 1, 1], 1), 4, 3).is_some());
        assert!(channel_vector(&t(vec![3, 1], 3), 3, 3).is_some());
        assert!(channel_vector(&t(vec![3], 3), 2, 3).is_some());
        assert!(channel_vector(&t(vec![3, 1, 1], 3), 4, 4).is_none());
        assert!(channel_vector(&t(vec![3, 1], 3), 4, 3).is_none());
    }
}
