//! `rtq bench`, Triton export and the TensorRT paths as a CPU-only build sees them.

mod common;

use common::*;

#[test]
fn bench_reports_trtexec_style_statistics() {
    let out = rtq_ok(&[
        "bench",
        demo_model().to_str().unwrap(),
        "--iterations",
        "20",
        "--duration",
        "0",
        "--warmup-ms",
        "10",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["iterations"].as_u64().unwrap(), 20);
    let lat = &j["latency_ms"];
    let (min, median, p99, max) = (
        lat["min"].as_f64().unwrap(),
        lat["median"].as_f64().unwrap(),
        lat["p99"].as_f64().unwrap(),
        lat["max"].as_f64().unwrap(),
    );
    assert!(
        min > 0.0 && min <= median && median <= p99 && p99 <= max,
        "{lat}"
    );
    assert!(j["throughput_inferences_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_exports_json_into_new_directories() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reports").join("cpu").join("bench.json");
    rtq_ok(&[
        "bench",
        demo_model().to_str().unwrap(),
        "--iterations",
        "2",
        "--duration",
        "0",
        "--warmup-ms",
        "0",
        "--export-json",
        path.to_str().unwrap(),
    ]);
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(j["iterations"].as_u64().unwrap(), 2);
    assert_eq!(
        files_in(path.parent().unwrap()),
        std::slice::from_ref(&path),
        "temp file left"
    );
}

#[test]
fn triton_repository_for_the_onnx_build() {
    let out = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    compile_ok(
        &demo_model(),
        out.path(),
        &[
            "--fp16",
            "--triton-repo",
            repo.path().to_str().unwrap(),
            "--triton-name",
            "tiny",
            "--max-batch-size",
            "8",
            "--dynamic-batching",
            "4,8",
            "--quiet",
        ],
    );
    let config = std::fs::read_to_string(repo.path().join("tiny/config.pbtxt")).unwrap();
    assert!(
        config.contains("platform: \"onnxruntime_onnx\""),
        "{config}"
    );
    assert!(config.contains("max_batch_size: 8"), "{config}");
    assert!(
        config.contains("dims: [ 3, 32, 32 ]"),
        "batch dim left to Triton: {config}"
    );
    assert!(
        config.contains("preferred_batch_size: [ 4, 8 ]"),
        "{config}"
    );
    let model = std::fs::read(repo.path().join("tiny/1/model.onnx")).unwrap();
    assert_eq!(
        model,
        std::fs::read(out.path().join("tinyresnet_fp16.onnx")).unwrap()
    );
    let report = std::fs::read_to_string(out.path().join("report.json")).unwrap();
    assert!(
        report.contains("config.pbtxt"),
        "report lists the Triton files"
    );
}

#[test]
fn engine_without_tensorrt_says_what_is_missing_and_writes_nothing() {
    if cfg!(feature = "tensorrt") {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let err = rtq_fails(&[
        "compile",
        demo_model().to_str().unwrap(),
        "--engine",
        "-o",
        out.path().to_str().unwrap(),
    ]);
    assert!(
        err.contains("built without the `tensorrt` feature"),
        "{err}"
    );
    assert!(err.contains("TENSORRT_ROOT"), "{err}");
    assert!(files_in(out.path()).is_empty());
    let err = rtq_fails(&["bench", "model.plan"]);
    assert!(err.contains("tensorrt"), "{err}");
}
