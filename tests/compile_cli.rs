//! End-to-end `rtq compile` on the bundled model, checked with onnx's checker and
//! onnxruntime as independent referees.

mod common;

use common::*;
use std::path::Path;
use std::time::Duration;

fn held_out_inputs() -> Vec<std::path::PathBuf> {
    files_in(&demo_calib()).into_iter().rev().take(6).collect()
}

fn check(candidate: &Path) -> serde_json::Value {
    let reference = demo_model();
    let inputs = held_out_inputs();
    let mut args: Vec<&Path> = vec![candidate, &reference];
    args.extend(inputs.iter().map(|p| p.as_path()));
    serde_json::from_str(&python("check_model.py", &args)).unwrap()
}

#[test]
fn int8_build_emits_qdq_model_cache_and_report() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    let stdout = rtq_ok(&[
        "compile",
        demo_model().to_str().unwrap(),
        "--int8",
        "--calib",
        demo_calib().to_str().unwrap(),
        "-o",
        o,
        "--quiet",
    ]);
    assert!(stdout.is_empty(), "--quiet prints nothing: {stdout}");
    let model = out.path().join("tinyresnet_int8.onnx");
    let cache = out.path().join("tinyresnet_calibration.cache");
    let report = out.path().join("report.json");
    for f in [&model, &cache, &report] {
        assert!(f.exists(), "{} missing", f.display());
    }

    // Calibration cache: TensorRT header, one `name: hex` line per activation tensor.
    let text = std::fs::read_to_string(&cache).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("TRT-100100-EntropyCalibration2"));
    let entries: Vec<(&str, &str)> = lines
        .map(|l| l.rsplit_once(": ").expect("name: hex"))
        .collect();
    assert!(
        entries.iter().any(|(n, _)| *n == "input"),
        "graph input calibrated"
    );
    let report_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let ranges = report_json["ranges"].as_array().unwrap();
    assert_eq!(ranges.len(), entries.len());
    for (name, hex) in &entries {
        let bits = u32::from_str_radix(hex, 16).unwrap();
        let scale = f32::from_bits(bits);
        let r = ranges.iter().find(|r| r["tensor"] == *name).unwrap();
        let amax = r["amax"].as_f64().unwrap() as f32;
        assert!(scale > 0.0 && scale.is_finite());
        assert_eq!(scale, amax / 127.0, "{name}: cache scale is amax/127");
    }
    let q = &report_json["quantization"];
    assert_eq!(q["method"], "entropy");
    // Six convolutions with per-channel int8 weights; the Gemm head is a GEMV at the
    // calibration data's batch of 1 and stays in float.
    assert_eq!(q["weight_qdq"].as_u64().unwrap(), 6, "{q}");
    assert!(q["skipped"].to_string().contains("GEMV"), "{q}");
    let acc = &report_json["accuracy"][0];
    assert_eq!(acc["variant"], "int8");
    assert!(acc["samples"].as_u64().unwrap() >= 1);

    if skip_python() {
        return;
    }
    let c = check(&model);
    assert!(c["qdq"].as_u64().unwrap() > 10, "{c}");
    assert!(c["opset"].as_i64().unwrap() >= 13);
    assert!(
        c["cosine_min"].as_f64().unwrap() > 0.97,
        "INT8 agrees with FP32 in onnxruntime: {c}"
    );
    assert!(c["top1"].as_f64().unwrap() >= 0.8, "{c}");
    // INT8 weights: int8 tensors dominate, total well under the FP32 bytes.
    let ratio = c["initializer_bytes"].as_f64().unwrap() / c["reference_bytes"].as_f64().unwrap();
    assert!(ratio <= 0.30, "INT8 model weights are {ratio:.3} of FP32");
}

#[test]
fn fp16_build_halves_weights_and_agrees_with_fp32() {
    let out = tempfile::tempdir().unwrap();
    compile_ok(&demo_model(), out.path(), &["--fp16", "--quiet"]);
    let model = out.path().join("tinyresnet_fp16.onnx");
    assert!(model.exists());
    let j = inspect_against(&model, &demo_model());
    let ratio = j["weight_ratio_vs_baseline"].as_f64().unwrap();
    assert!(ratio <= 0.51, "FP16 weights are {ratio:.3} of FP32");
    assert_eq!(j["precision"], "fp16");
    if skip_python() {
        return;
    }
    let c = check(&model);
    assert!(c["cosine_min"].as_f64().unwrap() > 0.9999, "{c}");
    assert_eq!(c["top1"].as_f64().unwrap(), 1.0, "{c}");
}

