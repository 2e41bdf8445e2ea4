//! Activation fusion at load: decomposed activations a graph spells out op by op
//! become one op of rtq's own domain that the executor runs in a single pass over
//! memory (as onnxruntime's graph optimizations fuse them at session creation),
//! computing the same f32 operations in the same order: the result is bit for bit the
//! graph's (see [`crate::ops::fused`]).
//!
//! * HardSwish: `Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)` (PaddlePaddle's and many
//!   exporters' form; the Mul's operands in either order, or the Div written as a Mul
//!   by a constant) on float32 → `DecomposedHardSwish(x)`. The intermediate values must
//!   have no other reader.
//!
//! The rewritten graph is executed, never written.

use crate::ops::integer::INTEGER_DOMAIN;
use rtq_ir::{Attr, DType, Graph, NodeId, ValueId};

/// Rewrites every decomposed activation of `graph` (not inside control-flow bodies);
/// returns how many were fused. The nodes they replace are left for dead-code
/// elimination.
pub fn fuse_activations(graph: &mut Graph) -> usize {
    let mut fused = 0;
    // Readers of each value, once: a rewrite only takes readers away from values of
    // the pattern it replaced, which no later pattern shares.
    let readers = graph.consumers();
    for id in graph.node_ids() {
        if let Some((x, scale, divide)) = hard_swish(graph, &readers, id) {
            let node = graph.node_mut(id);
            node.op_type = "DecomposedHardSwish".into();
            node.domain = INTEGER_DOMAIN.into();
            node.inputs = vec![Some(x)];
            node.attrs.clear();
            node.attrs.insert("scale".into(), Attr::Float(scale));
            node.attrs
                .insert("divide".into(), Attr::Int(i64::from(divide)));
            fused += 1;
        }
    }
    fused
}

/// The (node, input slot) pairs reading each value, by value index.
type Readers = Vec<Vec<(NodeId, usize)>>;

/// The scalar value of constant `v`, if it is one.
fn scalar(graph: &Graph, v: Option<ValueId>) -> Option<f32> {
    let t = graph.constant(v?)?;
    (t.len() == 1).then(|| t.data().get_f64(0) as f32)
}

/// The node producing `v`, with op `op`, whose output nothing else reads.
fn sole_producer(graph: &Graph, readers: &Readers, v: ValueId, op: &str) -> Option<NodeId> {
    let (id, _) = graph.value(v).producer?;
    let node = graph.node(id);
    let only_reader = readers[v.index()].len() == 1;
    (node.op_type == op && node.domain.is_empty() && only_reader && !graph.is_graph_output(v))
        .then_some(id)
}

/// (`x`, the final constant, whether it divides) when node `id` ends a decomposed
/// HardSwish of float32 `x`.
fn hard_swish(graph: &Graph, readers: &Readers, id: NodeId) -> Option<(ValueId, f32, bool)> {
    let node = graph.node(id);
    if !node.domain.is_empty() {
        return None;
    }
    let (product, scale, divide) = match node.op_type.as_str() {
        "Div" if scalar(graph, node.input(1)) == Some(6.0) => (node.input(0)?, 6.0, true),
        "Mul" => {
            let c = scalar(graph, node.input(1))?;
            ((c - 1.0 / 6.0).abs() < 1e-7).then_some(())?;
            (node.input(0)?, c, false)
        }
        _ => return None,
    };
    let mul = graph.node(sole_producer(graph, readers, product, "Mul")?);
    let (a, b) = (mul.input(0)?, mul.input(1)?);
    for (x, gate) in [(a, b), (b, a)] {
        let Some(clip) = sole_producer(graph, readers, gate, "Clip") else {
            continue;
        };
        let clip = graph.node(clip);
        if scalar(graph, clip.input(1)) != Some(0.0) || scalar(graph, clip.input(2)) != Some(6.0) {
            continue;
        }
        let Some(add) = clip
            .input(0)
            .and_then(|v| sole_producer(graph, readers, v, "Add"))
        else {
            continue;
        };
        let add = graph.node(add);
        let shifted = |p: usize, q: usize| {
            add.input(p) == Some(x) && scalar(graph, add.input(q)) == Some(3.0)
        };
        if (shifted(0, 1) || shifted(1, 0)) && graph.value(x).dtype == Some(DType::F32) {
            return Some((x, scale, divide));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Plan;
    use rtq_ir::{DType, Dim, Tensor};
    use std::collections::BTreeMap;

    /// `x * clip(x + 3, 0, 6) / 6`, the product's operands in `order`.
    fn decomposed(swap: bool) -> Graph {
        let mut g = Graph::new("g", 12);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(9)]);
        let c =
            |g: &mut Graph, n: &str, v: f32| g.add_constant(n, Tensor::from_f32(vec![], vec![v]));
        let (three, zero, six, six2) = (
            c(&mut g, "three", 3.0),
            c(&mut g, "zero", 0.0),
            c(&mut g, "six", 6.0),
            c(&mut g, "six2", 6.0),
        );
        let add = g.add_value("add", Some(DType::F32), None);
        let clip = g.add_value("clip", Some(DType::F32), None);
        let mul = g.add_value("mul", Some(DType::F32), None);
        let y = g.add_value("y", Some(DType::F32), None);
        g.add_node(
            "add",
            "Add",
            vec![Some(x), Some(three)],
            vec![add],
            BTreeMap::new(),
        );
        g.add_node(
            "clip",
            "Clip",
            vec![Some(add), Some(zero), Some(six)],
            vec![clip],
            BTreeMap::new(),
        );
        let ins = if swap {
            vec![Some(clip), Some(x)]
        } else {
            vec![Some(x), Some(clip)]
        };
        g.add_node("mul", "Mul", ins, vec![mul], BTreeMap::new());
        g.add_node(
            "div",
            "Div",
            vec![Some(mul), Some(six2)],
            vec![y],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        g
    }

    fn run(g: &Graph) -> Vec<f32> {
        let x = Tensor::from_f32(
            vec![9],
            vec![-5.0, -3.0, -1.5, -0.1, 0.0, 0.7, 2.9, 3.0, 8.0],
        );
        Plan::new(g).unwrap().run(&[("x".into(), x)]).unwrap()[0].to_f32_vec()
    }

    #[test]
    fn a_decomposed_hard_swish_becomes_one_op() {
        for swap in [false, true] {
            let mut g = decomposed(swap);
            let before = run(&g);
            assert_eq!(fuse_activations(&mut g), 1);
            let ops: Vec<&str> = g.nodes().map(|(_, n)| n.op_type.as_str()).collect();
            assert!(ops.contains(&"DecomposedHardSwish"), "{ops:?}");
            // Bit for bit what the four ops compute.
            let after = run(&g);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&before), bits(&after));
        }
    }

    #[test]
    fn a_shared_intermediate_or_other_constants_are_left_alone() {
        // The Clip's output is also a graph output: nothing is fused.
        let mut g = decomposed(false);
        let clip = g.value_by_name("clip").unwrap();
        g.outputs.push(clip);
        assert_eq!(fuse_activations(&mut g), 0);
        // Clip to [0, 5]: not a HardSwish.
        let mut g = decomposed(false);
        let six = g.value_by_name("six").unwrap();
        g.set_constant(six, Tensor::from_f32(vec![], vec![5.0]));
        assert_eq!(fuse_activations(&mut g), 0);
    }
}
