//! Control flow (If, Loop, Scan, and an If holding a Loop that reads a value two scopes
//! out), with bodies reading outer values, from `tests/python/make_control_flow.py`:
//! rtq's executor computes what onnxruntime computes; every mode builds a model that
//! passes onnx.checker's full check and runs in onnxruntime close to FP32, with the
//! weighted ops around the control flow quantized; an If whose condition is a
//! constant is folded into the branch it takes; onnx's own node tests of the three ops
//! pass; the weighted ops inside bodies are quantized; Silero VAD (a real If + LSTM
//! model from its PyPI wheel, its network inside If branches) builds in every mode.
//! Needs requirements-test.txt; `RTQ_SKIP_PYTHON_TESTS=1` skips.

mod common;

use common::*;
use rtq_exec::Plan;
use rtq_test_support::{skip_python, write_npy_f32, Rng};
use std::path::{Path, PathBuf};

const KINDS: [&str; 4] = ["if", "loop", "scan", "nested"];

fn make(kind: &str, dir: &Path) -> (PathBuf, PathBuf) {
    let model = dir.join(format!("{kind}.onnx"));
    let calib = dir.join("calib");
    python(
        "make_control_flow.py",
        &[kind, model.to_str().unwrap(), calib.to_str().unwrap(), "12"],
    );
    (model, calib)
}

/// One input of `kind`'s model: its shape for sample `i`, shifted so that If models
/// take both branches.
fn sample(kind: &str, i: usize, rng: &mut Rng) -> (Vec<usize>, Vec<f32>) {
    let shape = if kind == "scan" {
        vec![1, 5 + i, 8]
    } else {
        vec![1, 3, 8, 8]
    };
    let shift = if i % 2 == 0 { 0.8 } else { -0.8 };
    let n: usize = shape.iter().product();
    let values = (0..n).map(|_| rng.normal() as f32 + shift).collect();
    (shape, values)
}

/// Compiles `model` with `mode` (calibrated on `calib`) into `out`, then checks the
/// built model against `model` on `held_out` (check_model.py's JSON, and its path).
fn build_and_check(
    model: &Path,
    calib: &Path,
    held_out: &[PathBuf],
    out: &Path,
    mode: &[&str],
) -> (serde_json::Value, PathBuf) {
    let mut args = mode.to_vec();
    args.extend_from_slice(&["--calib", calib.to_str().unwrap(), "--quiet"]);
    compile_ok(model, out, &args);
    let built = built_model(out);
    let mut check: Vec<&Path> = vec![&built, model];
    check.extend(held_out.iter().map(PathBuf::as_path));
    let checked = serde_json::from_str(&python("check_model.py", &check)).unwrap();
    (checked, built)
}

#[test]
fn executor_matches_onnxruntime() {
    if skip_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(3);
    for kind in KINDS {
        let (model, _) = make(kind, dir.path());
        let graph = rtq_frontend::load_model(&model).unwrap();
        let plan = Plan::new(&graph).unwrap();
        let input = graph.value(graph.inputs[0]).name.clone();
        let cases = dir.path().join(format!("{kind}_cases"));
        std::fs::create_dir_all(&cases).unwrap();
        for i in 0..4 {
            let (shape, values) = sample(kind, i, &mut rng);
            write_npy_f32(&cases.join(format!("{i}_in.npy")), &shape, &values);
            let x = rtq_ir::Tensor::from_f32(shape, values);
            let outputs = plan.run(&[(input.clone(), x)]).unwrap();
            for (k, t) in outputs.iter().enumerate() {
                let v = t.to_f32_vec();
                write_npy_f32(&cases.join(format!("{i}_out{k}.npy")), t.shape(), &v);
            }
        }
        let worst = python_inline(&format!(
            r#"
import glob, numpy as np, onnxruntime as ort
s = ort.InferenceSession(r"{model}", providers=["CPUExecutionProvider"])
worst = 0.0
for i in range(4):
    x = np.load(r"{cases}/%d_in.npy" % i)
    for k, ref in enumerate(s.run(None, {{s.get_inputs()[0].name: x}})):
        got = np.load(r"{cases}/%d_out%d.npy" % (i, k))
        assert got.shape == ref.shape, (i, k, got.shape, ref.shape)
        worst = max(worst, float(np.max(np.abs(got - ref))))
print(worst)
"#,
            model = model.display(),
            cases = cases.display()
        ));
        let worst: f64 = worst.trim().parse().unwrap();
        assert!(
            worst < 1e-4,
            "{kind}: rtq vs onnxruntime max |diff| {worst}"
        );
    }
}