#[test]
fn int8_with_fp16_builds_a_mixed_model_with_half_scales_and_biases() {
    let out = tempfile::tempdir().unwrap();
    let calib = demo_calib();
    compile_ok(
        &demo_model(),
        out.path(),
        &[
            "--int8",
            "--fp16",
            "--calib",
            calib.to_str().unwrap(),
            "--quiet",
        ],
    );
    let model = out.path().join("tinyresnet_int8_fp16.onnx");
    assert!(model.exists());
    assert!(out.path().join("tinyresnet_calibration.cache").exists());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["precision"], "int8+fp16");
    assert_eq!(
        report["output_opset"], 19,
        "half-precision Q/DQ need opset 19"
    );
    assert_eq!(report["quantization"]["weight_qdq"], 6);
    let acc = &report["accuracy"][0]["outputs"][0];
    assert!(acc["cosine_min"].as_f64().unwrap() > 0.99, "{acc}");

    // Only int8 and half-precision weights are left: no FP32 scale or bias.
    let j = inspect_against(&model, &demo_model());
    let dtypes: Vec<&String> = j["weight_bytes"].as_object().unwrap().keys().collect();
    assert!(
        dtypes.iter().all(|d| *d == "int8" || *d == "float16"),
        "{dtypes:?}"
    );
    let ratio = j["weight_ratio_vs_baseline"].as_f64().unwrap();
    assert!(ratio <= 0.255, "INT8+FP16 weights are {ratio:.3} of FP32");

    if skip_python() {
        return;
    }
    let c = check(&model);
    assert_eq!(c["opset"], 19, "{c}");
    assert_eq!(c["qdq_scale_dtypes"], serde_json::json!(["float16"]), "{c}");
    for key in ["cosine_min", "cosine_min_unoptimized"] {
        assert!(c[key].as_f64().unwrap() > 0.97, "{key}: {c}");
    }
    assert!(c["top1"].as_f64().unwrap() >= 0.8, "{c}");
}

#[test]
fn every_calibration_method_builds() {
    let mut ranges: Vec<Vec<(String, f64)>> = Vec::new();
    for method in ["entropy", "max", "percentile", "mse", "per-tensor"] {
        let out = tempfile::tempdir().unwrap();
        compile_ok(
            &demo_model(),
            out.path(),
            &[
                "--int8",
                "--calib",
                demo_calib().to_str().unwrap(),
                "--calib-method",
                method,
                "--calib-samples",
                "8",
                "--quiet",
            ],
        );
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
                .unwrap();
        assert_eq!(report["quantization"]["method"], method);
        assert_eq!(report["quantization"]["samples"], 8);
        let amax = |r: &serde_json::Value| {
            (
                r["tensor"].as_str().unwrap().to_string(),
                r["amax"].as_f64().unwrap(),
            )
        };
        ranges.push(
            report["ranges"]
                .as_array()
                .unwrap()
                .iter()
                .map(amax)
                .collect(),
        );
    }
    // Per tensor, every range is one of the four methods' for that tensor.
    let (per_tensor, methods) = ranges.split_last().unwrap();
    for (i, (tensor, amax)) in per_tensor.iter().enumerate() {
        let options: Vec<f64> = methods.iter().map(|m| m[i].1).collect();
        assert!(
            options.contains(amax),
            "{tensor}: {amax} not in {options:?}"
        );
    }
}

#[test]
fn same_input_gives_byte_identical_outputs() {
    // Calibration runs the forward passes on several workers (one per thread), each
    // with range collectors of its own that are merged at the end, and splits large
    // tensors over a worker's threads: neither the timing nor the thread count may
    // change a single byte.
    let (model, calib) = (demo_model(), demo_calib());
    let build = |threads: Option<&str>| {
        let out = tempfile::tempdir().unwrap();
        rtq_ok_with_threads(
            &[
                "compile",
                model.to_str().unwrap(),
                "-o",
                out.path().to_str().unwrap(),
                "--int8",
                "--calib",
                calib.to_str().unwrap(),
                "--calib-samples",
                "10",
                "--quiet",
            ],
            threads,
            Duration::from_secs(300),
        );
        let model = std::fs::read(out.path().join("tinyresnet_int8.onnx")).unwrap();
        let cache = std::fs::read(out.path().join("tinyresnet_calibration.cache")).unwrap();
        (model, cache)
    };
    let (m1, c1) = build(None);
    for threads in [None, Some("1"), Some("3")] {
        let (m2, c2) = build(threads);
        assert!(
            m1 == m2,
            "INT8 model differs between runs (threads {threads:?})"
        );
        assert!(
            c1 == c2,
            "calibration cache differs between runs (threads {threads:?})"
        );
    }
}

