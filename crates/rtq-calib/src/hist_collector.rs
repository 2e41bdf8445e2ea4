//! A range collector that streams values into an [`AbsHistogram`] and hands
//! the final choice to a pluggable [`HistogramRule`].

use crate::amax::finalize;
use crate::histogram::AbsHistogram;
use crate::observed::{BatchSummary, Observed};
use crate::split_histogram::SplitHistogram;
use crate::{CalibError, RangeCollector, RangeStats};
use std::cell::{Cell, OnceCell};

/// How a histogram-based calibrator picks its threshold.
pub trait HistogramRule: Clone + Send + Sync + 'static {
    /// The threshold (in the data's units) for `hist`, whose data's largest
    /// |x| is `absmax` (> 0). The collector clamps it into `(0, absmax]`.
    fn threshold(&self, hist: &AbsHistogram, absmax: f32) -> f64;
}

/// Streams one tensor into a fixed-size |x| histogram plus running min/max.
///
/// What it observes itself is counted by sign ([`SplitHistogram`]), so that it can
/// also tell what `Relu` of the same values would have shown
/// ([`HistogramCollector::relu_collector`]); the |x| histogram the rule reads is the
/// two halves merged, with whatever was merged in or restored.
pub struct HistogramCollector<R: HistogramRule> {
    /// The values observed here, by sign.
    split: SplitHistogram,
    /// What was merged in, restored or derived, as an |x| histogram, if anything.
    absorbed: Option<AbsHistogram>,
    /// The |x| histogram of everything (both of the above), built when first asked
    /// for; cleared by every change.
    hist: OnceCell<AbsHistogram>,
    observed: Observed,
    rule: R,
    /// The last computed range; cleared by every change.
    cached: Cell<Option<f32>>,
}

impl<R: HistogramRule> HistogramCollector<R> {
    /// An empty collector with `num_bins` histogram bins.
    pub fn new(num_bins: usize, rule: R) -> Self {
        HistogramCollector {
            split: SplitHistogram::new(num_bins),
            absorbed: None,
            hist: OnceCell::new(),
            observed: Observed::default(),
            rule,
            cached: Cell::new(None),
        }
    }

    /// A collector that has already observed what `stats` describes.
    pub fn from_stats(stats: &crate::TensorStats, rule: R) -> Self {
        HistogramCollector {
            absorbed: Some(stats.histogram.clone()),
            observed: Observed::from_parts(stats.min, stats.max, stats.count),
            ..HistogramCollector::new(stats.histogram.num_bins(), rule)
        }
    }

    /// The |x| histogram collected so far.
    pub fn histogram(&self) -> &AbsHistogram {
        self.hist.get_or_init(|| {
            let mut all = self.split.abs();
            if let Some(absorbed) = &self.absorbed {
                all.merge(absorbed);
            }
            all
        })
    }

    /// The threshold rule.
    pub fn rule(&self) -> &R {
        &self.rule
    }

    /// A collector holding what this one would have collected from `Relu` of every
    /// value it observed (the same histogram, extremes, count and range, exactly), so
    /// that a `Relu`'s output need not be observed apart from its input. `None` once
    /// something was merged in or restored (kept only as |x|, which has lost the signs).
    pub fn relu_collector(&self) -> Option<HistogramCollector<R>> {
        if self.absorbed.is_some() {
            return None;
        }
        Some(HistogramCollector {
            absorbed: Some(self.split.relu()),
            observed: self.observed.relu(),
            ..HistogramCollector::new(self.histogram().num_bins(), self.rule.clone())
        })
    }

    /// Forgets what was derived from the state before a change.
    fn changed(&mut self) {
        self.hist = OnceCell::new();
        self.cached.set(None);
    }

    /// The range another rule picks from the same histogram (what [`RangeCollector::amax`]
    /// would return with `rule` as this collector's rule).
    pub fn amax_with<Q: HistogramRule>(&self, rule: &Q) -> Result<f32, CalibError> {
        let absmax = self.observed.absmax();
        let candidate = match absmax {
            Some(a) if a > 0.0 => rule.threshold(self.histogram(), a),
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
        let batch = self.split.add(values, |extremes| {
            BatchSummary::checked(extremes, values.len())
        })?;
        self.observed.add(batch, values.len());
        self.changed();
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
        let bins = self.histogram().num_bins();
        if theirs.histogram.num_bins() != bins {
            return Err(CalibError::Stats {
                reason: format!(
                    "histograms of {} and {} bins cannot be merged",
                    bins,
                    theirs.histogram.num_bins()
                ),
            });
        }
        match &mut self.absorbed {
            Some(absorbed) => {
                absorbed.merge(&theirs.histogram);
            }
            None => self.absorbed = Some(theirs.histogram),
        }
        self.observed
            .merge(Observed::from_parts(theirs.min, theirs.max, theirs.count));
        self.changed();
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
            histogram: self.histogram().clone(),
        })
    }

    fn relu_image(&self) -> Option<Box<dyn RangeCollector>> {
        self.relu_collector()
            .map(|c| Box::new(c) as Box<dyn RangeCollector>)
    }

    fn noise_ratio(&self, amax: f32) -> Option<f64> {
        let hist = self.histogram();
        let (counts, width) = (hist.counts(), hist.bin_width());
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
    #[derive(Clone)]
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
    fn relu_collector_equals_observing_the_relu_output() {
        let batches: [&[f32]; 5] = [
            &[-3.0, 0.5, -0.0],
            &[-0.25, -7.5],
            &[2.5, 0.0, -1.0, 9.0],
            &[0.0, 0.0],
            &[-12.0, 11.5, 0.125],
        ];
        let relu =
            |b: &[f32]| -> Vec<f32> { b.iter().map(|&x| if x > 0.0 { x } else { 0.0 }).collect() };
        let mut input = HistogramCollector::new(128, Half);
        let mut output = HistogramCollector::new(128, Half);
        for (i, b) in batches.iter().enumerate() {
            input.observe(b).unwrap();
            output.observe(&relu(b)).unwrap();
            let derived = input.relu_collector().unwrap();
            assert_eq!(derived.histogram(), output.histogram(), "batch {i}");
            assert_eq!(derived.stats(), output.stats(), "batch {i}");
            assert_eq!(derived.amax().unwrap(), output.amax().unwrap(), "batch {i}");
            assert_eq!(
                derived.statistics().unwrap(),
                output.statistics().unwrap(),
                "batch {i}"
            );
        }
        // Only negatives so far: Relu saw zeros alone.
        let mut negative = HistogramCollector::new(128, Half);
        negative.observe(&[-1.0, -2.0]).unwrap();
        let zeros = negative.relu_collector().unwrap();
        assert_eq!(
            (zeros.histogram().counts()[0], zeros.histogram().range()),
            (2, 0.0)
        );
        assert_eq!(zeros.amax().unwrap(), ZERO_RANGE_AMAX);
        // Merged statistics keep |x| only: no Relu image any more.
        let mut merged = HistogramCollector::new(128, Half);
        merged.merge(&input).unwrap();
        assert!(merged.relu_collector().is_none());
        assert!(merged.relu_image().is_none());
        assert_eq!(merged.histogram(), input.histogram());
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
