//! Lowers a decoded `ModelProto` into an rtq [`Graph`].

use crate::canonicalize::{add_canonical, NodeDraft};
use crate::registry::{lookup, SUPPORTED_OPSETS};
use crate::tensor::tensor_from_proto;
use crate::types::value_info_type;
use crate::FrontendError;
use rtq_ir::{Attr, Graph, Subgraph, ValueId};
use rtq_onnx_proto::{AttributeProto, GraphProto, ModelProto, NodeProto};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How to import a model.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Directory external data paths are relative to (the model file's directory).
    pub base_dir: Option<PathBuf>,
}

impl ImportOptions {
    /// Options resolving external data under `dir`.
    pub fn with_base_dir(dir: &Path) -> ImportOptions {
        ImportOptions {
            base_dir: Some(dir.to_path_buf()),
        }
    }
}

/// The default-domain opset a model imports.
fn default_opset(model: &ModelProto) -> Result<i64, FrontendError> {
    let opset = model
        .opset_import
        .iter()
        .find(|o| matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")))
        .and_then(|o| o.version)
        .ok_or_else(|| {
            FrontendError::BadGraph("the model imports no default-domain opset".into())
        })?;
    if !SUPPORTED_OPSETS.contains(&opset) {
        return Err(FrontendError::UnsupportedOpset(
            opset,
            format!("{}..={}", SUPPORTED_OPSETS.start(), SUPPORTED_OPSETS.end()),
        ));
    }
    Ok(opset)
}

/// Lowers `model` into rtq's IR: initializers become constants, `Constant` nodes are
/// folded into constants, every other node goes through the op registry and is
/// canonicalised to opset-13 form. Unknown ops are collected and reported together.
pub fn import_model(model: &ModelProto, opts: &ImportOptions) -> Result<Graph, FrontendError> {
    let opset = default_opset(model)?;
    let gp = model
        .graph
        .as_ref()
        .ok_or_else(|| FrontendError::BadGraph("no graph".into()))?;
    let mut graph = Graph::new(gp.name.clone().unwrap_or_else(|| "main".into()), opset);
    graph.producer = model.producer_name.clone().unwrap_or_default();
    graph.metadata = model
        .metadata_props
        .iter()
        .map(|e| {
            (
                e.key.clone().unwrap_or_default(),
                e.value.clone().unwrap_or_default(),
            )
        })
        .collect();
    graph.extra_opsets = model
        .opset_import
        .iter()
        .filter(|o| !matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")))
        .map(|o| (o.domain.clone().unwrap_or_default(), o.version.unwrap_or(1)))
        .collect();
    import_graph(gp, &mut graph, opset, opts, None)?;
    Ok(graph)
}

/// The values of the graphs enclosing a control-flow body, which the body may read by
/// name.
struct Scope<'a> {
    graph: &'a Graph,
    by_name: &'a HashMap<String, ValueId>,
    parent: Option<&'a Scope<'a>>,
}

impl Scope<'_> {
    /// The outer value `name`, if one is visible.
    fn value(&self, name: &str) -> Option<&rtq_ir::Value> {
        match self.by_name.get(name) {
            Some(&id) => Some(self.graph.value(id)),
            None => self.parent?.value(name),
        }
    }
}