#[test]
fn every_mode_builds_control_flow_models() {
    if skip_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let (model, calib) = make(kind, dir.path());
        let held_out: Vec<PathBuf> = files_in(&calib).into_iter().rev().take(4).collect();
        for (mode, floor) in [
            (&[][..], 0.99999),
            (&["--fp16"][..], 0.999),
            (&["--int8"][..], 0.99),
            (&["--int8", "--fp16"][..], 0.99),
        ] {
            let out = dir.path().join(format!("{kind}_out{}", mode.join("")));
            let (c, _) = build_and_check(&model, &calib, &held_out, &out, mode);
            let cos = c["cosine_min"].as_f64().unwrap();
            assert!(cos >= floor, "{kind} {mode:?}: cosine {cos} < {floor}: {c}");
            if mode.contains(&"--int8") && kind != "scan" {
                // The Convs around the control flow are quantized.
                assert!(c["qdq"].as_u64().unwrap() >= 2, "{kind} {mode:?}: {c}");
            }
        }
    }
}

#[test]
fn an_if_on_a_constant_condition_is_folded_into_its_branch() {
    let (_dir, model, calib) = python_model(
        "const_if.onnx",
        r#"
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
F = TensorProto.FLOAT
then = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["t"], name="then_mul")], "then", [],
                         [helper.make_tensor_value_info("t", F, None)])
other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
                          [helper.make_tensor_value_info("e", F, None)])
g = helper.make_graph(
    [helper.make_node("If", ["flag"], ["y"], name="if", then_branch=then, else_branch=other)],
    "const_if", [helper.make_tensor_value_info("x", F, [1, 4])],
    [helper.make_tensor_value_info("y", F, [1, 4])],
    [numpy_helper.from_array(np.array(True), "flag"), numpy_helper.from_array(np.array(3.0, np.float32), "k")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, MODEL)
np.save(f"{CALIB}/s0.npy", np.arange(4, dtype=np.float32).reshape(1, 4))
"#,
    );
    let out = model.parent().unwrap().join("out");
    let json: serde_json::Value =
        serde_json::from_str(&compile_ok(&model, &out, &["--json"])).unwrap();
    let built = out.join("const_if_opt.onnx");
    let ops = python_inline(&format!(
        "import onnx\nprint(' '.join(n.op_type for n in onnx.load(r'{}').graph.node))",
        built.display()
    ));
    assert_eq!(ops.trim(), "Mul", "{json}");
    let c: serde_json::Value = serde_json::from_str(&python(
        "check_model.py",
        &[built.as_path(), model.as_path(), &calib.join("s0.npy")],
    ))
    .unwrap();
    assert!(c["max_abs"].as_f64().unwrap() < 1e-6, "{c}");
}

