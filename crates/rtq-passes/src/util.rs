//! Small helpers shared by the passes: float views of constant tensors and
//! questions about how values are read.

use rtq_ir::{DType, Graph, NodeId, Tensor, TensorData, ValueId};

/// The elements of a floating-point tensor widened to f64; `None` for other types.
pub(crate) fn float_values(t: &Tensor) -> Option<Vec<f64>> {
    if !t.dtype().is_float() {
        return None;
    }
    Some(t.data().to_f64_vec())
}

/// A tensor of `dtype` and `shape` holding `values` (rounded to `dtype`).
pub(crate) fn float_tensor(dtype: DType, shape: Vec<usize>, values: Vec<f64>) -> Option<Tensor> {
    Tensor::new(shape, TensorData::F64(values).cast(dtype)).ok()
}

/// Whether `value` is read by exactly one node input slot, that of `reader`, and is
/// not a graph output: the condition for rewriting its producer and reader as one.
pub(crate) fn only_read_by(
    graph: &Graph,
    consumers: &[Vec<(NodeId, usize)>],
    value: ValueId,
    reader: NodeId,
) -> bool {
    !graph.is_graph_output(value)
        && consumers
            .get(value.index())
            .is_some_and(|uses| uses.len() == 1 && uses[0].0 == reader)
}

/// Whether `value` is neither read by any node nor a graph output.
pub(crate) fn is_unused(graph: &Graph, consumers: &[Vec<(NodeId, usize)>], value: ValueId) -> bool {
    !graph.is_graph_output(value) && consumers.get(value.index()).is_none_or(Vec::is_empty)
}

/// A fresh value name for a rewritten copy of constant `name` (`w` -> `w_folded`,
/// and `w_folded` stays the base for further rewrites so names do not grow).
pub(crate) fn folded_name(graph: &Graph, name: &str) -> String {
    let base = match name.rfind("_folded") {
        Some(pos)
            if name[pos + "_folded".len()..]
                .trim_start_matches('_')
                .chars()
                .all(|c| c.is_ascii_digit()) =>
        {
            &name[..pos]
        }
        _ => name,
    };
    graph.fresh_value_name(&format!("{base}_folded"))
}

/// Copies the dtype and shape known for `from` onto `into` where `into` lacks them
/// (used when `into` takes the place of `from` after a node is bypassed).
pub(crate) fn absorb_facts(graph: &mut Graph, from: ValueId, into: ValueId) {
    let (dtype, shape) = {
        let v = graph.value(from);
        (v.dtype, v.shape.clone())
    };
    let v = graph.value_mut(into);
    if v.constant.is_some() {
        return;
    }
    if v.dtype.is_none() {
        v.dtype = dtype;
    }
    if v.shape.is_none() {
        v.shape = shape;
    }
}

/// Describes value `id` as ``name: type[shape]`` for error messages.
pub(crate) fn describe_value(graph: &Graph, id: ValueId) -> String {
    let v = graph.value(id);
    format!(
        "`{}`: {}{}",
        v.name,
        v.dtype.map_or("?".to_string(), |d| d.to_string()),
        v.shape
            .as_deref()
            .map_or("[?]".to_string(), rtq_ir::format_shape)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use std::collections::BTreeMap;

    #[test]
    fn float_round_trip_keeps_dtype() {
        let t = Tensor::new(vec![2], TensorData::F16(vec![f16::from_f32(1.5), f16::ONE])).unwrap();
        let v = float_values(&t).unwrap();
        assert_eq!(v, vec![1.5, 1.0]);
        let back = float_tensor(DType::F16, vec![2], v.iter().map(|x| x * 2.0).collect()).unwrap();
        assert_eq!(back.dtype(), DType::F16);
        assert_eq!(back.to_f32_vec(), vec![3.0, 2.0]);
        assert!(float_values(&Tensor::from_i64(vec![1], vec![3])).is_none());
        assert!(float_tensor(DType::F32, vec![3], vec![1.0]).is_none());
    }

    #[test]
    fn reader_queries() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        let a = g.add_value("a", None, None);
        let b = g.add_value("b", None, None);
        let c = g.add_value("c", None, None);
        g.add_node("n0", "Relu", vec![Some(x)], vec![a], BTreeMap::new());
        let n1 = g.add_node("n1", "Relu", vec![Some(a)], vec![b], BTreeMap::new());
        let n2 = g.add_node(
            "n2",
            "Add",
            vec![Some(b), Some(b)],
            vec![c],
            BTreeMap::new(),
        );
        g.outputs.push(c);
        let uses = g.consumers();
        assert!(only_read_by(&g, &uses, a, n1));
        assert!(!only_read_by(&g, &uses, a, n2));
        // Read twice by the same node: not a single use.
        assert!(!only_read_by(&g, &uses, b, n2));
        // Graph outputs are never "only read by" a node.
        assert!(!only_read_by(&g, &uses, c, n2));
        assert!(!is_unused(&g, &uses, c));
        let d = g.add_value("d", None, None);
        assert!(is_unused(&g, &g.consumers(), d));
    }

    #[test]
    fn folded_names_do_not_grow() {
        let mut g = Graph::new("g", 13);
        assert_eq!(folded_name(&g, "w"), "w_folded");
        g.add_value("w_folded", None, None);
        assert_eq!(folded_name(&g, "w"), "w_folded_1");
        assert_eq!(folded_name(&g, "w_folded"), "w_folded_1");
        assert_eq!(folded_name(&g, "w_folded_1"), "w_folded_1");
        assert_eq!(folded_name(&g, "my_folded_net"), "my_folded_net_folded");
    }
}
