//! [`DeadCodeElimination`]: removes nodes whose results never reach a graph output.

use crate::{Pass, PassError};
use rtq_ir::Graph;

/// Removes every node none of whose outputs (transitively) reaches a graph output.
/// Graph inputs are never removed, even when unused.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeadCodeElimination;

impl DeadCodeElimination {
    /// The pass name.
    pub const NAME: &'static str = "dead-code-elimination";
}

impl Pass for DeadCodeElimination {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let ids = graph.node_ids();
        let bound = ids.last().map_or(0, |id| id.index() + 1);
        let mut live = vec![false; bound];
        let mut stack: Vec<_> = graph
            .outputs
            .iter()
            .filter_map(|&v| graph.value(v).producer.map(|(n, _)| n))
            .collect();
        while let Some(id) = stack.pop() {
            if !graph.is_live(id) || std::mem::replace(&mut live[id.index()], true) {
                continue;
            }
            for input in graph.node(id).inputs.iter().flatten() {
                if let Some((producer, _)) = graph.value(*input).producer {
                    stack.push(producer);
                }
            }
        }
        let mut changed = false;
        for id in ids {
            if !live[id.index()] {
                graph.remove_node(id);
                changed = true;
            }
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{DType, Dim};
    use std::collections::BTreeMap;

    #[test]
    fn removes_dead_branches_but_keeps_inputs_and_partly_used_nodes() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(4)]);
        let unused_input = g.add_input("unused", DType::F32, vec![Dim::Known(1)]);
        let a = g.add_value("a", None, None);
        let b = g.add_value("b", None, None);
        let y = g.add_value("y", None, None);
        // A two-output node with only one output used stays.
        let split = g.add_node("split", "Split", vec![Some(x)], vec![a, b], BTreeMap::new());
        let keep = g.add_node("keep", "Relu", vec![Some(a)], vec![y], BTreeMap::new());
        // Dead chain hanging off b, and a dead node on the unused input.
        let d1 = g.add_value("d1", None, None);
        let d2 = g.add_value("d2", None, None);
        g.add_node("dead1", "Exp", vec![Some(b)], vec![d1], BTreeMap::new());
        g.add_node("dead2", "Log", vec![Some(d1)], vec![d2], BTreeMap::new());
        let d3 = g.add_value("d3", None, None);
        g.add_node(
            "dead3",
            "Neg",
            vec![Some(unused_input)],
            vec![d3],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        assert!(DeadCodeElimination.run(&mut g).unwrap());
        assert_eq!(g.node_ids(), vec![split, keep]);
        assert_eq!(g.inputs, vec![x, unused_input]);
        rtq_ir::verify(&g).unwrap();
        assert!(!DeadCodeElimination.run(&mut g).unwrap());
    }

    #[test]
    fn graph_without_outputs_loses_all_nodes() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        let a = g.add_value("a", None, None);
        g.add_node("n", "Relu", vec![Some(x)], vec![a], BTreeMap::new());
        assert!(DeadCodeElimination.run(&mut g).unwrap());
        assert_eq!(g.node_count(), 0);
    }
}
