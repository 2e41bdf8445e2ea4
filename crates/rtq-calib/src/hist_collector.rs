//! A range collector that streams values into an [`AbsHistogram`] and hands
//! the final choice to a pluggable [`HistogramRule`].

use crate::amax::finalize;
use crate::histogram::AbsHistogram;
use crate::observed::{BatchSummary, Observed};
use crate::{CalibError, RangeCollector, RangeStats};
use std::cell::Cell;

/// How a histogram-based calibrator picks its threshold.
pub trait HistogramRule: Send + Sync + 'static {
    /// The threshold (in the data's units) for `hist`, whose data's largest
    /// |x| is `absmax` (> 0). The collector clamps it into `(0, absmax]`.
    fn threshold(&self, hist: &AbsHistogram, absmax: f32) -> f64;
}

/// Streams one tensor into a fixed-size |x| histogram plus running min/max.
pub struct HistogramCollector<R: HistogramRule> {
    hist: AbsHistogram,
    observed: Observed,
    rule: R,
    /// The last computed range; cleared by every `observe`.
    cached: Cell<Option<f32>>,
}

impl<R: HistogramRule> HistogramCollector<R> {
    /// An empty collector with `num_bins` histogram bins.
    pub fn new(num_bins: usize, rule: R) -> Self {
        HistogramCollector {
            hist: AbsHistogram::new(num_bins),
            observed: Observed::default(),
            rule,
            cached: Cell::new(None),
        }
    }

    /// A collector that has already observed what `stats` describes.
    pub fn from_stats(stats: &crate::TensorStats, rule: R) -> Self {
        HistogramCollector {
            hist: stats.histogram.clone(),
            observed: Observed::from_parts(stats.min, stats.max, stats.count),
            rule,
            cached: Cell::new(None),
        }
    }

    /// The histogram collected so far.
    pub fn histogram(&self) -> &AbsHistogram {
        &self.hist
    }

    /// The threshold rule.
    pub fn rule(&self) -> &R {
        &self.rule
    }

    /// The range another rule picks from the same histogram (what [`RangeCollector::amax`]
    /// would return with `rule` as this collector's rule).
    pub fn amax_with<Q: HistogramRule>(&self, rule: &Q) -> Result<f32, CalibError> {
        let absmax = self.observed.absmax();
        let candidate = match absmax {
            Some(a) if a > 0.0 => rule.threshold(&self.hist, a),
            _ => 0.0,
        };
        finalize(candidate, absmax)
    }
}

impl<R: HistogramRule> RangeCollector for HistogramCollector<R> {
    fn observe(&mut self, values: &[f32]) -> Result<(), CalibError> {
        if values.is_empty() {
            return Ok(());
        }
        let batch = if self.hist.range() > 0.0 {
            // One pass: scan and count against the current range, which usually
            // covers the batch; only a batch beyond it is counted again.
            let counted = self.hist.count(values);
            let batch = BatchSummary::checked(counted.extremes, values.len())?;
            if self.hist.covers(batch.absmax()) {
                self.hist.add_counted(&counted);
            } else {
                self.hist.add(values, batch.absmax());
            }
            batch
        } else {
            let Some(batch) = BatchSummary::scan(values)? else {
                return Ok(());
            };
            self.hist.add(values, batch.absmax());
            batch
        };
        self.observed.add(batch, values.len());
        self.cached.set(None);
        Ok(())
    }

    fn merge(&mut self, other: &dyn RangeCollector) -> Result<(), CalibError> {
        let Some(theirs) = other.statistics() else {
            return Err(CalibError::Stats {
                reason: "a collector without a histogram cannot be merged into one with a \
                         histogram"
                    .to_string(),
            });
        };
        if !self.hist.merge(&theirs.histogram) {
            return Err(CalibError::Stats {
                reason: format!(
                    "histograms of {} and {} bins cannot be merged",
                    self.hist.num_bins(),
                    theirs.histogram.num_bins()
                ),
            });
        }
        self.observed
            .merge(Observed::from_parts(theirs.min, theirs.max, theirs.count));
        self.cached.set(None);
        Ok(())
    }

    fn amax(&self) -> Result<f32, CalibError> {
        if let Some(a) = self.cached.get() {
            return Ok(a);
        }
        let a = self.amax_with(&self.rule)?;
        self.cached.set(Some(a));
        Ok(a)
    }

    fn stats(&self) -> RangeStats {
        self.observed.stats(self.amax().unwrap_or(0.0))
    }

