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
///
/// Candidates are scored [`LANES`] at a time, one per vector lane, each summed in
/// the order [`histogram_mse`] sums it: the scores are bit-identical to it.
pub fn mse_threshold(counts: &[u64], bin_width: f64) -> Option<MseChoice> {
    let n = counts.len();
    if n == 0 || bin_width.is_nan() || bin_width <= 0.0 || counts.iter().all(|&c| c == 0) {
        return None;
    }
    let total = counts.iter().sum::<u64>() as f64;
    let mut best: Option<MseChoice> = None;
    let first = MIN_BINS.min(n);
    for block in (first..=n).step_by(LANES) {
        // Lanes past the last candidate repeat it and are not read.
        let ks: [usize; LANES] = std::array::from_fn(|l| (block + l).min(n));
        let errors = candidate_errors(counts, bin_width, ks.map(|k| k as f64));
        for (&k, err) in ks.iter().zip(errors).take(n + 1 - block) {
            let mse = err / total;
            if best.is_none_or(|b| mse < b.mse) {
                best = Some(MseChoice { bins: k, mse });
            }
        }
    }
    best
}

/// Candidate thresholds [`mse_threshold`] scores together.
const LANES: usize = 8;

/// The count-weighted squared errors (not yet divided by the total count) of the
/// thresholds `ks[l] * bin_width`, compiled for the widest vector unit present.
fn candidate_errors(counts: &[u64], bin_width: f64, ks: [f64; LANES]) -> [f64; LANES] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { x86::candidate_errors_avx512(counts, bin_width, ks) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { x86::candidate_errors_avx2(counts, bin_width, ks) };
        }
    }
    candidate_errors_lanes(counts, bin_width, ks)
}

/// [`candidate_errors`] as a lane loop the compiler vectorises: each lane does the
/// operations of [`histogram_mse`] in its order (no fused multiply-adds in Rust).
#[inline(always)]
fn candidate_errors_lanes(counts: &[u64], bin_width: f64, ks: [f64; LANES]) -> [f64; LANES] {
    let t = ks.map(|k| k * bin_width);
    let inv_scale = t.map(|t| QMAX / t);
    let scale = t.map(|t| t / QMAX);
    let mut err = [0.0f64; LANES];
    for (j, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let x = (j as f64 + 0.5) * bin_width;
        let c = c as f64;
        for l in 0..LANES {
            let q = round_half_even(x * inv_scale[l]).min(QMAX) * scale[l];
            err[l] += c * (x - q) * (x - q);
        }
    }
    err
}

/// `v.round_ties_even()` for `v >= 0` (or NaN) without a library call: below 2^52,
/// adding and removing 2^52 rounds to the nearest integer, ties to even (the default
/// rounding mode); from 2^52 on every f64 is already an integer.
#[inline(always)]
fn round_half_even(v: f64) -> f64 {
    const TWO_52: f64 = 4_503_599_627_370_496.0;
    if v < TWO_52 {
        (v + TWO_52) - TWO_52
    } else {
        v
    }
}

/// The lane loop compiled for wider vector units.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{candidate_errors_lanes, LANES};

    #[target_feature(enable = "avx2")]
    pub(super) fn candidate_errors_avx2(
        counts: &[u64],
        bin_width: f64,
        ks: [f64; LANES],
    ) -> [f64; LANES] {
        candidate_errors_lanes(counts, bin_width, ks)
    }

    #[target_feature(enable = "avx512f")]
    pub(super) fn candidate_errors_avx512(
        counts: &[u64],
        bin_width: f64,
        ks: [f64; LANES],
    ) -> [f64; LANES] {
        candidate_errors_lanes(counts, bin_width, ks)
    }
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

    /// The search one candidate at a time, as the module docs define it.
    fn reference_threshold(counts: &[u64], w: f64) -> MseChoice {
        let n = counts.len();
        let mut best: Option<MseChoice> = None;
        for k in MIN_BINS.min(n)..=n {
            let mse = histogram_mse(counts, w, k as f64 * w);
            if best.is_none_or(|b| mse < b.mse) {
                best = Some(MseChoice { bins: k, mse });
            }
        }
        best.unwrap()
    }

    #[test]
    fn lane_search_is_bit_identical_to_one_candidate_at_a_time() {
        let mut rng = Rng::new(5);
        for n in [1usize, 7, 127, 128, 129, 135, 300, 2048] {
            let counts: Vec<u64> = (0..n)
                .map(|j| match rng.below(4) {
                    0 => 0,
                    _ => (rng.laplace().abs() * 1e4) as u64 / (1 + j as u64 / 16),
                })
                .collect();
            if counts.iter().all(|&c| c == 0) {
                continue;
            }
            let w = rng.uniform(1e-4, 3.0);
            let want = reference_threshold(&counts, w);
            assert_eq!(mse_threshold(&counts, w), Some(want), "{n} bins");
            // Every compiled form of the lane loop scores alike.
            let ks = std::array::from_fn(|l| (MIN_BINS.min(n) + l).min(n) as f64);
            let lanes = candidate_errors_lanes(&counts, w, ks);
            assert_eq!(candidate_errors(&counts, w, ks), lanes);
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                assert_eq!(unsafe { x86::candidate_errors_avx2(&counts, w, ks) }, lanes);
            }
        }
        // Rounding ties go to even, as round_ties_even does.
        for v in [0.5, 1.5, 2.5, 126.5, 3.49999, 1e16, 0.0] {
            assert_eq!(round_half_even(v), f64::round_ties_even(v), "{v}");
        }
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
