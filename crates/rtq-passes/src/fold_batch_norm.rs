//! [`FoldBatchNorm`]: folds inference-form BatchNormalization into the preceding
//! Conv, ConvTranspose or Gemm.

use crate::affine::{fold_into, ChannelAffine};
use crate::util::{absorb_facts, float_values, is_unused, only_read_by};
use crate::{Pass, PassError};
use rtq_ir::{Graph, NodeId, ValueId};

/// Folds `BatchNormalization(Conv(x))` (also ConvTranspose, and Gemm with `transB` 0 or
/// 1, with or without bias) into the producer: with `s = scale / sqrt(var + eps)` the
/// weights of output channel `c` are multiplied by `s[c]` and the bias becomes
/// `(b - mean) * s + B`.
///
/// Applies only when the producer's output has no other reader and is not a graph
/// output, every parameter is a float constant, and the BatchNormalization is in
/// inference form (no `training_mode`, extra outputs unused). Folded parameters are new
/// constants, so tensors shared with other nodes are never changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct FoldBatchNorm;

impl FoldBatchNorm {
    /// The pass name.
    pub const NAME: &'static str = "fold-batch-norm";
}

impl Pass for FoldBatchNorm {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let mut changed = false;
        for bn in graph.node_ids() {
            if !graph.is_live(bn) {
                continue;
            }
            let Some((producer, x, y, affine)) = match_bn(graph, bn) else {
                continue;
            };
            if fold_into(graph, producer, &affine) {
                let bypassed = graph.bypass(y, x);
                debug_assert!(bypassed, "x is a node output read only by the BN");
                absorb_facts(graph, y, x);
                graph.remove_node(bn);
                changed = true;
            }
        }
        Ok(changed)
    }
}

