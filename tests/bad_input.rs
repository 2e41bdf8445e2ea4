//! Bad input gets a clear error naming the file/node/tensor, a non-zero exit, and no
//! partial output.

mod common;

use common::*;
use std::path::Path;

fn assert_no_outputs(dir: &Path) {
    let left: Vec<_> = files_in(dir);
    assert!(left.is_empty(), "outputs left behind: {left:?}");
}

fn compile_int8(model: &Path, calib: &Path, out: &Path) -> String {
    compile_int8_with_threads(model, calib, out, None)
}

#[test]
fn truncated_and_garbage_models() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(demo_model()).unwrap();
    let truncated = dir.path().join("truncated.onnx");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(&garbage, b"this is not a protobuf at all \xff\xfe").unwrap();
    let empty = dir.path().join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    for (file, what) in [
        (&truncated, "truncated"),
        (&garbage, "garbage"),
        (&empty, "empty"),
    ] {
        let out = tempfile::tempdir().unwrap();
        let err = compile_int8(file, &demo_calib(), out.path());
        assert!(
            err.contains(file.to_str().unwrap()),
            "{what}: error names the file: {err}"
        );
        assert!(err.contains("not a valid ONNX model"), "{what}: {err}");
        assert_no_outputs(out.path());
    }
    let err = rtq_fails(&["inspect", "/nonexistent/model.onnx"]);
    assert!(err.contains("/nonexistent/model.onnx"), "{err}");
}

#[test]
fn calibration_data_problems() {
    let model = demo_model();
    let check = |setup: &dyn Fn(&Path), expect: &[&str]| {
        let calib = tempfile::tempdir().unwrap();
        setup(calib.path());
        let out = tempfile::tempdir().unwrap();
        let err = compile_int8(&model, calib.path(), out.path());
        for e in expect {
            assert!(err.contains(e), "expected `{e}` in: {err}");
        }
        assert_no_outputs(out.path());
    };
    let first = files_in(&demo_calib())[0].clone();
    let copy = |name: &str, dir: &Path| {
        std::fs::copy(&first, dir.join(name)).unwrap();
    };
    // Empty directory.
    check(&|_| {}, &["no"]);
    // NaN in a sample.
    check(
        &|d| {
            copy("a.npy", d);
            copy("b.npy", d);
            let mut bytes = std::fs::read(d.join("b.npy")).unwrap();
            let n = bytes.len();
            bytes[n - 4..].copy_from_slice(&f32::NAN.to_le_bytes());
            std::fs::write(d.join("b.npy"), bytes).unwrap();
        },
        &["b.npy", "NaN"],
    );
    // Wrong shape: a 1x3x16x16 array.
    check(
        &|d| {
            copy("a.npy", d);
            copy("c.npy", d);
            let out = std::process::Command::new("python3")
                .args([
                    "-c",
                    &format!(
                        "import numpy as np; np.save('{}', np.zeros((1,3,16,16), np.float32))",
                        d.join("wrong.npy").display()
                    ),
                ])
                .status();
            if !matches!(out, Ok(s) if s.success()) {
                // Without numpy, write a .npy by hand (version 1.0 header).
                let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 16, 16), }";
                let mut h = header.to_string();
                while (10 + h.len() + 1) % 64 != 0 {
                    h.push(' ');
                }
                h.push('\n');
                let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
                bytes.extend((h.len() as u16).to_le_bytes());
                bytes.extend(h.as_bytes());
                bytes.extend(vec![0u8; 3 * 16 * 16 * 4]);
                std::fs::write(d.join("wrong.npy"), bytes).unwrap();
            }
        },
        &["wrong.npy", "input"],
    );
    // Missing directory.
    let out = tempfile::tempdir().unwrap();
    let err = compile_int8(&model, Path::new("/nonexistent/calib"), out.path());
    assert!(err.contains("/nonexistent/calib"), "{err}");
    assert_no_outputs(out.path());
}

