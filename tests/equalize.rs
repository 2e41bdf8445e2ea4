//! Activation channel equalization (`--equalize`, on by default with `--calib-method
//! auto`): on a depthwise-separable block whose channels span ranges two orders of
//! magnitude apart, the equalized FP32 model computes what the original does (in
//! onnxruntime), and the INT8 model built on it keeps the output where per-tensor
//! quantization of the unequalized activations loses the small channels.

mod common;

use common::*;
use std::path::Path;

/// x -> Conv 3x3 (8 channels, output channel c scaled by 10^(-c/4)) -> Relu
/// -> depthwise Conv 3x3 -> Relu -> Conv 1x1 (weights undoing the scales, so every
/// channel matters equally) -> y.
const UNBALANCED: &str = r#"
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(5)
gain = 10.0 ** (-np.arange(8) / 4)
w1 = (rng.standard_normal((8, 3, 3, 3)) * 0.3 * gain[:, None, None, None]).astype(np.float32)
b1 = (0.05 * gain).astype(np.float32)
dw = (rng.standard_normal((8, 1, 3, 3)) * 0.4).astype(np.float32)
pw = (rng.standard_normal((4, 8, 1, 1)) * 0.3 / gain[None, :, None, None]).astype(np.float32)
pads = [1, 1, 1, 1]
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=pads),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("Conv", ["r1", "dw"], ["c2"], name="dwconv", group=8, pads=pads),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("Conv", ["r2", "pw"], ["y"], name="pwconv"),
]
g = helper.make_graph(nodes, "unbalanced",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
    [numpy_helper.from_array(a, n) for a, n in [(w1, "w1"), (b1, "b1"), (dw, "dw"), (pw, "pw")]])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), MODEL)
for i in range(20):
    np.save(f"{CALIB}/s{i:02d}.npy", rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
"#;

/// `rtq compile MODEL --int8 --calib CALIB -o OUT --quiet EXTRA...`, which must
/// succeed; its report.
fn build(model: &Path, calib: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--int8", "--calib", calib.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    compile_ok(model, out, &args);
    serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap()
}

/// Worst relative error and mean cosine of `candidate` against `reference` on every
/// calibration file, in onnxruntime.
fn compare(reference: &Path, candidate: &Path, calib: &Path) -> (f64, f64) {
    let code = format!(
        r#"
import glob, numpy as np, onnxruntime as ort
a = ort.InferenceSession(r"{a}", providers=["CPUExecutionProvider"])
b = ort.InferenceSession(r"{b}", providers=["CPUExecutionProvider"])
err, cos = 0.0, []
for f in sorted(glob.glob(r"{calib}/*.npy")):
    x = np.load(f)
    ya, yb = a.run(None, {{"x": x}})[0].ravel(), b.run(None, {{"x": x}})[0].ravel()
    err = max(err, float(np.abs(ya - yb).max() / np.abs(ya).max()))
    cos.append(float(ya @ yb / (np.linalg.norm(ya) * np.linalg.norm(yb))))
print(err, np.mean(cos))
"#,
        a = reference.display(),
        b = candidate.display(),
        calib = calib.display()
    );
    let out = python_inline(&code);
    let mut parts = out.split_whitespace().map(|p| p.parse::<f64>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

#[test]
fn equalization_keeps_the_function_and_saves_the_small_channels() {
    if skip_python() {
        return;
    }
    let (_dir, model, calib) = python_model("unbalanced.onnx", UNBALANCED);
    // The equalized FP32 graph is the same function.
    let eq = tempfile::tempdir().unwrap();
    let report = build(
        &model,
        &calib,
        eq.path(),
        &["--equalize", "--stop-after", "equalize"],
    );
    let tensors = report["passes"]["equalize"]["tensors"].as_array().unwrap();
    let names: Vec<&str> = tensors
        .iter()
        .map(|t| t["tensor"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["r1", "r2"], "{report}");
    // r1's only reader is depthwise: its channels end at the same range.
    assert!(tensors[0]["spread_before"].as_f64().unwrap() > 30.0);
    assert!(tensors[0]["spread_after"].as_f64().unwrap() < 1.01);
    let equalized = eq.path().join("unbalanced_equalized.onnx");
    let (err, _) = compare(&model, &equalized, &calib);
    assert!(
        err < 1e-4,
        "equalized FP32 differs from the original: {err}"
    );

    // With the same method, equalization is what keeps the INT8 model accurate.
    let plain = tempfile::tempdir().unwrap();
    build(&model, &calib, plain.path(), &["--calib-method", "max"]);
    let with = tempfile::tempdir().unwrap();
    let report = build(
        &model,
        &calib,
        with.path(),
        &["--calib-method", "max", "--equalize"],
    );
    assert_eq!(report["quantization"]["int8_mac_share"], 1.0, "{report}");
    let int8 = |dir: &Path| dir.join("unbalanced_int8.onnx");
    let (_, plain_cos) = compare(&model, &int8(plain.path()), &calib);
    let (_, eq_cos) = compare(&model, &int8(with.path()), &calib);
    assert!(
        eq_cos > 0.999 && plain_cos < 0.99,
        "cosine with equalization {eq_cos}, without {plain_cos}"
    );
    // The default build equalizes.
    let auto = tempfile::tempdir().unwrap();
    let report = build(&model, &calib, auto.path(), &[]);
    assert_eq!(
        report["passes"]["equalize"]["tensors"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn equalization_is_refused_where_it_cannot_run() {
    let out = tempfile::tempdir().unwrap();
    let model = demo_model();
    let calib = demo_calib();
    let (model, calib) = (model.to_str().unwrap(), calib.to_str().unwrap());
    let o = out.path().join("o");
    let o = o.to_str().unwrap();
    let err = rtq_fails(&["compile", model, "--equalize", "-o", o]);
    assert!(
        err.contains("--equalize") && err.contains("--int8"),
        "{err}"
    );
    let stats = out.path().join("s.json");
    let err = rtq_fails(&[
        "compile",
        model,
        "--int8",
        "--calib",
        calib,
        "--equalize",
        "--save-stats",
        stats.to_str().unwrap(),
        "-o",
        o,
    ]);
    assert!(err.contains("--save-stats"), "{err}");
    let err = rtq_fails(&[
        "compile",
        model,
        "--int8",
        "--calib",
        calib,
        "--calib-method",
        "max",
        "--stop-after",
        "equalize",
        "-o",
        o,
    ]);
    assert!(err.contains("does not equalize"), "{err}");
    assert!(!out.path().join("o").exists());
}
