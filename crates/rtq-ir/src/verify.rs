use crate::{Graph, IrError, Result};
use std::collections::HashSet;

/// Checks the graph's structural invariants: every input of a live node is a graph
/// input, a constant or the output of a live node; every value has at most one
/// producer and that producer lists it; graph outputs are defined; there is no cycle.
/// Errors name the offending node or value.
pub fn verify(graph: &Graph) -> Result<()> {
    let inputs: HashSet<_> = graph.inputs.iter().copied().collect();
    let defined = |v: crate::ValueId| {
        let value = graph.value(v);
        inputs.contains(&v)
            || value.constant.is_some()
            || value.producer.is_some_and(|(n, _)| graph.is_live(n))
    };
    for (id, node) in graph.nodes() {
        for (slot, input) in node.inputs.iter().enumerate() {
            if let Some(v) = input {
                if v.index() >= graph.value_count() {
                    return Err(IrError::Invalid(format!(
                        "node `{}` ({}) input {slot} refers to a value that does not exist",
                        node.name, node.op_type
                    )));
                }
                if !defined(*v) {
                    return Err(IrError::Invalid(format!(
                        "node `{}` ({}) reads `{}`, which nothing defines",
                        node.name,
                        node.op_type,
                        graph.value(*v).name
                    )));
                }
            }
        }
        for (slot, &out) in node.outputs.iter().enumerate() {
            if graph.value(out).producer != Some((id, slot)) {
                return Err(IrError::Invalid(format!(
                    "node `{}` ({}) output `{}` names another producer",
                    node.name,
                    node.op_type,
                    graph.value(out).name
                )));
            }
            if graph.value(out).constant.is_some() {
                return Err(IrError::Invalid(format!(
                    "node `{}` ({}) writes `{}`, which is also a constant",
                    node.name,
                    node.op_type,
                    graph.value(out).name
                )));
            }
        }
    }
    for &out in &graph.outputs {
        if !defined(out) {
            return Err(IrError::Invalid(format!(
                "graph output `{}` is not defined",
                graph.value(out).name
            )));
        }
    }
    graph.topo_order()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use std::collections::BTreeMap;

    #[test]
    fn catches_dangling_input() {
        let mut g = Graph::new("g", 13);
        let ghost = g.add_value("ghost", None, None);
        let y = g.add_value("y", None, None);
        g.add_node("relu", "Relu", vec![Some(ghost)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        let err = verify(&g).unwrap_err().to_string();
        assert!(err.contains("relu") && err.contains("ghost"), "{err}");
    }

    #[test]
    fn accepts_well_formed_graph() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        let y = g.add_value("y", None, None);
        g.add_node("relu", "Relu", vec![Some(x)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        verify(&g).unwrap();
    }
}
