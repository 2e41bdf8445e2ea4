//! INT4 weight-only builds (`--int4-weights`): MatMul/Gemm weights stored as blockwise
//! INT4 behind DequantizeLinear with `block_size` (opset 21), activations in FP16 (or
//! FP32/BF16). On the BERT- and ViT-style encoders of tests/python/make_encoder.py
//! (heavy-tailed weights, outlier LayerNorm channels) and its GPT-style decoder (AWQ and
//! GPTQ): onnx.checker (full check),
//! onnxruntime against FP32 on 48 held-out samples, the weight bytes, and the INT4
//! values and scales of a round-to-nearest build recomputed independently in numpy.
//! Needs requirements-test.txt; `RTQ_SKIP_PYTHON_TESTS=1` skips.

mod common;

use common::encoder::{build_encoder, Encoder};
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn encoder(kind: &str) -> Encoder {
    encoder_with(kind, 32)
}

/// `kind` with `calib` calibration samples (and 48 held-out ones).
fn encoder_with(kind: &str, calib_samples: usize) -> Encoder {
    common::encoder::encoder(kind, calib_samples, &[])
}

/// An accuracy target every build meets: the INT4 fallback keeps every weight in INT4.
const NO_TARGET: [&str; 2] = ["--accuracy-target", "cosine=0,top1=0"];

/// Builds `e` with `mode` (every planned weight in INT4, unless `mode` sets an accuracy
/// target); returns (check_encoder.py's JSON, report.json, built model).
fn build(e: &Encoder, out: &Path, mode: &[&str]) -> (Value, Value, PathBuf) {
    let mut args: Vec<&str> = mode.to_vec();
    if !mode.contains(&"--accuracy-target") {
        args.extend_from_slice(&NO_TARGET);
    }
    build_encoder(e, out, &args)
}

fn min_cosine(checked: &Value) -> f64 {
    checked["cosine"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c.as_f64().unwrap())
        .fold(1.0, f64::min)
}

#[test]
fn int4_awq_beats_round_to_nearest_at_an_eighth_of_the_weight_bytes() {
    if skip_python() {
        return;
    }
    for kind in ["bert", "vit"] {
        let e = encoder(kind);
        let work = tempfile::tempdir().unwrap();
        let (awq, report, built) = build(
            &e,
            &work.path().join("awq"),
            &["--int4-weights", "--fp16", "--int4-method", "awq"],
        );
        let (rtn, _, _) = build(
            &e,
            &work.path().join("rtn"),
            &["--int4-weights", "--fp16", "--int4-method", "rtn"],
        );
        let (awq_cos, rtn_cos) = (min_cosine(&awq), min_cosine(&rtn));
        let ratio = inspect_against(&built, &e.model)["weight_ratio_vs_baseline"]
            .as_f64()
            .unwrap();
        eprintln!("{kind}: cosine awq {awq_cos:.5} rtn {rtn_cos:.5}; weights {ratio:.3} of FP32");
        assert_eq!(report["precision"], "int4w+fp16");
        let int4 = &report["passes"]["int4_weights"];
        assert!(int4["layers"].as_array().unwrap().len() >= 6, "{int4}");
        assert_eq!(
            int4["awq"].as_array().unwrap().len(),
            int4["layers"].as_array().unwrap().len()
        );
        // These encoders' Student-t(5) weights are hard on 16 levels: with every MatMul
        // in INT4 (block 128) the mean cosine is 0.93 (BERT) and 0.98 (ViT) with AWQ,
        // 0.86 and 0.92 rounding to nearest.
        assert!(awq_cos >= 0.9, "{kind}: awq cosine {awq_cos}");
        assert!(
            awq_cos >= rtn_cos + 0.02,
            "{kind}: awq {awq_cos} vs rtn {rtn_cos}"
        );
        if kind == "bert" {
            // Every weight is a MatMul's (the ViT's patch Conv stays FP16).
            assert!(ratio <= 0.15, "{kind}: weights are {ratio} of FP32");
        }
    }
}

/// Every layer's GPTQ error in the report (where it had at least K activation rows), and
/// that GPTQ's values were kept exactly where they beat AWQ's; returns how many were kept.
fn gptq_kept(report: &Value) -> usize {
    let layers = report["passes"]["int4_weights"]["awq"].as_array().unwrap();
    let int4 = report["passes"]["int4_weights"]["layers"]
        .as_array()
        .unwrap();
    assert_eq!(layers.len(), int4.len());
    let mut kept = 0;
    for (l, q) in layers.iter().zip(int4) {
        let chosen = l["gptq"].as_bool().unwrap();
        assert_eq!(q["gptq"].as_bool(), Some(chosen), "{q}");
        let rows = l["hessian_rows"].as_u64().unwrap();
        let Some(gptq) = l["gptq_error"].as_f64() else {
            // Fewer activation rows than input channels (BERT's pooler: one per sample):
            // GPTQ does not run.
            assert!(rows < q["shape"][0].as_u64().unwrap() && !chosen, "{l} {q}");
            continue;
        };
        assert_eq!(chosen, gptq < l["error"].as_f64().unwrap(), "{l}");
        assert!(rows >= l["rows"].as_u64().unwrap());
        kept += usize::from(chosen);
    }
    kept
}

