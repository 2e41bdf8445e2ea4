//! Helpers shared by rtq's integration tests.
#![allow(dead_code)]

pub mod encoder;
pub mod manifest;

use rtq_test_support::run_python;
// Not every test file uses both.
#[allow(unused_imports)]
pub use rtq_test_support::{run_python_inline as python_inline, skip_python};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The bundled demo model.
pub fn demo_model() -> PathBuf {
    root().join("models/tinyresnet.onnx")
}

/// The bundled calibration directory.
pub fn demo_calib() -> PathBuf {
    root().join("calibration")
}

/// Runs the rtq binary.
pub fn rtq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtq"))
        .args(args)
        .output()
        .expect("rtq runs")
}

/// Runs rtq and asserts success, returning stdout.
pub fn rtq_ok(args: &[&str]) -> String {
    let out = rtq(args);
    assert!(
        out.status.success(),
        "rtq {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Runs rtq, asserts a non-zero exit, and returns stderr.
pub fn rtq_fails(args: &[&str]) -> String {
    let out = rtq(args);
    assert!(!out.status.success(), "rtq {args:?} unexpectedly succeeded");
    assert_ne!(
        out.status.code(),
        Some(101),
        "rtq {args:?} panicked:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).expect("utf-8")
}

/// Runs rtq with `RAYON_NUM_THREADS=threads` (rayon's default pool when `None`) and
/// asserts that it succeeds within `limit`: a hang, such as a thread-pool deadlock,
/// fails the test instead of stalling the suite.
pub fn rtq_ok_with_threads(args: &[&str], threads: Option<&str>, limit: Duration) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rtq"));
    cmd.args(args);
    if let Some(n) = threads {
        cmd.env("RAYON_NUM_THREADS", n);
    }
    let mut child = cmd.spawn().expect("rtq runs");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("rtq {args:?} hung (RAYON_NUM_THREADS {threads:?})");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "rtq {args:?} failed (RAYON_NUM_THREADS {threads:?})"
    );
}

/// Runs a Python script under tests/python with `args`, asserting success; returns stdout.
pub fn python<S: AsRef<OsStr>>(script: &str, args: &[S]) -> String {
    run_python(&root().join("tests/python").join(script), args)
}

/// A model (and calibration data) written by inline Python in a fresh temporary
/// directory. `script` sees `MODEL`, the path of the `.onnx` file to save, and
/// `CALIB`, an empty directory for `.npy` samples. Returns the directory (deleted
/// when dropped), the model path and the calibration directory.
pub fn python_model(file_name: &str, script: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join(file_name);
    let calib = dir.path().join("calib");
    std::fs::create_dir(&calib).unwrap();
    let prelude = format!(
        "MODEL = r\"{}\"\nCALIB = r\"{}\"\n",
        model.display(),
        calib.display()
    );
    python_inline(&(prelude + script));
    (dir, model, calib)
}

/// `n` seeded image-like `.npy` samples of `shape` (e.g. `1x3x224x224`) written into
/// `dir` by tests/python/make_inputs.py; every file in `dir`, sorted.
pub fn make_inputs(dir: &Path, shape: &str, n: usize, seed: u64) -> Vec<PathBuf> {
    python(
        "make_inputs.py",
        &[
            dir.to_str().unwrap(),
            shape,
            &n.to_string(),
            &seed.to_string(),
        ],
    );
    files_in(dir)
}

/// The `.onnx` files in `dir`, sorted (none when `dir` does not exist).
pub fn onnx_files(dir: &Path) -> Vec<PathBuf> {
    if !dir.exists() {
        return Vec::new();
    }
    files_in(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect()
}

/// The one ONNX model a build wrote into `out`.
pub fn built_model(out: &Path) -> PathBuf {
    let mut models = onnx_files(out);
    assert_eq!(
        models.len(),
        1,
        "one model in {}: {models:?}",
        out.display()
    );
    models.remove(0)
}

/// Files in `dir`, sorted.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// `rtq inspect MODEL --json --baseline BASELINE`, parsed.
pub fn inspect_against(model: &Path, baseline: &Path) -> serde_json::Value {
    let out = rtq_ok(&[
        "inspect",
        model.to_str().expect("utf-8 path"),
        "--json",
        "--baseline",
        baseline.to_str().expect("utf-8 path"),
    ]);
    serde_json::from_str(&out).expect("inspect prints JSON")
}

/// Runs `rtq compile MODEL -o OUT` with `extra` arguments, asserting success; returns stdout.
pub fn compile_ok(model: &Path, out: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "compile",
        model.to_str().expect("utf-8 path"),
        "-o",
        out.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    rtq_ok(&args)
}

/// `len` seeded values, roughly in [-2, 2) (xorshift: the same on every machine).
pub fn seeded_values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 22) as f32 - 2.0
        })
        .collect()
}
