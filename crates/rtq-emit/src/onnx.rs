//! IR -> ONNX `ModelProto`.

use crate::{write_atomic, EmitError};
use rtq_ir::{reduce_axes_is_input, unique_name, Attr, Dim, Graph, Tensor, ValueId};
use rtq_onnx_proto::{
    attribute_proto::AttributeType, tensor_shape_proto, type_proto, AttributeProto, GraphProto,
    Message, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use std::collections::HashSet;
use std::path::Path;

/// How to emit a model.
#[derive(Debug, Clone, Default)]
pub struct EmitOptions {
    /// Default-domain opset to declare; `None` = max(13, the graph's source opset).
    pub opset: Option<i64>,
    /// Extra `metadata_props` entries (e.g. rtq's precision and calibration method).
    pub metadata: Vec<(String, String)>,
    /// Also record the known type and shape of intermediate tensors (`value_info`).
    pub value_info: bool,
}

/// The ONNX IR version that goes with a default-domain opset.
pub fn ir_version_for_opset(opset: i64) -> i64 {
    match opset {
        ..=12 => 7,
        13..=14 => 7,
        15..=18 => 8,
        19..=20 => 9,
        21 => 10,
        _ => 11,
    }
}

/// Builds the `ModelProto` for `graph`: nodes in topological order, live constants as
/// initializers (raw little-endian data), interface types from the IR's facts.
pub fn to_model_proto(graph: &Graph, opts: &EmitOptions) -> Result<ModelProto, EmitError> {
    let opset = opts.opset.unwrap_or(graph.opset.max(13));
    let gp = graph_proto(graph, opset, opts.value_info, &HashSet::new())?;
    let mut opset_import = vec![OperatorSetIdProto {
        domain: Some(String::new()),
        version: Some(opset),
    }];
    opset_import.extend(graph.extra_opsets.iter().map(|(d, v)| OperatorSetIdProto {
        domain: Some(d.clone()),
        version: Some(*v),
    }));
    let metadata = graph
        .metadata
        .iter()
        .chain(opts.metadata.iter())
        .map(|(k, v)| StringStringEntryProto {
            key: Some(k.clone()),
            value: Some(v.clone()),
        })
        .collect();
    Ok(ModelProto {
        ir_version: Some(ir_version_for_opset(opset)),
        opset_import,
        producer_name: Some("rtq".into()),
        producer_version: Some(env!("CARGO_PKG_VERSION").into()),
        graph: Some(gp),
        metadata_props: metadata,
        ..Default::default()
    })
}

/// The `GraphProto` of `graph` (the main graph, or a control-flow body whose
/// enclosing graphs use the names in `outer`: ONNX names are unique across the nesting,
/// so a body value named like an outer one is renamed, and the body's captured inputs
/// are not listed: its nodes read the outer values by name).
fn graph_proto(
    graph: &Graph,
    opset: i64,
    with_value_info: bool,
    outer: &HashSet<String>,
) -> Result<GraphProto, EmitError> {
    let order = graph
        .topo_order()
        .map_err(|e| EmitError::Graph(e.to_string()))?;
    let mut gp = GraphProto {
        name: Some(graph.name.clone()),
        ..Default::default()
    };
    let mut emitted_consts: HashSet<ValueId> = HashSet::new();
    let mut extra_names: HashSet<String> = HashSet::new();
    let mut fresh = |base: &str, graph: &Graph| {
        let name = unique_name(base, |n| {
            graph.value_by_name(n).is_some() || extra_names.contains(n) || outer.contains(n)
        });
        extra_names.insert(name.clone());
        name
    };
    // Names visible to nested bodies: the enclosing graphs' and this one's.
    let mut scope: Option<HashSet<String>> = None;
    for &input in graph.declared_inputs() {
        gp.input
            .push(interface_info(graph, input, outer.is_empty())?);
    }
    for id in order {
        let node = graph.node(id);
        let mut inputs: Vec<String> = node
            .declared_inputs()
            .iter()
            .map(|i| i.map_or(String::new(), |v| graph.value(v).name.clone()))
            .collect();
        let mut attrs: Vec<AttributeProto> = Vec::new();
        for (name, attr) in &node.attrs {
            if name == "axes" && reduce_axes_is_input(&node.op_type, opset) {
                let axes = attr.as_ints().unwrap_or_default();
                let cname = fresh(&format!("{}_axes", node.name), graph);
                gp.initializer.push(tensor_proto(
                    &cname,
                    &Tensor::from_i64(vec![axes.len()], axes),
                ));
                inputs.push(cname);
                continue;
            }
            if let Attr::Graph(body) = attr {
                let scope = scope.get_or_insert_with(|| {
                    let mut names = outer.clone();
                    names.extend(graph.values().map(|(_, v)| v.name.clone()));
                    names
                });
                let captured: Vec<String> = node
                    .captured_inputs()
                    .iter()
                    .map(|v| v.map_or(String::new(), |v| graph.value(v).name.clone()))
                    .collect();
                let body = renamed_body(body, &captured, scope)?;
                let g = graph_proto(&body, opset, with_value_info, scope)?;
                attrs.push(AttributeProto {
                    name: Some(name.clone()),
                    r#type: Some(AttributeType::Graph as i32),
                    g: Some(g),
                    ..Default::default()
                });
                continue;
            }
            attrs.push(attribute_proto(name, attr));
        }
        if node.op_type == "Split" && opset >= 18 && node.input(1).is_none() {
            // Opset 18 needs the count of an even split spelled out (the IR's opset-13
            // form takes it from the outputs).
            attrs.push(attribute_proto(
                "num_outputs",
                &Attr::Int(node.outputs.len() as i64),
            ));
        }
        // Captured constants too: the body reads them by name.
        for v in node.inputs.iter().flatten() {
            if graph.value(*v).constant.is_some() && emitted_consts.insert(*v) {
                gp.initializer.push(tensor_proto(
                    &graph.value(*v).name,
                    graph.constant(*v).expect("constant"),
                ));
            }
        }
        gp.node.push(NodeProto {
            name: Some(node.name.clone()),
            op_type: Some(node.op_type.clone()),
            domain: (!node.domain.is_empty()).then(|| node.domain.clone()),
            input: inputs,
            output: node
                .outputs
                .iter()
                .map(|&o| graph.value(o).name.clone())
                .collect(),
            attribute: attrs,
            ..Default::default()
        });
    }
    if with_value_info {
        let interface: HashSet<ValueId> =
            graph.inputs.iter().chain(&graph.outputs).copied().collect();
        for (_, node) in graph.nodes() {
            for &out in &node.outputs {
                if !interface.contains(&out) && graph.value(out).dtype.is_some() {
                    gp.value_info.push(value_info(graph, out)?);
                }
            }
        }
    }
    for &out in &graph.outputs {
        let value = graph.value(out);
        let body_input = !outer.is_empty() && graph.inputs.contains(&out);
        if value.constant.is_some() || body_input {
            // ONNX outputs must be produced by nodes: a folded output gets an Identity
            // from a new initializer, a body output that is one of its inputs an
            // Identity to a new name.
            let (source, output) = match &value.constant {
                Some(tensor) => {
                    let cname = fresh(&format!("{}__const", value.name), graph);
                    gp.initializer.push(tensor_proto(&cname, tensor));
                    (cname, value.name.clone())
                }
                None => (
                    value.name.clone(),
                    fresh(&format!("{}__out", value.name), graph),
                ),
            };
            gp.node.push(NodeProto {
                name: Some(fresh(&format!("{}__identity", value.name), graph)),
                op_type: Some("Identity".into()),
                input: vec![source],
                output: vec![output.clone()],
                ..Default::default()
            });
            let mut info = interface_info(graph, out, outer.is_empty())?;
            info.name = Some(output);
            gp.output.push(info);
            continue;
        }
        gp.output
            .push(interface_info(graph, out, outer.is_empty())?);
    }
    Ok(gp)
}

/// A copy of control-flow body `body` whose captured inputs carry the names of the
/// outer values they stand for (`captured`, in order) and whose other values avoid
/// every name in `outer`.
fn renamed_body(
    body: &rtq_ir::Subgraph,
    captured: &[String],
    outer: &HashSet<String>,
) -> Result<Graph, EmitError> {
    let mut g: Graph = (*body.0).clone();
    let captures: Vec<ValueId> = g.captured_inputs().to_vec();
    if captures.len() != captured.len() {
        return Err(EmitError::Graph(format!(
            "body `{}` captures {} values but its node passes {}",
            g.name,
            captures.len(),
            captured.len()
        )));
    }
    let err = |e: rtq_ir::IrError| EmitError::Graph(e.to_string());
    // Out of the way first: every value named like an outer one, captures included.
    let clashing: Vec<ValueId> = g
        .values()
        .filter(|(_, v)| outer.contains(&v.name))
        .map(|(id, _)| id)
        .collect();
    for id in clashing {
        let base = format!("{}_{}", g.name, g.value(id).name);
        let name = unique_name(&base, |n| outer.contains(n) || g.value_by_name(n).is_some());
        g.rename_value(id, &name).map_err(err)?;
    }
    for (&id, name) in captures.iter().zip(captured) {
        g.rename_value(id, name).map_err(err)?;
    }
    Ok(g)
}

/// Serialises `graph` as ONNX bytes.
pub fn to_model_bytes(graph: &Graph, opts: &EmitOptions) -> Result<Vec<u8>, EmitError> {
    let model = to_model_proto(graph, opts)?;
    let size = model.encoded_len();
    if size > i32::MAX as usize {
        return Err(EmitError::Graph(format!(
            "the model is {size} bytes, over protobuf's 2 GiB limit"
        )));
    }
    Ok(model.encode_to_vec())
}

/// Writes `graph` as an ONNX file at `path`, atomically.
pub fn write_onnx(path: &Path, graph: &Graph, opts: &EmitOptions) -> Result<(), EmitError> {
    let bytes = to_model_bytes(graph, opts)?;
    write_atomic(path, &bytes)
}

/// The value info of an interface tensor: typed for the main graph (`strict`); a body's
/// may lack a known type (onnxruntime infers it), and then carries its name only.
fn interface_info(graph: &Graph, id: ValueId, strict: bool) -> Result<ValueInfoProto, EmitError> {
    if !strict && graph.value(id).dtype.is_none() {
        return Ok(ValueInfoProto {
            name: Some(graph.value(id).name.clone()),
            ..Default::default()
        });
    }
    value_info(graph, id)
}

fn value_info(graph: &Graph, id: ValueId) -> Result<ValueInfoProto, EmitError> {
    let value = graph.value(id);
    let dtype = value.dtype.ok_or_else(|| {
        EmitError::Graph(format!(
            "graph interface tensor `{}` has no known element type",
            value.name
        ))
    })?;
    let shape = value.shape.as_ref().map(|dims| TensorShapeProto {
        dim: dims
            .iter()
            .map(|d| tensor_shape_proto::Dimension {
                // An unnamed unknown dim stays unnamed: a shared name would claim equality.
                value: match d {
                    Dim::Known(n) => {
                        Some(tensor_shape_proto::dimension::Value::DimValue(*n as i64))
                    }
                    Dim::Sym(s) if s == "?" => None,
                    Dim::Sym(s) => Some(tensor_shape_proto::dimension::Value::DimParam(s.clone())),
                },
                ..Default::default()
            })
            .collect(),
    });
    Ok(ValueInfoProto {
        name: Some(value.name.clone()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(dtype.onnx_code()),
                shape,
            })),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// Encodes a tensor as `TensorProto` (raw data, except strings).
pub(crate) fn tensor_proto(name: &str, tensor: &Tensor) -> TensorProto {
    let mut proto = TensorProto {
        name: Some(name.to_string()),
        dims: tensor.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(tensor.dtype().onnx_code()),
        ..Default::default()
    };
    match tensor.data() {
        rtq_ir::TensorData::String(s) => proto.string_data = s.clone(),
        _ => proto.raw_data = Some(tensor.to_le_bytes()),
    }
    proto
}

fn attribute_proto(name: &str, attr: &Attr) -> AttributeProto {
    let mut a = AttributeProto {
        name: Some(name.to_string()),
        ..Default::default()
    };
    let ty = match attr {
        Attr::Int(v) => {
            a.i = Some(*v);
            AttributeType::Int
        }
        Attr::Float(v) => {
            a.f = Some(*v);
            AttributeType::Float
        }
        Attr::String(s) => {
            a.s = Some(s.clone().into_bytes());
            AttributeType::String
        }
        Attr::Tensor(t) => {
            a.t = Some(tensor_proto("", t));
            AttributeType::Tensor
        }
        Attr::Ints(v) => {
            a.ints = v.clone();
            AttributeType::Ints
        }
        Attr::Floats(v) => {
            a.floats = v.clone();
            AttributeType::Floats
        }
        Attr::Strings(v) => {
            a.strings = v.iter().map(|s| s.clone().into_bytes()).collect();
            AttributeType::Strings
        }
        // Bodies need the enclosing scope: `graph_proto` emits them.
        Attr::Graph(_) => AttributeType::Graph,
    };
    a.r#type = Some(ty as i32);
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::DType;
    use std::collections::BTreeMap;

    fn small_graph(opset: i64) -> Graph {
        let mut g = Graph::new("g", opset);
        let x = g.add_input("x", DType::F32, vec![Dim::Sym("N".into()), Dim::Known(4)]);
        let w = g.add_constant(
            "w",
            Tensor::from_f32(vec![4, 2], (0..8).map(|i| i as f32).collect()),
        );
        let y = g.add_value(
            "y",
            Some(DType::F32),
            Some(vec![Dim::Sym("N".into()), Dim::Known(2)]),
        );
        g.add_node(
            "mm",
            "MatMul",
            vec![Some(x), Some(w)],
            vec![y],
            BTreeMap::new(),
        );
        let z = g.add_value("z", Some(DType::F32), None);
        let mut attrs = BTreeMap::new();
        attrs.insert("axes".to_string(), Attr::Ints(vec![1]));
        attrs.insert("keepdims".to_string(), Attr::Int(1));
        g.add_node("mean", "ReduceMean", vec![Some(y)], vec![z], attrs);
        g.outputs.push(z);
        g
    }

    #[test]
    fn round_trips_through_the_frontend() {
        let g = small_graph(13);
        let opts = EmitOptions {
            value_info: true,
            ..Default::default()
        };
        let bytes = to_model_bytes(&g, &opts).unwrap();
        let back = rtq_frontend::load_model_bytes(&bytes).unwrap();
        assert_eq!(rtq_ir::dump(&back), rtq_ir::dump(&g));
    }

    #[test]
    fn fp8_tensors_are_raw_bytes_of_type_17() {
        use rtq_ir::{TensorData, F8E4M3};
        let codes = [0x38u8, 0xFE, 0x01, 0x7F, 0x80, 0x7E];
        let mut g = Graph::new("g", 19);
        let q = g.add_input("q", DType::F8E4M3, vec![Dim::Known(2)]);
        let w = g.add_constant(
            "w",
            Tensor::new(
                vec![2, 3],
                TensorData::F8E4M3(codes.iter().map(|&c| F8E4M3::from_bits(c)).collect()),
            )
            .unwrap(),
        );
        let s = g.add_constant("s", Tensor::from_f32(vec![2], vec![0.5, 0.25]));
        let mut axis = BTreeMap::new();
        axis.insert("axis".to_string(), Attr::Int(0));
        let wd = g.add_value("wd", Some(DType::F32), Some(vec![Dim::Known(2); 2]));
        g.add_node(
            "dq",
            "DequantizeLinear",
            vec![Some(w), Some(s)],
            vec![wd],
            axis,
        );
        let qi = g.add_value("qi", Some(DType::F8E4M3), Some(vec![Dim::Known(2)]));
        g.add_node("id", "Identity", vec![Some(q)], vec![qi], BTreeMap::new());
        g.outputs.extend([wd, qi]);
        let opts = EmitOptions {
            value_info: true,
            ..Default::default()
        };
        let model = to_model_proto(&g, &opts).unwrap();
        assert_eq!(model.opset_import[0].version, Some(19));
        assert_eq!(model.ir_version, Some(9));
        let gp = model.graph.as_ref().unwrap();
        let init = gp
            .initializer
            .iter()
            .find(|t| t.name.as_deref() == Some("w"))
            .unwrap();
        assert_eq!(init.data_type, Some(17));
        assert_eq!(init.dims, vec![2, 3]);
        assert_eq!(init.raw_data.as_deref(), Some(&codes[..]));
        assert!(init.int32_data.is_empty());
        let elem = |v: &ValueInfoProto| match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(type_proto::Value::TensorType(t)) => t.elem_type,
            _ => None,
        };
        assert_eq!(elem(&gp.input[0]), Some(17));
        let out = gp.output.iter().find(|o| o.name.as_deref() == Some("qi"));
        assert_eq!(out.and_then(elem), Some(17));
        // And back: the frontend reads the same graph.
        let back = rtq_frontend::load_model_bytes(&to_model_bytes(&g, &opts).unwrap()).unwrap();
        assert_eq!(rtq_ir::dump(&back), rtq_ir::dump(&g));
        let w_back = back.constant(back.value_by_name("w").unwrap()).unwrap();
        assert_eq!(w_back.to_le_bytes(), codes);
    }

    #[test]
    fn int4_tensors_are_packed_raw_bytes_of_type_22() {
        use rtq_ir::TensorData;
        // [2, 3] blocked along axis 1 (blocks of 2): scales [2, 2].
        let values = vec![-8i8, 7, -1, 0, 3, -5];
        let mut g = Graph::new("g", 21);
        let q = g.add_input("q", DType::I4, vec![Dim::Known(3)]);
        let w = g.add_constant(
            "w",
            Tensor::new(vec![2, 3], TensorData::I4(values.clone())).unwrap(),
        );
        let s = g.add_constant("s", Tensor::from_f32(vec![2, 2], vec![0.5; 4]));
        let mut attrs = BTreeMap::new();
        attrs.insert("axis".to_string(), Attr::Int(1));
        attrs.insert("block_size".to_string(), Attr::Int(2));
        let wd = g.add_value(
            "wd",
            Some(DType::F32),
            Some(vec![Dim::Known(2), Dim::Known(3)]),
        );
        g.add_node(
            "dq",
            "DequantizeLinear",
            vec![Some(w), Some(s)],
            vec![wd],
            attrs,
        );
        let qi = g.add_value("qi", Some(DType::I4), Some(vec![Dim::Known(3)]));
        g.add_node("id", "Identity", vec![Some(q)], vec![qi], BTreeMap::new());
        g.outputs.extend([wd, qi]);
        let opts = EmitOptions {
            value_info: true,
            ..Default::default()
        };
        let model = to_model_proto(&g, &opts).unwrap();
        assert_eq!(model.opset_import[0].version, Some(21));
        assert_eq!(model.ir_version, Some(10));
        let gp = model.graph.as_ref().unwrap();
        let init = gp
            .initializer
            .iter()
            .find(|t| t.name.as_deref() == Some("w"))
            .unwrap();
        assert_eq!(init.data_type, Some(22));
        assert_eq!(init.dims, vec![2, 3]);
        // Two per byte, the first in the low nibble.
        assert_eq!(init.raw_data.as_deref(), Some(&[0x78, 0x0F, 0xB3][..]));
        assert!(init.int32_data.is_empty());
        let elem = |v: &ValueInfoProto| match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(type_proto::Value::TensorType(t)) => t.elem_type,
            _ => None,
        };
        assert_eq!(elem(&gp.input[0]), Some(22));
        let out = gp.output.iter().find(|o| o.name.as_deref() == Some("qi"));
        assert_eq!(out.and_then(elem), Some(22));
        // And back: the frontend reads the same graph and values.
        let back = rtq_frontend::load_model_bytes(&to_model_bytes(&g, &opts).unwrap()).unwrap();
        assert_eq!(rtq_ir::dump(&back), rtq_ir::dump(&g));
        let w_back = back.constant(back.value_by_name("w").unwrap()).unwrap();
        assert_eq!(w_back.data(), &TensorData::I4(values));
    }

    #[test]
    fn opset_18_reductions_take_axes_as_input() {
        let g = small_graph(18);
        let model = to_model_proto(&g, &EmitOptions::default()).unwrap();
        let gp = model.graph.as_ref().unwrap();
        let mean = gp
            .node
            .iter()
            .find(|n| n.op_type.as_deref() == Some("ReduceMean"))
            .unwrap();
        assert_eq!(mean.input.len(), 2);
        assert!(mean
            .attribute
            .iter()
            .all(|a| a.name.as_deref() != Some("axes")));
        // And the frontend turns it back into the canonical attribute form.
        let back =
            rtq_frontend::load_model_bytes(&to_model_bytes(&g, &EmitOptions::default()).unwrap())
                .unwrap();
        let (_, node) = back
            .nodes()
            .find(|(_, n)| n.op_type == "ReduceMean")
            .unwrap();
        assert_eq!(node.attr_ints("axes"), Some(vec![1]));
    }

    #[test]
    fn constant_output_gets_an_identity() {
        let mut g = Graph::new("g", 13);
        let c = g.add_constant("c", Tensor::from_f32(vec![1], vec![3.0]));
        g.outputs.push(c);
        let model = to_model_proto(&g, &EmitOptions::default()).unwrap();
        let gp = model.graph.unwrap();
        assert_eq!(gp.node.len(), 1);
        assert_eq!(gp.node[0].output, vec!["c".to_string()]);
        assert_eq!(gp.initializer[0].name.as_deref(), Some("c__const"));
    }
}
