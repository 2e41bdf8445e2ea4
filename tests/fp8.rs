//! FP8 E4M3 builds (`--fp8`, `--fp8 --fp16`): Q/DQ with FLOAT8E4M3FN zero points at
//! opset 19, weights stored as FP8 per output channel, activation scales amax / 448,
//! no TensorRT calibration cache. Each build is checked by onnx.checker (full check),
//! run in onnxruntime against the FP32 original, and its FP8 weights are recomputed
//! independently (ml_dtypes, which onnx depends on) from the FP32 build's weights.
//! Needs requirements-test.txt; `RTQ_SKIP_PYTHON_TESTS=1` skips.

mod common;

use common::*;
use std::path::{Path, PathBuf};

/// The build's report.json.
fn report(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

fn held_out() -> Vec<PathBuf> {
    files_in(&demo_calib()).into_iter().rev().take(4).collect()
}

#[test]
fn fp8_builds_pass_the_checker_run_in_onnxruntime_and_keep_accuracy() {
    if skip_python() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let calib = demo_calib();
    for (name, extra, suffix) in [
        ("fp8", vec!["--fp8"], "_fp8.onnx"),
        ("fp8-fp16", vec!["--fp8", "--fp16"], "_fp8_fp16.onnx"),
    ] {
        let out = work.path().join(name);
        let mut args = extra.clone();
        args.extend(["--calib", calib.to_str().unwrap(), "--quiet"]);
        compile_ok(&demo_model(), &out, &args);
        let built = built_model(&out);
        assert!(built.to_string_lossy().ends_with(suffix), "{built:?}");
        // FP8 has no TensorRT calibration cache.
        assert!(
            !files_in(&out)
                .iter()
                .any(|p| p.extension().is_some_and(|x| x == "cache")),
            "{name}: {:?}",
            files_in(&out)
        );
        let mut check: Vec<PathBuf> = vec![built.clone(), demo_model()];
        check.extend(held_out());
        let c: serde_json::Value = serde_json::from_str(&python("check_model.py", &check)).unwrap();
        assert!(c["opset"].as_u64().unwrap() >= 19, "{name}: {c}");
        assert!(c["qdq"].as_u64().unwrap() > 0, "{name}: {c}");
        assert!(
            c["weight_dtypes"]["float8_e4m3fn"].as_u64().unwrap() > 0,
            "{name}: {c}"
        );
        let cos = c["cosine_min"].as_f64().unwrap();
        assert!(cos >= 0.99, "{name}: cosine {cos} ({c})");
        let r = report(&out);
        let precision = if name == "fp8" { "fp8" } else { "fp8+fp16" };
        assert_eq!(r["precision"], precision, "{name}");
        // Every reported activation scale is amax / 448 (FP16-exact in the mixed build).
        for range in r["ranges"].as_array().unwrap() {
            let amax = range["amax"].as_f64().unwrap() as f32;
            let scale = range["scale"].as_f64().unwrap() as f32;
            if name == "fp8" {
                assert_eq!(scale, amax / 448.0, "{range}");
            } else {
                assert!(
                    scale >= amax / 448.0 && scale <= amax / 448.0 * 1.001,
                    "{range}"
                );
            }
        }
    }
}

/// The FP8 weights and activation quantizers, recomputed outside rtq: each FP8 weight
/// is ml_dtypes' float8_e4m3fn of the FP32 build's weight over its channel's scale,
/// each scale that weight channel's max |w| / 448, every Q/DQ zero point FP8.
const CHECK_FP8_WEIGHTS: &str = r#"
import sys, json, numpy as np, onnx, ml_dtypes
from onnx import numpy_helper
fp8, fp32 = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
inits = {i.name: i for i in fp8.graph.initializer}
ref = {i.name: numpy_helper.to_array(i) for i in fp32.graph.initializer}
checked = 0
for n in fp8.graph.node:
    if n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
        continue
    if len(n.input) > 2:
        assert inits[n.input[2]].data_type == onnx.TensorProto.FLOAT8E4M3FN, n.name
    src = inits.get(n.input[0])
    if src is None:
        continue
    assert src.data_type == onnx.TensorProto.FLOAT8E4M3FN, n.name
    q = numpy_helper.to_array(src)
    scale = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
    w = ref[n.input[0][: -len("_quantized")]].astype(np.float32)
    axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
    shape = [1] * w.ndim
    if scale.ndim == 1:
        shape[axis] = -1
    s = scale.reshape(shape)
    amax = np.max(np.abs(w), axis=tuple(i for i in range(w.ndim) if i != axis), keepdims=True) if scale.ndim == 1 else np.max(np.abs(w))
    expect_scale = np.where(amax > 0, amax / np.float32(448), np.float32(1)).astype(np.float32)
    assert np.array_equal(s, expect_scale.reshape(s.shape)), n.name
    expect = (w / s).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(q.view(np.uint8), expect.view(np.uint8)), n.name
    checked += 1
print(json.dumps({"weights": checked}))
"#;

#[test]
fn fp8_weights_equal_an_independent_e4m3_conversion() {
    if skip_python() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let calib = demo_calib();
    let fp32 = work.path().join("fp32");
    compile_ok(&demo_model(), &fp32, &["--quiet"]);
    let fp8 = work.path().join("fp8");
    // Equalization rescales weights, so the FP32 build's weights are only the FP8
    // build's source without it.
    compile_ok(
        &demo_model(),
        &fp8,
        &[
            "--fp8",
            "--calib",
            calib.to_str().unwrap(),
            "--no-equalize",
            "--quiet",
        ],
    );
    let script = work.path().join("check.py");
    std::fs::write(&script, CHECK_FP8_WEIGHTS).unwrap();
    let out = rtq_test_support::run_python(&script, &[built_model(&fp8), built_model(&fp32)]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(v["weights"].as_u64().unwrap() >= 5, "{v}");
}

#[test]
fn fp8_refuses_what_it_cannot_do() {
    let model = demo_model();
    let model = model.to_str().unwrap();
    let calib = demo_calib();
    let calib = calib.to_str().unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("o");
    let out = out.to_str().unwrap();
    let err = rtq_fails(&["compile", model, "-o", out, "--fp8"]);
    assert!(err.contains("--fp8 needs calibration data"), "{err}");
    let err = rtq_fails(&[
        "compile", model, "-o", out, "--fp8", "--int8", "--calib", calib,
    ]);
    assert!(err.contains("--fp8") && err.contains("--int8"), "{err}");
    let cache = work.path().join("c.cache");
    std::fs::write(&cache, "TRT-8600-EntropyCalibration2\n").unwrap();
    let err = rtq_fails(&[
        "compile",
        model,
        "-o",
        out,
        "--fp8",
        "--calib-cache",
        cache.to_str().unwrap(),
    ]);
    assert!(err.contains("INT8"), "{err}");
    let err = rtq_fails(&[
        "compile",
        model,
        "-o",
        out,
        "--fp8",
        "--calib",
        calib,
        "--stop-after",
        "int8-qdq",
    ]);
    assert!(err.contains("no INT8 Q/DQ"), "{err}");
    assert!(!Path::new(out).exists(), "nothing written");
}
