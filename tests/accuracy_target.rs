//! A build never passes silently: it is judged against its accuracy target on the
//! held-out files, a miss is a warning (an error with --strict-accuracy), and the
//! default `--calib-method auto` recovers from a calibration method that breaks the
//! model. The model here is made to break entropy calibration: rare large spikes
//! carry most of its signal, and KL thresholds clip them.

mod common;

use common::*;
use std::path::{Path, PathBuf};

const SPIKY: &str = r#"
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(3)
w = (rng.standard_normal((8, 4, 1, 1)) * 0.5).astype(np.float32)
g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], "spiky",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])],
    [numpy_helper.from_array(w, "w")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), MODEL)
for i in range(20):
    x = rng.normal(0, 0.01, (1, 4, 16, 16)).astype(np.float32)
    spikes = rng.random(x.shape) < 0.02
    x[spikes] = rng.uniform(2, 10, spikes.sum()) * rng.choice([-1, 1], spikes.sum())
    np.save(f"{CALIB}/s{i:02d}.npy", x)
"#;

/// Independent convolutions, each with its own input and output, that no single
/// calibration method serves together: `a`'s signal is a rare spike (every clipping
/// method loses it), `b` is dense with one huge outlier in the calibration set (`max`
/// and `mse` keep it and flatten the rest); `c` and `d` are benign. Run with `NAMES`
/// (the branches) and `SEED` set by [`branches`].
const BRANCHES: &str = r#"
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(SEED)
shape, out = [1, 4, 64, 64], [1, 8, 64, 64]
nodes, inits = [], []
for p in NAMES:
    inits.append(numpy_helper.from_array((rng.standard_normal((8, 4, 1, 1)) * 0.5).astype(np.float32), f"w{p}"))
    nodes.append(helper.make_node("Conv", [p, f"w{p}"], [f"y{p}"], name=f"conv_{p}"))
g = helper.make_graph(nodes, "branches",
    [helper.make_tensor_value_info(p, TensorProto.FLOAT, shape) for p in NAMES],
    [helper.make_tensor_value_info(f"y{p}", TensorProto.FLOAT, out) for p in NAMES], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), MODEL)
for i in range(24):
    # a: one spike per sample (0.006% of the values) carry its signal.
    x = {"a": rng.normal(0, 0.01, shape).astype(np.float32)}
    x["a"].flat[rng.choice(x["a"].size, 1)] = rng.uniform(500, 1000, 1)
    # b: a dense signal, with one huge outlier in a single calibration file.
    x["b"] = rng.uniform(-1, 1, shape).astype(np.float32)
    if i == 3:
        x["b"][0, 0, 0, 0] = 1e4
    if "c" in NAMES:
        x["c"] = rng.uniform(-2, 2, shape).astype(np.float32)
        x["d"] = rng.normal(0, 1, shape).astype(np.float32)
    np.savez(f"{CALIB}/s{i:02d}.npz", **x)
"#;

/// [`BRANCHES`] with the branches `names` (`ab` or `abcd`), data drawn from `seed`.
fn branches(file_name: &str, names: &str, seed: u64) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let script = format!("NAMES = \"{names}\"\nSEED = {seed}\n{BRANCHES}");
    python_model(file_name, &script)
}

