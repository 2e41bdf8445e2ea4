//! rtq on real models shipped in PyPI wheels: the classic architectures of the `onnx`
//! wheel's `backend/test/data/light` and the PP-OCR models of `rapidocr-onnxruntime`,
//! each compiled by rtq and checked in onnxruntime against the original.
//! Needs requirements-test.txt; `RTQ_SKIP_PYTHON_TESTS=1` skips.

mod common;

use common::*;
use rtq_test_support::{light_models, python_package_path};
use std::path::{Path, PathBuf};

fn compare(candidate: &Path, reference: &Path, inputs: &[PathBuf]) -> serde_json::Value {
    let mut args: Vec<&Path> = vec![candidate, reference];
    args.extend(inputs.iter().map(|p| p.as_path()));
    serde_json::from_str(&python("check_model.py", &args)).unwrap()
}

/// `rtq compile MODEL --int8 --calib CALIB -o OUT --quiet`, asserting success.
/// A plain entropy INT8 build (TensorRT's method, no accuracy remedies: on these
/// synthetic inputs an accuracy target means little, and the tests check the Q/DQ
/// conversion itself).
fn compile_int8_quietly(model: &Path, calib: &Path, out: &Path) {
    compile_ok(
        model,
        out,
        &[
            "--int8",
            "--calib",
            calib.to_str().unwrap(),
            "--calib-method",
            "entropy",
            "--quiet",
        ],
    );
}

#[test]
fn optimized_light_models_match_the_originals_in_onnxruntime() {
    let Some(models) = light_models() else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let inputs = make_inputs(data.path(), "1x3x224x224", 2, 7);
    assert_eq!(models.len(), 9);
    for model in models {
        let out = tempfile::tempdir().unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&compile_ok(&model, out.path(), &["--json"])).unwrap();
        let nodes_in = json["graph"]["nodes_in"].as_u64().unwrap();
        let nodes_out = json["graph"]["nodes_out"].as_u64().unwrap();
        assert!(
            nodes_out < nodes_in,
            "{}: folding removed nodes ({nodes_in} -> {nodes_out})",
            model.display()
        );
        let stem = model.file_stem().unwrap().to_str().unwrap();
        let emitted = out.path().join(format!("{stem}_opt.onnx"));
        let c = compare(&emitted, &model, &inputs);
        assert!(
            c["cosine_min"].as_f64().unwrap() > 0.99999,
            "{}: {c}",
            model.display()
        );
        assert!(
            c["max_abs"].as_f64().unwrap() < 1e-4,
            "{}: {c}",
            model.display()
        );
        assert_eq!(c["opset"], 13, "{}", model.display());
    }
}

#[test]
fn int8_light_squeezenet_runs_in_onnxruntime() {
    let Some(model) = python_package_path("onnx", "backend/test/data/light/light_squeezenet.onnx")
    else {
        return;
    };
    let calib = tempfile::tempdir().unwrap();
    let inputs = make_inputs(calib.path(), "1x3x224x224", 5, 11);
    let out = tempfile::tempdir().unwrap();
    compile_int8_quietly(&model, calib.path(), out.path());
    let c = compare(
        &out.path().join("light_squeezenet_int8.onnx"),
        &model,
        &inputs[3..],
    );
    assert!(
        c["qdq"].as_u64().unwrap() >= 2 * 26,
        "every conv quantized: {c}"
    );
    assert!(c["cosine_min"].as_f64().unwrap() > 0.99, "{c}");
}

#[test]
fn pp_ocr_classifier_int8_agrees_with_fp32() {
    let Some(model) = python_package_path(
        "rapidocr_onnxruntime",
        "models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
    ) else {
        return;
    };
    let calib = tempfile::tempdir().unwrap();
    let inputs = make_inputs(calib.path(), "1x3x48x192", 24, 3);
    // A MobileNetV3-style model with HardSigmoid/SE blocks: both calibrators must keep
    // it close to FP32, and rtq's executor must agree with onnxruntime on the result.
    for (method, min_cosine) in [("entropy", 0.9), ("percentile", 0.95)] {
        let out = tempfile::tempdir().unwrap();
        let report: serde_json::Value = serde_json::from_str(&compile_ok(
            &model,
            out.path(),
            &[
                "--int8",
                "--calib",
                calib.path().to_str().unwrap(),
                "--calib-method",
                method,
                "--json",
            ],
        ))
        .unwrap();
        let rtq_cos = report["accuracy"][0]["outputs"][0]["cosine_min"]
            .as_f64()
            .unwrap();
        let c = compare(
            &out.path().join("ch_ppocr_mobile_v2.0_cls_infer_int8.onnx"),
            &model,
            &inputs[inputs.len() - 4..],
        );
        // onnxruntime's default session fuses Q/DQ into its own int8 kernels, which
        // round differently; with optimisations off it runs plain ONNX semantics,
        // which rtq's executor must reproduce.
        let ort_cos = c["cosine_min"].as_f64().unwrap();
        let plain_cos = c["cosine_min_unoptimized"].as_f64().unwrap();
        assert!(
            ort_cos > min_cosine && plain_cos > min_cosine,
            "{method}: {c}"
        );
        assert!(
            (rtq_cos - plain_cos).abs() < 0.002,
            "{method}: rtq executor {rtq_cos} vs onnxruntime (no optimisations) {plain_cos}"
        );
    }
}

#[test]
fn pp_ocr_v4_detector_compiles_with_dynamic_dims() {
    let Some(model) =
        python_package_path("rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx")
    else {
        return;
    };
    let calib = tempfile::tempdir().unwrap();
    let inputs = make_inputs(calib.path(), "1x3x96x96", 6, 5);
    let out = tempfile::tempdir().unwrap();
    compile_int8_quietly(&model, calib.path(), out.path());
    let int8 = out.path().join("ch_PP-OCRv4_det_infer_int8.onnx");
    let c = compare(&int8, &model, &inputs[4..]);
    assert!(c["qdq"].as_u64().unwrap() > 100, "{c}");
    assert!(c["cosine_min"].as_f64().unwrap() > 0.95, "{c}");
    // The interface keeps its symbolic dims.
    let j: serde_json::Value =
        serde_json::from_str(&rtq_ok(&["inspect", int8.to_str().unwrap(), "--json"])).unwrap();
    let input = j["inputs"][0][1].as_str().unwrap();
    assert!(
        input.contains('?') || input.chars().any(|ch| ch.is_alphabetic() && ch != 'f'),
        "{input}"
    );
}
