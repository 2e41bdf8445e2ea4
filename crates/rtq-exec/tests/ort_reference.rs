//! Checks rtq-exec's kernels against onnxruntime, an independent reference.
//!
//! `tests/reference/ort_ops.py` builds single-node ONNX models for many op
//! configurations, runs them with onnxruntime on seeded random inputs and prints the
//! inputs, attributes and outputs as JSON. This test rebuilds every node as an rtq IR
//! node, evaluates it with `rtq_exec::eval_node` and compares.
//!
//! Needs python3 with numpy, onnx and onnxruntime; set `RTQ_SKIP_PYTHON_TESTS=1` to skip.

use half::f16;
use rtq_ir::{Attr, DType, Node, Tensor, TensorData};
use rtq_test_support::{node, run_python, skip_python};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Runs the reference script and parses its JSON output.
fn reference_cases() -> Option<Vec<Value>> {
    if skip_python() {
        eprintln!("RTQ_SKIP_PYTHON_TESTS=1: skipping the onnxruntime comparison");
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/ort_ops.py");
    let out = run_python(&script, std::iter::empty::<&str>());
    let doc: Value = serde_json::from_str(&out).expect("the script prints JSON");
    let cases = doc["cases"]
        .as_array()
        .expect("`cases` is an array")
        .clone();
    Some(cases)
}

fn dtype(name: &str) -> DType {
    match name {
        "float32" => DType::F32,
        "float16" => DType::F16,
        "int64" => DType::I64,
        "int32" => DType::I32,
        "int16" => DType::I16,
        "int8" => DType::I8,
        "uint8" => DType::U8,
        "bool" => DType::Bool,
        other => panic!("unknown dtype {other}"),
    }
}

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("extent") as usize)
        .collect();
    let data = v["data"].as_array().expect("data");
    let f = |x: &Value| match x {
        Value::String(s) => s.parse::<f64>().expect("inf, -inf or nan"),
        other => other.as_f64().expect("number"),
    };
    let i = |x: &Value| x.as_i64().expect("integer");
    let storage = match dtype(v["dtype"].as_str().expect("dtype")) {
        DType::F32 => TensorData::F32(data.iter().map(|x| f(x) as f32).collect()),
        DType::F16 => TensorData::F16(data.iter().map(|x| f16::from_f64(f(x))).collect()),
        DType::I64 => TensorData::I64(data.iter().map(i).collect()),
        DType::I32 => TensorData::I32(data.iter().map(|x| i(x) as i32).collect()),
        DType::I16 => TensorData::I16(data.iter().map(|x| i(x) as i16).collect()),
        DType::I8 => TensorData::I8(data.iter().map(|x| i(x) as i8).collect()),
        DType::U8 => TensorData::U8(data.iter().map(|x| i(x) as u8).collect()),
        DType::Bool => TensorData::Bool(data.iter().map(|x| x.as_bool().expect("bool")).collect()),
        other => panic!("unexpected dtype {other}"),
    };
    Tensor::new(shape, storage).expect("data fills the shape")
}

fn attr(v: &Value) -> (String, Attr) {
    let name = v["name"].as_str().expect("name").to_string();
    let value = &v["value"];
    let a = match v["type"].as_str().expect("type") {
        "int" => Attr::Int(value.as_i64().expect("int")),
        "float" => Attr::Float(value.as_f64().expect("float") as f32),
        "string" => Attr::String(value.as_str().expect("string").to_string()),
        "ints" => Attr::Ints(
            value
                .as_array()
                .expect("ints")
                .iter()
                .map(|x| x.as_i64().expect("int"))
                .collect(),
        ),
        "floats" => Attr::Floats(
            value
                .as_array()
                .expect("floats")
                .iter()
                .map(|x| x.as_f64().expect("float") as f32)
                .collect(),
        ),
        "strings" => Attr::Strings(
            value
                .as_array()
                .expect("strings")
                .iter()
                .map(|x| x.as_str().expect("string").to_string())
                .collect(),
        ),
        "tensor" => Attr::Tensor(tensor(value)),
        other => panic!("unknown attribute type {other}"),
    };
    (name, a)
}

/// Compares one output; returns a description of the first mismatch.
fn compare(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?}, expected {:?}",
            got.shape(),
            want.shape()
        ));
    }
    if got.dtype() != want.dtype() {
        return Err(format!("type {}, expected {}", got.dtype(), want.dtype()));
    }
    let exact = !want.dtype().is_float();
    let mut worst = (0.0f64, 0usize);
    for i in 0..want.len() {
        let (g, w) = (got.data().get_f64(i), want.data().get_f64(i));
        let err = (g - w).abs();
        let bad = if exact {
            err != 0.0
        } else {
            err > atol + rtol * w.abs() || g.is_nan() != w.is_nan()
        };
        if bad {
            return Err(format!("element {i}: got {g}, expected {w}"));
        }
        if err > worst.0 {
            worst = (err, i);
        }
    }
    Ok(())
}

#[test]
fn kernels_match_onnxruntime() {
    let Some(cases) = reference_cases() else {
        return;
    };
    assert!(
        cases.len() >= 30,
        "only {} reference cases were produced",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        let inputs: Vec<Option<Tensor>> = case["inputs"]
            .as_array()
            .expect("inputs")
            .iter()
            .map(|v| (!v.is_null()).then(|| tensor(v)))
            .collect();
        let expected: Vec<Tensor> = case["outputs"]
            .as_array()
            .expect("outputs")
            .iter()
            .map(tensor)
            .collect();
        let attrs: BTreeMap<String, Attr> = case["attrs"]
            .as_array()
            .expect("attrs")
            .iter()
            .map(attr)
            .collect();
        let op = case["op"].as_str().expect("op");
        let n = Node {
            name: name.to_string(),
            attrs,
            ..node(op, &[], expected.len())
        };
        let refs: Vec<Option<&Tensor>> = inputs.iter().map(Option::as_ref).collect();
        let rtol = case["rtol"].as_f64().unwrap_or(1e-4);
        let atol = case["atol"].as_f64().unwrap_or(1e-5);
        match rtq_exec::eval_node(&n, &refs) {
            Err(e) => failures.push(format!("{name}: {e}")),
            Ok(outputs) => {
                for (k, (got, want)) in outputs.iter().zip(&expected).enumerate() {
                    if let Err(msg) = compare(got, want, rtol, atol) {
                        failures.push(format!("{name} output {k}: {msg}"));
                    }
                }
                if outputs.len() != expected.len() {
                    failures.push(format!(
                        "{name}: {} outputs, expected {}",
                        outputs.len(),
                        expected.len()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from onnxruntime:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
