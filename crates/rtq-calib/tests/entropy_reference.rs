//! Cross-checks rtq's EntropyCalibration2 search against an independent
//! numpy/scipy implementation (`tests/reference/entropy_reference.py`).
//!
//! For several distributions, the histogram rtq's entropy collector builds is
//! written to a JSON file; the Python script computes the divergence curve and
//! the chosen bin count from it. The curves must agree to 1e-9 (relative) and
//! the chosen bin count must be identical; the only tolerated difference is a
//! choice between two candidates whose divergences tie to 1e-12 (floating-point
//! summation order could then pick either one first).
//!
//! Needs `python3` with numpy and scipy (CI installs them). The test fails if
//! they are missing, unless `RTQ_SKIP_PYTHON_TESTS=1` is set.

use rtq_calib::{
    entropy_threshold, kl_divergences, level_zero_bin, CalibOptions, EntropyCalibrator,
    RangeCollector, INT8_LEVELS,
};
use rtq_test_support::{run_python, skip_python, Rng};
use std::path::Path;

/// What the reference script reports.
struct Reference {
    bins: usize,
    amax: f64,
    divergences: Vec<f64>,
}

fn run_reference(dir: &Path, name: &str, hist: &[u64], bin_width: f64) -> Reference {
    let input = dir.join(format!("{name}.json"));
    let json = serde_json::json!({ "hist": hist, "bin_width": bin_width });
    std::fs::write(&input, json.to_string()).expect("write histogram json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/entropy_reference.py");
    let out = run_python(&script, [&input]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("reference prints JSON");
    Reference {
        bins: v["bins"].as_u64().expect("bins") as usize,
        amax: v["amax"].as_f64().expect("amax"),
        divergences: v["divergences"]
            .as_array()
            .expect("divergences")
            .iter()
            .map(|d| d.as_f64().expect("divergence is a number"))
            .collect(),
    }
}

/// Feeds `batches` to a default entropy collector and checks it against the reference.
fn check(dir: &Path, name: &str, batches: &[Vec<f32>]) {
    let mut collector = EntropyCalibrator::new(&CalibOptions::default()).new_collector();
    for b in batches {
        collector.observe(b).unwrap();
    }
    let stats = collector.stats();
    let hist = collector.histogram();
    // The bins the rule searches: those covering the observed data.
    let counts = &hist.counts()[..hist.used_bins(stats.absmax)];
    let width = hist.bin_width();

    let reference = run_reference(dir, name, counts, width);
    let ours = kl_divergences(&level_zero_bin(counts), INT8_LEVELS);
    assert_eq!(
        ours.len(),
        reference.divergences.len(),
        "{name}: curve length"
    );
    for (k, (a, b)) in ours.iter().zip(&reference.divergences).enumerate() {
        let tol = 1e-9 * b.abs() + 1e-13;
        assert!(
            (a - b).abs() <= tol,
            "{name}: KL at {} bins: rtq {a} vs reference {b}",
            INT8_LEVELS + k
        );
    }
    let choice = entropy_threshold(counts).unwrap();
    if choice.bins != reference.bins {
        let at_ref = ours[reference.bins - INT8_LEVELS];
        assert!(
            (at_ref - choice.divergence).abs() <= 1e-12,
            "{name}: rtq picks {} bins (KL {}), reference {} bins (KL {at_ref})",
            choice.bins,
            choice.divergence,
            reference.bins
        );
    }
    let expected_amax = (reference.amax as f32).min(stats.absmax);
    if choice.bins == reference.bins {
        assert_eq!(collector.amax().unwrap(), expected_amax, "{name}: amax");
    }
    // The search must actually clip or keep something sensible.
    assert!(choice.bins >= INT8_LEVELS && choice.bins <= counts.len());
    eprintln!(
        "{name}: {} of {} bins, amax {} (absmax {})",
        choice.bins,
        counts.len(),
        collector.amax().unwrap(),
        stats.absmax
    );
}

#[test]
fn entropy_matches_independent_numpy_reference() {
    if skip_python() {
        eprintln!("RTQ_SKIP_PYTHON_TESTS=1: skipping the numpy entropy reference");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(2024);

    // Gaussian + Laplace mixture.
    let mix: Vec<f32> = (0..200_000)
        .map(|k| {
            if k % 3 == 0 {
                (rng.laplace() * 0.7) as f32
            } else {
                (rng.normal() * 1.3 + 0.4) as f32
            }
        })
        .collect();
    check(dir.path(), "gauss_laplace_mix", &[mix]);

    // Gaussian with a few large outliers.
    let mut outliers: Vec<f32> = (0..100_000).map(|_| rng.normal() as f32).collect();
    outliers[17] = 55.0;
    outliers[99] = -31.0;
    check(dir.path(), "gauss_outliers", &[outliers]);

    // ReLU-like activations: half exact zeros, an exponential tail.
    let relu: Vec<f32> = (0..150_000)
        .map(|_| (rng.normal() * 2.0).max(0.0) as f32)
        .collect();
    check(dir.path(), "relu", &[relu]);

    // Uniform: the best threshold keeps nearly everything.
    let uniform: Vec<f32> = (0..100_000)
        .map(|_| rng.uniform(-3.0, 3.0) as f32)
        .collect();
    check(dir.path(), "uniform", &[uniform]);

    // Streamed batches whose range keeps growing (the histogram is re-binned).
    let batches: Vec<Vec<f32>> = (0..12)
        .map(|b| {
            let scale = 1.0 + b as f64 * 0.4;
            (0..20_000)
                .map(|_| (rng.laplace() * scale) as f32)
                .collect()
        })
        .collect();
    check(dir.path(), "growing_laplace_batches", &batches);

    // A sparse histogram: few distinct values (many empty bins and groups).
    let sparse: Vec<f32> = (0..50_000)
        .map(|_| [0.0f32, 0.5, -1.0, 2.0, 8.0][(rng.next_u64() % 5) as usize])
        .collect();
    check(dir.path(), "sparse_levels", &[sparse]);
}
