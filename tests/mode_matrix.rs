//! Every mode on every model: the nine light models of the `onnx` wheel and the three
//! PP-OCR models of `rapidocr-onnxruntime`, each built with `--fp16`, `--int8` (the
//! default `auto`, then each calibrator: entropy, max, percentile, mse) and
//! `--int8 --fp16`, FP8 E4M3 (`--fp8` from the saved statistics, `--fp8 --fp16` on
//! the data with every accuracy remedy) and INT4 weight-only with FP16 activations. Every output must pass onnx.checker's full check, load and run in
//! onnxruntime and stay close to the FP32 original on held-out inputs. (The light
//! models' weights are constants, so their outputs barely vary: for them this checks
//! the conversion, not accuracy; labeled accuracy lives in `bench/` and the encoder
//! and PP-OCR tests.)
//! Needs requirements-test.txt; `RTQ_SKIP_PYTHON_TESTS=1` skips.

mod common;

use common::*;
use rtq_test_support::{light_models, pp_ocr_models};
use std::path::{Path, PathBuf};

/// One build of the matrix: its name and the arguments it adds to `rtq compile`.
struct Mode {
    name: &'static str,
    args: Vec<String>,
    /// Lowest cosine with FP32 accepted on the held-out inputs.
    min_cosine: f64,
}

fn modes(calib: &Path, stats: &Path) -> Vec<Mode> {
    let calib = calib.to_str().unwrap().to_string();
    let stats = stats.to_str().unwrap().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut modes = vec![
        Mode {
            name: "fp16",
            args: s(&["--fp16"]),
            min_cosine: 0.999,
        },
        // Calibrates once (entropy) and keeps every method's statistics ...
        Mode {
            name: "int8-entropy",
            args: [
                s(&["--int8", "--calib-method", "entropy", "--holdout", "1"]),
                s(&["--calib", &calib, "--save-stats", &stats]),
            ]
            .concat(),
            min_cosine: 0.9,
        },
    ];
    // ... which the other calibrators and the mixed build reuse.
    for method in ["max", "percentile", "mse"] {
        modes.push(Mode {
            name: method,
            args: s(&["--int8", "--calib-method", method, "--stats", &stats]),
            min_cosine: 0.9,
        });
    }
    modes.push(Mode {
        name: "int8-fp16",
        args: s(&[
            "--int8",
            "--fp16",
            "--calib-method",
            "entropy",
            "--stats",
            &stats,
        ]),
        min_cosine: 0.9,
    });
    // The default a user gets: `auto` with every accuracy remedy, on the data itself.
    modes.push(Mode {
        name: "int8-auto",
        args: s(&["--int8", "--calib", &calib, "--holdout", "1"]),
        min_cosine: 0.9,
    });
    // FP8 from the same statistics (auto starts from max), and as TensorRT runs it
    // fastest: FP8 with FP16 everywhere else, calibrated on the data.
    modes.push(Mode {
        name: "fp8",
        args: s(&["--fp8", "--stats", &stats]),
        min_cosine: 0.9,
    });
    modes.push(Mode {
        name: "fp8-fp16",
        args: s(&["--fp8", "--fp16", "--calib", &calib, "--holdout", "1"]),
        min_cosine: 0.9,
    });
    // INT4 weight-only MatMul/Gemm weights (AWQ on the data), FP16 elsewhere; models
    // without such weights come out as plain FP16 builds.
    modes.push(Mode {
        name: "int4w-fp16",
        args: s(&[
            "--int4-weights",
            "--fp16",
            "--calib",
            &calib,
            "--holdout",
            "1",
        ]),
        min_cosine: 0.9,
    });
    modes
}

/// Builds `model` in every mode, checking each output against `model` on `held_out`.
fn every_mode(model: &Path, calib: &Path, held_out: &[PathBuf]) -> Vec<String> {
    let stem = model.file_stem().unwrap().to_str().unwrap().to_string();
    let work = tempfile::tempdir().unwrap();
    let stats = work.path().join("stats.json");
    let mut lines = Vec::new();
    for mode in modes(calib, &stats) {
        let out = work.path().join(mode.name);
        let mut args = mode.args.iter().map(String::as_str).collect::<Vec<_>>();
        args.push("--quiet");
        compile_ok(model, &out, &args);
        let built = built_model(&out);
        let mut check: Vec<&Path> = vec![&built, model];
        check.extend(held_out.iter().map(PathBuf::as_path));
        let c: serde_json::Value = serde_json::from_str(&python("check_model.py", &check)).unwrap();
        let cos = c["cosine_min"].as_f64().unwrap();
        lines.push(format!("{stem} {}: cosine_min {cos:.5}", mode.name));
        assert!(
            cos >= mode.min_cosine,
            "{stem} {}: cosine {cos} < {} ({c})",
            mode.name,
            mode.min_cosine
        );
        if !matches!(mode.name, "fp16" | "int4w-fp16") {
            assert!(c["qdq"].as_u64().unwrap() > 0, "{stem} {}: {c}", mode.name);
        }
    }
    lines
}

#[test]
fn every_mode_on_every_light_model() {
    let Some(models) = light_models() else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let calib = data.path().join("calib");
    make_inputs(&calib, "1x3x224x224", 3, 5);
    let held_out = make_inputs(&data.path().join("held_out"), "1x3x224x224", 1, 6);
    for model in models {
        for line in every_mode(&model, &calib, &held_out) {
            eprintln!("{line}");
        }
    }
}

#[test]
fn every_mode_on_every_pp_ocr_model() {
    let Some(models) = pp_ocr_models() else {
        return;
    };
    for model in models {
        let name = model.file_name().unwrap().to_str().unwrap();
        let shape = if name.contains("det") {
            "1x3x96x96"
        } else if name.contains("cls") {
            "1x3x48x192"
        } else {
            "1x3x48x160"
        };
        let data = tempfile::tempdir().unwrap();
        let calib = data.path().join("calib");
        make_inputs(&calib, shape, 6, 5);
        let held_out = make_inputs(&data.path().join("held_out"), shape, 2, 6);
        for line in every_mode(&model, &calib, &held_out) {
            eprintln!("{line}");
        }
    }
}