    fn statistics(&self) -> Option<crate::TensorStats> {
        let s = self.observed.stats(0.0);
        Some(crate::TensorStats {
            min: s.min,
            max: s.max,
            count: s.count,
            histogram: self.hist.clone(),
        })
    }

    fn noise_ratio(&self, amax: f32) -> Option<f64> {
        let (counts, width) = (self.hist.counts(), self.hist.bin_width());
        let total: u64 = counts.iter().sum();
        if total == 0 || width.is_nan() || width <= 0.0 {
            return None;
        }
        let power = counts
            .iter()
            .enumerate()
            .map(|(j, &c)| c as f64 * ((j as f64 + 0.5) * width).powi(2))
            .sum::<f64>()
            / total as f64;
        let noise = crate::histogram_mse(counts, width, amax as f64);
        Some(if power > 0.0 { noise / power } else { 0.0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::amax::ZERO_RANGE_AMAX;

    /// Picks half the histogram range, to see what the collector does around it.
    struct Half;
    impl HistogramRule for Half {
        fn threshold(&self, hist: &AbsHistogram, _absmax: f32) -> f64 {
            hist.range() / 2.0
        }
    }

    #[test]
    fn collector_streams_and_caches() {
        let mut c = HistogramCollector::new(128, Half);
        assert!(matches!(c.amax(), Err(CalibError::NoData)));
        assert_eq!(c.stats().amax, 0.0);
        c.observe(&[1.0, -3.0]).unwrap();
        assert_eq!(c.histogram().range(), 4.0);
        assert_eq!(c.amax().unwrap(), 2.0);
        c.observe(&[6.0]).unwrap();
        assert_eq!(c.histogram().range(), 8.0);
        assert_eq!(c.amax().unwrap(), 4.0);
        let s = c.stats();
        assert_eq!(
            (s.min, s.max, s.absmax, s.count, s.amax),
            (-3.0, 6.0, 6.0, 3, 4.0)
        );
    }

    #[test]
    fn noise_ratio_grows_as_the_range_clips() {
        let mut c = HistogramCollector::new(2048, Half);
        let values: Vec<f32> = (0..1000).map(|i| i as f32 / 100.0).collect();
        c.observe(&values).unwrap();
        let full = c.noise_ratio(10.0).unwrap();
        let clipped = c.noise_ratio(2.0).unwrap();
        // Rounding alone: (step^2 / 12) / E[x^2] with step 10/127 and E[x^2] ~ 33.
        assert!(full > 0.0 && full < 1e-3, "{full}");
        assert!(clipped > 100.0 * full, "{clipped} vs {full}");
        assert_eq!(HistogramCollector::new(128, Half).noise_ratio(1.0), None);
    }

    #[test]
    fn non_finite_batch_leaves_collector_unchanged() {
        let mut c = HistogramCollector::new(128, Half);
        c.observe(&[1.0]).unwrap();
        let before = c.histogram().clone();
        assert!(matches!(
            c.observe(&[100.0, f32::NAN]),
            Err(CalibError::NonFinite { count: 1, total: 2 })
        ));
        assert_eq!(c.histogram(), &before);
        assert_eq!(c.stats().count, 1);
    }

    #[test]
    fn all_zero_tensor_gets_positive_range() {
        let mut c = HistogramCollector::new(128, Half);
        c.observe(&[0.0; 16]).unwrap();
        c.observe(&[]).unwrap();
        assert_eq!(c.amax().unwrap(), ZERO_RANGE_AMAX);
        assert_eq!(c.histogram().counts()[0], 16);
    }

    #[test]
    fn one_pass_and_regrowth_paths_agree_with_the_histogram() {
        // Batches inside the current range take the one-pass path; the third one
        // exceeds it and is counted again after the range doubles.
        let batches: [&[f32]; 4] = [&[1.0, -0.25], &[0.5, 0.75, -1.0], &[2.5, 0.1], &[-0.3]];
        let mut c = HistogramCollector::new(128, Half);
        let mut reference = AbsHistogram::new(128);
        for b in batches {
            c.observe(b).unwrap();
            let absmax = b.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            reference.add(b, absmax);
        }
        assert_eq!(c.histogram(), &reference);
        assert_eq!(c.histogram().range(), 4.0);
        // A non-finite batch inside the range leaves everything unchanged too.
        let before = c.histogram().clone();
        assert!(c.observe(&[0.5, f32::INFINITY]).is_err());
        assert_eq!(c.histogram(), &before);
    }
}
