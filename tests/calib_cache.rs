//! `--calib-cache FILE`: a Q/DQ model from an existing TensorRT calibration cache (or a
//! ranges JSON) without calibrating, the migration path from TensorRT <= 10's implicit
//! INT8 to TensorRT 11's explicit quantization.

mod common;

use common::*;
use std::path::Path;

fn demo_args<'a>(out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "compile",
        "models/tinyresnet.onnx",
        "-o",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_build_from_its_own_cache_is_the_same_model() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let calib = demo_calib();
    let calib = calib.to_str().unwrap();
    std::env::set_current_dir(root()).unwrap();
    rtq_ok(&demo_args(
        &a,
        &["--int8", "--calib", calib, "--calib-method", "entropy"],
    ));
    let cache = a.join("tinyresnet_calibration.cache");
    rtq_ok(&demo_args(
        &b,
        &[
            "--int8",
            "--calib-cache",
            cache.to_str().unwrap(),
            "--calib",
            calib,
        ],
    ));
    let read = |p: &Path| std::fs::read(p).unwrap();
    assert_eq!(
        read(&a.join("tinyresnet_int8.onnx")),
        read(&b.join("tinyresnet_int8.onnx")),
        "the same ranges give the same model"
    );
    let report: serde_json::Value = serde_json::from_slice(&read(&b.join("report.json"))).unwrap();
    assert_eq!(report["quantization"]["method"], "calib-cache");
    assert_eq!(
        report["accuracy_check"]["met"], true,
        "{}",
        report["accuracy_check"]
    );
}

#[test]
fn scales_come_from_an_independently_written_cache() {
    // Python writes a MinMax cache (big-endian IEEE-754 hex of amax / 127) with its own
    // range for every tensor of the model, and checks every activation Q/DQ scale rtq
    // writes against it; the model runs in onnxruntime.
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("model.cache");
    let out = dir.path().join("out");
    let model = root().join("models/tinyresnet.onnx");
    python_inline(&format!(
        r#"
import onnx, struct
m = onnx.load(r"{model}")
names = [i.name for i in m.graph.input] + [o for n in m.graph.node for o in n.output]
with open(r"{cache}", "w") as f:
    f.write("TRT-8601-MinMaxCalibration\n")
    for i, name in enumerate(names):
        amax = 0.5 + 0.25 * i
        f.write("%s: %s\n" % (name, struct.pack(">f", amax / 127).hex()))
"#,
        model = model.display(),
        cache = cache.display()
    ));
    rtq_ok(&[
        "compile",
        model.to_str().unwrap(),
        "--int8",
        "--calib-cache",
        cache.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    let checked = python_inline(&format!(
        r#"
import onnx, struct, numpy as np, onnxruntime as ort
from onnx import numpy_helper
want = {{}}
for line in open(r"{cache}").read().splitlines()[1:]:
    name, hexs = line.rsplit(":", 1)
    want[name.strip()] = struct.unpack(">f", bytes.fromhex(hexs.strip()))[0]
m = onnx.load(r"{out}/tinyresnet_int8.onnx")
inits = {{i.name: numpy_helper.to_array(i) for i in m.graph.initializer}}
checked = 0
for n in m.graph.node:
    if n.op_type == "QuantizeLinear":
        scale = float(inits[n.input[1]])
        assert n.input[0] in want, n.input[0]
        assert scale == np.float32(want[n.input[0]]), (n.input[0], scale, want[n.input[0]])
        checked += 1
s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
s.run(None, {{s.get_inputs()[0].name: np.zeros([d if isinstance(d, int) else 1 for d in s.get_inputs()[0].shape], np.float32)}})
print(checked)
"#,
        cache = cache.display(),
        out = out.display()
    ));
    assert!(checked.trim().parse::<usize>().unwrap() >= 5, "{checked}");
}

#[test]
fn bad_caches_are_refused_by_name_and_partial_ones_keep_nodes_in_float() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/tinyresnet.onnx");
    let m = model.to_str().unwrap();
    let unknown = dir.path().join("unknown.cache");
    std::fs::write(
        &unknown,
        "TRT-8601-EntropyCalibration2\ninput: 3c010204\nnot_a_tensor: 3c010204\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let err = rtq_fails(&[
        "compile",
        m,
        "--int8",
        "--calib-cache",
        unknown.to_str().unwrap(),
        "-o",
        o,
    ]);
    assert!(
        err.contains("`not_a_tensor`") && err.contains("not in"),
        "{err}"
    );
    assert!(!out.exists(), "no partial output");
    let garbled = dir.path().join("garbled.cache");
    std::fs::write(&garbled, "TRT-8601-EntropyCalibration2\ninput: zz\n").unwrap();
    let err = rtq_fails(&[
        "compile",
        m,
        "--int8",
        "--calib-cache",
        garbled.to_str().unwrap(),
        "-o",
        o,
    ]);
    assert!(
        err.contains("garbled.cache") && err.contains("line 2"),
        "{err}"
    );
    let err = rtq_fails(&[
        "compile",
        m,
        "--calib-cache",
        garbled.to_str().unwrap(),
        "-o",
        o,
    ]);
    assert!(err.contains("add --int8"), "{err}");
    // A ranges JSON covering the input and the stem only: the rest stays in float.
    let json = dir.path().join("ranges.json");
    std::fs::write(&json, r#"{"input": 2.5, "stem.relu": 4.0}"#).unwrap();
    let stdout = rtq_ok(&[
        "compile",
        m,
        "--int8",
        "--calib-cache",
        json.to_str().unwrap(),
        "-o",
        o,
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("kept in float") && warnings.contains("head"),
        "{warnings}"
    );
    // The stem conv, block 1's first conv and its residual Add read covered tensors.
    let q = &report["quantization"];
    assert_eq!(q["quantized_nodes"], 3, "{q}");
    assert!(
        q["skipped"]
            .to_string()
            .contains("no range in the calibration cache"),
        "{q}"
    );
}
