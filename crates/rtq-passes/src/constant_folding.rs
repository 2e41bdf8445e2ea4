//! [`ConstantFolding`]: evaluates nodes whose inputs are all constants.

use crate::shape_infer::check_declared;
use crate::{Pass, PassError};
use rtq_exec::{eval_node, ExecError};
use rtq_ir::{known_shape, DType, Graph, Node, NodeId, Tensor};

/// Default cap on the bytes a folded result may take: 256 MiB.
pub const DEFAULT_FOLD_SIZE_LIMIT: usize = 256 << 20;

/// Ops never folded: their results are random, or (Q/DQ) they carry quantization
/// structure that deployment back ends such as TensorRT must see as written.
const NEVER_FOLD: &[&str] = &[
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
    "Dropout",
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "If",
    "Loop",
    "Scan",
];

/// Replaces every deterministic node whose inputs are all constants by constants holding
/// its results (computed with [`rtq_exec::eval_node`]); also folds `Shape` and `Size` of
/// values whose shape is fully known.
///
/// Nodes the executor does not support are left in place. Results over the size limit
/// are not folded (when the output's shape is already known, the node is not even
/// evaluated). Results that contradict a declared type or shape are an error.
#[derive(Debug, Clone, Copy)]
pub struct ConstantFolding {
    size_limit: usize,
}

impl Default for ConstantFolding {
    fn default() -> Self {
        ConstantFolding::new(DEFAULT_FOLD_SIZE_LIMIT)
    }
}

impl ConstantFolding {
    /// The pass name.
    pub const NAME: &'static str = "constant-folding";

    /// Folding that leaves results over `size_limit` bytes (all outputs together) unfolded.
    pub fn new(size_limit: usize) -> ConstantFolding {
        ConstantFolding { size_limit }
    }

    /// The size limit in bytes.
    pub fn size_limit(&self) -> usize {
        self.size_limit
    }

    /// Folds node `id` if possible; returns whether it did.
    fn fold(&self, graph: &mut Graph, id: NodeId) -> Result<bool, PassError> {
        let node = graph.node(id);
        if !matches!(node.domain.as_str(), "" | "ai.onnx")
            || node.outputs.is_empty()
            || NEVER_FOLD.contains(&node.op_type.as_str())
        {
            return Ok(false);
        }
        let results = match node.op_type.as_str() {
            // Only the input's shape matters (and a constant's shape is known).
            "Shape" | "Size" => match shape_of(graph, node) {
                Some(t) => vec![t],
                None => return Ok(false),
            },
            _ => {
                let inputs: Option<Vec<Option<&Tensor>>> = node
                    .inputs
                    .iter()
                    .map(|slot| match slot {
                        None => Some(None),
                        Some(v) => graph.constant(*v).map(|t| Some(t.as_ref())),
                    })
                    .collect();
                let Some(inputs) = inputs else {
                    return Ok(false);
                };
                if !rtq_exec::supports_node(node) {
                    return Ok(false);
                }
                if predicted_bytes(graph, node).is_some_and(|b| b > self.size_limit) {
                    return Ok(false);
                }
                match eval_node(node, &inputs) {
                    Ok(results) => results,
                    Err(ExecError::Unsupported { .. } | ExecError::UnsupportedMany(_)) => {
                        return Ok(false)
                    }
                    Err(source) => {
                        return Err(PassError::Eval {
                            pass: Self::NAME,
                            node: node.name.clone(),
                            op: node.op_type.clone(),
                            source: Box::new(source),
                        })
                    }
                }
            }
        };
        if results.len() < node.outputs.len() {
            return Ok(false);
        }
        let bytes: usize = results.iter().map(Tensor::byte_size).sum();
        if bytes > self.size_limit {
            return Ok(false);
        }
        for (&out, t) in node.outputs.iter().zip(&results) {
            let shape: Vec<rtq_ir::Dim> = t.shape().iter().map(|&d| d.into()).collect();
            check_declared(graph, node, out, Some(t.dtype()), Some(&shape), Self::NAME)?;
        }
        let outputs = node.outputs.clone();
        graph.remove_node(id);
        for (out, t) in outputs.into_iter().zip(results) {
            graph.set_constant(out, t);
        }
        Ok(true)
    }
}

impl Pass for ConstantFolding {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        let order = graph.topo_order().map_err(|source| PassError::Ir {
            pass: Self::NAME,
            source,
        })?;
        let mut changed = false;
        for id in order {
            changed |= self.fold(graph, id)?;
        }
        Ok(changed)
    }
}

/// `Shape` (honouring `start`/`end`) or `Size` of the node's input when its shape is
/// fully known.
fn shape_of(graph: &Graph, node: &Node) -> Option<Tensor> {
    let dims = known_shape(graph.value(node.input(0)?).shape.as_deref()?)?;
    let dims: Vec<i64> = dims
        .iter()
        .map(|&d| i64::try_from(d).ok())
        .collect::<Option<_>>()?;
    if node.op_type == "Size" {
        return Tensor::new(vec![], rtq_ir::TensorData::I64(vec![dims.iter().product()])).ok();
    }
    let rank = dims.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
    let start = clamp(node.attr_int("start", 0));
    let end = clamp(node.attr_int("end", rank));
    let picked = dims.get(start..end.max(start))?.to_vec();
    Some(Tensor::from_i64(vec![picked.len()], picked))
}

