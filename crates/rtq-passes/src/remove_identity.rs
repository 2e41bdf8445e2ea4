//! [`RemoveIdentity`]: drops Identity nodes and inference-mode Dropout nodes.

use crate::util::{absorb_facts, is_unused};
use crate::{Pass, PassError};
use rtq_ir::{Graph, NodeId};

/// Removes `Identity` nodes and `Dropout` nodes (which are identities at inference),
/// rerouting readers to the node's input with [`Graph::bypass`] so graph output names
/// survive.
///
/// A Dropout is left alone when its mask output is used or its `training_mode` input is
/// not a constant false; any node is left alone when `bypass` refuses (its input and
/// output are both graph interface values).
#[derive(Debug, Clone, Copy, Default)]
pub struct RemoveIdentity;

impl RemoveIdentity {
    /// The pass name.
    pub const NAME: &'static str = "remove-identity";
}

impl Pass for RemoveIdentity {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let consumers = graph.consumers();
        let mut changed = false;
        for id in graph.node_ids() {
            if !removable(graph, &consumers, id) {
                continue;
            }
            let node = graph.node(id);
            let (Some(input), Some(&output)) = (node.input(0), node.outputs.first()) else {
                continue;
            };
            if !graph.bypass(output, input) {
                continue;
            }
            // Keep whatever is known about the output (declared interface facts).
            absorb_facts(graph, output, input);
            graph.remove_node(id);
            changed = true;
        }
        Ok(changed)
    }
}

fn removable(graph: &Graph, consumers: &[Vec<(NodeId, usize)>], id: NodeId) -> bool {
    let node = graph.node(id);
    if !matches!(node.domain.as_str(), "" | "ai.onnx") || node.input(0).is_none() {
        return false;
    }
    match node.op_type.as_str() {
        "Identity" => node.outputs.len() == 1,
        "Dropout" => {
            let mask_unused = node
                .outputs
                .iter()
                .skip(1)
                .all(|&m| is_unused(graph, consumers, m));
            let inference = match node.input(2) {
                None => true,
                Some(mode) => graph
                    .constant(mode)
                    .is_some_and(|t| t.len() == 1 && t.data().get_f64(0) == 0.0),
            };
            !node.outputs.is_empty() && mask_unused && inference
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{DType, Dim, Tensor, TensorData};
    use std::collections::BTreeMap;

    fn run(g: &mut Graph) -> bool {
        let changed = RemoveIdentity.run(g).unwrap();
        rtq_ir::verify(g).unwrap();
        changed
    }

    #[test]
    fn removes_inner_identity_and_rewires_readers() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(2)]);
        let a = g.add_value("a", None, None);
        let b = g.add_value("b", None, None);
        let y = g.add_value("y", None, None);
        g.add_node("r", "Relu", vec![Some(x)], vec![a], BTreeMap::new());
        g.add_node("id", "Identity", vec![Some(a)], vec![b], BTreeMap::new());
        let s = g.add_node("s", "Sigmoid", vec![Some(b)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        assert!(run(&mut g));
        assert_eq!(g.node_count(), 2);
        assert_eq!(g.node(s).input(0), Some(a));
        assert!(!run(&mut g), "second run must report no change");
    }

    #[test]
    fn output_identity_keeps_the_output_name_and_facts() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(2)]);
        let a = g.add_value("a", None, None);
        let y = g.add_value("y", Some(DType::F32), Some(vec![Dim::Known(2)]));
        g.add_node("r", "Relu", vec![Some(x)], vec![a], BTreeMap::new());
        g.add_node("id", "Identity", vec![Some(a)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        assert!(run(&mut g));
        assert_eq!(g.outputs, vec![a]);
        assert_eq!(g.value(a).name, "y");
        assert_eq!(g.value(a).shape, Some(vec![Dim::Known(2)]));
        assert_eq!(g.value(a).dtype, Some(DType::F32));
    }

    #[test]
    fn input_to_output_identity_is_left_alone() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        let y = g.add_value("y", None, None);
        g.add_node("id", "Identity", vec![Some(x)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        assert!(!run(&mut g));
        assert_eq!(g.node_count(), 1);
    }

    #[test]
    fn dropout_is_removed_only_in_inference_form() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        let a = g.add_value("a", None, None);
        g.add_node("r", "Relu", vec![Some(x)], vec![a], BTreeMap::new());
        // 1. Unused mask: removed.
        let d1 = g.add_value("d1", None, None);
        let m1 = g.add_value("m1", None, None);
        g.add_node(
            "drop1",
            "Dropout",
            vec![Some(a)],
            vec![d1, m1],
            BTreeMap::new(),
        );
        // 2. Mask read by a node: kept.
        let d2 = g.add_value("d2", None, None);
        let m2 = g.add_value("m2", None, None);
        g.add_node(
            "drop2",
            "Dropout",
            vec![Some(d1)],
            vec![d2, m2],
            BTreeMap::new(),
        );
        let mc = g.add_value("mc", None, None);
        g.add_node("not", "Not", vec![Some(m2)], vec![mc], BTreeMap::new());
        // 3. training_mode = true: kept.
        let ratio = g.add_constant("ratio", Tensor::scalar_f32(0.5));
        let on = g.add_constant(
            "on",
            Tensor::new(vec![], TensorData::Bool(vec![true])).unwrap(),
        );
        let d3 = g.add_value("d3", None, None);
        g.add_node(
            "drop3",
            "Dropout",
            vec![Some(d2), Some(ratio), Some(on)],
            vec![d3],
            BTreeMap::new(),
        );
        // 4. training_mode = false constant: removed.
        let off = g.add_constant(
            "off",
            Tensor::new(vec![], TensorData::Bool(vec![false])).unwrap(),
        );
        let d4 = g.add_value("d4", None, None);
        g.add_node(
            "drop4",
            "Dropout",
            vec![Some(d3), Some(ratio), Some(off)],
            vec![d4],
            BTreeMap::new(),
        );
        g.outputs.extend([d4, mc]);
        assert!(run(&mut g));
        let left: Vec<&str> = g.nodes().map(|(_, n)| n.name.as_str()).collect();
        assert_eq!(left, vec!["r", "drop2", "not", "drop3"]);
        assert_eq!(g.value(g.outputs[0]).name, "d4");
        assert_eq!(g.outputs[0], d3);
    }
}
