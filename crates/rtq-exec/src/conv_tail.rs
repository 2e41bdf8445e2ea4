//! Convolutions that quantize their own output, made at load by [`fuse_conv_tails`].
//!
//! In a quantized CNN nearly every integer convolution is followed by its activation
//! and the next layer's QuantizeLinear, which [`crate::fuse_chains`] makes one
//! `ElementwiseChain`. Run apart, the convolution writes its float32 results to
//! memory (four bytes a value) and the chain reads them back to write one byte: for
//! layers with few input channels (PP-OCRv4 det's 1x1 convolutions of 12 or 16
//! channels) that traffic, not the arithmetic, is the layer's time. Here such a chain
//! becomes the convolution's tail ([`crate::ops::chain::QuantizingTail`]): the
//! convolution applies it to each block of results while they are in cache and
//! writes the 8-bit codes. The values are the chain's, bit for bit.

use crate::hoist::per_tensor_8bit;
use crate::ops::chain::{is_quantizing_tail, Code, TAIL_PARAMS, TAIL_STEPS};
use crate::ops::integer::INTEGER_DOMAIN;
use rtq_ir::{Attr, Graph};

/// Input slots of `IntegerConv` before a tail's operands: `Xq, x_scale, Wq, w_scale, B`.
const CONV_SLOTS: usize = 5;