/// Bytes the node's outputs will take, when their dtypes and shapes are known (or, for
/// `ConstantOfShape`, readable from its constant input), so oversized results are
/// skipped before being computed. Counted as stored ([`Tensor::byte_size`]: INT4 packs
/// two elements per byte), like the results' check after computing.
fn predicted_bytes(graph: &Graph, node: &Node) -> Option<usize> {
    if node.op_type == "ConstantOfShape" {
        let dims = graph.constant(node.input(0)?)?.to_i64_vec();
        let dtype = node
            .attr("value")
            .and_then(|a| a.as_tensor())
            .map_or(DType::F32, Tensor::dtype);
        let mut count: usize = 1;
        for d in dims {
            count = count.checked_mul(usize::try_from(d).ok()?)?;
        }
        return dtype.stored_bytes(count);
    }
    let mut total: usize = 0;
    for &out in &node.outputs {
        let v = graph.value(out);
        let dims = known_shape(v.shape.as_deref()?)?;
        let count = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
        total = total.checked_add(v.dtype?.stored_bytes(count)?)?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{Attr, Dim, TensorData};
    use rtq_test_support::attrs;
    use std::collections::BTreeMap;

    #[test]
    fn folds_shape_and_size_of_known_shapes_only() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input(
            "x",
            DType::F32,
            vec![Dim::Known(2), Dim::Known(3), Dim::Known(5)],
        );
        let n = g.add_input("n", DType::F32, vec![Dim::Sym("N".into()), Dim::Known(3)]);
        let s = g.add_value("s", None, None);
        let tail = g.add_value("tail", None, None);
        let size = g.add_value("size", None, None);
        let sym = g.add_value("sym", None, None);
        g.add_node("shape", "Shape", vec![Some(x)], vec![s], BTreeMap::new());
        g.add_node(
            "shape_tail",
            "Shape",
            vec![Some(x)],
            vec![tail],
            attrs(&[("start", Attr::Int(-2))]),
        );
        g.add_node("size", "Size", vec![Some(x)], vec![size], BTreeMap::new());
        g.add_node(
            "shape_sym",
            "Shape",
            vec![Some(n)],
            vec![sym],
            BTreeMap::new(),
        );
        g.outputs.extend([s, tail, size, sym]);
        assert!(ConstantFolding::default().run(&mut g).unwrap());
        assert_eq!(g.constant(s).unwrap().as_i64().unwrap(), &[2, 3, 5]);
        assert_eq!(g.constant(tail).unwrap().as_i64().unwrap(), &[3, 5]);
        let size_t = g.constant(size).unwrap();
        assert_eq!(
            (size_t.shape(), size_t.as_i64().unwrap()),
            (&[][..], &[30][..])
        );
        assert!(g.constant(sym).is_none());
        assert_eq!(g.node_count(), 1);
        rtq_ir::verify(&g).unwrap();
    }

    #[test]
    fn unsupported_ops_and_non_constant_inputs_are_left_alone() {
        let mut g = Graph::new("g", 13);
        let c = g.add_constant("c", Tensor::from_f32(vec![2], vec![1.0, 2.0]));
        let x = g.add_input("x", DType::F32, vec![Dim::Known(2)]);
        let a = g.add_value("a", None, None);
        let b = g.add_value("b", None, None);
        let mut custom = BTreeMap::new();
        custom.insert("k".to_string(), Attr::Int(1));
        let n = g.add_node("weird", "NoSuchOp", vec![Some(c)], vec![a], custom);
        g.node_mut(n).domain = String::new();
        g.add_node(
            "add",
            "Add",
            vec![Some(a), Some(x)],
            vec![b],
            BTreeMap::new(),
        );
        g.outputs.push(b);
        assert!(!ConstantFolding::default().run(&mut g).unwrap());
        assert_eq!(g.node_count(), 2);
    }

    #[test]
    fn random_and_qdq_nodes_are_never_folded() {
        let mut g = Graph::new("g", 13);
        let r = g.add_value("r", None, None);
        g.add_node(
            "rand",
            "RandomUniform",
            vec![],
            vec![r],
            attrs(&[("shape", Attr::Ints(vec![2]))]),
        );
        let w = g.add_constant("w", Tensor::from_f32(vec![2], vec![0.5, 1.0]));
        let scale = g.add_constant("scale", Tensor::scalar_f32(0.1));
        let q = g.add_value("q", None, None);
        g.add_node(
            "q",
            "QuantizeLinear",
            vec![Some(w), Some(scale)],
            vec![q],
            BTreeMap::new(),
        );
        g.outputs.extend([r, q]);
        assert!(!ConstantFolding::default().run(&mut g).unwrap());
        assert_eq!(g.node_count(), 2);
    }

    #[test]
    fn oversized_results_are_not_evaluated() {
        let mut g = Graph::new("g", 13);
        let shape = g.add_constant("shape", Tensor::from_i64(vec![2], vec![1024, 1024]));
        let y = g.add_value("y", None, None);
        g.add_node(
            "fill",
            "ConstantOfShape",
            vec![Some(shape)],
            vec![y],
            attrs(&[("value", Attr::Tensor(Tensor::from_f32(vec![1], vec![1.0])))]),
        );
        g.outputs.push(y);
        // 4 MiB of f32 over a 1 MiB limit.
        assert!(!ConstantFolding::new(1 << 20).run(&mut g).unwrap());
        assert_eq!(g.node_count(), 1);
        let predicted = predicted_bytes(&g, g.node(g.node_ids()[0]));
        assert_eq!(predicted, Some(4 << 20));
        // Known output facts predict the size of any op.
        let mut g = Graph::new("g", 13);
        let a = g.add_constant("a", Tensor::from_f32(vec![2], vec![1.0, 2.0]));
        let y = g.add_value(
            "y",
            Some(DType::F64),
            Some(vec![Dim::Known(3), Dim::Known(4)]),
        );
        let n = g.add_node("e", "Expand", vec![Some(a)], vec![y], BTreeMap::new());
        assert_eq!(predicted_bytes(&g, g.node(n)), Some(96));
        // INT4 results are counted packed, two per byte, as `byte_size` counts them.
        g.value_mut(y).dtype = Some(DType::I4);
        assert_eq!(predicted_bytes(&g, g.node(n)), Some(6));
        let _ = TensorData::Bool(vec![]);
    }

    // Tests below need the real executor; they fail while rtq_exec::eval_node is a stub.

    #[test]
    fn folds_constant_of_shape_chains_into_constants() {
        // The onnx light models build weights as ConstantOfShape(shape) -> Conv.
        let mut g = Graph::new("g", 13);
        let x = g.add_input(
            "x",
            DType::F32,
            vec![Dim::Known(1), Dim::Known(2), Dim::Known(3), Dim::Known(3)],
        );
        let shape = g.add_constant("w__SHAPE", Tensor::from_i64(vec![4], vec![4, 2, 1, 1]));
        let w = g.add_value("w", None, None);
        g.add_node(
            "fill",
            "ConstantOfShape",
            vec![Some(shape)],
            vec![w],
            attrs(&[("value", Attr::Tensor(Tensor::from_f32(vec![1], vec![0.02])))]),
        );
        let half = g.add_constant("half", Tensor::scalar_f32(0.5));
        let w2 = g.add_value("w2", None, None);
        g.add_node(
            "scale",
            "Mul",
            vec![Some(w), Some(half)],
            vec![w2],
            BTreeMap::new(),
        );
        let y = g.add_value("y", None, None);
        let conv = g.add_node(
            "conv",
            "Conv",
            vec![Some(x), Some(w2)],
            vec![y],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        assert!(ConstantFolding::default().run(&mut g).unwrap());
        rtq_ir::verify(&g).unwrap();
        assert_eq!(g.node_ids(), vec![conv]);
        let folded = g.constant(w2).unwrap();
        assert_eq!(folded.shape(), &[4, 2, 1, 1]);
        assert!(folded.to_f32_vec().iter().all(|&v| (v - 0.01).abs() < 1e-7));
        assert_eq!(g.value(w2).dtype, Some(DType::F32));
        assert!(!ConstantFolding::default().run(&mut g).unwrap());
    }

    #[test]
    fn folded_graph_output_becomes_a_constant_output() {
        let mut g = Graph::new("g", 13);
        let a = g.add_constant("a", Tensor::from_f32(vec![2], vec![1.0, 2.0]));
        let b = g.add_constant("b", Tensor::from_f32(vec![2], vec![10.0, 20.0]));
        let y = g.add_value("y", Some(DType::F32), Some(vec![Dim::Known(2)]));
        g.add_node(
            "add",
            "Add",
            vec![Some(a), Some(b)],
            vec![y],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        assert!(ConstantFolding::default().run(&mut g).unwrap());
        assert_eq!(g.node_count(), 0);
        assert_eq!(g.constant(y).unwrap().to_f32_vec(), vec![11.0, 22.0]);
        assert_eq!(g.value(y).name, "y");
        rtq_ir::verify(&g).unwrap();
    }

    #[test]
    fn folded_result_contradicting_declared_shape_is_an_error() {
        let mut g = Graph::new("g", 13);
        let a = g.add_constant("a", Tensor::from_f32(vec![2], vec![1.0, 2.0]));
        let y = g.add_value("y", Some(DType::F32), Some(vec![Dim::Known(3)]));
        g.add_node("neg", "Neg", vec![Some(a)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        let err = ConstantFolding::default()
            .run(&mut g)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("neg") && err.contains("[3]") && err.contains("[2]"),
            "{err}"
        );
    }
}
