//! Per-layer diagnosis (`rtq eval --per-layer`) finds the first diverging layer of a
//! deliberately broken model: the bundled model's INT8 build with one activation
//! scale made 50 times too small, so that its Q/DQ clips.

mod common;

use common::*;

fn per_layer(candidate: &std::path::Path) -> serde_json::Value {
    let out = rtq_ok(&[
        "eval",
        demo_model().to_str().unwrap(),
        candidate.to_str().unwrap(),
        "--data",
        demo_calib().to_str().unwrap(),
        "--samples",
        "4",
        "--per-layer",
        "--json",
    ]);
    serde_json::from_str::<serde_json::Value>(&out).unwrap()["per_layer"].clone()
}

#[test]
fn per_layer_diagnosis_finds_the_broken_layer() {
    if skip_python() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let calib = demo_calib();
    compile_ok(
        &demo_model(),
        out.path(),
        &[
            "--int8",
            "--calib",
            calib.to_str().unwrap(),
            "--calib-method",
            "entropy",
            "--quiet",
        ],
    );
    let good = out.path().join("tinyresnet_int8.onnx");
    let sound = per_layer(&good);
    assert!(sound["first_diverging"].is_null(), "{sound}");
    let layers = sound["layers"].as_array().unwrap();
    assert!(layers.len() >= 15, "{sound}");
    assert!(layers.iter().any(|l| l["local_sqnr_db"].is_number()));

    let broken = out.path().join("broken.onnx");
    python_inline(&format!(
        r#"
import onnx
from onnx import numpy_helper
m = onnx.load(r"{good}")
for i in m.graph.initializer:
    if i.name == "block1.a.relu_scale":
        i.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(i) / 50, i.name))
onnx.save(m, r"{broken}")
"#,
        good = good.display(),
        broken = broken.display()
    ));
    let report = per_layer(&broken);
    // The clipped tensor is the most sensitive; the convolution reading it is the
    // first to diverge; everything upstream still agrees with FP32.
    assert_eq!(report["most_sensitive"][0], "block1.a.relu", "{report}");
    assert_eq!(report["first_diverging"], "block1.b.conv", "{report}");
    let layers = report["layers"].as_array().unwrap();
    let at = layers
        .iter()
        .position(|l| l["tensor"] == "block1.b.conv")
        .unwrap();
    assert!(layers[..at]
        .iter()
        .all(|l| l["cosine"].as_f64().unwrap() > 0.99));
    assert_eq!(layers[at]["node"], "block1.b/conv");
}
