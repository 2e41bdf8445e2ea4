//! The benchmark report and its text and JSON forms.

use super::memory::HostMemory;
use super::profile::Profile;
use super::stats::LatencyStats;
use crate::backend::BackendKind;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Result of [`run_benchmark`](super::run_benchmark).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// The model file.
    pub model: String,
    /// The backend kind.
    pub backend: BackendKind,
    /// The backend's description (device, library version).
    pub backend_description: String,
    /// Samples per inference.
    pub batch_size: usize,
    /// Warm-up inferences run.
    pub warmup_iterations: u32,
    /// Warm-up wall time in seconds.
    pub warmup_time_s: f64,
    /// Measured inferences.
    pub iterations: usize,
    /// Wall time of the measured loop in seconds.
    pub total_time_s: f64,
    /// Inferences per second over the measured loop.
    pub throughput_inferences_per_s: f64,
    /// Samples per second (inferences/s × batch size).
    pub throughput_samples_per_s: f64,
    /// Host latency of one inference call, in ms.
    pub latency_ms: LatencyStats,
    /// Device compute time per inference, in ms (GPU backends).
    pub device_compute_ms: Option<LatencyStats>,
    /// Per-layer times from separate profiled runs (`profile_runs`; backends that can).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// The process's resident memory (where the platform reports it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory: Option<HostMemory>,
}

impl BenchReport {
    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain numbers and strings cannot fail; NaN/inf become null.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// A trtexec-style text summary.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        out.push_str("=== Performance summary ===\n");
        out.push_str(&format!("Model: {}\n", self.model));
        out.push_str(&format!(
            "Backend: {} ({})\n",
            self.backend, self.backend_description
        ));
        out.push_str(&format!("Batch size: {}\n", self.batch_size));
        out.push_str(&format!(
            "Throughput: {:.3} inferences/s ({:.3} samples/s)\n",
            self.throughput_inferences_per_s, self.throughput_samples_per_s
        ));
        out.push_str(&format!("Latency: {}\n", self.latency_ms.summary_line()));
        if let Some(device) = &self.device_compute_ms {
            out.push_str(&format!("GPU Compute Time: {}\n", device.summary_line()));
        }
        out.push_str(&format!(
            "Total Host Walltime: {:.5} s ({} iterations; warm-up: {} iterations in {:.5} s)\n",
            self.total_time_s, self.iterations, self.warmup_iterations, self.warmup_time_s
        ));
        if let Some(memory) = &self.host_memory {
            out.push_str(&format!("Host memory: {}\n", memory.summary_line()));
        }
        if let Some(profile) = &self.profile {
            out.push_str(&profile.to_text(15));
        }
        out
    }
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(device: bool) -> BenchReport {
        let stats = LatencyStats::from_samples(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        BenchReport {
            model: "m.plan".into(),
            backend: BackendKind::TensorRt,
            backend_description: "TensorRT 10.3.0 on GPU".into(),
            batch_size: 8,
            warmup_iterations: 5,
            warmup_time_s: 0.2,
            iterations: 4,
            total_time_s: 0.01,
            throughput_inferences_per_s: 400.0,
            throughput_samples_per_s: 3200.0,
            latency_ms: stats,
            device_compute_ms: device.then_some(stats),
            profile: None,
            host_memory: None,
        }
    }

    #[test]
    fn text_summary() {
        let text = report(true).to_text();
        let expected = "=== Performance summary ===\n\
            Model: m.plan\n\
            Backend: tensorrt (TensorRT 10.3.0 on GPU)\n\
            Batch size: 8\n\
            Throughput: 400.000 inferences/s (3200.000 samples/s)\n\
            Latency: min = 1.00000 ms, max = 4.00000 ms, mean = 2.50000 ms, median = 2.50000 ms, \
            percentile(90%) = 3.70000 ms, percentile(95%) = 3.85000 ms, percentile(99%) = 3.97000 ms\n\
            GPU Compute Time: min = 1.00000 ms, max = 4.00000 ms, mean = 2.50000 ms, median = 2.50000 ms, \
            percentile(90%) = 3.70000 ms, percentile(95%) = 3.85000 ms, percentile(99%) = 3.97000 ms\n\
            Total Host Walltime: 0.01000 s (4 iterations; warm-up: 5 iterations in 0.20000 s)\n";
        assert_eq!(text, expected);
        assert!(!report(false).to_text().contains("GPU Compute Time"));
    }

    #[test]
    fn json_round_trips() {
        let r = report(false);
        let json = r.to_json();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["backend"], "tensorrt");
        assert!((value["latency_ms"]["p99"].as_f64().unwrap() - 3.97).abs() < 1e-9);
        assert_eq!(value["latency_ms"]["count"], 4);
        assert_eq!(value["throughput_samples_per_s"], 3200.0);
        assert!(value["device_compute_ms"].is_null());
        let back: BenchReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.model, r.model);
        assert_eq!(back.iterations, r.iterations);
        assert!((back.latency_ms.p95 - r.latency_ms.p95).abs() < 1e-9);
    }
}
