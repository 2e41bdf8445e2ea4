//! Quantization moved ahead of data movement, at load: a per-tensor QuantizeLinear to
//! 8 bits of a Concat or of a nearest-mode Resize (and so on down: a Concat of resized
//! values, as feature-pyramid necks join their levels) becomes one QuantizeLinear per
//! value they read, and the Concat and Resize move 8-bit values: a quarter of the
//! memory traffic, fewer values to quantize where a Resize upsamples, and each new
//! QuantizeLinear may join the elementwise chain computing its input
//! ([`crate::fuse_chains`]). Concat and nearest-mode Resize only copy values and
//! QuantizeLinear maps each value on its own, so the result is bit for bit the graph's.
//!
//! The rewritten graph is executed, never written.

use crate::fuse::Readers;
use crate::registry::is_default_domain;
use rtq_ir::{DType, Graph, Node, NodeId, TensorData, ValueId};

/// Moves every per-tensor 8-bit QuantizeLinear of `graph` (not inside control-flow
/// bodies) ahead of the Concat and nearest-mode Resize ops computing its input, where
/// nothing else reads their outputs; returns how many were moved.
pub fn hoist_quantize(graph: &mut Graph) -> usize {
    let readers = graph.consumers();
    let mut moved = 0;
    for id in graph.node_ids() {
        let Some(quantized) = per_tensor_8bit(graph, id) else {
            continue;
        };
        let q = graph.node(id);
        let (Some(x), Some(&out)) = (q.input(0), q.outputs.first()) else {
            continue;
        };
        let Some(top) = mover(graph, &readers, x) else {
            continue;
        };
        let q = graph.remove_node(id).expect("a live node");
        quantize_inputs(graph, &readers, top, &q, quantized);
        graph.node_mut(top).outputs[0] = out;
        graph.value_mut(out).producer = Some((top, 0));
        moved += 1;
    }
    moved
}

/// The 8-bit type of QuantizeLinear node `id` of float32 to a constant scalar float32
/// scale and 8-bit zero point, or `None` when it is not one.
pub(crate) fn per_tensor_8bit(graph: &Graph, id: NodeId) -> Option<DType> {
    let node = graph.node(id);
    if !is_default_domain(&node.domain)
        || node.op_type != "QuantizeLinear"
        || node.outputs.len() != 1
    {
        return None;
    }
    if node.attr_int("block_size", 0) != 0 || node.attr_int("output_dtype", 0) != 0 {
        return None;
    }
    let scale = graph.constant(node.input(1)?)?;
    if scale.len() != 1 || scale.dtype() != DType::F32 {
        return None;
    }
    if graph.value(node.input(0)?).dtype != Some(DType::F32) {
        return None;
    }
    match node.input(2) {
        None => Some(DType::U8),
        Some(z) => match graph.constant(z)?.data() {
            TensorData::U8(v) if v.len() == 1 => Some(DType::U8),
            TensorData::I8(v) if v.len() == 1 => Some(DType::I8),
            _ => None,
        },
    }
}

/// The Concat or nearest-mode Resize producing float32 `v`, if nothing but one node
/// reads `v` and it is no graph output.
fn mover(graph: &Graph, readers: &Readers, v: ValueId) -> Option<NodeId> {
    let (id, _) = graph.value(v).producer?;
    let node = graph.node(id);
    let default_domain = is_default_domain(&node.domain);
    let moves = match node.op_type.as_str() {
        "Concat" => true,
        "Resize" => {
            node.attr_str("mode", "nearest") == "nearest"
                && node.attr_str("coordinate_transformation_mode", "half_pixel")
                    != "tf_crop_and_resize"
        }
        _ => false,
    };
    let sole = readers[v.index()].len() == 1 && !graph.is_graph_output(v);
    let float = graph.value(v).dtype == Some(DType::F32);
    (default_domain && moves && sole && float && node.outputs.len() == 1).then_some(id)
}

/// Makes node `id` (a Concat or Resize) read its data quantized as `q` does, to type
/// `quantized`.
fn quantize_inputs(graph: &mut Graph, readers: &Readers, id: NodeId, q: &Node, quantized: DType) {
    let slots = match graph.node(id).op_type.as_str() {
        "Resize" => 1,
        _ => graph.node(id).inputs.len(),
    };
    for slot in 0..slots {
        let Some(v) = graph.node(id).input(slot) else {
            continue;
        };
        let data = quantized_value(graph, readers, v, q, quantized);
        graph.node_mut(id).inputs[slot] = Some(data);
    }
}

