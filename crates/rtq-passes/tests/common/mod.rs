//! Helpers shared by rtq-passes' integration tests: running its Python reference tools,
//! comparing outputs, and checking inferred shapes against actual ones.

#![allow(dead_code)]

use rtq_ir::{Dim, Graph, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// Runs `tests/python/<script>` with `args` and returns its standard output.
pub fn run_python(script: &str, args: &[&str]) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    rtq_test_support::run_python(&dir.join(script), args)
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
