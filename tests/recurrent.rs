//! Recurrent models: a CRNN text recognizer (convolutions, a bidirectional LSTM with
//! variable sequence lengths and a GRU, a CTC-style classifier) built with onnx's helper,
//! run by rtq's executor and compiled in every mode, each output checked by
//! `onnx.checker` and onnxruntime against the original. Needs requirements-test.txt.

mod common;

use common::*;
use std::path::Path;

/// x [1, 1, 32, 64] -> Conv/Relu/MaxPool x2 -> [T=16, 1, 256] -> bidirectional LSTM
/// (hidden 48) -> GRU (hidden 32) -> MatMul + bias (37 classes) -> Softmax.
/// Weights are scaled so activations stay in the ranges trained layers keep.
const CRNN: &str = r#"
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(11)
def w(*shape, fan_in):
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
H1, H2, C = 48, 32, 37
inits = {
    "c1": w(16, 1, 3, 3, fan_in=9), "b1": w(16, fan_in=4),
    "c2": w(32, 16, 3, 3, fan_in=144), "b2": w(32, fan_in=4),
    "shape": np.array([0, 256, 16], np.int64),
    "W1": w(2, 4 * H1, 256, fan_in=256), "R1": w(2, 4 * H1, H1, fan_in=H1),
    "B1": w(2, 8 * H1, fan_in=16), "lens": np.array([16], np.int32),
    "shape2": np.array([16, 1, 2 * H1], np.int64),
    "W2": w(1, 3 * H2, 2 * H1, fan_in=2 * H1), "R2": w(1, 3 * H2, H2, fan_in=H2),
    "B2": w(1, 6 * H2, fan_in=16),
    "fc": w(H2, C, fan_in=H2) * 3, "fcb": w(C, fan_in=4),
}
nodes = [
    helper.make_node("Conv", ["x", "c1", "b1"], ["a1"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["a1"], ["r1"]),
    helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p1", "c2", "b2"], ["a2"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["a2"], ["r2"]),
    helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
    # [1, 32, 8, 16] -> [1, 256, 16] -> [16, 1, 256]
    helper.make_node("Reshape", ["p2", "shape"], ["f"]),
    helper.make_node("Transpose", ["f"], ["seq"], perm=[2, 0, 1]),
    helper.make_node("LSTM", ["seq", "W1", "R1", "B1", "lens"], ["y1", "h1", "c1s"],
                     hidden_size=H1, direction="bidirectional"),
    # [16, 2, 1, 48] -> [16, 1, 2, 48] -> [16, 1, 96]
    helper.make_node("Transpose", ["y1"], ["y1t"], perm=[0, 2, 1, 3]),
    helper.make_node("Reshape", ["y1t", "shape2"], ["y1r"]),
    helper.make_node("GRU", ["y1r", "W2", "R2", "B2"], ["y2", "h2"], hidden_size=H2,
                     linear_before_reset=1),
    helper.make_node("Squeeze", ["y2", "sq_axes"], ["y2s"]),
    helper.make_node("MatMul", ["y2s", "fc"], ["logits0"]),
    helper.make_node("Add", ["logits0", "fcb"], ["logits"]),
    helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
]
inits["sq_axes"] = np.array([1, 2], np.int64)
g = helper.make_graph(nodes, "crnn",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 32, 64])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [16, C])],
    [numpy_helper.from_array(v, k) for k, v in inits.items()])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
m.ir_version = 8
onnx.checker.check_model(m, full_check=True)
onnx.save(m, MODEL)
for i in range(24):
    # Text-like inputs: a bright background with dark strokes.
    x = np.ones((1, 1, 32, 64), np.float32)
    for _ in range(8):
        r, c = rng.integers(4, 28), rng.integers(2, 60)
        x[0, 0, r - 3:r + 3, c:c + 2] = rng.uniform(0, 0.3)
    np.save(f"{CALIB}/s{i:02d}.npy", (x - 0.5) / 0.5 + rng.normal(0, 0.05, x.shape).astype(np.float32))
"#;

/// The check script's verdict on `candidate` against `reference` on the calibration
/// files' last four samples.
fn check(candidate: &Path, reference: &Path, calib: &Path) -> serde_json::Value {
    let inputs = files_in(calib);
    let mut args: Vec<&Path> = vec![candidate, reference];
    args.extend(inputs[20..].iter().map(|p| p.as_path()));
    serde_json::from_str(&python("check_model.py", &args)).unwrap()
}

#[test]
fn a_crnn_compiles_in_every_mode_and_agrees_with_onnxruntime() {
    if skip_python() {
        return;
    }
    let (_dir, model, calib) = python_model("crnn.onnx", CRNN);
    let calib_arg = calib.to_str().unwrap();
    let modes: [(&str, &[&str], f64); 4] = [
        ("opt", &[], 0.99999),
        ("fp16", &["--fp16"], 0.999),
        ("int8", &["--int8", "--calib", calib_arg], 0.99),
        (
            "int8_fp16",
            &["--int8", "--fp16", "--calib", calib_arg],
            0.99,
        ),
    ];
    for (suffix, flags, floor) in modes {
        let out = tempfile::tempdir().unwrap();
        let mut args = flags.to_vec();
        args.push("--quiet");
        compile_ok(&model, out.path(), &args);
        let built = out.path().join(format!("crnn_{suffix}.onnx"));
        let c = check(&built, &model, &calib);
        assert!(
            c["cosine_min_unoptimized"].as_f64().unwrap() > floor,
            "{suffix}: {c}"
        );
        if suffix.starts_with("int8") {
            let report: serde_json::Value =
                serde_json::from_slice(&std::fs::read(out.path().join("report.json")).unwrap())
                    .unwrap();
            // The convolutions and the classifier are INT8; the recurrent layers are
            // not quantized (TensorRT takes no Q/DQ on them).
            assert!(c["qdq"].as_u64().unwrap() >= 3, "{suffix}: {c}");
            let share = report["quantization"]["int8_mac_share"].as_f64().unwrap();
            assert!(share > 0.5, "{suffix}: {report}");
        }
    }
}

#[test]
fn rtq_runs_the_crnn_as_onnxruntime_does() {
    if skip_python() {
        return;
    }
    let (_dir, model, calib) = python_model("crnn.onnx", CRNN);
    let code = format!(
        r#"
import glob, json, numpy as np, onnxruntime as ort
s = ort.InferenceSession(r"{model}", providers=["CPUExecutionProvider"])
x = np.load(sorted(glob.glob(r"{calib}/*.npy"))[0])
y = s.run(None, {{"x": x}})[0]
print(json.dumps({{"x": x.ravel().tolist(), "shape": list(x.shape), "y": y.ravel().tolist()}}))
"#,
        model = model.display(),
        calib = calib.display()
    );
    let doc: serde_json::Value = serde_json::from_str(python_inline(&code).trim()).unwrap();
    let floats = |v: &serde_json::Value| -> Vec<f32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    let shape: Vec<usize> = doc["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let x = rtq_ir::Tensor::from_f32(shape, floats(&doc["x"]));
    let graph = rtq_frontend::load_model(&model).unwrap();
    let plan = rtq_exec::Plan::new(&graph).unwrap();
    let got = plan.run(&[("x".into(), x)]).unwrap()[0].to_f32_vec();
    let expected = floats(&doc["y"]);
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert!((g - e).abs() < 1e-5, "{g} vs {e}");
    }
}
