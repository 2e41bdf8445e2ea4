//! BF16 as the high-precision type (`--high-precision bf16`): alone, and with INT8 or
//! FP8 Q/DQ. onnxruntime's CPU provider has no bfloat16 Conv (nor DequantizeLinear-21),
//! so each build is checked by onnx.checker (full check) and run in onnxruntime as an
//! FP32 model that rounds every BF16 value where the build stores it
//! (tests/python/check_reference.py), against the FP32 original; rtq's own executor
//! (`rtq eval`) must agree with that emulation.
//! Needs requirements-test.txt; `RTQ_SKIP_PYTHON_TESTS=1` skips.

mod common;

use common::*;
use rtq_test_support::pp_ocr_models;
use std::path::{Path, PathBuf};

/// Checks `built` against `model` on `inputs` outside rtq, and with rtq's executor;
/// returns (the emulation's cosine, rtq's cosine).
fn check(built: &Path, model: &Path, inputs: &[PathBuf], data: &Path) -> (f64, f64) {
    let mut args: Vec<&Path> = vec![built, model];
    args.extend(inputs.iter().map(PathBuf::as_path));
    let c: serde_json::Value = serde_json::from_str(&python("check_reference.py", &args)).unwrap();
    assert!(c["opset"].as_u64().unwrap() >= 22, "{c}");
    assert!(c["weight_dtypes"]["bfloat16"].as_u64().unwrap() > 0, "{c}");
    assert!(
        c["weight_dtypes"]
            .get("float32")
            .is_none_or(|b| b.as_u64().unwrap() < 4096),
        "float weights left: {c}"
    );
    let eval = rtq_ok(&[
        "eval",
        model.to_str().unwrap(),
        built.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--json",
    ]);
    let e: serde_json::Value = serde_json::from_str(&eval).unwrap();
    let rtq_cos = e["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["cosine_min"].as_f64().unwrap())
        .fold(1.0, f64::min);
    (c["cosine_min"].as_f64().unwrap(), rtq_cos)
}

#[test]
fn bf16_builds_pass_the_checker_and_match_an_independent_emulation() {
    if skip_python() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let calib = demo_calib();
    let held: Vec<PathBuf> = files_in(&calib).into_iter().rev().take(4).collect();
    let held_dir = work.path().join("held");
    std::fs::create_dir(&held_dir).unwrap();
    for f in &held {
        std::fs::copy(f, held_dir.join(f.file_name().unwrap())).unwrap();
    }
    for (name, extra, min_cos) in [
        ("bf16", vec![], 0.999),
        ("int8_bf16", vec!["--int8"], 0.99),
        ("fp8_bf16", vec!["--fp8"], 0.99),
    ] {
        let out = work.path().join(name);
        let mut args = extra.clone();
        args.extend([
            "--high-precision",
            "bf16",
            "--calib",
            calib.to_str().unwrap(),
            "--quiet",
        ]);
        compile_ok(&demo_model(), &out, &args);
        let built = built_model(&out);
        assert!(built.to_string_lossy().ends_with(&format!("_{name}.onnx")));
        let (reference, ours) = check(&built, &demo_model(), &held, &held_dir);
        assert!(reference >= min_cos, "{name}: emulated cosine {reference}");
        assert!(ours >= min_cos, "{name}: rtq cosine {ours}");
        assert!(
            (reference - ours).abs() < 1e-3,
            "{name}: {reference} vs {ours}"
        );
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        assert_eq!(report["precision"], name.replace('_', "+"));
    }
}

/// PP-OCR's classifier and recognizer (the detector's map is all zeros on synthetic
/// inputs, which makes its cosine meaningless; its BF16 conversion is checked by the
/// checker in the same way through `bench/`'s labeled pages).
#[test]
fn bf16_converts_the_pp_ocr_models() {
    let Some(models) = pp_ocr_models() else {
        return;
    };
    for model in models {
        let name = model.file_name().unwrap().to_str().unwrap().to_string();
        let shape = if name.contains("det") {
            continue;
        } else if name.contains("cls") {
            "1x3x48x192"
        } else {
            "1x3x48x160"
        };
        let data = tempfile::tempdir().unwrap();
        let inputs = make_inputs(&data.path().join("in"), shape, 2, 7);
        let out = data.path().join("out");
        compile_ok(&model, &out, &["--high-precision", "bf16", "--quiet"]);
        let (reference, ours) = check(&built_model(&out), &model, &inputs, &data.path().join("in"));
        eprintln!("{name}: cosine emulated {reference:.5}, rtq {ours:.5}");
        assert!(
            reference >= 0.99 && ours >= 0.99,
            "{name}: {reference} / {ours}"
        );
        assert!(
            (reference - ours).abs() < 1e-3,
            "{name}: {reference} vs {ours}"
        );
    }
}

#[test]
fn bf16_refuses_a_second_half_type() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("o");
    let err = rtq_fails(&[
        "compile",
        demo_model().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--fp16",
        "--high-precision",
        "bf16",
    ]);
    assert!(
        err.contains("--high-precision") && err.contains("--fp16"),
        "{err}"
    );
    let err = rtq_fails(&[
        "compile",
        demo_model().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--high-precision",
        "bf32",
    ]);
    assert!(err.contains("bf32"), "{err}");
    assert!(!out.exists());
}