/// Gives every `IntegerConv` of `graph` whose float32 output is read only by an
/// `ElementwiseChain` of one quantizing pass with constant operands (an activation,
/// a scalar multiplication and addition, a per-tensor 8-bit QuantizeLinear), or by a
/// per-tensor 8-bit QuantizeLinear alone, that reader as its tail: the reader's node
/// becomes the convolution with the tail, and the original convolution is left for
/// dead-code elimination. Returns how many were
/// fused. Run after [`crate::fuse_chains`].
pub fn fuse_conv_tails(graph: &mut Graph) -> usize {
    let readers = graph.consumers();
    let mut fused = 0;
    for id in graph.node_ids() {
        let conv = graph.node(id);
        if conv.op_type != "IntegerConv"
            || conv.domain != INTEGER_DOMAIN
            || conv.attr(TAIL_STEPS).is_some()
            || conv.inputs.len() > CONV_SLOTS
        {
            continue;
        }
        let Some(&out) = conv.outputs.first() else {
            continue;
        };
        let [(chain_id, 0)] = readers[out.index()][..] else {
            continue;
        };
        if graph.is_graph_output(out) {
            continue;
        }
        let chain = graph.node(chain_id);
        let (steps, params) = if chain.op_type == "ElementwiseChain"
            && chain.domain == INTEGER_DOMAIN
            && is_quantizing_tail(graph, chain)
        {
            let (Some(Attr::Ints(steps)), Some(Attr::Floats(params))) =
                (chain.attr("steps"), chain.attr("params"))
            else {
                continue;
            };
            (steps.clone(), params.clone())
        } else if per_tensor_8bit(graph, chain_id).is_some() {
            // A QuantizeLinear alone: a tail of that one step (scale, zero point).
            let zero = if chain.input(2).is_some() { 2 } else { 0 };
            (vec![Code::Quantize as i64, 1, zero], vec![0.0, 0.0])
        } else {
            continue;
        };
        // The chain's operand slots 1.. follow the convolution's five.
        let steps: Vec<i64> = steps
            .chunks_exact(3)
            .flat_map(|s| {
                let moved = |slot: i64| {
                    if slot == 0 {
                        0
                    } else {
                        slot + CONV_SLOTS as i64 - 1
                    }
                };
                [s[0], moved(s[1]), moved(s[2])]
            })
            .collect();
        let mut inputs = conv.inputs.clone();
        inputs.resize(CONV_SLOTS, None);
        inputs.extend(chain.inputs.iter().skip(1).copied());
        let mut attrs = conv.attrs.clone();
        attrs.insert(TAIL_STEPS.into(), Attr::Ints(steps));
        attrs.insert(TAIL_PARAMS.into(), Attr::Floats(params));
        let node = graph.node_mut(chain_id);
        node.op_type = "IntegerConv".into();
        node.domain = INTEGER_DOMAIN.into();
        node.inputs = inputs;
        node.attrs = attrs;
        fused += 1;
    }
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::igemm::Isa;
    use crate::ops::integer::ISA_ATTR;
    use crate::Plan;
    use rtq_ir::{DType, Dim, NodeId, Tensor, TensorData};
    use rtq_test_support::Rng;
    use std::collections::BTreeMap;

    /// What follows the test convolution: a chain with this activation, or a
    /// QuantizeLinear alone.
    #[derive(Clone, Copy, Debug)]
    enum Act {
        None,
        Relu,
        HardSwish,
        QuantizeOnly,
    }

    /// `IntegerConv` of int8 `x` (`[n, c, h, w]`) by `m` filters of `k`x`k` (padding
    /// `k / 2`), then a chain: `act`, `* 1.25`, `- 0.5`, QuantizeLinear (uint8 with
    /// zero point 128, or int8 with -3); or that QuantizeLinear alone. The node after
    /// the convolution is returned with the graph.
    fn conv_then_chain(
        (n, c, h, w): (usize, usize, usize, usize),
        (m, k): (usize, usize),
        act: Act,
        unsigned: bool,
        isa: Isa,
    ) -> (Graph, NodeId) {
        let mut rng = Rng::new((n * 31 + c * 7 + m * 3 + k) as u64);
        let mut g = Graph::new("g", 13);
        let dims = |d: &[usize]| d.iter().map(|&v| Dim::Known(v)).collect::<Vec<_>>();
        let x = g.add_input("x", DType::I8, dims(&[n, c, h, w]));
        let sx = g.add_constant("sx", Tensor::scalar_f32(0.02));
        let weights: Vec<i8> = (0..m * c * k * k)
            .map(|_| (rng.below(255) as i32 - 127) as i8)
            .collect();
        let wq = g.add_constant(
            "w",
            Tensor::new(vec![m, c, k, k], TensorData::I8(weights)).unwrap(),
        );
        let sw: Vec<f32> = (0..m).map(|i| 0.001 + 0.0005 * i as f32).collect();
        let sw = g.add_constant("sw", Tensor::from_f32(vec![m], sw));
        let bias: Vec<f32> = (0..m).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
        let b = g.add_constant("b", Tensor::from_f32(vec![m], bias));
        let y = g.add_value("y", Some(DType::F32), Some(dims(&[n, m, h, w])));
        let mut attrs = BTreeMap::new();
        let pad = (k / 2) as i64;
        attrs.insert("pads".to_string(), Attr::Ints(vec![pad; 4]));
        attrs.insert(ISA_ATTR.to_string(), Attr::String(isa.name().into()));
        let conv = g.add_node(
            "conv",
            "IntegerConv",
            vec![Some(x), Some(sx), Some(wq), Some(sw), Some(b)],
            vec![y],
            attrs,
        );
        g.node_mut(conv).domain = INTEGER_DOMAIN.into();
        let factor = g.add_constant("factor", Tensor::scalar_f32(1.25));
        let term = g.add_constant("term", Tensor::scalar_f32(0.5));
        let s = g.add_constant("s", Tensor::scalar_f32(0.043));
        let zero = if unsigned {
            Tensor::new(vec![], TensorData::U8(vec![128])).unwrap()
        } else {
            Tensor::new(vec![], TensorData::I8(vec![-3])).unwrap()
        };
        let z = g.add_constant("z", zero);
        let dtype = if unsigned { DType::U8 } else { DType::I8 };
        let q = g.add_value("q", Some(dtype), Some(dims(&[n, m, h, w])));
        g.outputs.push(q);
        if let Act::QuantizeOnly = act {
            let node = g.add_node(
                "q",
                "QuantizeLinear",
                vec![Some(y), Some(s), Some(z)],
                vec![q],
                BTreeMap::new(),
            );
            return (g, node);
        }
        let mut steps = Vec::new();
        let mut params = Vec::new();
        match act {
            Act::None | Act::QuantizeOnly => {}
            Act::Relu => {
                steps.extend([Code::Relu as i64, 0, 0]);
                params.extend([0.0, 0.0]);
            }
            Act::HardSwish => {
                steps.extend([Code::HardSwish as i64, 0, 0]);
                params.extend([6.0, 1.0]);
            }
        }
        steps.extend([Code::Mul as i64, 1, 0, Code::Sub as i64, 2, 0]);
        steps.extend([Code::Quantize as i64, 3, 4]);
        params.extend([0.0; 6]);
        let mut attrs = BTreeMap::new();
        attrs.insert("steps".to_string(), Attr::Ints(steps));
        attrs.insert("params".to_string(), Attr::Floats(params));
        let chain = g.add_node(
            "chain",
            "ElementwiseChain",
            vec![Some(y), Some(factor), Some(term), Some(s), Some(z)],
            vec![q],
            attrs,
        );
        g.node_mut(chain).domain = INTEGER_DOMAIN.into();
        (g, chain)
    }

    /// The graph's output bytes on a seeded int8 input of `shape`.
    fn run(g: &Graph, shape: &[usize]) -> (DType, Vec<u8>) {
        let mut rng = Rng::new(99);
        let values: Vec<i8> = (0..shape.iter().product::<usize>())
            .map(|_| (rng.below(256) as i32 - 128) as i8)
            .collect();
        let x = Tensor::new(shape.to_vec(), TensorData::I8(values)).unwrap();
        let out = Plan::new(g).unwrap().run(&[("x".into(), x)]).unwrap();
        (out[0].dtype(), out[0].to_le_bytes())
    }

    #[test]
    fn tails_give_the_chains_codes_on_every_path() {
        // Pointwise (blocks of columns, several and a partial one per image), 3x3 (the
        // im2col path in blocks too; on AVX-512 VNNI the direct convolution, then the
        // tail over its results), odd channel counts.
        let cases = [
            ((2, 16, 37, 41), (32, 1)),
            ((1, 12, 9, 11), (7, 1)),
            ((2, 8, 13, 9), (5, 3)),
        ];
        for isa in Isa::available() {
            for (input, filters) in cases {
                for act in [Act::None, Act::Relu, Act::HardSwish, Act::QuantizeOnly] {
                    for unsigned in [true, false] {
                        let case = format!("{isa:?} {input:?} {filters:?} {act:?} {unsigned}");
                        let (mut g, chain) = conv_then_chain(input, filters, act, unsigned, isa);
                        let shape = [input.0, input.1, input.2, input.3];
                        let expected = run(&g, &shape);
                        assert_eq!(fuse_conv_tails(&mut g), 1, "{case}");
                        assert_eq!(g.node(chain).op_type, "IntegerConv", "{case}");
                        assert_eq!(run(&g, &shape), expected, "{case}");
                    }
                }
            }
        }
    }

    #[test]
    fn chains_that_are_not_one_quantizing_pass_stay_apart() {
        let isa = Isa::detect();
        // Another reader of the convolution's output.
        let (mut g, _) = conv_then_chain((1, 4, 3, 3), (4, 1), Act::Relu, true, isa);
        let y = g.value_by_name("y").unwrap();
        g.outputs.push(y);
        assert_eq!(fuse_conv_tails(&mut g), 0);
        // A computed operand (the multiplication by a graph input).
        let (mut g, chain) = conv_then_chain((1, 4, 3, 3), (4, 1), Act::Relu, true, isa);
        let factor = g.add_input("factor_in", DType::F32, vec![]);
        g.node_mut(chain).inputs[1] = Some(factor);
        assert_eq!(fuse_conv_tails(&mut g), 0);
        // No final quantization.
        let (mut g, chain) = conv_then_chain((1, 4, 3, 3), (4, 1), Act::Relu, true, isa);
        if let Some(Attr::Ints(steps)) = g.node_mut(chain).attrs.get_mut("steps") {
            steps.truncate(steps.len() - 3);
        }
        if let Some(Attr::Floats(params)) = g.node_mut(chain).attrs.get_mut("params") {
            params.truncate(params.len() - 2);
        }
        assert_eq!(fuse_conv_tails(&mut g), 0);
    }
}
