//! Multiply-accumulate counts of the weighted ops (Conv, ConvTranspose, Gemm, MatMul),
//! from the shapes shape inference left: how much of a model's arithmetic a precision
//! decision covers.

use rtq_ir::{Graph, NodeId};

/// Multiply-accumulates one run of `node` performs, where it is a weighted op whose
/// shapes are known (symbolic dimensions count as 1); `None` otherwise.
pub fn node_macs(graph: &Graph, node: NodeId) -> Option<u64> {
    let n = graph.node(node);
    let known = |v| -> Option<Vec<u64>> {
        let shape = graph.value(v).shape.as_ref()?;
        Some(
            shape
                .iter()
                .map(|d| d.known().unwrap_or(1) as u64)
                .collect(),
        )
    };
    let out = known(*n.outputs.first()?)?;
    let out_elems: u64 = out.iter().product();
    let weight = known(n.input(1)?)?;
    let per_output = match n.op_type.as_str() {
        // Every output element reads C_in/group * prod(kernel) inputs: weight [M, C/g, k...].
        "Conv" => weight.iter().skip(1).product(),
        // Every input element feeds M/group * prod(kernel) outputs: weight [C, M/g, k...].
        "ConvTranspose" => {
            let input: u64 = known(n.input(0)?)?.iter().product();
            return Some(input * weight.iter().skip(1).product::<u64>());
        }
        "MatMul" => *known(n.input(0)?)?.last()?,
        "Gemm" => {
            let a = known(n.input(0)?)?;
            *a.get(if n.attr_int("transA", 0) != 0 { 0 } else { 1 })?
        }
        _ => return None,
    };
    Some(out_elems * per_output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{Attr, DType, Dim, Tensor};
    use rtq_test_support::add_op;

    #[test]
    fn counts_conv_depthwise_and_matmul() {
        let mut g = Graph::new("g", 13);
        let dims = |s: &[usize]| s.iter().map(|&d| Dim::Known(d)).collect();
        let x = g.add_input("x", DType::F32, dims(&[1, 4, 8, 8]));
        let w = g.add_constant("w", Tensor::zeros(DType::F32, vec![6, 4, 3, 3]));
        let pads = ("pads", Attr::Ints(vec![1; 4]));
        let c = add_op(
            &mut g,
            "c",
            "Conv",
            &[Some(x), Some(w)],
            std::slice::from_ref(&pads),
        );
        let dw = g.add_constant("dw", Tensor::zeros(DType::F32, vec![6, 1, 3, 3]));
        let d = add_op(
            &mut g,
            "d",
            "Conv",
            &[Some(c), Some(dw)],
            &[pads, ("group", Attr::Int(6))],
        );
        let m = g.add_input(
            "m",
            DType::F32,
            vec![Dim::Sym("batch".into()), Dim::Known(5), Dim::Known(4)],
        );
        let mw = g.add_constant("mw", Tensor::zeros(DType::F32, vec![4, 3]));
        let y = add_op(&mut g, "y", "MatMul", &[Some(m), Some(mw)], &[]);
        g.outputs.extend([d, y]);
        crate::infer_shapes(&mut g).unwrap();
        let id = |name: &str| g.nodes().find(|(_, n)| n.name == name).unwrap().0;
        assert_eq!(node_macs(&g, id("c")), Some(6 * 64 * 4 * 9));
        assert_eq!(node_macs(&g, id("d")), Some(6 * 64 * 9));
        assert_eq!(node_macs(&g, id("y")), Some(5 * 3 * 4));
    }
}