#[test]
fn int4_gptq_lowers_the_layer_errors_of_awq() {
    if skip_python() {
        return;
    }
    // BERT with 32 calibration samples; the GPT with 128 (GPTQ's H = X^T X wants more
    // token rows than the 1024 input channels of its MLP's second MatMul).
    for (kind, samples) in [("bert", 32), ("gpt", 128)] {
        let e = encoder_with(kind, samples);
        let work = tempfile::tempdir().unwrap();
        let awq_mode = ["--int4-weights", "--fp16", "--int4-method", "awq"];
        let (awq, _, _) = build(&e, &work.path().join("awq"), &awq_mode);
        // The GPT is built as a user would: the default method (GPTQ) and the default
        // accuracy target, so the INT4 fallback would keep weights in FP16 if the build
        // missed it.
        let mode = match kind {
            "gpt" => vec![
                "--int4-weights",
                "--fp16",
                "--accuracy-target",
                "cosine=0.99,top1=0.99",
            ],
            _ => vec!["--int4-weights", "--fp16", "--int4-method", "gptq"],
        };
        let (gptq, report, built) = build(&e, &work.path().join("gptq"), &mode);
        let (awq_cos, gptq_cos) = (min_cosine(&awq), min_cosine(&gptq));
        let ratio = inspect_against(&built, &e.model)["weight_ratio_vs_baseline"]
            .as_f64()
            .unwrap();
        let kept = gptq_kept(&report);
        eprintln!(
            "{kind}: cosine gptq {gptq_cos:.5} awq {awq_cos:.5}; weights {ratio:.4} of FP32; \
             gptq kept on {kept} layers"
        );
        assert!(kept >= 1, "{kind}: {}", report["passes"]["int4_weights"]);
        assert!(
            report["passes"]["int4_weights"]["method"]
                .as_str()
                .unwrap()
                .starts_with("gptq"),
            "{kind}"
        );
        assert!(
            gptq_cos >= awq_cos - 0.005,
            "{kind}: gptq {gptq_cos} vs awq {awq_cos}"
        );
        if kind == "gpt" {
            // Every MatMul in INT4 (block 128), the embeddings in FP16: 14.9% of the FP32
            // weight bytes; mean logits cosine 0.992 with GPTQ, 0.981 with AWQ. The build
            // meets its target with nothing kept in FP16.
            assert_eq!(
                report["accuracy_check"]["met"], true,
                "{}",
                report["accuracy_check"]
            );
            assert_eq!(report["accuracy_check"]["fallback"], serde_json::json!([]));
            assert!(ratio <= 0.15, "gpt: weights are {ratio} of FP32");
            assert!(gptq_cos >= 0.989, "gpt: gptq cosine {gptq_cos}");
            assert!(
                gptq_cos >= awq_cos + 0.005,
                "gpt: gptq {gptq_cos} vs awq {awq_cos}"
            );
        }
    }
}

