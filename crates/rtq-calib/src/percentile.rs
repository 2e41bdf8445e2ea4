//! The `percentile` calibrator: the range is a high percentile of |x|.

use crate::hist_collector::{HistogramCollector, HistogramRule};
use crate::histogram::AbsHistogram;
use crate::{CalibOptions, Calibrator, RangeCollector};

/// The `percentile`-th percentile (in percent) of the histogram's |x|.
///
/// The cumulative count is walked to the bin where it reaches
/// `percentile / 100 * total`, and the value is interpolated linearly inside
/// that bin (values are taken as spread uniformly over a bin). 100 gives the
/// histogram's range; an empty histogram gives 0.
pub fn histogram_percentile(hist: &AbsHistogram, percentile: f64) -> f64 {
    let total = hist.total();
    if total == 0 {
        return 0.0;
    }
    let width = hist.bin_width();
    let target = (percentile / 100.0).clamp(0.0, 1.0) * total as f64;
    let mut below = 0u64;
    for (j, &c) in hist.counts().iter().enumerate() {
        let above = below + c;
        if c > 0 && above as f64 >= target {
            let frac = ((target - below as f64) / c as f64).clamp(0.0, 1.0);
            return (j as f64 + frac) * width;
        }
        below = above;
    }
    hist.range()
}

/// Percentile rule: the given percentile of |x|, at most the observed max.
#[derive(Debug, Clone, Copy)]
pub struct PercentileRule {
    /// Percentile in (0, 100].
    pub percentile: f64,
}

impl HistogramRule for PercentileRule {
    fn threshold(&self, hist: &AbsHistogram, absmax: f32) -> f64 {
        if self.percentile >= 100.0 {
            return absmax as f64;
        }
        histogram_percentile(hist, self.percentile)
    }
}

/// Range = a percentile of |x| (default 99.99), from a streaming histogram.
#[derive(Debug, Clone)]
pub struct PercentileCalibrator {
    num_bins: usize,
    percentile: f64,
}

impl PercentileCalibrator {
    /// A calibrator using `options.percentile` and `options.num_bins`.
    pub fn new(options: &CalibOptions) -> Self {
        PercentileCalibrator {
            num_bins: options.num_bins,
            percentile: options.percentile,
        }
    }

    /// A collector with its concrete type (for inspection).
    pub fn new_collector(&self) -> HistogramCollector<PercentileRule> {
        HistogramCollector::new(
            self.num_bins,
            PercentileRule {
                percentile: self.percentile,
            },
        )
    }
}

impl Calibrator for PercentileCalibrator {
    fn name(&self) -> &'static str {
        "percentile"
    }

    fn collector(&self) -> Box<dyn RangeCollector> {
        Box::new(self.new_collector())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_test_support::Rng;

    fn calibrator(percentile: f64) -> PercentileCalibrator {
        PercentileCalibrator::new(&CalibOptions {
            percentile,
            ..Default::default()
        })
    }

    #[test]
    fn uniform_percentiles_are_close_to_expected() {
        let mut rng = Rng::new(1);
        for p in [50.0, 90.0, 99.0, 99.99] {
            let mut c = calibrator(p).collector();
            for _ in 0..20 {
                let v: Vec<f32> = (0..50_000).map(|_| rng.uniform(-2.0, 2.0) as f32).collect();
                c.observe(&v).unwrap();
            }
            // |x| is uniform on [0, 2]: the p-th percentile is 2 p / 100.
            let expected = 2.0 * p / 100.0;
            let got = c.amax().unwrap() as f64;
            assert!((got - expected).abs() < 4e-3, "p={p}: {got} vs {expected}");
        }
    }

    #[test]
    fn hundred_is_the_max_and_interpolation_is_linear() {
        let mut c = calibrator(100.0).collector();
        c.observe(&[0.25, -3.0, 1.0]).unwrap();
        assert_eq!(c.amax().unwrap(), 3.0);

        let mut h = AbsHistogram::new(4);
        h.add(&[0.5, 1.5, 2.5, 3.5], 4.0);
        // One value per bin of width 1: the 50th percentile sits at the end of bin 1.
        assert!((histogram_percentile(&h, 50.0) - 2.0).abs() < 1e-12);
        assert!((histogram_percentile(&h, 62.5) - 2.5).abs() < 1e-12);
        assert_eq!(histogram_percentile(&AbsHistogram::new(4), 50.0), 0.0);
    }

    #[test]
    fn clips_rare_outliers() {
        let mut rng = Rng::new(2);
        let mut c = calibrator(99.9).collector();
        let mut v: Vec<f32> = (0..100_000).map(|_| rng.normal() as f32).collect();
        v[10] = 1000.0;
        c.observe(&v).unwrap();
        let a = c.amax().unwrap();
        // 99.9th percentile of |N(0,1)| is 3.29; bins are 1000/2048 wide.
        assert!((a - 3.29).abs() < 0.5, "{a}");
    }

    #[test]
    fn equal_range_batches_match_one_combined_batch() {
        let mut rng = Rng::new(4);
        let mut a: Vec<f32> = (0..1000).map(|_| rng.normal() as f32).collect();
        let mut b: Vec<f32> = (0..1000).map(|_| rng.normal() as f32).collect();
        a[0] = 5.0;
        b[0] = -5.0;
        let cal = calibrator(99.0);
        let mut split = cal.new_collector();
        split.observe(&a).unwrap();
        split.observe(&b).unwrap();
        let mut whole = cal.new_collector();
        whole.observe(&[a, b].concat()).unwrap();
        assert_eq!(split.histogram(), whole.histogram());
        assert_eq!(split.amax().unwrap(), whole.amax().unwrap());
    }
}
