//! Helpers shared by rtq-passes' integration tests: locating Python reference tools and
//! models, a deterministic random source, and checking inferred shapes against actual ones.

#![allow(dead_code)]

use rtq_ir::{Dim, Graph, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether tests needing `python3` with onnx/onnxruntime are to be skipped
/// (`RTQ_SKIP_PYTHON_TESTS=1`).
pub fn skip_python() -> bool {
    std::env::var_os("RTQ_SKIP_PYTHON_TESTS").is_some()
}

/// The directory `sub` inside Python package `module`, or `None` when Python tests are
/// skipped. Panics with an installation hint when the package is missing.
pub fn python_package_dir(module: &str, sub: &str) -> Option<PathBuf> {
    if skip_python() {
        return None;
    }
    let code = format!(
        "import {module}, os; print(os.path.join(os.path.dirname({module}.__file__), '{sub}'))"
    );
    let out = Command::new("python3")
        .args(["-c", &code])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run python3 ({e}); set RTQ_SKIP_PYTHON_TESTS=1 to skip")
        });
    assert!(
        out.status.success(),
        "python package `{module}` is needed (pip install -r requirements-test.txt): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Runs `tests/python/<script>` with `args` and returns its standard output.
pub fn run_python(script: &str, args: &[&str]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let out = Command::new("python3")
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run python3 ({e}); set RTQ_SKIP_PYTHON_TESTS=1 to skip")
        });
    assert!(
        out.status.success(),
        "{} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// The `.onnx` files of `dir`, sorted.
pub fn onnx_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    files.sort();
    files
}

/// A small deterministic generator (64-bit LCG) for test inputs.
pub struct Lcg(pub u64);

impl Lcg {
    /// The next value, uniform in [-1, 1).
    pub fn next_f32(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// A tensor of `shape` with values uniform in [-1, 1).
    pub fn tensor(&mut self, shape: &[usize]) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_f32(shape.to_vec(), (0..n).map(|_| self.next_f32()).collect())
    }
}

/// The largest absolute difference between two f32 tensors of equal shape.
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.shape(), b.shape());
    a.to_f32_vec()
        .iter()
        .zip(b.to_f32_vec())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// What `tensor_shapes.py` reports for a model.
pub struct ActualShapes {
    /// Shape fed per graph input.
    pub inputs: HashMap<String, Vec<usize>>,
    /// Shape computed per tensor name.
    pub shapes: HashMap<String, Vec<usize>>,
}

/// Runs `tensor_shapes.py` on `model`.
pub fn actual_shapes(model: &Path, size: usize) -> ActualShapes {
    let out = run_python(
        "tensor_shapes.py",
        &[&model.to_string_lossy(), &size.to_string()],
    );
    let json: serde_json::Value = serde_json::from_str(&out).expect("JSON from tensor_shapes.py");
    let read = |key: &str| -> HashMap<String, Vec<usize>> {
        json[key]
            .as_object()
            .expect("object")
            .iter()
            .map(|(k, v)| {
                let dims = v
                    .as_array()
                    .expect("array")
                    .iter()
                    .map(|d| d.as_u64().expect("dim") as usize)
                    .collect();
                (k.clone(), dims)
            })
            .collect()
    };
    ActualShapes {
        inputs: read("inputs"),
        shapes: read("shapes"),
    }
}

/// Checks every shape fact of `graph` against the actual shapes: ranks and known extents
/// must match, and each named symbol must stand for one extent throughout (the one fed
/// for it when it appears in a graph input). Returns how many values were checked.
pub fn check_facts(graph: &Graph, actual: &ActualShapes, context: &str) -> usize {
    let mut symbols: HashMap<String, usize> = HashMap::new();
    for &i in &graph.inputs {
        let v = graph.value(i);
        if let (Some(shape), Some(fed)) = (&v.shape, actual.inputs.get(&v.name)) {
            for (d, &n) in shape.iter().zip(fed) {
                if let Dim::Sym(s) = d {
                    symbols.insert(s.clone(), n);
                }
            }
        }
    }
    let mut checked = 0;
    for (_, v) in graph.values() {
        let (Some(shape), Some(real)) = (&v.shape, actual.shapes.get(&v.name)) else {
            continue;
        };
        checked += 1;
        assert_eq!(
            shape.len(),
            real.len(),
            "{context}: `{}` inferred {shape:?}, actual {real:?}",
            v.name
        );
        for (d, &n) in shape.iter().zip(real) {
            match d {
                Dim::Known(k) => assert_eq!(
                    *k, n,
                    "{context}: `{}` inferred {shape:?}, actual {real:?}",
                    v.name
                ),
                Dim::Sym(s) if s != "?" && !s.is_empty() => {
                    let bound = *symbols.entry(s.clone()).or_insert(n);
                    assert_eq!(
                        bound, n,
                        "{context}: `{}` inferred {shape:?} with {s} = {bound}, actual {real:?}",
                        v.name
                    );
                }
                Dim::Sym(_) => {}
            }
        }
    }
    checked
}
