//! The transformer encoders of `tests/python/make_encoder.py` (BERT, ViT, GPT kinds),
//! with held-out samples, and building one and checking it in onnxruntime
//! (`tests/python/check_encoder.py`).

use super::{built_model, compile_ok, python};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A generated encoder: its directory, model, calibration and held-out samples.
pub struct Encoder {
    _dir: tempfile::TempDir,
    /// The FP32 model.
    pub model: PathBuf,
    /// Calibration samples.
    pub calib: PathBuf,
    /// 48 held-out samples of the same model (another sample seed).
    pub eval: PathBuf,
}

/// Writes the `kind` encoder (`make_encoder.py` `flags` applied) with `calib_samples`
/// calibration samples and 48 held-out ones.
pub fn encoder(kind: &str, calib_samples: usize, flags: &[&str]) -> Encoder {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join(format!("{kind}.onnx"));
    let calib = dir.path().join("calib");
    let eval = dir.path().join("eval");
    let n = calib_samples.to_string();
    let mut args = vec![kind, model.to_str().unwrap(), calib.to_str().unwrap(), &n];
    args.extend_from_slice(flags);
    python("make_encoder.py", &args);
    // Held-out samples: same model, other inputs.
    let again = dir.path().join("again.onnx");
    let mut args = vec![kind, again.to_str().unwrap(), eval.to_str().unwrap(), "48"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--sample-seed", "7"]);
    python("make_encoder.py", &args);
    Encoder {
        _dir: dir,
        model,
        calib,
        eval,
    }
}

/// Compiles `e` with `args` (calibrated on its samples) into `out` and checks the
/// result against FP32 in onnxruntime; returns (check_encoder.py's JSON, report.json,
/// the built model).
pub fn build_encoder(e: &Encoder, out: &Path, args: &[&str]) -> (Value, Value, PathBuf) {
    let mut args = args.to_vec();
    args.extend_from_slice(&["--calib", e.calib.to_str().unwrap(), "--quiet"]);
    compile_ok(&e.model, out, &args);
    let built = built_model(out);
    let checked = python(
        "check_encoder.py",
        &[e.model.as_path(), built.as_path(), e.eval.as_path()],
    );
    let report = std::fs::read(out.join("report.json")).unwrap();
    (
        serde_json::from_str(&checked).unwrap(),
        serde_json::from_slice(&report).unwrap(),
        built,
    )
}
