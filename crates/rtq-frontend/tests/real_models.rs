//! Loads real models shipped inside PyPI wheels: every classic architecture under
//! `onnx/backend/test/data/light` of the `onnx` wheel and the PP-OCR models of
//! `rapidocr-onnxruntime`. The wheels are located through `python3`; set
//! `RTQ_SKIP_PYTHON_TESTS=1` to skip on a machine without them.

use std::path::PathBuf;
use std::process::Command;

fn python_dir(module: &str, sub: &str) -> Option<PathBuf> {
    if std::env::var_os("RTQ_SKIP_PYTHON_TESTS").is_some() {
        return None;
    }
    let code = format!(
        "import {module}, os; print(os.path.join(os.path.dirname({module}.__file__), '{sub}'))"
    );
    let out = Command::new("python3")
        .args(["-c", &code])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python package `{module}` is needed (pip install -r requirements-test.txt): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()))
}

fn onnx_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    files.sort();
    files
}

#[test]
fn loads_every_light_model_of_the_onnx_wheel() {
    let Some(dir) = python_dir("onnx", "backend/test/data/light") else {
        return;
    };
    let files = onnx_files(&dir);
    assert!(
        files.len() >= 9,
        "expected the nine light models in {}",
        dir.display()
    );
    for file in files {
        let graph =
            rtq_frontend::load_model(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(graph.node_count() > 10, "{}", file.display());
        assert_eq!(graph.outputs.len(), 1);
        // Legacy models list initializers as inputs; only the image input remains.
        assert_eq!(
            graph.inputs.len(),
            1,
            "{}: {:?}",
            file.display(),
            graph.inputs
        );
        rtq_ir::verify(&graph).unwrap();
    }
}

#[test]
fn loads_the_pp_ocr_models_of_rapidocr() {
    let Some(dir) = python_dir("rapidocr_onnxruntime", "models") else {
        return;
    };
    let files = onnx_files(&dir);
    assert!(
        files.len() >= 3,
        "expected det/rec/cls models in {}",
        dir.display()
    );
    for file in files {
        let graph =
            rtq_frontend::load_model(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let input = graph.value(graph.inputs[0]);
        // PP-OCR inputs have symbolic batch/height/width dims.
        assert!(
            input
                .shape
                .as_ref()
                .unwrap()
                .iter()
                .any(|d| d.is_symbolic()),
            "{}: {:?}",
            file.display(),
            input.shape
        );
        assert!(graph.opset >= 11);
    }
}
