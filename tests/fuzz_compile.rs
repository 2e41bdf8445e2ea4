//! Structure-aware fuzzing of the whole compile: `tests/python/random_graph.py` writes
//! random valid networks (convolutions dense and depthwise, BatchNormalization,
//! activations, residual Adds, Concats, pooling, squeeze-and-excitation gates, nearest
//! upsampling, attention blocks over spatial positions, dynamic batch, classifier heads
//! or feature-map outputs), and each goes through every mode: `--fp16`, `--int8`
//! (entropy, and the default `auto`) and `--int8 --fp16`. rtq must never panic; a build
//! either succeeds, and its model passes onnx.checker's full check, runs in onnxruntime
//! and stays near FP32, or fails with one `error:` line and no model written.
//!
//! `RTQ_FUZZ_SECONDS` bounds the run (default 60; seeds are tried in order until the
//! time is up, at least 4), `RTQ_FUZZ_SEED` is the first seed (default 0): a failure
//! names its seed, which replays with `RTQ_FUZZ_SEED=<seed> RTQ_FUZZ_SECONDS=1`.
//! Needs requirements-test.txt; `RTQ_SKIP_PYTHON_TESTS=1` skips.

mod common;

use common::*;
use std::path::Path;
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
        })
        .unwrap_or(default)
}

/// One build of `model` with `args`; checks the outcome as described above.
fn build(seed: u64, model: &Path, out: &Path, args: &[&str]) {
    let mut all = vec![
        "compile",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--quiet",
    ];
    all.extend_from_slice(args);
    let run = rtq(&all);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let what = format!("seed {seed}, rtq {args:?}");
    assert_ne!(run.status.code(), Some(101), "{what} panicked:\n{stderr}");
    let built = onnx_files(out);
    if !run.status.success() {
        assert!(
            stderr.starts_with("error:"),
            "{what}: unclear failure:\n{stderr}"
        );
        assert!(built.is_empty(), "{what} failed but wrote {built:?}");
        eprintln!("{what}: refused: {}", stderr.lines().next().unwrap_or(""));
        return;
    }
    assert_eq!(built.len(), 1, "{what}: {built:?}");
    let calib = model.parent().unwrap().join("calib");
    let inputs = files_in(&calib);
    let mut check: Vec<&Path> = vec![&built[0], model];
    check.extend(inputs[inputs.len() - 2..].iter().map(|p| p.as_path()));
    let c: serde_json::Value = serde_json::from_str(&python("check_model.py", &check)).unwrap();
    let cos = c["cosine_min"].as_f64().unwrap();
    // Random weights make some nets chaotic (small input changes flip the output), so
    // INT8 is only asked to keep the output's direction; FP16 to keep it all.
    let floor = if args.contains(&"--int8") { 0.5 } else { 0.99 };
    assert!(cos >= floor, "{what}: cosine {cos} < {floor}: {c}");
}

#[test]
fn random_networks_compile_in_every_mode() {
    if skip_python() {
        return;
    }
    let budget = Duration::from_secs(env_u64("RTQ_FUZZ_SECONDS", 60));
    let first = env_u64("RTQ_FUZZ_SEED", 0);
    let start = Instant::now();
    let mut seed = first;
    while seed < first + 4 || start.elapsed() < budget {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join(format!("random_{seed}.onnx"));
        let calib = dir.path().join("calib");
        let described = python(
            "random_graph.py",
            &[
                &seed.to_string(),
                model.to_str().unwrap(),
                calib.to_str().unwrap(),
            ],
        );
        eprint!("{described}");
        let stats = dir.path().join("stats.json");
        let (calib, stats) = (calib.to_str().unwrap(), stats.to_str().unwrap());
        let modes: [&[&str]; 4] = [
            &["--fp16"],
            &[
                "--int8",
                "--calib",
                calib,
                "--calib-method",
                "entropy",
                "--save-stats",
                stats,
                "--holdout",
                "1",
            ],
            &[
                "--int8",
                "--fp16",
                "--stats",
                stats,
                "--calib-method",
                "entropy",
            ],
            &["--int8", "--calib", calib, "--holdout", "1"],
        ];
        for (i, args) in modes.iter().enumerate() {
            build(seed, &model, &dir.path().join(format!("out{i}")), args);
        }
        seed += 1;
    }
    eprintln!(
        "{} random networks in {:.0?}",
        seed - first,
        start.elapsed()
    );
}