/// Checks the pattern at BatchNormalization `bn`: returns the producer, the producer's
/// output, the BN output and the affine map equivalent to the BN.
fn match_bn(graph: &Graph, bn: NodeId) -> Option<(NodeId, ValueId, ValueId, ChannelAffine)> {
    let node = graph.node(bn);
    if node.op_type != "BatchNormalization"
        || !matches!(node.domain.as_str(), "" | "ai.onnx")
        || node.attr_int("training_mode", 0) != 0
    {
        return None;
    }
    let &y = node.outputs.first()?;
    let x = node.input(0)?;
    let (producer, 0) = graph.value(x).producer? else {
        return None;
    };
    if !graph.is_live(producer)
        || !matches!(
            graph.node(producer).op_type.as_str(),
            "Conv" | "ConvTranspose" | "Gemm"
        )
        || !matches!(graph.node(producer).domain.as_str(), "" | "ai.onnx")
    {
        return None;
    }
    // Only now pay for the reader table.
    let consumers = graph.consumers();
    if !only_read_by(graph, &consumers, x, bn)
        || !node.outputs[1..]
            .iter()
            .all(|&o| is_unused(graph, &consumers, o))
    {
        return None;
    }
    let param = |slot: usize| -> Option<Vec<f64>> {
        float_values(graph.constant(node.input(slot)?)?.as_ref())
    };
    let (scale, bias, mean, var) = (param(1)?, param(2)?, param(3)?, param(4)?);
    let channels = scale.len();
    if [bias.len(), mean.len(), var.len()] != [channels; 3] {
        return None;
    }
    let eps = f64::from(node.attr_float("epsilon", 1e-5));
    let mut affine = ChannelAffine {
        scale: Vec::with_capacity(channels),
        shift: Vec::with_capacity(channels),
    };
    for c in 0..channels {
        let s = scale[c] / (var[c] + eps).sqrt();
        if !s.is_finite() {
            return None;
        }
        affine.scale.push(s);
        affine.shift.push(bias[c] - mean[c] * s);
    }
    Some((producer, x, y, affine))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{Attr, DType, Dim, Tensor};
    use std::collections::BTreeMap;

    struct Bn {
        graph: Graph,
        conv: NodeId,
        bn: NodeId,
        y: ValueId,
        w: ValueId,
    }

    /// x[1,2,3,3] -> Conv(w[2,2,1,1], b?) -> BN(2 channels) -> y (graph output).
    fn conv_bn(with_bias: bool) -> Bn {
        let mut g = Graph::new("g", 13);
        let x = g.add_input(
            "x",
            DType::F32,
            vec![Dim::Known(1), Dim::Known(2), Dim::Known(3), Dim::Known(3)],
        );
        let w = g.add_constant(
            "w",
            Tensor::from_f32(vec![2, 2, 1, 1], vec![1.0, 2.0, 3.0, 4.0]),
        );
        let b = with_bias.then(|| g.add_constant("b", Tensor::from_f32(vec![2], vec![0.5, -0.5])));
        let c = g.add_value("c", Some(DType::F32), None);
        let conv = g.add_node(
            "conv",
            "Conv",
            vec![Some(x), Some(w), b],
            vec![c],
            BTreeMap::new(),
        );
        let scale = g.add_constant("scale", Tensor::from_f32(vec![2], vec![2.0, 3.0]));
        let bias = g.add_constant("bias", Tensor::from_f32(vec![2], vec![0.1, 0.2]));
        let mean = g.add_constant("mean", Tensor::from_f32(vec![2], vec![1.0, -1.0]));
        let var = g.add_constant("var", Tensor::from_f32(vec![2], vec![4.0, 9.0]));
        let y = g.add_value("y", Some(DType::F32), None);
        let mut attrs = BTreeMap::new();
        attrs.insert("epsilon".to_string(), Attr::Float(0.0));
        let bn = g.add_node(
            "bn",
            "BatchNormalization",
            vec![Some(c), Some(scale), Some(bias), Some(mean), Some(var)],
            vec![y],
            attrs,
        );
        g.outputs.push(y);
        Bn {
            graph: g,
            conv,
            bn,
            y,
            w,
        }
    }

    fn input_values(g: &Graph, node: NodeId, slot: usize) -> Vec<f32> {
        g.constant(g.node(node).input(slot).unwrap())
            .unwrap()
            .to_f32_vec()
    }

    #[test]
    fn folds_conv_bn_with_and_without_bias() {
        for with_bias in [true, false] {
            let Bn {
                mut graph,
                conv,
                bn,
                y,
                w,
            } = conv_bn(with_bias);
            assert!(FoldBatchNorm.run(&mut graph).unwrap());
            rtq_ir::verify(&graph).unwrap();
            assert!(!graph.is_live(bn));
            // s = [2/2, 3/3] = [1, 1]... use the expected closed form per channel.
            let s = [2.0 / 2.0, 3.0 / 3.0];
            let b = if with_bias { [0.5, -0.5] } else { [0.0, 0.0] };
            let expect_bias: Vec<f32> = (0..2)
                .map(|c| ((b[c] - [1.0, -1.0][c]) * s[c] + [0.1, 0.2][c]) as f32)
                .collect();
            assert_eq!(input_values(&graph, conv, 2), expect_bias);
            assert_eq!(input_values(&graph, conv, 1), vec![1.0, 2.0, 3.0, 4.0]);
            // The conv output now is the graph output, under the BN output's name.
            let out = graph.outputs[0];
            assert_eq!(graph.value(out).producer, Some((conv, 0)));
            assert_eq!(graph.value(out).name, "y");
            assert_ne!(out, y);
            // The original weight constant is untouched.
            assert_eq!(
                graph.constant(w).unwrap().to_f32_vec(),
                vec![1.0, 2.0, 3.0, 4.0]
            );
            assert!(!FoldBatchNorm.run(&mut graph).unwrap());
        }
    }

    #[test]
    fn scales_weights_by_gamma_over_sigma() {
        let Bn {
            mut graph,
            conv,
            bn,
            ..
        } = conv_bn(true);
        // Make gamma differ from sigma: gamma = [4, -6], sigma = [2, 3] -> s = [2, -2].
        let gamma = graph.add_constant("gamma", Tensor::from_f32(vec![2], vec![4.0, -6.0]));
        graph.node_mut(bn).inputs[1] = Some(gamma);
        assert!(FoldBatchNorm.run(&mut graph).unwrap());
        assert_eq!(input_values(&graph, conv, 1), vec![2.0, 4.0, -6.0, -8.0]);
        // (0.5 - 1) * 2 + 0.1 = -0.9 ; (-0.5 + 1) * -2 + 0.2 = -0.8
        let b = input_values(&graph, conv, 2);
        assert!(
            (b[0] + 0.9).abs() < 1e-6 && (b[1] + 0.8).abs() < 1e-6,
            "{b:?}"
        );
    }

    #[test]
    fn leaves_shared_conv_output_alone() {
        let Bn {
            mut graph,
            conv,
            bn,
            ..
        } = conv_bn(true);
        let c = graph.node(conv).outputs[0];
        let r = graph.add_value("r", None, None);
        graph.add_node("other", "Relu", vec![Some(c)], vec![r], BTreeMap::new());
        graph.outputs.push(r);
        assert!(!FoldBatchNorm.run(&mut graph).unwrap());
        assert!(graph.is_live(bn));
    }

    #[test]
    fn leaves_non_constant_parameters_and_training_mode_alone() {
        let Bn { mut graph, bn, .. } = conv_bn(true);
        let var_in = graph.add_input("var_in", DType::F32, vec![Dim::Known(2)]);
        graph.node_mut(bn).inputs[4] = Some(var_in);
        assert!(!FoldBatchNorm.run(&mut graph).unwrap());

        let Bn { mut graph, bn, .. } = conv_bn(true);
        graph
            .node_mut(bn)
            .attrs
            .insert("training_mode".into(), Attr::Int(1));
        assert!(!FoldBatchNorm.run(&mut graph).unwrap());
    }

    #[test]
    fn folds_gemm_bn_for_both_layouts() {
        for trans_b in [0i64, 1] {
            let mut g = Graph::new("g", 13);
            let a = g.add_input("a", DType::F32, vec![Dim::Known(1), Dim::Known(2)]);
            // B' = identity (K = N = 2).
            let b = g.add_constant("b", Tensor::from_f32(vec![2, 2], vec![1.0, 0.0, 0.0, 1.0]));
            let c = g.add_value("c", None, None);
            let mut attrs = BTreeMap::new();
            attrs.insert("transB".to_string(), Attr::Int(trans_b));
            let gemm = g.add_node("fc", "Gemm", vec![Some(a), Some(b)], vec![c], attrs);
            let p = |g: &mut Graph, n: &str, v: [f32; 2]| {
                Some(g.add_constant(n, Tensor::from_f32(vec![2], v.to_vec())))
            };
            let ins = vec![
                Some(c),
                p(&mut g, "s", [2.0, 4.0]),
                p(&mut g, "t", [1.0, 1.0]),
                p(&mut g, "m", [0.0, 1.0]),
                p(&mut g, "v", [1.0, 1.0]),
            ];
            let y = g.add_value("y", None, None);
            let mut attrs = BTreeMap::new();
            attrs.insert("epsilon".to_string(), Attr::Float(0.0));
            g.add_node("bn", "BatchNormalization", ins, vec![y], attrs);
            g.outputs.push(y);
            assert!(FoldBatchNorm.run(&mut g).unwrap());
            assert_eq!(g.node_count(), 1);
            // diag(2, 4) is symmetric, so both layouts store the same matrix.
            assert_eq!(input_values(&g, gemm, 1), vec![2.0, 0.0, 0.0, 4.0]);
            // bias = B - mean * s = [1, 1 - 4]
            assert_eq!(input_values(&g, gemm, 2), vec![1.0, -3.0]);
        }
    }
}