/// Lowers `gp` into `graph` (empty but for its model-level facts). A control-flow body
/// (`scope` set) may read values of its enclosing graphs: each becomes a trailing input
/// of the body ([`Graph::captures`] of them), in the order first read.
fn import_graph(
    gp: &GraphProto,
    graph: &mut Graph,
    opset: i64,
    opts: &ImportOptions,
    scope: Option<&Scope>,
) -> Result<(), FrontendError> {
    if !gp.sparse_initializer.is_empty() {
        return Err(FrontendError::BadGraph(
            "sparse initializers are not supported".into(),
        ));
    }
    let unsupported = unsupported_nodes(&gp.node, opset);
    if !unsupported.is_empty() {
        return Err(FrontendError::UnsupportedOps(unsupported));
    }

    let mut by_name: HashMap<String, ValueId> = HashMap::new();
    let base = opts.base_dir.as_deref();
    for init in &gp.initializer {
        let name = init.name.clone().unwrap_or_default();
        if name.is_empty() {
            return Err(FrontendError::BadGraph("an initializer has no name".into()));
        }
        let tensor = tensor_from_proto(init, base)?;
        let id = graph.add_constant(&name, tensor);
        by_name.insert(name, id);
    }
    for input in &gp.input {
        let name = input.name.clone().unwrap_or_default();
        if by_name.contains_key(&name) {
            continue; // IR < 4: initializers are listed as inputs too.
        }
        let (dtype, shape) = value_info_type(input)?;
        let id = match (dtype, scope) {
            (Some(dtype), _) => graph.add_input(&name, dtype, shape.clone().unwrap_or_default()),
            // A body's inputs may leave their type to the op (Loop's iteration count).
            (None, Some(_)) => {
                let id = graph.add_value(&name, None, shape.clone());
                graph.inputs.push(id);
                id
            }
            (None, None) => {
                return Err(FrontendError::bad_tensor(
                    &name,
                    "graph input has no element type",
                ))
            }
        };
        if input
            .r#type
            .as_ref()
            .and_then(|t| t.value.as_ref())
            .is_some()
            && graph.value(id).shape.as_ref().is_some_and(Vec::is_empty)
        {
            // A declared rank-0 input keeps its empty shape; an input without shape info becomes unknown.
            let declared = matches!(
                input.r#type.as_ref().and_then(|t| t.value.as_ref()),
                Some(rtq_onnx_proto::type_proto::Value::TensorType(t)) if t.shape.is_some()
            );
            if !declared {
                graph.value_mut(id).shape = None;
            }
        }
        by_name.insert(name, id);
    }

    let declared: HashMap<String, &rtq_onnx_proto::ValueInfoProto> = gp
        .value_info
        .iter()
        .chain(gp.output.iter())
        .filter_map(|v| v.name.clone().map(|n| (n, v)))
        .collect();

    // Create every node output first so nodes listed out of order still resolve.
    let mut outputs_of: Vec<Vec<ValueId>> = Vec::with_capacity(gp.node.len());
    for (index, node) in gp.node.iter().enumerate() {
        let node_name = node_label(node, index);
        let mut outs = Vec::new();
        let last_named = node
            .output
            .iter()
            .rposition(|o| !o.is_empty())
            .map_or(0, |p| p + 1);
        for (slot, out) in node.output[..last_named].iter().enumerate() {
            let name = if out.is_empty() {
                format!("{node_name}__unused{slot}")
            } else {
                out.clone()
            };
            if by_name.contains_key(&name) {
                return Err(FrontendError::BadGraph(format!(
                    "tensor `{name}` is defined twice (again by node `{node_name}`)"
                )));
            }
            let (dtype, shape) = match declared.get(&name) {
                Some(info) => value_info_type(info)?,
                None => (None, None),
            };
            let id = graph.add_value(&name, dtype, shape);
            by_name.insert(name, id);
            outs.push(id);
        }
        outputs_of.push(outs);
    }

    let mut captured = 0usize;
    // A name read by a node: a value of this graph, or (in a body) an enclosing graph's
    // value, captured as a new trailing input.
    let mut resolve = |graph: &mut Graph,
                       by_name: &mut HashMap<String, ValueId>,
                       name: &str|
     -> Option<ValueId> {
        if let Some(&id) = by_name.get(name) {
            return Some(id);
        }
        let outer = scope?.value(name)?;
        if let Some(t) = &outer.constant {
            // An outer constant (an initializer, a folded Constant node) becomes a
            // constant of the body: rules that need constant inputs (axes, shapes,
            // weights) see it, and nothing is captured.
            let id = graph.add_constant(name, (**t).clone());
            by_name.insert(name.to_string(), id);
            return Some(id);
        }
        let (dtype, shape) = (outer.dtype, outer.shape.clone());
        let id = graph.add_value(name, dtype, shape);
        graph.inputs.push(id);
        by_name.insert(name.to_string(), id);
        captured += 1;
        Some(id)
    };

    for (index, (node, outs)) in gp.node.iter().zip(outputs_of).enumerate() {
        let name = node_label(node, index);
        let op = node.op_type.clone().unwrap_or_default();
        let mut inputs = Vec::with_capacity(node.input.len());
        for input in &node.input {
            if input.is_empty() {
                inputs.push(None);
                continue;
            }
            let id = resolve(graph, &mut by_name, input).ok_or_else(|| {
                FrontendError::bad_node(
                    &name,
                    &op,
                    format!("reads `{input}`, which no initializer, input or node defines"),
                )
            })?;
            inputs.push(Some(id));
        }
        while inputs.last() == Some(&None) {
            inputs.pop();
        }
        let spec = lookup(&op, opset).expect("checked by unsupported_nodes");
        if !spec.inputs.contains(&inputs.len()) {
            return Err(FrontendError::bad_node(
                &name,
                &op,
                format!("has {} inputs, expected {:?}", inputs.len(), spec.inputs),
            ));
        }
        let mut attrs = BTreeMap::new();
        let mut bodies: Vec<(String, Graph, Vec<String>)> = Vec::new();
        for a in &node.attribute {
            match a.r#type {
                Some(5) => {
                    let attr = a.name.clone().unwrap_or_default();
                    let body_proto = a.g.as_ref().ok_or_else(|| {
                        FrontendError::bad_node(
                            &name,
                            &op,
                            format!("attribute `{attr}` has no graph"),
                        )
                    })?;
                    let inner = Scope {
                        graph,
                        by_name: &by_name,
                        parent: scope,
                    };
                    let mut body = Graph::new(
                        body_proto
                            .name
                            .clone()
                            .unwrap_or_else(|| format!("{name}_{attr}")),
                        opset,
                    );
                    import_graph(body_proto, &mut body, opset, opts, Some(&inner)).map_err(
                        |e| {
                            FrontendError::bad_node(
                                &name,
                                &op,
                                format!("in its `{attr}` body: {e}"),
                            )
                        },
                    )?;
                    let names = body
                        .captured_inputs()
                        .iter()
                        .map(|&v| body.value(v).name.clone())
                        .collect();
                    bodies.push((attr, body, names));
                }
                Some(10) => {
                    return Err(FrontendError::bad_node(
                        &name,
                        &op,
                        "graph-list attributes are not supported",
                    ))
                }
                _ => {
                    let (k, v) = convert_attr(a, &name, &op, opts)?;
                    attrs.insert(k, v);
                }
            }
        }
        if !bodies.is_empty() {
            // Every body of the node takes the union of their captures, in one order,
            // which the node passes as its trailing inputs.
            let mut union: Vec<String> = Vec::new();
            for (_, _, names) in &bodies {
                for n in names {
                    if !union.contains(n) {
                        union.push(n.clone());
                    }
                }
            }
            let outer: Vec<ValueId> = union
                .iter()
                .map(|n| resolve(graph, &mut by_name, n).expect("a body's capture is visible"))
                .collect();
            for (attr, mut body, names) in bodies {
                let first = body.declared_inputs().len();
                let mut aligned = body.declared_inputs().to_vec();
                for (n, &v) in union.iter().zip(&outer) {
                    match names.iter().position(|m| m == n) {
                        Some(i) => aligned.push(body.inputs[first + i]),
                        // Read by another body of the node only: an unused input here.
                        None => {
                            let (dtype, shape) =
                                (graph.value(v).dtype, graph.value(v).shape.clone());
                            aligned.push(body.add_value(n, dtype, shape));
                        }
                    }
                }
                body.inputs = aligned;
                body.captures = union.len();
                attrs.insert(attr, Attr::Graph(Subgraph(Arc::new(body))));
            }
            inputs.extend(outer.into_iter().map(Some));
        }
        if op == "Constant" {
            let out = *outs
                .first()
                .ok_or_else(|| FrontendError::bad_node(&name, &op, "has no output"))?;
            let tensor = constant_value(&attrs)
                .ok_or_else(|| FrontendError::bad_node(&name, &op, "has no value attribute"))?;
            graph.set_constant(out, tensor);
            continue;
        }
        add_canonical(
            graph,
            opset,
            NodeDraft {
                name,
                op,
                inputs,
                outputs: outs,
                attrs,
            },
        )?;
    }

    for out in &gp.output {
        let name = out.name.clone().unwrap_or_default();
        let id = resolve(graph, &mut by_name, &name).ok_or_else(|| {
            FrontendError::BadGraph(format!("graph output `{name}` is not defined"))
        })?;
        if graph.outputs.contains(&id) && scope.is_none() {
            return Err(FrontendError::BadGraph(format!(
                "graph output `{name}` is listed twice"
            )));
        }
        graph.outputs.push(id);
    }
    graph.captures = captured;
    rtq_ir::verify(graph).map_err(|e| FrontendError::BadGraph(e.to_string()))?;
    Ok(())
}