#[test]
fn int4_fallback_keeps_the_most_sensitive_weights_in_fp16() {
    if skip_python() {
        return;
    }
    // BERT's heavy-tailed weights miss the target with every MatMul in INT4 (pooled
    // cosine 0.94 with GPTQ); with the default target the fallback keeps the most
    // sensitive ones in FP16 until the calibration samples meet it.
    let e = encoder_with("bert", 32);
    let work = tempfile::tempdir().unwrap();
    let mode = ["--int4-weights", "--fp16", "--int4-method", "gptq"];
    let (pure, pure_report, _) = build(&e, &work.path().join("pure"), &mode);
    let mut with_target = mode.to_vec();
    with_target.extend_from_slice(&["--accuracy-target", "cosine=0.99,top1=0.99"]);
    let (kept, report, built) = build(&e, &work.path().join("fallback"), &with_target);
    let check = &report["accuracy_check"];
    let reverted: Vec<&str> = check["fallback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let planned = pure_report["passes"]["int4_weights"]["layers"]
        .as_array()
        .unwrap()
        .len();
    let stored: Vec<&str> = report["passes"]["int4_weights"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["node"].as_str().unwrap())
        .collect();
    eprintln!(
        "bert: {} of {planned} weights kept in FP16 ({reverted:?}); cosine {:.4} -> {:.4}",
        reverted.len(),
        min_cosine(&pure),
        min_cosine(&kept)
    );
    assert!(!reverted.is_empty() && reverted.len() < planned, "{check}");
    assert_eq!(stored.len() + reverted.len(), planned);
    assert!(
        reverted.iter().all(|n| !stored.contains(n)),
        "{reverted:?} {stored:?}"
    );
    assert_eq!(
        check["sensitivity"].as_array().unwrap().len(),
        planned,
        "every weight ranked"
    );
    assert!(
        min_cosine(&kept) >= min_cosine(&pure) + 0.02,
        "fallback {} vs every weight in INT4 {}",
        min_cosine(&kept),
        min_cosine(&pure)
    );
    assert!(min_cosine(&kept) >= 0.985, "{}", min_cosine(&kept));
    // More bytes than every weight in INT4, fewer than FP16.
    let ratio = inspect_against(&built, &e.model)["weight_ratio_vs_baseline"]
        .as_f64()
        .unwrap();
    assert!(ratio > 0.15 && ratio < 0.5, "weights {ratio} of FP32");
}

/// The INT4 values and scales of a round-to-nearest FP32 build, recomputed in numpy
/// from the FP32 build's weights: scale = max|w| over each block of 32 input channels
/// / 7, value = round half to even of w / scale, clamped to [-8, 7].
const CHECK_INT4: &str = r#"
import sys, json, numpy as np, onnx
from onnx import numpy_helper
q_model, fp32 = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
inits = {i.name: i for i in q_model.graph.initializer}
ref = {i.name: numpy_helper.to_array(i) for i in fp32.graph.initializer}
checked = 0
for n in q_model.graph.node:
    if n.op_type != "DequantizeLinear" or inits.get(n.input[0]) is None:
        continue
    src = inits[n.input[0]]
    assert src.data_type == onnx.TensorProto.INT4, n.name
    attrs = {a.name: a.i for a in n.attribute}
    block, axis = attrs["block_size"], attrs["axis"]
    q = numpy_helper.to_array(src).astype(np.int8)
    scale = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
    w = ref[n.input[0][: -len("_int4")]].astype(np.float32)
    wk = w if axis == 0 else w.T
    k = wk.shape[0]
    blocks = -(-k // block)
    padded = np.zeros((blocks * block, wk.shape[1]), np.float32)
    padded[:k] = np.abs(wk)
    amax = padded.reshape(blocks, block, -1).max(axis=1)
    expect_scale = np.where(amax > 0, amax / np.float32(7), np.float32(1)).astype(np.float32)
    got_scale = scale if axis == 0 else scale.T
    assert np.array_equal(got_scale, expect_scale), n.name
    s = np.repeat(expect_scale, block, axis=0)[:k]
    expect = np.clip(np.round(wk / s), -8, 7).astype(np.int8)
    got = q if axis == 0 else q.T
    assert np.array_equal(got, expect), (n.name, int(np.sum(got != expect)))
    checked += 1
print(json.dumps({"weights": checked}))
"#;

#[test]
fn int4_rtn_values_equal_an_independent_computation() {
    if skip_python() {
        return;
    }
    let e = encoder("bert");
    let work = tempfile::tempdir().unwrap();
    let fp32 = work.path().join("fp32");
    compile_ok(&e.model, &fp32, &["--quiet"]);
    let int4 = work.path().join("int4");
    compile_ok(
        &e.model,
        &int4,
        &[
            "--int4-weights",
            "--int4-block-size",
            "32",
            "--int4-method",
            "rtn",
            "--quiet",
        ],
    );
    let script = work.path().join("check.py");
    std::fs::write(&script, CHECK_INT4).unwrap();
    let out = rtq_test_support::run_python(&script, &[built_model(&int4), built_model(&fp32)]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(v["weights"].as_u64().unwrap() >= 6, "{v}");
}

#[test]
fn int4_refuses_what_it_cannot_do() {
    let model = demo_model();
    let model = model.to_str().unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("o");
    let out = out.to_str().unwrap();
    let calib = demo_calib();
    let calib = calib.to_str().unwrap();
    // (flags after `--int4-weights`, what the message must name)
    let cases: [(&[&str], &[&str]); 4] = [
        (&["--int8", "--calib", calib], &["--int4-weights", "--int8"]),
        (&["--int4-block-size", "48"], &["48"]),
        (&["--int4-method", "awq"], &["--calib"]),
        (&["--int4-method", "gptq"], &["gptq", "--calib"]),
    ];
    for (flags, named) in cases {
        let mut args = vec!["compile", model, "-o", out, "--int4-weights"];
        args.extend_from_slice(flags);
        let err = rtq_fails(&args);
        assert!(named.iter().all(|n| err.contains(n)), "{flags:?}: {err}");
    }
    assert!(!Path::new(out).exists(), "nothing written");
}
