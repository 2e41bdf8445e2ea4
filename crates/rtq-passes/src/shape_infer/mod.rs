//! [`InferShapes`]: fills in the element type and shape of every node output.
//!
//! Rules per op live in the sibling files (see [`rules`]); this file walks the graph in
//! topological order and merges inferred facts with declared ones. Nothing is ever
//! guessed: a dimension that cannot be proven is the unknown `?`, a shape that cannot be
//! proven is left `None`. A declared fact that contradicts an inferred one is an error
//! naming the node and both facts.

mod control_flow;
mod conv_pool;
mod ctx;
mod dims;
mod elementwise;
mod generators;
mod indexing;
mod linalg;
mod normalization;
mod quant;
mod recurrent;
mod reduce;
mod reshape;
mod resize;
mod rules;
mod slice_concat;
mod symbolic;
#[cfg(test)]
mod testing;

use crate::util::describe_value;
use crate::{Conflict, Pass, PassError};
use ctx::NodeCtx;
use dims::is_unknown;
use rtq_ir::{format_shape, DType, Dim, Graph, Node, Shape, ValueId};
use symbolic::SymTable;

pub use rules::shape_rule_ops;

/// Name of the shape inference pass.
pub(crate) const PASS: &str = "infer-shapes";

/// Shape and type inference as a pass (see [`infer_shapes`]); reports a change when any
/// fact was added or refined.
#[derive(Debug, Clone, Copy, Default)]
pub struct InferShapes;

impl InferShapes {
    /// The pass name.
    pub const NAME: &'static str = PASS;
}

impl Pass for InferShapes {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&mut self, graph: &mut Graph) -> Result<bool, PassError> {
        infer(graph)
    }
}

/// Fills [`rtq_ir::Value::dtype`] and [`rtq_ir::Value::shape`] of node outputs from
/// the facts about their inputs (graph input declarations and constants), per op rule.
///
/// Symbolic dimensions propagate (`N` stays `N`), as do the symbolic values of small
/// integer tensors computed from shapes (`Shape -> Gather -> Concat -> Reshape`).
/// Declared facts are refined where inference knows more, except on graph outputs,
/// whose declared dimensions are kept when consistent. Ops without a rule, and ops of
/// other domains, keep whatever was declared.
pub fn infer_shapes(graph: &mut Graph) -> Result<(), PassError> {
    infer(graph).map(|_| ())
}

type Update = (ValueId, Option<DType>, Option<Shape>);

fn infer(graph: &mut Graph) -> Result<bool, PassError> {
    let order = graph
        .topo_order()
        .map_err(|source| PassError::Ir { pass: PASS, source })?;
    let mut syms = SymTable::new();
    let mut changed = false;
    for id in order {
        let (updates, tracked): (Vec<Update>, _) = {
            let node = graph.node(id);
            if !matches!(node.domain.as_str(), "" | "ai.onnx") {
                continue;
            }
            let Some(rule) = rules::rule_for(&node.op_type) else {
                continue;
            };
            let ctx = NodeCtx {
                graph,
                node,
                syms: &syms,
            };
            let facts = rule(&ctx)?;
            let tracked = node
                .outputs
                .first()
                .and_then(|&out| Some((out, symbolic::propagate(&ctx)?)));
            let mut updates = Vec::with_capacity(facts.len());
            for (&out, fact) in node.outputs.iter().zip(facts) {
                let (dtype, shape) =
                    merge(graph, node, out, fact.dtype, fact.shape.as_deref(), PASS)?;
                updates.push((out, dtype, shape));
            }
            (updates, tracked)
        };
        for (out, dtype, shape) in updates {
            let v = graph.value_mut(out);
            if v.dtype != dtype || v.shape != shape {
                v.dtype = dtype;
                v.shape = shape;
                changed = true;
            }
        }
        if let Some((out, values)) = tracked {
            syms.insert(out, values);
        }
    }
    Ok(changed)
}

