//! The compile pipeline's stages seen from the command line: `--stop-after` at every
//! stage and precision pass, stops a build never reaches refused before any work,
//! `--dump-ir` over the precision passes, and the report written once.

mod common;

use common::*;
use std::path::Path;

/// An INT8 compile of the bundled model on 4 calibration files, plus `extra`.
fn int8_args<'a>(calib: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--int8",
        "--calib",
        calib,
        "--calib-samples",
        "4",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    args
}

fn file_names(dir: &Path) -> Vec<String> {
    files_in(dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn ops(model: &Path) -> serde_json::Value {
    let out = rtq_ok(&["inspect", model.to_str().unwrap(), "--json"]);
    serde_json::from_str::<serde_json::Value>(&out).unwrap()["ops"].clone()
}

#[test]
fn stop_after_writes_each_stage_and_precision_pass() {
    let calib = demo_calib();
    let calib = calib.to_str().unwrap();
    // (stop, model written, calibration cache written, Q/DQ in the model)
    let cases = [
        ("load", "tinyresnet_load.onnx", false, false),
        ("optimize", "tinyresnet_optimized.onnx", false, false),
        ("fold-batch-norm", "tinyresnet_optimized.onnx", false, false),
        ("calibrate", "tinyresnet_optimized.onnx", true, false),
        ("int8-qdq", "tinyresnet_int8.onnx", true, true),
        ("quantize", "tinyresnet_int8.onnx", true, true),
    ];
    for (stop, model, cache, qdq) in cases {
        let out = tempfile::tempdir().unwrap();
        compile_ok(
            &demo_model(),
            out.path(),
            &int8_args(calib, &["--stop-after", stop]),
        );
        let names = file_names(out.path());
        assert!(names.contains(&model.to_string()), "{stop}: {names:?}");
        assert!(
            names.contains(&"report.json".to_string()),
            "{stop}: {names:?}"
        );
        assert_eq!(
            names.contains(&"tinyresnet_calibration.cache".to_string()),
            cache,
            "{stop}: {names:?}"
        );
        let ops = ops(&out.path().join(model));
        assert_eq!(ops.get("QuantizeLinear").is_some(), qdq, "{stop}: {ops}");
    }
}

#[test]
fn stops_the_build_never_reaches_are_refused_before_any_work() {
    let calib = demo_calib();
    let calib = calib.to_str().unwrap();
    let model = demo_model();
    let model = model.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--stop-after", "calibrate"], "calibrates nothing"),
        (&["--stop-after", "quantize"], "no precision transform"),
        (&["--fp16", "--stop-after", "int8-qdq"], "inserts no INT8"),
        (
            &["--int8", "--calib", calib, "--stop-after", "fp16"],
            "converts nothing to FP16",
        ),
        (
            &[
                "--disable-pass",
                "fold-batch-norm",
                "--stop-after",
                "fold-batch-norm",
            ],
            "that pass is disabled",
        ),
    ];
    for (extra, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut args = vec!["compile", model, "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        let err = rtq_fails(&args);
        assert!(
            err.contains("--stop-after") && err.contains(reason),
            "{extra:?}: {err}"
        );
        assert!(!out.exists(), "{extra:?}: nothing is written");
    }
    let err = rtq_fails(&["compile", model, "--stop-after", "fold-bn"]);
    assert!(
        err.contains("fold-bn") && err.contains("calibrate") && err.contains("int8-qdq"),
        "{err}"
    );
}

#[test]
fn dump_ir_and_pass_statistics_cover_the_precision_passes() {
    let calib = demo_calib();
    let out = tempfile::tempdir().unwrap();
    let mut args = vec![
        "compile",
        "models/tinyresnet.onnx",
        "-o",
        out.path().to_str().unwrap(),
        "--fp16",
        "--dump-ir",
    ];
    args.extend(int8_args(calib.to_str().unwrap(), &[]));
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_rtq"))
        .current_dir(root())
        .args(&args)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    let int8 = stderr
        .find("=== after int8-qdq ===")
        .expect("int8 pass dumped");
    let fp16 = stderr.find("=== after fp16 ===").expect("fp16 pass dumped");
    assert!(int8 < fp16, "INT8 Q/DQ go in before the FP16 conversion");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("report.json")).unwrap()).unwrap();
    let passes: Vec<&str> = report["passes"]["precision"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(passes, ["int8-qdq", "fp16", "infer-shapes"]);
    // The reports list themselves once, last (the HTML page, then the JSON), after
    // the model and the cache.
    let outputs: Vec<&str> = report["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert_eq!(outputs.len(), 4, "{outputs:?}");
    assert!(
        outputs[0].ends_with("tinyresnet_int8_fp16.onnx"),
        "{outputs:?}"
    );
    assert!(outputs[2].ends_with("report.html"), "{outputs:?}");
    assert!(outputs[3].ends_with("report.json"), "{outputs:?}");
}

#[test]
fn mixed_build_reports_the_scales_it_stores() {
    if skip_python() {
        return;
    }
    let calib = demo_calib();
    let out = tempfile::tempdir().unwrap();
    compile_ok(
        &demo_model(),
        out.path(),
        &int8_args(calib.to_str().unwrap(), &["--fp16"]),
    );
    // Every activation scale in the model equals the report's scale for its tensor.
    let checked = python_inline(&format!(
        r#"
import json, onnx, numpy as np
from onnx import numpy_helper
m = onnx.load(r"{model}")
init = {{i.name: numpy_helper.to_array(i) for i in m.graph.initializer}}
# The tensor each QuantizeLinear reads (through the input's cast, if any) -> its scale.
casts = {{n.output[0]: n.input[0] for n in m.graph.node if n.op_type == "Cast"}}
scales = {{casts.get(n.input[0], n.input[0]): float(init[n.input[1]])
          for n in m.graph.node if n.op_type == "QuantizeLinear"}}
report = json.load(open(r"{report}"))
n = 0
for r in report["ranges"]:
    if r["tensor"] in scales:
        # The report's f32 (printed shortest) is exactly the stored FP16 value.
        scale = np.float32(r["scale"])
        assert np.float16(scale) == scale, r
        assert np.float32(scales[r["tensor"]]) == scale, (r["tensor"], scales[r["tensor"]], scale)
        n += 1
print(n)
"#,
        model = out.path().join("tinyresnet_int8_fp16.onnx").display(),
        report = out.path().join("report.json").display(),
    ));
    let n: usize = checked.trim().parse().unwrap();
    assert!(n >= 5, "compared {n} scales");
}
