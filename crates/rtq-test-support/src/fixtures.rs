//! Real models shipped inside pip packages (the `onnx` wheel's `backend/test/data/light`,
//! the PP-OCR models of `rapidocr-onnxruntime`).

use crate::python::{checked, python3};
use crate::skip_python;
use std::path::{Path, PathBuf};

/// The file or directory `rel` inside pip-installed Python package `module` (for example
/// `onnx` and `backend/test/data/light`), or `None` when Python tests are skipped. Panics
/// with an installation hint when python3 or the package is missing, or the package
/// holds no `rel`.
pub fn python_package_path(module: &str, rel: &str) -> Option<PathBuf> {
    if skip_python() {
        return None;
    }
    let code = format!(
        "import {module}, os; print(os.path.join(os.path.dirname({module}.__file__), '{rel}'))"
    );
    let out = checked(python3().args(["-c", &code]), &format!("`import {module}`"));
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        path.exists(),
        "python package `{module}` has no `{rel}` ({} is missing); \
         install the versions of requirements-test.txt",
        path.display()
    );
    Some(path)
}

/// The classic architectures under the `onnx` wheel's `backend/test/data/light` (nine
/// `.onnx` files), sorted, or `None` when Python tests are skipped.
pub fn light_models() -> Option<Vec<PathBuf>> {
    models(
        "onnx",
        "backend/test/data/light",
        9,
        "the nine light models",
    )
}

/// The PP-OCR models (det, rec, cls) of `rapidocr-onnxruntime`, sorted, or `None` when
/// Python tests are skipped.
pub fn pp_ocr_models() -> Option<Vec<PathBuf>> {
    models("rapidocr_onnxruntime", "models", 3, "det/rec/cls models")
}

/// The `.onnx` files of directory `rel` in package `module`, asserting at least `count`
/// (`what` in the message).
fn models(module: &str, rel: &str, count: usize, what: &str) -> Option<Vec<PathBuf>> {
    let dir = python_package_path(module, rel)?;
    let files = onnx_files(&dir);
    assert!(files.len() >= count, "expected {what} in {}", dir.display());
    Some(files)
}

/// The `.onnx` files directly inside `dir`, sorted.
fn onnx_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    files.sort();
    files
}