fn node_label(node: &NodeProto, index: usize) -> String {
    match node.name.as_deref() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => format!("{}_{index}", node.op_type.as_deref().unwrap_or("node")),
    }
}

/// Every node whose op the frontend cannot import, as (node, domain, op).
fn unsupported_nodes(nodes: &[NodeProto], opset: i64) -> Vec<(String, String, String)> {
    nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let domain = n.domain.clone().unwrap_or_default();
            let op = n.op_type.clone().unwrap_or_default();
            let default_domain = domain.is_empty() || domain == "ai.onnx";
            if default_domain && lookup(&op, opset).is_some() {
                None
            } else {
                Some((node_label(n, i), domain, op))
            }
        })
        .collect()
}

fn convert_attr(
    a: &AttributeProto,
    node: &str,
    op: &str,
    opts: &ImportOptions,
) -> Result<(String, Attr), FrontendError> {
    let name = a.name.clone().unwrap_or_default();
    if a.ref_attr_name.is_some() {
        return Err(FrontendError::bad_node(
            node,
            op,
            format!("attribute `{name}` refers to a function attribute"),
        ));
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let ty = a.r#type.unwrap_or(0);
    let attr = match ty {
        1 => Attr::Float(a.f.unwrap_or(0.0)),
        2 => Attr::Int(a.i.unwrap_or(0)),
        3 => Attr::String(text(a.s.as_deref().unwrap_or_default())),
        4 => {
            let t = a.t.as_ref().ok_or_else(|| {
                FrontendError::bad_node(node, op, format!("attribute `{name}` has no tensor"))
            })?;
            Attr::Tensor(tensor_from_proto(t, opts.base_dir.as_deref())?)
        }
        6 => Attr::Floats(a.floats.clone()),
        7 => Attr::Ints(a.ints.clone()),
        8 => Attr::Strings(a.strings.iter().map(|s| text(s)).collect()),
        5 | 10 => {
            return Err(FrontendError::bad_node(
                node,
                op,
                format!("attribute `{name}` holds a subgraph, which `{op}` does not take"),
            ))
        }
        // Very old models omit the type: infer it from the field that is set.
        0 => {
            if let Some(t) = &a.t {
                Attr::Tensor(tensor_from_proto(t, opts.base_dir.as_deref())?)
            } else if !a.ints.is_empty() {
                Attr::Ints(a.ints.clone())
            } else if !a.floats.is_empty() {
                Attr::Floats(a.floats.clone())
            } else if !a.strings.is_empty() {
                Attr::Strings(a.strings.iter().map(|s| text(s)).collect())
            } else if let Some(s) = &a.s {
                Attr::String(text(s))
            } else if let Some(f) = a.f {
                Attr::Float(f)
            } else {
                Attr::Int(a.i.unwrap_or(0))
            }
        }
        other => {
            return Err(FrontendError::bad_node(
                node,
                op,
                format!("attribute `{name}` has unsupported type {other}"),
            ))
        }
    };
    Ok((name, attr))
}

fn constant_value(attrs: &BTreeMap<String, Attr>) -> Option<rtq_ir::Tensor> {
    use rtq_ir::Tensor;
    let (key, attr) = attrs.iter().next()?;
    Some(match (key.as_str(), attr) {
        ("value", Attr::Tensor(t)) => t.clone(),
        ("value_float", a) => Tensor::scalar_f32(a.as_float()?),
        ("value_floats", Attr::Floats(v)) => Tensor::from_f32(vec![v.len()], v.clone()),
        ("value_int", Attr::Int(v)) => Tensor::from_i64(vec![], vec![*v]),
        ("value_ints", Attr::Ints(v)) => Tensor::from_i64(vec![v.len()], v.clone()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewritten_ops;
    use rtq_onnx_proto::{
        type_proto, GraphProto, OperatorSetIdProto, TensorProto, TypeProto, ValueInfoProto,
    };

    fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            name: Some(output.into()),
            op_type: Some(op.into()),
            input: inputs.iter().map(|i| i.to_string()).collect(),
            output: vec![output.into()],
            attribute,
            ..Default::default()
        }
    }

    fn typed_value(name: &str, elem_type: i32) -> ValueInfoProto {
        ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: Some(elem_type),
                    shape: None,
                })),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn imports_fp8_initializers_constants_and_value_types() {
        use rtq_ir::{DType, TensorData};
        let fp8 = |name: &str, codes: &[u8], raw: bool| TensorProto {
            name: Some(name.into()),
            data_type: Some(17),
            dims: vec![codes.len() as i64],
            raw_data: raw.then(|| codes.to_vec()),
            int32_data: if raw {
                vec![]
            } else {
                codes.iter().map(|&c| i32::from(c)).collect()
            },
            ..Default::default()
        };
        let value = AttributeProto {
            name: Some("value".into()),
            r#type: Some(4),
            t: Some(fp8("", &[0x38, 0xC0], false)),
            ..Default::default()
        };
        let scale = TensorProto {
            name: Some("s".into()),
            data_type: Some(1),
            float_data: vec![0.5],
            ..Default::default()
        };
        let graph = GraphProto {
            node: vec![
                node("Constant", &[], "c", vec![value]),
                node("DequantizeLinear", &["w", "s"], "wd", vec![]),
                node("DequantizeLinear", &["q", "s"], "qd", vec![]),
                node("Identity", &["c"], "y", vec![]),
            ],
            initializer: vec![fp8("w", &[0x7E, 0x01], true), scale],
            input: vec![typed_value("q", 17)],
            output: vec![
                typed_value("y", 17),
                typed_value("wd", 1),
                typed_value("qd", 1),
            ],
            ..Default::default()
        };
        let model = ModelProto {
            ir_version: Some(9),
            opset_import: vec![OperatorSetIdProto {
                domain: None,
                version: Some(19),
            }],
            graph: Some(graph),
            ..Default::default()
        };
        let g = import_model(&model, &ImportOptions::default()).unwrap();
        let codes = |name: &str| match g.constant(g.value_by_name(name).unwrap()).unwrap().data() {
            TensorData::F8E4M3(v) => v.iter().map(|c| c.to_bits()).collect::<Vec<u8>>(),
            other => panic!("{name} is not FP8: {other:?}"),
        };
        assert_eq!(codes("w"), [0x7E, 0x01]);
        assert_eq!(codes("c"), [0x38, 0xC0]);
        let dtype = |name: &str| g.value(g.value_by_name(name).unwrap()).dtype;
        assert_eq!(dtype("q"), Some(DType::F8E4M3));
        assert_eq!(dtype("y"), Some(DType::F8E4M3));
        assert_eq!(dtype("w"), Some(DType::F8E4M3));
    }

    #[test]
    fn imports_int4_initializers_constants_and_value_types() {
        use rtq_ir::{DType, TensorData};
        // Three values -1, -8, 7, packed: 0x8F, 0x07.
        let int4 = |name: &str, raw: bool| TensorProto {
            name: Some(name.into()),
            data_type: Some(22),
            dims: vec![3],
            raw_data: raw.then(|| vec![0x8F, 0x07]),
            int32_data: if raw { vec![] } else { vec![0x8F, 0x07] },
            ..Default::default()
        };
        let value = AttributeProto {
            name: Some("value".into()),
            r#type: Some(4),
            t: Some(int4("", false)),
            ..Default::default()
        };
        let scale = TensorProto {
            name: Some("s".into()),
            data_type: Some(1),
            float_data: vec![0.5],
            ..Default::default()
        };
        let graph = GraphProto {
            node: vec![
                node("Constant", &[], "c", vec![value]),
                node("DequantizeLinear", &["w", "s"], "wd", vec![]),
                node("DequantizeLinear", &["q", "s"], "qd", vec![]),
                node("Identity", &["c"], "y", vec![]),
            ],
            initializer: vec![int4("w", true), scale],
            input: vec![typed_value("q", 22)],
            output: vec![
                typed_value("y", 22),
                typed_value("wd", 1),
                typed_value("qd", 1),
            ],
            ..Default::default()
        };
        let model = ModelProto {
            ir_version: Some(10),
            opset_import: vec![OperatorSetIdProto {
                domain: None,
                version: Some(21),
            }],
            graph: Some(graph),
            ..Default::default()
        };
        let g = import_model(&model, &ImportOptions::default()).unwrap();
        let constant = |name: &str| g.constant(g.value_by_name(name).unwrap()).unwrap();
        for name in ["w", "c"] {
            assert_eq!(
                constant(name).data(),
                &TensorData::I4(vec![-1, -8, 7]),
                "{name}"
            );
            assert_eq!(constant(name).to_le_bytes(), [0x8F, 0x07], "{name}");
        }
        let dtype = |name: &str| g.value(g.value_by_name(name).unwrap()).dtype;
        assert_eq!(dtype("q"), Some(DType::I4));
        assert_eq!(dtype("y"), Some(DType::I4));
        assert_eq!(dtype("w"), Some(DType::I4));
    }

    #[test]
    fn rewritten_ops_never_reach_the_graph() {
        let scales = AttributeProto {
            name: Some("value".into()),
            r#type: Some(4),
            t: Some(TensorProto {
                data_type: Some(1),
                dims: vec![4],
                float_data: vec![1.0, 1.0, 2.0, 2.0],
                ..Default::default()
            }),
            ..Default::default()
        };
        let x = ValueInfoProto {
            name: Some("x".into()),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: Some(1),
                    shape: None,
                })),
                ..Default::default()
            }),
            ..Default::default()
        };
        let graph = GraphProto {
            node: vec![
                node("Constant", &[], "scales", vec![scales]),
                node("Upsample", &["x", "scales"], "y", vec![]),
            ],
            input: vec![x],
            output: vec![ValueInfoProto {
                name: Some("y".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let model = ModelProto {
            ir_version: Some(4),
            opset_import: vec![OperatorSetIdProto {
                domain: None,
                version: Some(9),
            }],
            graph: Some(graph),
            ..Default::default()
        };
        // The model holds every rewritten op, and the imported graph none of them.
        let sent = &model.graph.as_ref().unwrap().node;
        for op in rewritten_ops() {
            assert!(
                sent.iter().any(|n| n.op_type.as_deref() == Some(op)),
                "{op}"
            );
        }
        let g = import_model(&model, &ImportOptions::default()).unwrap();
        let ops: Vec<&str> = g.nodes().map(|(_, n)| n.op_type.as_str()).collect();
        assert_eq!(ops, ["Resize"]);
    }
}
