use crate::dim::format_shape;
use crate::{Graph, ValueId};
use std::fmt::Write;

/// A stable, line-per-item text dump of the graph (for `--dump-ir` and golden tests).
///
/// Nodes appear in topological order; constants are summarised by type and shape.
pub fn dump(graph: &Graph) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "graph {:?} opset {}", graph.name, graph.opset);
    let ty = |v: ValueId| {
        let value = graph.value(v);
        let dtype = value.dtype.map_or("?".to_string(), |d| d.to_string());
        let shape = value
            .shape
            .as_deref()
            .map_or("[?]".to_string(), format_shape);
        format!("{dtype}{shape}")
    };
    for &i in &graph.inputs {
        let _ = writeln!(out, "  input  {:?}: {}", graph.value(i).name, ty(i));
    }
    let order = graph.topo_order().unwrap_or_else(|_| graph.node_ids());
    let mut consts: Vec<ValueId> = Vec::new();
    for &id in &order {
        for v in graph.node(id).inputs.iter().flatten() {
            if graph.value(*v).constant.is_some() && !consts.contains(v) {
                consts.push(*v);
            }
        }
    }
    for &c in &consts {
        let _ = writeln!(out, "  const  {:?}: {}", graph.value(c).name, ty(c));
    }
    for id in order {
        let node = graph.node(id);
        let outs: Vec<String> = node
            .outputs
            .iter()
            .map(|&o| format!("{:?}: {}", graph.value(o).name, ty(o)))
            .collect();
        let ins: Vec<String> = node
            .inputs
            .iter()
            .map(|i| i.map_or("_".to_string(), |v| format!("{:?}", graph.value(v).name)))
            .collect();
        let attrs: Vec<String> = node.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let attrs = if attrs.is_empty() {
            String::new()
        } else {
            format!(" {{{}}}", attrs.join(", "))
        };
        let _ = writeln!(
            out,
            "  {} = {}({}){attrs}  # {:?}",
            outs.join(", "),
            node.op_type,
            ins.join(", "),
            node.name
        );
    }
    for &o in &graph.outputs {
        let _ = writeln!(out, "  output {:?}: {}", graph.value(o).name, ty(o));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attr, DType, Dim, Tensor};
    use std::collections::BTreeMap;

    #[test]
    fn dump_is_stable() {
        let mut g = Graph::new("tiny", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Sym("N".into()), Dim::Known(2)]);
        let w = g.add_constant("w", Tensor::from_f32(vec![2, 2], vec![1.0, 0.0, 0.0, 1.0]));
        let y = g.add_value("y", Some(DType::F32), None);
        let mut attrs = BTreeMap::new();
        attrs.insert("transB".to_string(), Attr::Int(1));
        g.add_node("fc", "Gemm", vec![Some(x), Some(w), None], vec![y], attrs);
        g.outputs.push(y);
        insta::assert_snapshot!(dump(&g), @r#"
        graph "tiny" opset 13
          input  "x": float[N,2]
          const  "w": float[2,2]
          "y": float[?] = Gemm("x", "w", _) {transB=1}  # "fc"
          output "y": float[?]
        "#);
    }
}
