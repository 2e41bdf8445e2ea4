//! The public calibration API end to end: registry, streaming collectors,
//! reports and the TensorRT calibration cache.

use rtq_calib::{
    calibrator_by_name, calibrator_names, parse_cache_text, scale_to_cache_hex, write_cache_text,
    CalibOptions, RangeCollector, ZERO_RANGE_AMAX,
};
use rtq_test_support::Rng;

/// Three "tensors" of different distributions, streamed in batches.
fn tensors(rng: &mut Rng) -> Vec<(String, Vec<Vec<f32>>)> {
    let gauss = (0..8)
        .map(|_| (0..4096).map(|_| rng.normal() as f32).collect())
        .collect();
    let relu = (0..8)
        .map(|_| {
            (0..4096)
                .map(|_| (rng.laplace() * 3.0).max(0.0) as f32)
                .collect()
        })
        .collect();
    let zeros = vec![vec![0.0f32; 100]; 3];
    vec![
        ("conv1_out".to_string(), gauss),
        ("relu2:0".to_string(), relu),
        ("dead".to_string(), zeros),
    ]
}

#[test]
fn every_calibrator_streams_in_parallel_and_writes_a_cache() {
    let mut rng = Rng::new(77);
    let data = tensors(&mut rng);
    for &name in calibrator_names() {
        let cal = calibrator_by_name(name, &CalibOptions::default()).unwrap();
        let mut collectors: Vec<Box<dyn RangeCollector>> =
            data.iter().map(|_| cal.collector()).collect();
        // One thread per tensor, as a caller using rayon would do.
        std::thread::scope(|s| {
            for (c, (_, batches)) in collectors.iter_mut().zip(&data) {
                s.spawn(move || {
                    for b in batches {
                        c.observe(b).unwrap();
                    }
                });
            }
        });
        let mut entries = Vec::new();
        for (c, (tensor, batches)) in collectors.iter().zip(&data) {
            let amax = c.amax().unwrap();
            let stats = c.stats();
            let n: usize = batches.iter().map(Vec::len).sum();
            assert_eq!(stats.count, n as u64, "{name} {tensor}");
            assert_eq!(stats.amax, amax);
            assert!(amax.is_finite() && amax > 0.0, "{name} {tensor}: {amax}");
            assert!(
                amax <= stats.absmax || stats.absmax == 0.0,
                "{name} {tensor}"
            );
            if tensor == "dead" {
                assert_eq!(amax, ZERO_RANGE_AMAX);
            }
            if name == "max" {
                assert!(amax == stats.absmax || stats.absmax == 0.0);
            }
            entries.push((tensor.clone(), amax));
        }
        let text = write_cache_text("8601", &entries);
        let (header, parsed) = parse_cache_text(&text).unwrap();
        assert_eq!(header, "TRT-8601-EntropyCalibration2");
        assert_eq!(parsed.len(), entries.len());
        for ((t, amax), (pt, scale)) in entries.iter().zip(&parsed) {
            assert_eq!(t, pt);
            assert_eq!(*scale, amax / 127.0, "{name} {t}");
        }
    }
}

#[test]
fn calibrators_order_as_expected_on_heavy_tails() {
    // Laplace data with one far outlier: max keeps it, the others clip. (MSE
    // weighs the outlier's clipping error by its frequency: with 1 in 1e5 it
    // would rightly keep ~2/3 of the range; at 1 in 1e6 it clips to ~16.)
    let mut rng = Rng::new(5);
    let mut v: Vec<f32> = (0..1_000_000).map(|_| rng.laplace() as f32).collect();
    v[0] = 100.0;
    let amax = |name: &str| {
        let cal = calibrator_by_name(name, &CalibOptions::default()).unwrap();
        let mut c = cal.collector();
        for chunk in v.chunks(100_000) {
            c.observe(chunk).unwrap();
        }
        c.amax().unwrap()
    };
    let max = amax("max");
    assert_eq!(max, 100.0);
    for name in ["entropy", "percentile", "mse"] {
        let a = amax(name);
        eprintln!("{name}: amax {a}");
        assert!(a < max / 3.0 && a > 2.0, "{name}: {a}");
    }
}

#[test]
fn non_finite_batches_are_reported_with_the_tensor() {
    let cal = calibrator_by_name("entropy", &CalibOptions::default()).unwrap();
    let mut c = cal.collector();
    let e = c.observe(&[1.0, f32::NAN]).unwrap_err().for_tensor("act");
    assert_eq!(
        e.to_string(),
        "tensor `act`: batch contains 1 NaN/Inf values out of 2"
    );
}

#[test]
fn cache_hex_known_values() {
    assert_eq!(scale_to_cache_hex(127.0), "3f800000");
    assert_eq!(scale_to_cache_hex(1.0), "3c010204");
    let text = write_cache_text("8601", &[("t".into(), 1.0)]);
    assert_eq!(text, "TRT-8601-EntropyCalibration2\nt: 3c010204\n");
    let (_, e) = parse_cache_text(&text).unwrap();
    assert_eq!(e[0].1, 1.0f32 / 127.0);
}

#[test]
fn stats_serialize_for_reports() {
    let cal = calibrator_by_name("max", &CalibOptions::default()).unwrap();
    let mut c = cal.collector();
    c.observe(&[-2.0, 0.5]).unwrap();
    let json = serde_json::to_value(c.stats()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"min": -2.0, "max": 0.5, "absmax": 2.0, "count": 2, "amax": 2.0})
    );
}
