//! End to end on the CPU backend: an ONNX file loaded through `Engine::load`, run,
//! described and (feature `bench`) benchmarked.

#![cfg(feature = "cpu")]

mod common;

use rtq_runtime::{
    Backend, BackendKind, DataType, Engine, HostTensor, LoadOptions, RuntimeError, TensorInfo,
};

fn mlp_engine(dir: &tempfile::TempDir) -> Engine {
    let path = dir.path().join("mlp.onnx");
    common::write_mlp_model(&path);
    Engine::load(&path, &LoadOptions::default()).unwrap()
}

#[test]
fn loads_describes_and_runs_an_onnx_model() {
    let dir = tempfile::tempdir().unwrap();
    let engine = mlp_engine(&dir);
    assert_eq!(engine.backend_kind(), BackendKind::Cpu);
    assert_eq!(
        engine.inputs(),
        &[TensorInfo::new("x", DataType::F32, vec![-1, 4])]
    );
    assert_eq!(
        engine.outputs(),
        &[TensorInfo::new("y", DataType::F32, vec![-1, 2])]
    );

    let x = [1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 0.0, 0.0, 0.5, -0.5, 2.0, 1.0];
    let out = engine
        .infer(&[HostTensor::from_f32("x", vec![3, 4], &x).unwrap()])
        .unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].name, "y");
    assert_eq!(out[0].dtype(), DataType::F32);
    assert_eq!(out[0].shape(), &[3, 2]);
    let y = out[0].to_f32_vec().unwrap();
    assert_eq!(y, common::mlp_reference(&x));
    assert_eq!(&y[..4], &[1.5, 13.0, 0.0, 0.0]);
}

#[test]
fn explicit_cpu_backend_and_bad_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mlp.onnx");
    common::write_mlp_model(&path);
    let options = LoadOptions {
        backend: Backend::Cpu,
        ..Default::default()
    };
    let engine = Engine::load(&path, &options).unwrap();
    let wrong = HostTensor::from_f32("x", vec![1, 3], &[0.0; 3]).unwrap();
    let err = engine.infer(&[wrong]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor `x`: dimension 1 must be 4 (x: float32[?,4]), got shape [1, 3]"
    );
    let err = engine.infer(&[]).unwrap_err();
    assert_eq!(err.to_string(), "tensor `x`: missing input");
}

#[test]
fn load_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.onnx");
    let err = Engine::load(&missing, &LoadOptions::default()).unwrap_err();
    assert!(matches!(err, RuntimeError::ModelLoad { .. }), "{err:?}");
    assert!(err.to_string().contains("missing.onnx"), "{err}");

    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(&garbage, b"not a protobuf at all \xff\xff").unwrap();
    let err = Engine::load(&garbage, &LoadOptions::default()).unwrap_err();
    assert!(
        err.to_string().starts_with(&garbage.display().to_string()),
        "{err}"
    );
}

#[cfg(feature = "bench")]
#[test]
fn benchmarks_the_cpu_backend() {
    use rtq_runtime::bench::{make_inputs, run_benchmark, BenchOptions, InputFill, InputSpec};
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let engine = mlp_engine(&dir);
    let spec = InputSpec {
        batch_size: Some(8),
        fill: InputFill::Random { seed: 3 },
        ..Default::default()
    };
    let inputs = make_inputs(&engine, &spec).unwrap();
    assert_eq!(inputs[0].shape(), &[8, 4]);
    let options = BenchOptions {
        warmup_iterations: 2,
        warmup_time: Duration::ZERO,
        iterations: 25,
        min_duration: Duration::ZERO,
        batch_size: 8,
        profile_runs: 3,
    };
    let report = run_benchmark(&engine, &inputs, &options).unwrap();
    assert_eq!(report.iterations, 25);
    assert_eq!(report.warmup_iterations, 2);
    assert_eq!(report.latency_ms.count, 25);
    assert!(report.latency_ms.min > 0.0);
    assert!(report.latency_ms.min <= report.latency_ms.median);
    assert!(report.latency_ms.median <= report.latency_ms.p99);
    assert!(report.latency_ms.p99 <= report.latency_ms.max);
    assert!(report.device_compute_ms.is_none());
    // The process's resident memory, where the platform reports it.
    if cfg!(target_os = "linux") {
        let memory = report.host_memory.expect("Linux reports resident memory");
        assert!(memory.peak_rss_mib >= memory.rss_after_run_mib.max(memory.rss_after_warmup_mib));
        assert!(memory.rss_after_warmup_mib > 0.0);
        assert!(report.to_text().contains("Host memory: peak RSS"));
        assert!(report.to_json().contains("\"peak_rss_mib\""));
    }
    // Every node of the MLP profiled (the bias Add and Relu run as one chain), in
    // execution order, over the 3 profiled runs.
    let profile = report.profile.as_ref().expect("the CPU backend profiles");
    assert_eq!(profile.runs, 3);
    let ops: Vec<&str> = profile.layers.iter().map(|l| l.op.as_str()).collect();
    assert!(ops.contains(&"Gemm") || ops.contains(&"MatMul"), "{ops:?}");
    assert!(profile.layers.iter().all(|l| l.mean_ms >= 0.0));
    assert!((profile.layers.iter().map(|l| l.percent).sum::<f64>() - 100.0).abs() < 1e-6);
    assert!(report.to_text().contains("=== Profile (3 runs"));
    let expected_ips = 25.0 / report.total_time_s;
    assert!((report.throughput_inferences_per_s - expected_ips).abs() < 1e-6 * expected_ips);
    assert!((report.throughput_samples_per_s - 8.0 * expected_ips).abs() < 1e-6 * expected_ips);
    assert!(report
        .to_text()
        .contains("Backend: cpu (rtq CPU executor (2 nodes))"));
}

#[test]
fn constant_subgraphs_are_computed_once_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mlp_reshape.onnx");
    common::write_mlp_model_reshaping_w(&path);
    let engine = Engine::load(&path, &LoadOptions::default()).unwrap();
    // The Reshape of the constant weight is folded, and the bias Add and the Relu run
    // as one elementwise chain: two nodes run, not four.
    assert_eq!(engine.description(), "rtq CPU executor (2 nodes)");
    let x = [1.0, 2.0, 3.0, 4.0];
    let out = engine
        .infer(&[HostTensor::from_f32("x", vec![1, 4], &x).unwrap()])
        .unwrap();
    assert_eq!(out[0].to_f32_vec().unwrap(), common::mlp_reference(&x));
}

#[test]
fn threads_share_one_engine() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Engine>();
    let dir = tempfile::tempdir().unwrap();
    let engine = std::sync::Arc::new(mlp_engine(&dir));
    // Each thread runs its own inputs; every result equals the same call made alone.
    let input = |t: usize, i: usize| {
        let x: Vec<f32> = (0..8)
            .map(|k| (t * 31 + i * 7 + k) as f32 * 0.1 - 2.0)
            .collect();
        HostTensor::from_f32("x", vec![2, 4], &x).unwrap()
    };
    let alone: Vec<Vec<Vec<f32>>> = (0..4)
        .map(|t| {
            (0..16)
                .map(|i| {
                    engine.infer(&[input(t, i)]).unwrap()[0]
                        .to_f32_vec()
                        .unwrap()
                })
                .collect()
        })
        .collect();
    let together: Vec<Vec<Vec<f32>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let engine = std::sync::Arc::clone(&engine);
                s.spawn(move || {
                    (0..16)
                        .map(|i| {
                            engine.infer(&[input(t, i)]).unwrap()[0]
                                .to_f32_vec()
                                .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(together, alone);
}