#[test]
fn large_activations_calibrate_identically_on_any_pool_size() {
    if skip_python() {
        return;
    }
    // Activations of 16x128x128 values are histogrammed on the pool of the forward
    // worker that computed them (split over its threads when it has several): with
    // one thread, or several workers, this must neither deadlock nor change a byte.
    let (_dir, model, calib) = python_model(
        "convs.onnx",
        r#"
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(5)
nodes, inits, prev = [], [], "x"
for i in range(4):
    inits.append(numpy_helper.from_array((rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32), f"w{i}"))
    nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
    prev = f"r{i}"
nodes.append(helper.make_node("GlobalAveragePool", [prev], ["y"], name="pool"))
g = helper.make_graph(nodes, "convs",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 128, 128])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 1, 1])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), MODEL)
for i in range(8):
    np.save(f"{CALIB}/s{i}.npy", rng.standard_normal((1, 16, 128, 128)).astype(np.float32))
"#,
    );
    let build = |threads: &str| {
        let out = tempfile::tempdir().unwrap();
        rtq_ok_with_threads(
            &[
                "compile",
                model.to_str().unwrap(),
                "--int8",
                "--holdout",
                "0",
                "--calib",
                calib.to_str().unwrap(),
                "--quiet",
                "-o",
                out.path().to_str().unwrap(),
            ],
            Some(threads),
            Duration::from_secs(300),
        );
        std::fs::read(out.path().join("convs_calibration.cache")).unwrap()
    };
    let one = build("1");
    assert_eq!(one, build("2"), "cache differs between 1 and 2 threads");
    assert_eq!(one, build("3"), "cache differs between 1 and 3 threads");
    // Four workers, the first with two threads.
    assert_eq!(one, build("5"), "cache differs between 1 and 5 threads");
}

#[test]
fn report_text_and_debug_flags() {
    let out = tempfile::tempdir().unwrap();
    let stdout = compile_ok(
        &demo_model(),
        out.path(),
        &[
            "--int8",
            "--calib",
            demo_calib().to_str().unwrap(),
            "--calib-samples",
            "4",
        ],
    );
    assert!(stdout.contains("accuracy of int8 vs fp32"), "{stdout}");
    assert!(
        stdout.contains("stem.relu"),
        "per-layer ranges listed: {stdout}"
    );
    // --stop-after writes the graph as it stood after that stage.
    let out2 = tempfile::tempdir().unwrap();
    compile_ok(
        &demo_model(),
        out2.path(),
        &["--stop-after", "optimize", "--quiet"],
    );
    let j: serde_json::Value = serde_json::from_str(&rtq_ok(&[
        "inspect",
        out2.path()
            .join("tinyresnet_optimized.onnx")
            .to_str()
            .unwrap(),
        "--json",
    ]))
    .unwrap();
    assert!(
        j["ops"].get("BatchNormalization").is_none(),
        "BN folded: {}",
        j["ops"]
    );
    assert_eq!(j["ops"]["Conv"], 6);
}

#[test]
fn an_already_quantized_model_keeps_its_qdq_and_is_not_quantized_twice() {
    let calib = demo_calib();
    let calib = calib.to_str().unwrap();
    let args = [
        "--int8",
        "--calib",
        calib,
        "--calib-method",
        "entropy",
        "--quiet",
    ];
    let first = tempfile::tempdir().unwrap();
    compile_ok(&demo_model(), first.path(), &args);
    let int8 = first.path().join("tinyresnet_int8.onnx");
    let again = tempfile::tempdir().unwrap();
    compile_ok(&int8, again.path(), &args);
    let ops = |model: &Path| {
        let out = rtq_ok(&["inspect", model.to_str().unwrap(), "--json"]);
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["ops"].clone()
    };
    let twice = again.path().join("tinyresnet_int8_int8.onnx");
    assert_eq!(ops(&twice), ops(&int8), "the same Q/DQ, no second layer");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(again.path().join("report.json")).unwrap()).unwrap();
    let q = &report["quantization"];
    assert_eq!(q["quantized_nodes"], 0, "{q}");
    assert!(q["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s[1].as_str().unwrap().contains("already quantized")));
}
