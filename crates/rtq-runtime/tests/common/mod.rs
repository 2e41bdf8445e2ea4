//! Helpers shared by the integration tests.

#![allow(dead_code)]

use rtq_onnx_proto::{
    tensor_shape_proto::{dimension, Dimension},
    type_proto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use std::path::Path;

const FLOAT: i32 = 1;

fn value_info(name: &str, dims: &[Result<i64, &str>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Ok(n) => dimension::Value::DimValue(*n),
                Err(p) => dimension::Value::DimParam(p.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(FLOAT),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        name: Some(name.to_string()),
        op_type: Some(op.to_string()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn initializer(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.to_string()),
        dims: dims.to_vec(),
        data_type: Some(FLOAT),
        float_data: values.to_vec(),
        ..Default::default()
    }
}

/// The weight of [`write_mlp_model`], row-major 4x2.
pub const W: [f32; 8] = [1.0, -1.0, 2.0, 0.0, 0.0, 1.0, -1.0, 3.0];
/// The bias of [`write_mlp_model`].
pub const B: [f32; 2] = [0.5, -1.0];

/// `y = Relu(x · W + B)` with `x: float[N,4]`, `y: float[N,2]` (opset 13).
pub fn write_mlp_model(path: &Path) {
    write_mlp(path, false);
}

/// [`write_mlp_model`] whose `W` is stored flat and reshaped by a node at run time.
pub fn write_mlp_model_reshaping_w(path: &Path) {
    write_mlp(path, true);
}

fn write_mlp(path: &Path, reshape_w: bool) {
    let mut nodes = vec![
        node("matmul", "MatMul", &["x", "W"], &["xw"]),
        node("add", "Add", &["xw", "B"], &["pre"]),
        node("relu", "Relu", &["pre"], &["y"]),
    ];
    let mut initializers = vec![initializer("B", &[2], &B)];
    if reshape_w {
        nodes.insert(
            0,
            node("reshape_w", "Reshape", &["W_flat", "W_shape"], &["W"]),
        );
        initializers.push(initializer("W_flat", &[8], &W));
        initializers.push(TensorProto {
            name: Some("W_shape".into()),
            dims: vec![2],
            data_type: Some(7),
            int64_data: vec![4, 2],
            ..Default::default()
        });
    } else {
        initializers.push(initializer("W", &[4, 2], &W));
    }
    let graph = GraphProto {
        name: Some("mlp".into()),
        node: nodes,
        initializer: initializers,
        input: vec![value_info("x", &[Err("N"), Ok(4)])],
        output: vec![value_info("y", &[Err("N"), Ok(2)])],
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(8),
        producer_name: Some("rtq-runtime tests".into()),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        graph: Some(graph),
        ..Default::default()
    };
    std::fs::write(path, model.encode_to_vec()).unwrap();
}

/// Reference `Relu(x · W + B)` for rows of 4 values.
pub fn mlp_reference(x: &[f32]) -> Vec<f32> {
    x.chunks(4)
        .flat_map(|row| {
            (0..2).map(move |j| {
                let v: f32 = (0..4).map(|k| row[k] * W[k * 2 + j]).sum::<f32>() + B[j];
                v.max(0.0)
            })
        })
        .collect()
}