/// A `--strict-accuracy` build of `model`, which must succeed.
fn strict_build(model: &Path, calib: &Path) -> tempfile::TempDir {
    let out = tempfile::tempdir().unwrap();
    let run = compile(model, calib, out.path(), &["--strict-accuracy"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    out
}

fn compile(model: &Path, calib: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "compile",
        model.to_str().unwrap(),
        "--int8",
        "--calib",
        calib.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    rtq(&args)
}

/// `{tensor: amax}` of a report's ranges, as JSON for the reference scripts.
fn amax_by_tensor(report: &serde_json::Value) -> serde_json::Value {
    report["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["tensor"].as_str().unwrap().to_string(), r["amax"].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn report(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap()
}

/// Mean cosine of the INT8 model against FP32 on the last 4 files, in onnxruntime.
fn ort_cosine(fp32: &Path, int8: &Path, calib: &Path) -> f64 {
    let code = format!(
        r#"
import glob, numpy as np, onnxruntime as ort
files = sorted(glob.glob(r"{calib}/*.npy"))[-4:]
a = ort.InferenceSession(r"{fp32}", providers=["CPUExecutionProvider"])
b = ort.InferenceSession(r"{int8}", providers=["CPUExecutionProvider"])
cos = []
for f in files:
    x = np.load(f)
    ya, yb = a.run(None, {{"x": x}})[0].ravel(), b.run(None, {{"x": x}})[0].ravel()
    cos.append(float(ya @ yb / (np.linalg.norm(ya) * np.linalg.norm(yb))))
print(np.mean(cos))
"#,
        calib = calib.display(),
        fp32 = fp32.display(),
        int8 = int8.display()
    );
    python_inline(&code).trim().parse().unwrap()
}

#[test]
fn a_missed_target_is_said_out_loud_and_strict_fails_after_writing() {
    if skip_python() {
        return;
    }
    let (_dir, model, calib) = python_model("spiky.onnx", SPIKY);
    let out = tempfile::tempdir().unwrap();
    let run = compile(&model, &calib, out.path(), &["--calib-method", "entropy"]);
    assert!(run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("warning:") && stderr.contains("misses the accuracy target"),
        "{stderr}"
    );
    assert!(stderr.contains("most sensitive tensors: x"), "{stderr}");
    let check = &report(out.path())["accuracy_check"];
    assert_eq!(check["met"], false, "{check}");
    assert_eq!(check["per_layer"]["most_sensitive"][0], "x", "{check}");
    assert!(check["misses"][0].as_str().unwrap().contains("cosine mean"));
    assert_eq!(
        check["method_search"].as_array().unwrap().len(),
        0,
        "entropy asked for: no search"
    );
    // The held-out verdict agrees with onnxruntime's reading of the model.
    let int8 = out.path().join("spiky_int8.onnx");
    assert!(ort_cosine(&model, &int8, &calib) < 0.99);

    let strict = tempfile::tempdir().unwrap();
    let run = compile(
        &model,
        &calib,
        strict.path(),
        &["--calib-method", "entropy", "--strict-accuracy"],
    );
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("--strict-accuracy") && stderr.contains("cosine mean"),
        "{stderr}"
    );
    assert!(
        strict.path().join("spiky_int8.onnx").is_file(),
        "the best model is written"
    );
    assert!(strict.path().join("report.json").is_file());
}

#[test]
fn auto_recovers_with_the_method_that_holds_the_target() {
    if skip_python() {
        return;
    }
    let (_dir, model, calib) = python_model("spiky.onnx", SPIKY);
    let entropy = tempfile::tempdir().unwrap();
    assert!(compile(
        &model,
        &calib,
        entropy.path(),
        &["--calib-method", "entropy"]
    )
    .status
    .success());
    let auto = tempfile::tempdir().unwrap();
    let run = compile(&model, &calib, auto.path(), &["--strict-accuracy"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report = report(auto.path());
    let check = &report["accuracy_check"];
    assert_eq!(check["met"], true, "{check}");
    let trials = check["method_search"].as_array().unwrap();
    let names: Vec<&str> = trials
        .iter()
        .map(|t| t["method"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["entropy", "max", "percentile", "mse"]);
    let chosen = check["method"].as_str().unwrap();
    assert_ne!(chosen, "entropy");
    assert_eq!(report["quantization"]["method"], chosen);
    // The chosen method's trial has the best margin.
    let margin = |name: &str| {
        trials.iter().find(|t| t["method"] == name).unwrap()["margin"]
            .as_f64()
            .unwrap()
    };
    assert!(names.iter().all(|n| margin(n) <= margin(chosen)));
    // The model and cache follow the chosen ranges; onnxruntime confirms the accuracy.
    let cache = |dir: &Path| std::fs::read(dir.join("spiky_calibration.cache")).unwrap();
    assert_ne!(cache(auto.path()), cache(entropy.path()));
    assert!(ort_cosine(&model, &auto.path().join("spiky_int8.onnx"), &calib) > 0.99);
}

#[test]
fn skipped_checks_are_said_and_impossible_holdouts_refused() {
    let calib = tempfile::tempdir().unwrap();
    let one: PathBuf = files_in(&demo_calib())[0].clone();
    std::fs::copy(&one, calib.path().join(one.file_name().unwrap())).unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = compile(&demo_model(), calib.path(), out.path(), &[]);
    assert!(run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("accuracy was not checked") && stderr.contains("1 calibration file"),
        "{stderr}"
    );
    let run = compile(
        &demo_model(),
        calib.path(),
        out.path(),
        &["--strict-accuracy"],
    );
    assert!(!run.status.success());

    let out = tempfile::tempdir().unwrap();
    let err = rtq_fails(&[
        "compile",
        demo_model().to_str().unwrap(),
        "--int8",
        "--calib",
        demo_calib().to_str().unwrap(),
        "--holdout",
        "1000",
        "-o",
        out.path().join("o").to_str().unwrap(),
    ]);
    assert!(
        err.contains("--holdout 1000") && err.contains("calibration file"),
        "{err}"
    );
    assert!(!out.path().join("o").exists());
}

#[test]
fn fallback_reverts_the_fewest_nodes_when_no_method_is_enough() {
    if skip_python() {
        return;
    }
    let (_dir, model, calib) = branches("two.onnx", "ab", 4);
    let out = strict_build(&model, &calib);
    let check = report(out.path())["accuracy_check"].clone();
    assert_eq!(check["met"], true, "{check}");
    // Every method alone misses the target on the calibration samples...
    let trials = check["method_search"].as_array().unwrap();
    assert_eq!(trials.len(), 4);
    assert!(
        trials.iter().all(|t| t["margin"].as_f64().unwrap() < 0.0),
        "{check}"
    );
    // ... and reverting one convolution, the one whose input the chosen ranges clip,
    // is enough.
    assert_eq!(check["fallback"], serde_json::json!(["conv_a"]), "{check}");
    assert_eq!(check["quantized_nodes"], serde_json::json!([2, 1]));
    // onnxruntime agrees: both outputs hold, and only conv_b reads Q/DQ.
    let int8 = out.path().join("two_int8.onnx");
    let code = format!(
        r#"
import glob, numpy as np, onnx, onnxruntime as ort
m = onnx.load(r"{int8}")
dq = {{o for n in m.graph.node if n.op_type == "DequantizeLinear" for o in n.output}}
convs = {{n.name: any(i in dq for i in n.input) for n in m.graph.node if n.op_type == "Conv"}}
assert convs == {{"conv_a": False, "conv_b": True}}, convs
a = ort.InferenceSession(r"{fp32}", providers=["CPUExecutionProvider"])
b = ort.InferenceSession(r"{int8}", providers=["CPUExecutionProvider"])
worst = 1.0
for f in sorted(glob.glob(r"{calib}/*.npz"))[-4:]:
    feeds = dict(np.load(f))
    for ya, yb in zip(a.run(None, feeds), b.run(None, feeds)):
        ya, yb = ya.ravel(), yb.ravel()
        worst = min(worst, float(ya @ yb / (np.linalg.norm(ya) * np.linalg.norm(yb))))
print(worst)
"#,
        int8 = int8.display(),
        fp32 = model.display(),
        calib = calib.display()
    );
    let worst: f64 = python_inline(&code).trim().parse().unwrap();
    assert!(worst > 0.99, "worst cosine {worst}");
}

#[test]
fn fallback_reverts_exactly_the_branches_an_independent_reference_finds_failing() {
    if skip_python() {
        return;
    }
    let (_dir, model, calib) = branches("four.onnx", "abcd", 9);
    let out = strict_build(&model, &calib);
    let report = report(out.path());
    let check = &report["accuracy_check"];
    // Written out in numpy, without rtq: each branch's conv with its input
    // fake-quantized at the range rtq chose and its weights quantized per output
    // channel, judged like rtq's method search and fallback (mean cosine per output
    // on the last 8 calibration files: 24 files, 4 held out). The outputs are
    // independent, so the fewest nodes to revert are exactly the failing branches.
    let ranges = amax_by_tensor(&report);
    let code = format!(
        r#"
import glob, json, numpy as np, onnx
from onnx import numpy_helper
m = onnx.load(r"{model}")
w = {{i.name: numpy_helper.to_array(i) for i in m.graph.initializer}}
amax = json.loads(r'{ranges}')
def q(x, s): return np.clip(np.round(x / s), -128, 127) * s
def conv(x, w): return np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x)
failing = []
for p in "abcd":
    wp = w["w" + p]
    ws = np.abs(wp).reshape(8, -1).max(1) / 127
    wq = np.clip(np.round(wp / ws[:, None, None, None]), -127, 127) * ws[:, None, None, None]
    cos = []
    for f in sorted(glob.glob(r"{calib}/*.npz"))[12:20]:
        x = np.load(f)[p].astype(np.float64)
        y, yq = conv(x, wp).ravel(), conv(q(x, amax[p] / 127), wq).ravel()
        cos.append(y @ yq / (np.linalg.norm(y) * np.linalg.norm(yq) + 1e-30))
    if np.mean(cos) < 0.99:
        failing.append("conv_" + p)
print(json.dumps(failing))
"#,
        model = model.display(),
        calib = calib.display(),
        ranges = ranges
    );
    let expected: serde_json::Value = serde_json::from_str(python_inline(&code).trim()).unwrap();
    assert!(
        !expected.as_array().unwrap().is_empty(),
        "the model must need a fallback: {check} {}",
        report["ranges"]
    );
    assert_eq!(check["fallback"], expected, "{check}");
    assert_eq!(check["met"], true, "{check}");
}

#[test]
fn auto_picks_the_method_an_independent_reference_finds_best() {
    if skip_python() {
        return;
    }
    let (_dir, model, calib) = python_model("spiky.onnx", SPIKY);
    // Each method's ranges, as rtq calibrates them when asked for by name.
    let mut ranges = serde_json::Map::new();
    for method in ["entropy", "max", "percentile", "mse"] {
        let out = tempfile::tempdir().unwrap();
        assert!(
            compile(&model, &calib, out.path(), &["--calib-method", method])
                .status
                .success()
        );
        let amax = report(out.path())["ranges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["tensor"] == "x")
            .unwrap()["amax"]
            .clone();
        ranges.insert(method.to_string(), amax);
    }
    // Written out in numpy, without rtq: the conv with its input fake-quantized at each
    // method's range and its weights per output channel, judged as the method search
    // judges (mean cosine on the last 8 calibration files: 20 files, 4 held out); the
    // first of the best wins, entropy first.
    let code = format!(
        r#"
import glob, json, numpy as np, onnx
from onnx import numpy_helper
w = numpy_helper.to_array(onnx.load(r"{model}").graph.initializer[0]).astype(np.float64)
ws = np.abs(w).reshape(8, -1).max(1) / 127
wq = np.clip(np.round(w / ws[:, None, None, None]), -127, 127) * ws[:, None, None, None]
def q(x, s): return np.clip(np.round(x / s), -128, 127) * s
def conv(x, w): return np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x)
best, score = None, -1.0
for method, amax in json.loads(r'{ranges}').items():
    cos = []
    for f in sorted(glob.glob(r"{calib}/*.npy"))[8:16]:
        x = np.load(f).astype(np.float64)
        y, yq = conv(x, w).ravel(), conv(q(x, amax / 127), wq).ravel()
        cos.append(y @ yq / (np.linalg.norm(y) * np.linalg.norm(yq)))
    if np.mean(cos) > score + 1e-9:
        best, score = method, np.mean(cos)
print(best)
"#,
        model = model.display(),
        calib = calib.display(),
        ranges = serde_json::Value::Object(ranges)
    );
    let expected = python_inline(&code).trim().to_string();
    let auto = tempfile::tempdir().unwrap();
    assert!(compile(&model, &calib, auto.path(), &[]).status.success());
    let report = report(auto.path());
    assert_ne!(expected, "entropy", "the model must need the search");
    assert_eq!(report["accuracy_check"]["method"], expected.as_str());
}

/// x [1, 16, 12, 12] in [0, 1] -> Conv 1x1 (w1, b1) -> Relu -> r1 -> Conv 1x1 (w2, b2)
/// -> y. The weights sit just under a rounding step (0.4961 of a maximum of 1 rounds to
/// 63/127 = 0.49606...) plus noise, so per-channel rounding shifts every output's mean
/// the same way; all inputs positive, so the shifts add up.
const SHIFTED: &str = r#"
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(21)
def weights(o, c):
    w = 0.4961 + rng.normal(0, 0.0004, (o, c, 1, 1))
    w[:, 0] = 1.0
    return (w * rng.choice([1.0, 0.5], (o, 1, 1, 1))).astype(np.float32)
inits = {"w1": weights(16, 16), "b1": rng.normal(0, 0.1, 16).astype(np.float32),
         "w2": weights(8, 16), "b2": rng.normal(0, 0.1, 8).astype(np.float32)}
nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1"),
         helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
         helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], name="conv2")]
g = helper.make_graph(nodes, "shifted",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 12])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 12, 12])],
    [numpy_helper.from_array(v, k) for k, v in inits.items()])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), MODEL)