#[test]
fn onnx_node_tests_of_if_loop_and_scan_pass() {
    if skip_python() {
        return;
    }
    // The onnx package's own cases, with the outputs its reference implementation expects.
    let dir = tempfile::tempdir().unwrap();
    let listed: serde_json::Value =
        serde_json::from_str(&python("onnx_node_cases.py", &[dir.path()])).unwrap();
    let tensor: Vec<&str> = listed["tensor"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(tensor.len() >= 5, "{listed}");
    for name in &tensor {
        let graph = rtq_frontend::load_model(&dir.path().join(format!("{name}.onnx"))).unwrap();
        let specs = rtq_calib::InputSpec::from_graph(&graph).unwrap();
        let feeds = rtq_calib::load_file(
            &dir.path().join(format!("{name}_in.npz")),
            &specs,
            &rtq_calib::DataOptions::default(),
        )
        .unwrap()
        .remove(0);
        let outputs = Plan::new(&graph).unwrap().run(&feeds).unwrap();
        for (k, t) in outputs.iter().enumerate() {
            let path = dir.path().join(format!("{name}_got{k}.npy"));
            write_npy_f32(&path, t.shape(), &t.to_f32_vec());
        }
    }
    let report = python_inline(&format!(
        r#"
import numpy as np
for name in {names:?}:
    expected = np.load(r"{dir}/%s_expected.npz" % name)
    for k in range(len(expected.files)):
        want = expected["output_%d" % k]
        got = np.load(r"{dir}/%s_got%d.npy" % (name, k))
        assert got.shape == want.shape, (name, k, got.shape, want.shape)
        assert np.allclose(got, want.astype(np.float32), rtol=1e-5, atol=1e-5), (name, k, got, want)
print("ok")
"#,
        names = tensor,
        dir = dir.path().display()
    ));
    assert_eq!(report.trim(), "ok");
    // Sequences, optionals and Scan-8 are refused at load with one clear sentence.
    for name in listed["other"].as_array().unwrap() {
        let model = dir.path().join(format!("{}.onnx", name.as_str().unwrap()));
        let out = dir.path().join("refused");
        let err = rtq_fails(&[
            "compile",
            model.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(
            err.contains("only tensor types") || err.contains("unsupported ops: `Scan`"),
            "{name}: {err}"
        );
        assert!(!out.exists(), "{name}: nothing written");
    }
}

/// Every QuantizeLinear of a model, by the graph (`top`, or the body's attribute path)
/// it sits in, counted by a Python walk of the ONNX file.
const QDQ_BY_GRAPH: &str = r#"
import json, sys, onnx
def walk(g, path, out):
    q = sum(1 for n in g.node if n.op_type == "QuantizeLinear")
    if q:
        out[path] = q
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                walk(a.g, (path + "/" if path != "top" else "") + n.name + "." + a.name, out)
out = {}
walk(onnx.load(sys.argv[1]).graph, "top", out)
print(json.dumps(out))
"#;

#[test]
fn weighted_ops_inside_bodies_are_quantized() {
    if skip_python() {
        return;
    }
    // An If whose then-branch runs a Loop of Conv + Relu steps and whose else-branch a
    // Conv: calibration observes both branches (samples of both signs) and the loop's
    // every iteration, and the Q/DQ land inside the bodies.
    let dir = tempfile::tempdir().unwrap();
    let (model, calib) = make("weighted", dir.path());
    let held_out: Vec<PathBuf> = files_in(&calib).into_iter().rev().take(4).collect();
    let script = dir.path().join("qdq_by_graph.py");
    std::fs::write(&script, QDQ_BY_GRAPH).unwrap();
    for mode in [&["--int8"][..], &["--int8", "--fp16"][..], &["--fp8"][..]] {
        let out = dir.path().join(format!("out{}", mode.join("")));
        let (c, built) = build_and_check(&model, &calib, &held_out, &out, mode);
        let cos = c["cosine_min"].as_f64().unwrap();
        assert!(cos >= 0.99, "{mode:?}: cosine {cos}: {c}");
        let by_graph: serde_json::Value = serde_json::from_str(
            rtq_test_support::run_python(&script, std::slice::from_ref(&built)).trim(),
        )
        .unwrap();
        for body in ["branch.else_branch", "branch.then_branch/steps.body"] {
            assert!(
                by_graph[body].as_u64().unwrap_or(0) >= 1,
                "{mode:?}: no Q/DQ in {body}: {by_graph}"
            );
        }
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        let bodies = report["passes"]["qdq_in_bodies"]["bodies"].to_string();
        assert!(
            bodies.contains("step_conv") && bodies.contains("else_conv"),
            "{bodies}"
        );
        assert_eq!(report["quantization"]["quantized_nodes"], 4, "{report}");
        assert!(
            !report["warnings"].to_string().contains("kept in float"),
            "{}",
            report["warnings"]
        );
    }
    // Calibration data that never takes the else-branch leaves it in float, and says so.
    let positive = dir.path().join("positive");
    std::fs::create_dir_all(&positive).unwrap();
    for f in files_in(&calib).iter().skip(1).step_by(2) {
        std::fs::copy(f, positive.join(f.file_name().unwrap())).unwrap();
    }
    let out = dir.path().join("positive_out");
    compile_ok(
        &model,
        &out,
        &["--int8", "--calib", positive.to_str().unwrap(), "--quiet"],
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("1 of the 2") && warnings.contains("never ran on the calibration data"),
        "{warnings}"
    );
}

#[test]
fn silero_vad_builds_in_every_mode() {
    // Silero VAD (from its PyPI wheel, downloaded by scripts/test.sh): a Conv + LSTM
    // voice-activity model exported with If nodes around the 8 kHz / 16 kHz paths, and
    // its If-less opset-18 export.
    let wheel = root().join("target/test-wheels/silero_vad-6.2.3-py3-none-any.whl");
    if skip_python() || !wheel.exists() {
        eprintln!(
            "{} not downloaded (scripts/test.sh does): skipped",
            wheel.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let calib = dir.path().join("calib");
    python_inline(&format!(
        r#"
import os, zipfile, numpy as np
z = zipfile.ZipFile(r"{wheel}")
for name in ("silero_vad.onnx", "silero_vad_op18_ifless.onnx"):
    open(os.path.join(r"{dir}", name), "wb").write(z.read("silero_vad/data/" + name))
os.makedirs(r"{calib}")
rng = np.random.default_rng(0)
t = np.arange(512) / 16000
for i in range(12):
    x = rng.uniform(0.01, 0.5) * np.sin(2 * np.pi * rng.uniform(100, 3000) * t) + rng.normal(0, 0.02, 512) * (i % 3)
    state = rng.normal(0, 0.3, (2, 1, 128)) * (i % 2)
    np.savez(os.path.join(r"{calib}", "s%02d.npz" % i), input=x[None].astype(np.float32),
             state=state.astype(np.float32), sr=np.array(16000, np.int64))
"#,
        wheel = wheel.display(),
        dir = dir.path().display(),
        calib = calib.display()
    ));
    for model in ["silero_vad", "silero_vad_op18_ifless"] {
        let source = dir.path().join(format!("{model}.onnx"));
        for mode in [
            &[][..],
            &["--fp16"][..],
            &["--int8"][..],
            &["--int8", "--fp16"][..],
        ] {
            let out = dir.path().join(format!("{model}{}", mode.join("")));
            let mut args = mode.to_vec();
            args.extend_from_slice(&["--calib", calib.to_str().unwrap(), "--quiet"]);
            compile_ok(&source, &out, &args);
            let built = built_model(&out);
            let worst = python_inline(&format!(
                r#"
import glob, numpy as np, onnx, onnxruntime as ort
onnx.checker.check_model(onnx.load(r"{built}"), full_check=True)
a = ort.InferenceSession(r"{source}", providers=["CPUExecutionProvider"])
b = ort.InferenceSession(r"{built}", providers=["CPUExecutionProvider"])
names = [i.name for i in a.get_inputs()]
worst = 0.0
for f in sorted(glob.glob(r"{calib}/*.npz")):
    feeds = {{k: v for k, v in np.load(f).items() if k in names}}
    prob_a, prob_b = a.run(["output"], feeds)[0], b.run(["output"], feeds)[0]
    worst = max(worst, float(np.max(np.abs(prob_a - prob_b))))
print(worst)
"#,
                built = built.display(),
                source = source.display(),
                calib = calib.display()
            ));
            let worst: f64 = worst.trim().parse().unwrap();
            // The speech probability.
            assert!(
                worst < 0.05,
                "{model} {mode:?}: speech probability off by {worst}"
            );
            if mode.contains(&"--int8") {
                // The whole network sits in If branches: the 16 kHz one (the samples')
                // is quantized inside, the 8 kHz one never runs and stays in float.
                let report: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap())
                        .unwrap();
                let quantized = report["quantization"]["quantized_nodes"].as_u64().unwrap();
                assert!(quantized >= 4, "{model} {mode:?}: {quantized} quantized");
                let warnings = report["warnings"].to_string();
                assert!(
                    warnings.contains("never ran on the calibration data"),
                    "{warnings}"
                );
            }
        }
    }
}
