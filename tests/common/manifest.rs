//! Tests that generate a model and its reference results with inline Python into a
//! directory with a `manifest.json` (inputs and outputs as `[name, type, shape]`, raw
//! little-endian `.bin` files under `in/`, `ort/`, ...), then run the model in rtq's
//! CPU runtime on the same inputs.

use rtq_runtime::{Backend, DataType, Engine, HostTensor, LoadOptions};
use serde_json::Value;
use std::path::Path;

/// Runs the Python `script` (which sees `OUT`, the directory to fill) in a fresh
/// directory; returns the directory and its parsed `manifest.json`.
pub fn generate(script: &str) -> (tempfile::TempDir, Value) {
    let dir = tempfile::tempdir().unwrap();
    super::python_inline(&format!("OUT = r\"{}\"\n{script}", dir.path().display()));
    let manifest = std::fs::read(dir.path().join("manifest.json")).unwrap();
    (dir, serde_json::from_slice(&manifest).unwrap())
}

/// `[name, type, shape]` entries of a manifest list.
pub fn entries(list: &Value) -> Vec<(String, DataType, Vec<usize>)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let dtype = DataType::from_name(e[1].as_str().unwrap()).unwrap();
            let shape = e[2].as_array().unwrap();
            let shape = shape.iter().map(|d| d.as_u64().unwrap() as usize).collect();
            (e[0].as_str().unwrap().to_string(), dtype, shape)
        })
        .collect()
}

/// The bytes of `kind/name.bin` (`kind`: `in`, `ort`, ...).
pub fn read(dir: &Path, kind: &str, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(kind).join(format!("{name}.bin"))).unwrap()
}

/// Runs `model` in rtq's CPU runtime on the manifest's inputs; outputs in order.
pub fn run_rtq(dir: &Path, model: &Path, manifest: &Value) -> Vec<HostTensor> {
    let opts = LoadOptions {
        backend: Backend::Cpu,
        ..Default::default()
    };
    let engine = Engine::load(model, &opts).unwrap();
    let inputs: Vec<HostTensor> = entries(&manifest["inputs"])
        .into_iter()
        .map(|(name, dtype, shape)| {
            let bytes = read(dir, "in", &name);
            HostTensor::new(name, dtype, shape, bytes).unwrap()
        })
        .collect();
    engine.infer(&inputs).unwrap()
}