for i in range(24):
    np.save(f"{CALIB}/s{i:02d}.npy", rng.uniform(0, 1, (1, 16, 12, 12)).astype(np.float32))
"#;

#[test]
fn bias_correction_matches_an_independent_sequential_reference() {
    if skip_python() {
        return;
    }
    let (_dir, model, calib) = python_model("shifted.onnx", SHIFTED);
    let out = tempfile::tempdir().unwrap();
    let run = compile(
        &model,
        &calib,
        out.path(),
        &["--calib-method", "max", "--bias-correction"],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report = report(out.path());
    let trial = &report["accuracy_check"]["bias_correction"];
    assert_eq!(trial["nodes"], 2, "{report}");
    assert_eq!(trial["applied"], true, "{report}");
    let ranges = amax_by_tensor(&report);
    // Written out in numpy, without rtq: both convs fake-quantized (inputs at rtq's
    // ranges, weights per output channel), the first's mean shift per channel removed
    // before the second runs, on the files bias correction measures on (24 files, 4
    // held out, the last 8 of the other 20 judge: files 0-11). Prints the corrected
    // biases; rtq's model must carry the same.
    let code = format!(
        r#"
import glob, json, numpy as np, onnx
from onnx import numpy_helper
m = onnx.load(r"{model}")
p = {{i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}}
amax = json.loads(r'{ranges}')
def fq(x, a): s = np.float32(a) / np.float32(127); return np.clip(np.round(x / s), -128, 127) * s
def wq(w):
    s = (np.abs(w).reshape(len(w), -1).max(1) / 127).astype(np.float32).astype(np.float64)
    return np.clip(np.round(w / s[:, None, None, None]), -127, 127) * s[:, None, None, None]
def conv(x, w, b): return np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x) + b[None, :, None, None]
xs = [np.load(f).astype(np.float64) for f in sorted(glob.glob(r"{calib}/*.npy"))[:12]]
mean = lambda ys: np.mean([y.mean(axis=(0, 2, 3)) for y in ys], axis=0)
f1 = [conv(x, p["w1"], p["b1"]) for x in xs]
q1 = [conv(fq(x, amax["x"]), wq(p["w1"]), p["b1"]) for x in xs]
s1 = mean(q1) - mean(f1)
q1 = [np.maximum(y - s1[None, :, None, None], 0) for y in q1]
f2 = [conv(np.maximum(y, 0), p["w2"], p["b2"]) for y in f1]
q2 = [conv(fq(r, amax["r1"]), wq(p["w2"]), p["b2"]) for r in q1]
s2 = mean(q2) - mean(f2)
print(json.dumps({{"conv1": (p["b1"] - s1).tolist(), "conv2": (p["b2"] - s2).tolist(),
                  "shift": float(np.abs(s2).max())}}))
"#,
        model = model.display(),
        calib = calib.display(),
        ranges = ranges
    );
    let expected: serde_json::Value = serde_json::from_str(python_inline(&code).trim()).unwrap();
    assert!(
        expected["shift"].as_f64().unwrap() > 1e-3,
        "the model must shift the means: {expected}"
    );
    let int8 = out.path().join("shifted_int8.onnx");
    let code = format!(
        r#"
import json, onnx
from onnx import numpy_helper
m = onnx.load(r"{int8}")
inits = {{i.name: numpy_helper.to_array(i) for i in m.graph.initializer}}
print(json.dumps({{n.name: inits[n.input[2]].tolist() for n in m.graph.node if n.op_type == "Conv"}}))
"#,
        int8 = int8.display()
    );
    let got: serde_json::Value = serde_json::from_str(python_inline(&code).trim()).unwrap();
    for conv in ["conv1", "conv2"] {
        let pairs = got[conv]
            .as_array()
            .unwrap()
            .iter()
            .zip(expected[conv].as_array().unwrap());
        for (g, e) in pairs {
            let (g, e) = (g.as_f64().unwrap(), e.as_f64().unwrap());
            assert!(
                (g - e).abs() < 1e-4,
                "{conv}: {g} vs {e}\n{got}\n{expected}"
            );
        }
    }
}
