//! `run_benchmark` against a scripted backend: iteration and duration minimums,
//! warm-up, throughput and device-time statistics.

#![cfg(feature = "bench")]

use rtq_runtime::bench::{run_benchmark, BenchOptions};
use rtq_runtime::{
    BackendKind, DataType, Engine, HostTensor, InferBackend, RuntimeError, TensorInfo,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Echoes its input; reports device times 1, 2, 3, ... ms when `device` is set.
struct Scripted {
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
    calls: Arc<AtomicUsize>,
    device: bool,
    sleep: Duration,
    fail_after: Option<usize>,
}

impl InferBackend for Scripted {
    fn kind(&self) -> BackendKind {
        BackendKind::TensorRt
    }
    fn description(&self) -> String {
        "scripted".into()
    }
    fn inputs(&self) -> &[TensorInfo] {
        &self.inputs
    }
    fn outputs(&self) -> &[TensorInfo] {
        &self.outputs
    }
    fn infer(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.fail_after.is_some_and(|limit| n > limit) {
            return Err(RuntimeError::Execution {
                model: "scripted".into(),
                message: format!("call {n} failed"),
            });
        }
        std::thread::sleep(self.sleep);
        let mut out = inputs[0].clone();
        out.name = "y".into();
        Ok(vec![out])
    }
    fn last_device_time_ms(&self) -> Option<f64> {
        self.device
            .then(|| self.calls.load(Ordering::SeqCst) as f64)
    }
}

fn engine(device: bool, sleep: Duration, fail_after: Option<usize>) -> (Engine, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let backend = Scripted {
        inputs: vec![TensorInfo::new("x", DataType::F32, vec![2])],
        outputs: vec![TensorInfo::new("y", DataType::F32, vec![2])],
        calls: calls.clone(),
        device,
        sleep,
        fail_after,
    };
    (
        Engine::from_backend(Box::new(backend), "scripted.plan"),
        calls,
    )
}

fn input() -> Vec<HostTensor> {
    vec![HostTensor::from_f32("x", vec![2], &[1.0, 2.0]).unwrap()]
}

#[test]
fn runs_the_minimum_iterations_after_warmup() {
    let (engine, calls) = engine(true, Duration::ZERO, None);
    let options = BenchOptions {
        warmup_iterations: 3,
        warmup_time: Duration::ZERO,
        iterations: 10,
        min_duration: Duration::ZERO,
        batch_size: 4,
        profile_runs: 0,
    };
    let report = run_benchmark(&engine, &input(), &options).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 13);
    assert_eq!(report.warmup_iterations, 3);
    assert_eq!(report.iterations, 10);
    assert_eq!(report.model, "scripted.plan");
    // Device times of the measured calls are 4..=13 ms.
    let device = report.device_compute_ms.unwrap();
    assert_eq!(device.count, 10);
    assert_eq!(device.min, 4.0);
    assert_eq!(device.max, 13.0);
    assert_eq!(device.mean, 8.5);
    assert_eq!(device.median, 8.5);
    assert!((device.p90 - 12.1).abs() < 1e-9);
    assert!(
        (report.throughput_samples_per_s - 4.0 * report.throughput_inferences_per_s).abs() < 1e-6
    );
}

#[test]
fn runs_until_the_minimum_duration() {
    let (engine, _) = engine(false, Duration::from_millis(2), None);
    let options = BenchOptions {
        warmup_iterations: 0,
        warmup_time: Duration::from_millis(10),
        iterations: 1,
        min_duration: Duration::from_millis(60),
        batch_size: 1,
        profile_runs: 0,
    };
    let report = run_benchmark(&engine, &input(), &options).unwrap();
    assert!(report.total_time_s >= 0.06, "{}", report.total_time_s);
    assert!(report.iterations >= 10, "{}", report.iterations);
    assert!(report.warmup_time_s >= 0.01);
    assert!(report.warmup_iterations >= 1);
    assert!(report.latency_ms.min >= 2.0, "{:?}", report.latency_ms);
    assert!(report.device_compute_ms.is_none());
    let ips = report.iterations as f64 / report.total_time_s;
    assert!((report.throughput_inferences_per_s - ips).abs() < 1e-9 * ips);
}

#[test]
fn inference_errors_stop_the_benchmark() {
    let (engine, _) = engine(false, Duration::ZERO, Some(4));
    let options = BenchOptions {
        warmup_iterations: 2,
        warmup_time: Duration::ZERO,
        iterations: 10,
        min_duration: Duration::ZERO,
        batch_size: 1,
        profile_runs: 0,
    };
    let err = run_benchmark(&engine, &input(), &options).unwrap_err();
    assert_eq!(err.to_string(), "scripted: call 5 failed");
}

#[test]
fn invalid_options_are_rejected() {
    let (engine, calls) = engine(false, Duration::ZERO, None);
    let options = BenchOptions {
        iterations: 0,
        ..Default::default()
    };
    let err = run_benchmark(&engine, &input(), &options).unwrap_err();
    assert_eq!(err.to_string(), "invalid iterations: must be at least 1");
    let options = BenchOptions {
        batch_size: 0,
        ..Default::default()
    };
    let err = run_benchmark(&engine, &input(), &options).unwrap_err();
    assert_eq!(err.to_string(), "invalid batch size: must be at least 1");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}
