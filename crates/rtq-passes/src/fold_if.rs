//! [`FoldIf`]: replaces an `If` whose condition is a constant by the branch it takes.

use crate::{Pass, PassError};
use rtq_ir::{Graph, NodeId, ValueId};
use std::collections::{BTreeMap, HashMap};

/// Inlines the taken branch of every `If` whose condition is a constant (exported
/// models carry many, e.g. a shape check folded to `true`): the branch's nodes and
/// constants move into the enclosing graph, reading the node's captured inputs, and
/// each of the node's outputs becomes an Identity of the branch output (removed by
/// `remove-identity`), so graph output names survive.
#[derive(Debug, Clone, Copy, Default)]
pub struct FoldIf;

impl FoldIf {
    /// The pass name.
    pub const NAME: &'static str = "fold-if";
}

impl Pass for FoldIf {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let mut changed = false;
        for id in graph.node_ids() {
            changed |= inline(graph, id)?;
        }
        Ok(changed)
    }
}

/// The condition's truth, when `node`'s input 0 is a one-element constant.
fn constant_condition(graph: &Graph, id: NodeId) -> Option<bool> {
    let t = graph.constant(graph.node(id).input(0)?)?;
    (t.len() == 1).then(|| t.data().get_f64(0) != 0.0)
}

fn inline(graph: &mut Graph, id: NodeId) -> Result<bool, PassError> {
    let node = graph.node(id);
    if node.op_type != "If" || !matches!(node.domain.as_str(), "" | "ai.onnx") {
        return Ok(false);
    }
    let Some(cond) = constant_condition(graph, id) else {
        return Ok(false);
    };
    let attr = if cond { "then_branch" } else { "else_branch" };
    let Some(body) = node.attr(attr).and_then(|a| a.as_graph()).cloned() else {
        return Ok(false);
    };
    let node = node.clone();
    let invalid = |reason: String| PassError::InvalidNode {
        pass: FoldIf::NAME,
        node: node.name.clone(),
        op: node.op_type.clone(),
        reason,
    };
    if body.outputs.len() < node.outputs.len() || !body.declared_inputs().is_empty() {
        return Err(invalid(format!(
            "branch `{}` has {} outputs and {} declared inputs",
            body.name,
            body.outputs.len(),
            body.declared_inputs().len()
        )));
    }
    let captured = node.captured_inputs();
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    for (&inner, outer) in body.inputs.iter().zip(captured) {
        let outer = outer.ok_or_else(|| invalid("a captured input is missing".into()))?;
        map.insert(inner, outer);
    }
    for (inner, v) in body.values() {
        if let Some(t) = &v.constant {
            let name = graph.fresh_value_name(&format!("{}_{}", node.name, v.name));
            map.insert(inner, graph.add_constant(&name, (**t).clone()));
        }
    }
    let order = body.topo_order().map_err(|e| invalid(e.to_string()))?;
    graph.remove_node(id);
    for inner_id in order {
        let n = body.node(inner_id);
        let mut outputs = Vec::with_capacity(n.outputs.len());
        for &o in &n.outputs {
            let v = body.value(o);
            let outer = graph.add_value(
                &format!("{}_{}", node.name, v.name),
                v.dtype,
                v.shape.clone(),
            );
            map.insert(o, outer);
            outputs.push(outer);
        }
        let inputs = n
            .inputs
            .iter()
            .map(|i| i.map(|v| map.get(&v).copied().ok_or(v)).transpose())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|v| {
                invalid(format!(
                    "branch value `{}` has no source",
                    body.value(v).name
                ))
            })?;
        let name = graph.fresh_node_name(&format!("{}_{}", node.name, n.name));
        let added = graph.add_node(&name, &n.op_type, inputs, outputs, n.attrs.clone());
        graph.node_mut(added).domain = n.domain.clone();
    }
    for (&out, &inner) in node.outputs.iter().zip(&body.outputs) {
        let source = *map.get(&inner).ok_or_else(|| {
            invalid(format!(
                "branch output `{}` has no source",
                body.value(inner).name
            ))
        })?;
        let name = graph.fresh_node_name(&format!("{}_out", node.name));
        graph.add_node(
            &name,
            "Identity",
            vec![Some(source)],
            vec![out],
            BTreeMap::new(),
        );
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{Attr, DType, Dim, Subgraph, Tensor};
    use std::sync::Arc;

    /// A branch computing `op(x)` on the captured outer `x`.
    fn branch(op: &str) -> Subgraph {
        let mut b = Graph::new(op, 13);
        let x = b.add_input("x", DType::F32, vec![Dim::Known(1), Dim::Known(4)]);
        let y = b.add_value("y", None, None);
        b.add_node("op", op, vec![Some(x)], vec![y], BTreeMap::new());
        b.outputs.push(y);
        b.captures = 1;
        Subgraph(Arc::new(b))
    }

    /// `out = If(cond) { Relu(x) } else { Neg(x) }`, with `cond` a constant or an input.
    fn graph(cond: Option<bool>) -> Graph {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(1), Dim::Known(4)]);
        let c = match cond {
            Some(v) => g.add_constant(
                "c",
                Tensor::new(vec![], rtq_ir::TensorData::Bool(vec![v])).unwrap(),
            ),
            None => g.add_input("c", DType::Bool, vec![]),
        };
        let out = g.add_value("out", Some(DType::F32), None);
        let attrs = BTreeMap::from([
            ("then_branch".to_string(), Attr::Graph(branch("Relu"))),
            ("else_branch".to_string(), Attr::Graph(branch("Neg"))),
        ]);
        g.add_node("if", "If", vec![Some(c), Some(x)], vec![out], attrs);
        g.outputs.push(out);
        g
    }

    fn ops(g: &Graph) -> Vec<String> {
        let mut v: Vec<String> = g.nodes().map(|(_, n)| n.op_type.clone()).collect();
        v.sort();
        v
    }

    #[test]
    fn a_constant_condition_inlines_the_branch_it_takes() {
        for (cond, op) in [(true, "Relu"), (false, "Neg")] {
            let mut g = graph(Some(cond));
            assert!(FoldIf.run(&mut g).unwrap());
            assert_eq!(ops(&g), vec!["Identity".to_string(), op.to_string()]);
            rtq_ir::verify(&g).unwrap();
            // The output keeps its value (and name); it reads the branch's op on `x`.
            let out = g.outputs[0];
            assert_eq!(g.value(out).name, "out");
            let x = g.value_by_name("x").unwrap();
            let (id, _) = g.nodes().find(|(_, n)| n.op_type == op).unwrap();
            assert_eq!(g.node(id).inputs, vec![Some(x)]);
            assert!(!FoldIf.run(&mut g).unwrap(), "nothing left to fold");
        }
    }

    #[test]
    fn a_runtime_condition_is_left_alone() {
        let mut g = graph(None);
        assert!(!FoldIf.run(&mut g).unwrap());
        assert_eq!(ops(&g), vec!["If".to_string()]);
    }
}