/// `v` quantized as `q` does: `v` itself when a Concat or Resize computes it (which
/// then moves quantized values), else the output of a new QuantizeLinear of `v`.
fn quantized_value(
    graph: &mut Graph,
    readers: &Readers,
    v: ValueId,
    q: &Node,
    quantized: DType,
) -> ValueId {
    if let Some(inner) = mover(graph, readers, v) {
        quantize_inputs(graph, readers, inner, q, quantized);
        graph.value_mut(v).dtype = Some(quantized);
        return v;
    }
    let name = graph.fresh_value_name(&format!("{}_quantized", graph.value(v).name));
    let shape = graph.value(v).shape.clone();
    let out = graph.add_value(&name, Some(quantized), shape);
    let node_name = graph.fresh_node_name(&q.name);
    let mut inputs = q.inputs.clone();
    inputs[0] = Some(v);
    graph.add_node(
        &node_name,
        "QuantizeLinear",
        inputs,
        vec![out],
        q.attrs.clone(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Plan;
    use rtq_ir::{Attr, Dim, Tensor};
    use std::collections::BTreeMap;

    /// `Q(Concat(Resize(a), Resize(b), c))` along channels: `a` [1,2,2,3] upsampled 2x
    /// (`mode`), `b` [1,1,1,6] upsampled 4x in height (floor, asymmetric), `c`
    /// [1,3,4,6]; QuantizeLinear by 0.05 to `zero`'s type.
    fn pyramid(mode: &str, zero: Tensor) -> Graph {
        let mut g = Graph::new("g", 13);
        let dims = |s: &[usize]| s.iter().map(|&d| Dim::Known(d)).collect::<Vec<_>>();
        let a = g.add_input("a", DType::F32, dims(&[1, 2, 2, 3]));
        let b = g.add_input("b", DType::F32, dims(&[1, 1, 1, 6]));
        let c = g.add_input("c", DType::F32, dims(&[1, 3, 4, 6]));
        let resize = |g: &mut Graph, x, name: &str, scales: Vec<f32>, channels| {
            let s = g.add_constant(&format!("{name}_scales"), Tensor::from_f32(vec![4], scales));
            let out = g.add_value(name, Some(DType::F32), Some(dims(&[1, channels, 4, 6])));
            let mut attrs = BTreeMap::new();
            attrs.insert("mode".into(), Attr::String(mode.into()));
            attrs.insert(
                "coordinate_transformation_mode".into(),
                Attr::String("asymmetric".into()),
            );
            attrs.insert("nearest_mode".into(), Attr::String("floor".into()));
            g.add_node(
                name,
                "Resize",
                vec![Some(x), None, Some(s)],
                vec![out],
                attrs,
            );
            out
        };
        let ra = resize(&mut g, a, "ra", vec![1.0, 1.0, 2.0, 2.0], 2);
        let rb = resize(&mut g, b, "rb", vec![1.0, 1.0, 4.0, 1.0], 1);
        let cat = g.add_value("cat", Some(DType::F32), Some(dims(&[1, 6, 4, 6])));
        let mut attrs = BTreeMap::new();
        attrs.insert("axis".into(), Attr::Int(1));
        let inputs = vec![Some(ra), Some(rb), Some(c)];
        g.add_node("cat", "Concat", inputs, vec![cat], attrs);
        let s = g.add_constant("s", Tensor::from_f32(vec![], vec![0.05]));
        let dtype = zero.dtype();
        let z = g.add_constant("z", zero);
        let q = g.add_value("q", Some(dtype), Some(dims(&[1, 6, 4, 6])));
        let inputs = vec![Some(cat), Some(s), Some(z)];
        g.add_node("q", "QuantizeLinear", inputs, vec![q], BTreeMap::new());
        g.outputs.push(q);
        g
    }

    /// The output's bytes on inputs with NaN, infinities, ties and out-of-range values.
    fn run(g: &Graph) -> Vec<u8> {
        let input = |name: &str, shape: Vec<usize>, phase: f32| {
            let n = shape.iter().product();
            let v = (0..n)
                .map(|i| match i % 7 {
                    0 => f32::NAN,
                    1 => f32::NEG_INFINITY,
                    2 => 0.025, // a tie
                    _ => (i as f32 * 0.41 + phase).sin() * 9.0,
                })
                .collect();
            (name.to_string(), Tensor::from_f32(shape, v))
        };
        let inputs = [
            input("a", vec![1, 2, 2, 3], 0.0),
            input("b", vec![1, 1, 1, 6], 0.7),
            input("c", vec![1, 3, 4, 6], 1.9),
        ];
        match Plan::new(g).unwrap().run(&inputs).unwrap()[0].data() {
            TensorData::U8(v) => v.clone(),
            TensorData::I8(v) => v.iter().map(|&x| x as u8).collect(),
            other => panic!("{}", other.dtype()),
        }
    }

    #[test]
    fn quantization_moves_ahead_of_concat_and_nearest_resize() {
        for zero in [
            Tensor::new(vec![], TensorData::U8(vec![128])).unwrap(),
            Tensor::new(vec![], TensorData::I8(vec![-3])).unwrap(),
        ] {
            let dtype = zero.dtype();
            let mut g = pyramid("nearest", zero);
            let before = run(&g);
            assert_eq!(hoist_quantize(&mut g), 1);
            // One QuantizeLinear per input; the Resize ops and the Concat move 8 bits.
            let ops = |op: &str| g.nodes().filter(|(_, n)| n.op_type == op).count();
            assert_eq!(ops("QuantizeLinear"), 3);
            for name in ["ra", "rb"] {
                assert_eq!(g.value(g.value_by_name(name).unwrap()).dtype, Some(dtype));
            }
            assert_eq!(before, run(&g));
        }
    }

    #[test]
    fn other_resizes_and_shared_values_stay() {
        let zero = || Tensor::new(vec![], TensorData::U8(vec![128])).unwrap();
        // A linear Resize does not commute with QuantizeLinear: the Concat alone moves.
        let mut g = pyramid("linear", zero());
        let before = run(&g);
        assert_eq!(hoist_quantize(&mut g), 1);
        let ra = g.value_by_name("ra").unwrap();
        assert_eq!(g.value(ra).dtype, Some(DType::F32));
        assert_eq!(before, run(&g));
        // A Concat output read elsewhere too stays float.
        let mut g = pyramid("nearest", zero());
        let cat = g.value_by_name("cat").unwrap();
        g.outputs.push(cat);
        assert_eq!(hoist_quantize(&mut g), 0);
    }
}
