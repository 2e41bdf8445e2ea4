//! The `mse` calibrator: the range minimising the mean squared error of
//! symmetric int8 fake quantization.
//!
//! Every bin's values are represented by the bin centre, weighted by the bin's
//! count. For each candidate threshold `t = k * bin_width` (the upper edge of
//! bin `k-1`, for `k` from `min(128, bins)` up to the bins covering the data)
//! the scale is `s = t / 127` and a centre `x` quantizes to
//! `min(round_half_even(x / s), 127) * s`. The candidate with the smallest
//! count-weighted squared error wins (the first one on ties).

use crate::hist_collector::{HistogramCollector, HistogramRule};
use crate::histogram::AbsHistogram;
use crate::options::MIN_BINS;
use crate::{CalibOptions, Calibrator, RangeCollector};

/// Largest int8 quantization level of symmetric quantization.
const QMAX: f64 = rtq_ir::QuantGrid::Int8.qmax() as f64;

/// The result of the MSE search over one histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MseChoice {
    /// Number of leading bins kept (the threshold is this bin's upper edge).
    pub bins: usize,
    /// Mean squared quantization error (in squared data units) at that threshold.
    pub mse: f64,
}

/// Mean squared error of fake-quantizing the histogram `counts` (bins of
/// `bin_width`, represented by their centres) with threshold `t`.
pub fn histogram_mse(counts: &[u64], bin_width: f64, t: f64) -> f64 {
    let total: u64 = counts.iter().sum();
    if total == 0 || t <= 0.0 {
        return 0.0;
    }
    let inv_scale = QMAX / t;
    let scale = t / QMAX;
    let mut err = 0.0f64;
    for (j, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let x = (j as f64 + 0.5) * bin_width;
        let q = (x * inv_scale).round_ties_even().min(QMAX) * scale;
        err += c as f64 * (x - q) * (x - q);
    }
    err / total as f64
}

/// The MSE-optimal threshold over the first `counts.len()` bins (see the
/// module docs), or `None` for an empty histogram or a non-positive width.
pub fn mse_threshold(counts: &[u64], bin_width: f64) -> Option<MseChoice> {
    let n = counts.len();
    if n == 0 || bin_width.is_nan() || bin_width <= 0.0 || counts.iter().all(|&c| c == 0) {
        return None;
    }
    let mut best: Option<MseChoice> = None;
    for k in MIN_BINS.min(n)..=n {
        let mse = histogram_mse(counts, bin_width, k as f64 * bin_width);
        if best.is_none_or(|b| mse < b.mse) {
            best = Some(MseChoice { bins: k, mse });
        }
    }
    best
}

/// MSE rule over the bins that cover the observed data.
#[derive(Debug, Clone, Copy, Default)]
pub struct MseRule;

impl HistogramRule for MseRule {
    fn threshold(&self, hist: &AbsHistogram, absmax: f32) -> f64 {
        let used = hist.used_bins(absmax);
        match mse_threshold(&hist.counts()[..used], hist.bin_width()) {
            Some(choice) => choice.bins as f64 * hist.bin_width(),
            None => absmax as f64,
        }
    }
}

/// Range = the threshold minimising int8 fake-quantization MSE.
#[derive(Debug, Clone)]
pub struct MseCalibrator {
    num_bins: usize,
}

impl MseCalibrator {
    /// A calibrator using `options.num_bins` histogram bins.
    pub fn new(options: &CalibOptions) -> Self {
        MseCalibrator {
            num_bins: options.num_bins,
        }
    }

    /// A collector with its concrete type (for inspection).
    pub fn new_collector(&self) -> HistogramCollector<MseRule> {
        HistogramCollector::new(self.num_bins, MseRule)
    }
}

impl Calibrator for MseCalibrator {
    fn name(&self) -> &'static str {
        "mse"
    }

    fn collector(&self) -> Box<dyn RangeCollector> {
        Box::new(self.new_collector())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_test_support::Rng;

    /// MSE of fake-quantizing the raw values with threshold `t`.
    fn raw_mse(values: &[f32], t: f64) -> f64 {
        let s = t / QMAX;
        let sum: f64 = values
            .iter()
            .map(|&v| {
                let x = v as f64;
                let q = (x / s).round_ties_even().clamp(-QMAX, QMAX) * s;
                (x - q) * (x - q)
            })
            .sum();
        sum / values.len() as f64
    }

    #[test]
    fn gaussian_with_outliers_clips_between_tenth_and_full_max() {
        let mut rng = Rng::new(21);
        let mut v: Vec<f32> = (0..1_000_000).map(|_| rng.normal() as f32).collect();
        v[0] = 60.0;
        v[1] = -55.0;
        let mut c = MseCalibrator::new(&CalibOptions::default()).new_collector();
        for chunk in v.chunks(100_000) {
            c.observe(chunk).unwrap();
        }
        let amax = c.amax().unwrap() as f64;
        let max = 60.0;
        assert!(amax > max / 10.0 && amax < max / 2.0, "amax {amax}");

        // Against the exact error on the raw values: the histogram's choice is
        // within 5% of the best raw-value MSE over the same candidates.
        let h = c.histogram();
        let w = h.bin_width();
        let best_raw = (128..=h.used_bins(60.0))
            .step_by(16)
            .map(|k| raw_mse(&v, k as f64 * w))
            .fold(f64::INFINITY, f64::min);
        let ours = raw_mse(&v, amax);
        assert!(ours <= best_raw * 1.05, "{ours} vs best {best_raw}");
        // And clipping nothing is clearly worse.
        assert!(ours < raw_mse(&v, max) * 0.8);
    }

    #[test]
    fn uniform_data_keeps_the_full_range() {
        let mut rng = Rng::new(8);
        let v: Vec<f32> = (0..200_000)
            .map(|_| rng.uniform(-1.0, 1.0) as f32)
            .collect();
        let mut c = MseCalibrator::new(&CalibOptions::default()).collector();
        c.observe(&v).unwrap();
        let a = c.amax().unwrap();
        assert!(a > 0.95 && a <= 1.0, "{a}");
    }

    #[test]
    fn histogram_mse_of_exact_levels_is_zero() {
        // Centres at 0.5, 1.5, 2.5, 3.5 with t = 127 * 0.5: every centre is a level.
        let counts = [1u64, 1, 1, 1];
        assert!(histogram_mse(&counts, 1.0, 63.5).abs() < 1e-24);
        // t = 2: centres 2.5 and 3.5 clip to 2.
        let e = histogram_mse(&counts, 1.0, 2.0);
        let s = 2.0 / 127.0;
        let q = |x: f64| ((x / s).round_ties_even().min(127.0) * s - x).powi(2);
        let expected = (q(0.5) + q(1.5) + 0.25 + 2.25) / 4.0;
        assert!((e - expected).abs() < 1e-15, "{e} vs {expected}");
        assert!(mse_threshold(&[0, 0], 1.0).is_none());
        assert!(mse_threshold(&[1, 0], 0.0).is_none());
    }
}