/// Checks that a type and shape computed for output `out` of `node` agree with what is
/// declared for it; an error (attributed to `pass`) names the node and both facts.
pub(crate) fn check_declared(
    graph: &Graph,
    node: &Node,
    out: ValueId,
    dtype: Option<DType>,
    shape: Option<&[Dim]>,
    pass: &'static str,
) -> Result<(), PassError> {
    merge(graph, node, out, dtype, shape, pass).map(|_| ())
}

/// Combines the declared facts of `out` with inferred ones.
fn merge(
    graph: &Graph,
    node: &Node,
    out: ValueId,
    dtype: Option<DType>,
    shape: Option<&[Dim]>,
    pass: &'static str,
) -> Result<(Option<DType>, Option<Shape>), PassError> {
    let v = graph.value(out);
    let conflict = |reason: &str| {
        PassError::Conflict(Box::new(Conflict {
            pass,
            node: node.name.clone(),
            op: node.op_type.clone(),
            reason: reason.to_string(),
            first: format!("declared {}", describe_value(graph, out)),
            second: format!(
                "inferred {}{}",
                dtype.or(v.dtype).map_or("?".to_string(), |d| d.to_string()),
                shape.map_or("[?]".to_string(), format_shape)
            ),
        }))
    };
    let new_dtype = match (v.dtype, dtype) {
        (Some(a), Some(b)) if a != b => {
            return Err(conflict("declared type differs from the inferred one"))
        }
        (a, b) => a.or(b),
    };
    let new_shape = match (&v.shape, shape) {
        (None, s) => s.map(<[Dim]>::to_vec),
        (Some(d), None) => Some(d.clone()),
        (Some(declared), Some(inferred)) => {
            if declared.len() != inferred.len() {
                return Err(conflict("declared rank differs from the inferred one"));
            }
            let keep_symbols = graph.is_graph_output(out);
            let mut merged = Vec::with_capacity(declared.len());
            for (d, i) in declared.iter().zip(inferred) {
                merged.push(match (d, i) {
                    (Dim::Known(a), Dim::Known(b)) if a != b => {
                        return Err(conflict("declared shape differs from the inferred one"))
                    }
                    _ if is_unknown(d) => i.clone(),
                    (Dim::Sym(_), Dim::Known(_)) if !keep_symbols => i.clone(),
                    _ => d.clone(),
                });
            }
            Some(merged)
        }
    };
    Ok((new_dtype, new_shape))
}

#[cfg(test)]
mod tests {
    use super::testing::{s, sym, Case};
    use super::*;
    use rtq_ir::{Attr, Tensor};
    use std::collections::BTreeMap;

    #[test]
    fn declared_output_shape_is_kept_when_consistent_and_checked_otherwise() {
        let mut g = Case::new("Relu")
            .input(DType::F32, vec![s(1), s(3)])
            .build();
        let out = g.outputs[0];
        g.value_mut(out).shape = Some(vec![sym("batch"), s(3)]);
        infer_shapes(&mut g).unwrap();
        // A graph output keeps its declared symbol.
        assert_eq!(g.value(out).shape, Some(vec![sym("batch"), s(3)]));

        let mut g = Case::new("Relu")
            .input(DType::F32, vec![s(1), s(3)])
            .build();
        let out = g.outputs[0];
        g.value_mut(out).shape = Some(vec![s(1), s(4)]);
        let err = infer_shapes(&mut g).unwrap_err().to_string();
        assert!(
            err.contains("node `n`") && err.contains("out0") && err.contains("[1,4]"),
            "{err}"
        );
        assert!(err.contains("float[1,3]"), "{err}");

        let mut g = Case::new("Relu")
            .input(DType::F32, vec![s(1), s(3)])
            .build();
        let out = g.outputs[0];
        g.value_mut(out).dtype = Some(DType::I64);
        let err = infer_shapes(&mut g).unwrap_err().to_string();
        assert!(err.contains("type"), "{err}");
    }