#[test]
fn unsupported_ops_are_listed_by_node() {
    if skip_python() {
        return;
    }
    let (_dir, path, _) = python_model(
        "custom.onnx",
        r#"
import onnx
from onnx import helper, TensorProto
n1 = helper.make_node("Relu", ["x"], ["a"], name="ok_relu")
n2 = helper.make_node("FancyOp", ["a"], ["b"], name="mystery_1", domain="com.example")
n3 = helper.make_node("Gelu2", ["b"], ["y"], name="mystery_2")
g = helper.make_graph([n1, n2, n3], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
onnx.save(m, MODEL)
"#,
    );
    let out = tempfile::tempdir().unwrap();
    let err = rtq_fails(&[
        "compile",
        path.to_str().unwrap(),
        "-o",
        out.path().to_str().unwrap(),
    ]);
    assert!(
        err.contains("mystery_1") && err.contains("com.example::FancyOp"),
        "{err}"
    );
    assert!(err.contains("mystery_2") && err.contains("Gelu2"), "{err}");
    assert!(!err.contains("ok_relu"), "{err}");
    assert_no_outputs(out.path());
}

#[test]
fn nan_computed_inside_the_graph_names_tensor_and_sample() {
    if skip_python() {
        return;
    }
    // Sqrt of a negative input gives NaN in an intermediate tensor (samples 3 and 4):
    // the calibration must stop the run with an error naming the tensor and the
    // first such sample, whichever forward worker met which sample first, leaving no
    // output.
    let (_dir, model, calib) = python_model(
        "sqrt.onnx",
        r#"
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
n1 = helper.make_node("Sqrt", ["x"], ["root"], name="sqrt")
n2 = helper.make_node("MatMul", ["root", "w"], ["y"], name="mm")
g = helper.make_graph([n1, n2], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), MODEL)
for i in range(6):
    np.save(f"{CALIB}/s{i}.npy", np.full((1, 4), -1.0 if i in (3, 4) else 1.0, np.float32))
"#,
    );
    for threads in [None, Some("1"), Some("2"), Some("3")] {
        let out = tempfile::tempdir().unwrap();
        let err = compile_int8_with_threads(&model, &calib, out.path(), threads);
        assert!(
            err.contains("s3.npy")
                && !err.contains("s4.npy")
                && err.contains("`root`")
                && err.contains("NaN"),
            "threads {threads:?}: {err}"
        );
        assert_no_outputs(out.path());
    }
}

/// `rtq compile --int8` of `model` with `calib` into `out`, with
/// `RAYON_NUM_THREADS=threads` (rayon's default when `None`), asserting a clean
/// failure (non-zero exit, no panic); returns stderr.
fn compile_int8_with_threads(
    model: &Path,
    calib: &Path,
    out: &Path,
    threads: Option<&str>,
) -> String {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_rtq"));
    cmd.args([
        "compile",
        model.to_str().unwrap(),
        "--int8",
        "--calib",
        calib.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    if let Some(n) = threads {
        cmd.env("RAYON_NUM_THREADS", n);
    }
    let result = cmd.output().expect("rtq runs");
    assert!(
        !result.status.success() && result.status.code() != Some(101),
        "rtq compile {} did not fail cleanly:\n{}",
        model.display(),
        String::from_utf8_lossy(&result.stderr)
    );
    String::from_utf8(result.stderr).expect("utf-8")
}

#[test]
fn unwritable_output_and_missing_calib_flag() {
    let err = rtq_fails(&[
        "compile",
        demo_model().to_str().unwrap(),
        "-o",
        "/proc/rtq-cannot-write-here",
    ]);
    assert!(err.contains("/proc/rtq-cannot-write-here"), "{err}");
    let out = tempfile::tempdir().unwrap();
    let err = rtq_fails(&[
        "compile",
        demo_model().to_str().unwrap(),
        "--int8",
        "-o",
        out.path().to_str().unwrap(),
    ]);
    assert!(err.contains("--calib"), "{err}");
    assert_no_outputs(out.path());
}