    #[test]
    fn internal_symbols_are_refined_and_reruns_report_no_change() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![s(2), s(3)]);
        let a = g.add_value("a", None, Some(vec![sym("unk__0"), sym("?")]));
        let y = g.add_value("y", None, None);
        g.add_node("r", "Relu", vec![Some(x)], vec![a], BTreeMap::new());
        g.add_node("t", "Transpose", vec![Some(a)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        let mut pass = InferShapes;
        assert!(pass.run(&mut g).unwrap());
        assert_eq!(g.value(a).shape, Some(vec![s(2), s(3)]));
        assert_eq!(g.value(y).shape, Some(vec![s(3), s(2)]));
        assert_eq!(g.value(y).dtype, Some(DType::F32));
        assert!(!pass.run(&mut g).unwrap());
    }

    #[test]
    fn symbolic_shape_values_flow_into_reshape() {
        // x[N, 4, 8] -> Shape -> Gather(0) -> Unsqueeze -> Concat([-1... ]) -> Reshape
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![sym("N"), s(4), s(8)]);
        let shape = g.add_value("shape", None, None);
        g.add_node(
            "shape",
            "Shape",
            vec![Some(x)],
            vec![shape],
            BTreeMap::new(),
        );
        let zero = g.add_constant("zero", Tensor::from_i64(vec![], vec![0]));
        let n = g.add_value("n", None, None);
        g.add_node(
            "gather",
            "Gather",
            vec![Some(shape), Some(zero)],
            vec![n],
            BTreeMap::new(),
        );
        let axes = g.add_constant("axes", Tensor::from_i64(vec![1], vec![0]));
        let n1 = g.add_value("n1", None, None);
        g.add_node(
            "unsq",
            "Unsqueeze",
            vec![Some(n), Some(axes)],
            vec![n1],
            BTreeMap::new(),
        );
        let minus_one = g.add_constant("m1", Tensor::from_i64(vec![1], vec![-1]));
        let target = g.add_value("target", None, None);
        let mut attrs = BTreeMap::new();
        attrs.insert("axis".to_string(), Attr::Int(0));
        g.add_node(
            "cat",
            "Concat",
            vec![Some(n1), Some(minus_one)],
            vec![target],
            attrs,
        );
        let y = g.add_value("y", None, None);
        g.add_node(
            "reshape",
            "Reshape",
            vec![Some(x), Some(target)],
            vec![y],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        infer_shapes(&mut g).unwrap();
        assert_eq!(g.value(shape).shape, Some(vec![s(3)]));
        assert_eq!(g.value(n).shape, Some(vec![]));
        assert_eq!(g.value(target).shape, Some(vec![s(2)]));
        assert_eq!(g.value(y).shape, Some(vec![sym("N"), s(32)]));
    }

    #[test]
    fn constant_nodes_feed_shape_values() {
        // Reshape's target comes from a Constant node (folding disabled): still exact.
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![sym("N"), s(2), s(3)]);
        let target = g.add_value("target", None, None);
        let mut attrs = BTreeMap::new();
        attrs.insert(
            "value".to_string(),
            Attr::Tensor(Tensor::from_i64(vec![2], vec![0, -1])),
        );
        g.add_node("c", "Constant", vec![], vec![target], attrs);
        let y = g.add_value("y", None, None);
        g.add_node(
            "r",
            "Reshape",
            vec![Some(x), Some(target)],
            vec![y],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        infer_shapes(&mut g).unwrap();
        assert_eq!(g.value(target).shape, Some(vec![s(2)]));
        assert_eq!(g.value(y).shape, Some(vec![sym("N"), s(6)]));
    }

    #[test]
    fn unknown_ops_and_foreign_domains_are_skipped() {
        let mut g = Case::new("SomeCustomOp")
            .input(DType::F32, vec![s(2)])
            .build();
        infer_shapes(&mut g).unwrap();
        assert_eq!(g.value(g.outputs[0]).shape, None);
        let mut g = Case::new("Relu").input(DType::F32, vec![s(2)]).build();
        let id = g.node_ids()[0];
        g.node_mut(id).domain = "com.example".into();
        infer_shapes(&mut g).unwrap();
        assert_eq!(g.value(g.outputs[0]).shape, None);
    }
}
