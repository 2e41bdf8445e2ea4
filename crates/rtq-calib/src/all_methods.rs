//! One histogram, every method's range: the calibrator behind rtq's method search,
//! which compares the methods' ranges on the model without new forward passes.

use crate::entropy::EntropyRule;
use crate::hist_collector::{HistogramCollector, HistogramRule};
use crate::histogram::AbsHistogram;
use crate::mse::MseRule;
use crate::percentile::PercentileRule;
use crate::{
    CalibError, CalibMethod, CalibOptions, Calibrator, RangeCollector, RangeStats, TensorStats,
};

/// The threshold rule of a [`CalibMethod`] (`max`: the observed maximum).
#[derive(Debug, Clone, Copy)]
pub struct MethodRule {
    method: CalibMethod,
    percentile: PercentileRule,
}

impl MethodRule {
    /// The rule of `method`, with `percentile` for [`CalibMethod::Percentile`].
    pub fn new(method: CalibMethod, percentile: f64) -> MethodRule {
        MethodRule {
            method,
            percentile: PercentileRule { percentile },
        }
    }
}

impl HistogramRule for MethodRule {
    fn threshold(&self, hist: &AbsHistogram, absmax: f32) -> f64 {
        match self.method {
            CalibMethod::Entropy => EntropyRule.threshold(hist, absmax),
            CalibMethod::Max => absmax as f64,
            CalibMethod::Percentile => self.percentile.threshold(hist, absmax),
            CalibMethod::Mse => MseRule.threshold(hist, absmax),
        }
    }
}

/// Collects one histogram per tensor; its range is `primary`'s (identical to that
/// method's own calibrator), and [`RangeCollector::amax_for`] gives any method's.
#[derive(Debug, Clone)]
pub struct AllMethodsCalibrator {
    primary: CalibMethod,
    num_bins: usize,
    percentile: f64,
}

impl AllMethodsCalibrator {
    /// Ranges of `primary`, candidates of every method, configured by `options`.
    pub fn new(primary: CalibMethod, options: &CalibOptions) -> Result<Self, CalibError> {
        options.validate()?;
        Ok(AllMethodsCalibrator {
            primary,
            num_bins: options.num_bins,
            percentile: options.percentile,
        })
    }
}

impl AllMethodsCalibrator {
    /// A collector that has already observed what `stats` describes (saved by
    /// [`RangeCollector::statistics`]); fails if its histogram has another bin count.
    pub fn restore(&self, stats: &TensorStats) -> Result<Box<dyn RangeCollector>, CalibError> {
        if stats.histogram.num_bins() != self.num_bins {
            return Err(CalibError::InvalidOption {
                option: "num_bins",
                reason: format!(
                    "the statistics have {}-bin histograms, the calibrator {} bins",
                    stats.histogram.num_bins(),
                    self.num_bins
                ),
            });
        }
        Ok(Box::new(AllMethodsCollector {
            inner: HistogramCollector::from_stats(
                stats,
                MethodRule::new(self.primary, self.percentile),
            ),
            percentile: self.percentile,
        }))
    }
}

impl Calibrator for AllMethodsCalibrator {
    fn name(&self) -> &'static str {
        self.primary.name()
    }

    fn collector(&self) -> Box<dyn RangeCollector> {
        Box::new(AllMethodsCollector {
            inner: HistogramCollector::new(
                self.num_bins,
                MethodRule::new(self.primary, self.percentile),
            ),
            percentile: self.percentile,
        })
    }
}

/// The collector of [`AllMethodsCalibrator`].
struct AllMethodsCollector {
    inner: HistogramCollector<MethodRule>,
    percentile: f64,
}

impl RangeCollector for AllMethodsCollector {
    fn observe(&mut self, values: &[f32]) -> Result<(), CalibError> {
        self.inner.observe(values)
    }

    fn merge(&mut self, other: &dyn RangeCollector) -> Result<(), CalibError> {
        self.inner.merge(other)
    }

    fn amax(&self) -> Result<f32, CalibError> {
        self.inner.amax()
    }

    fn stats(&self) -> RangeStats {
        self.inner.stats()
    }

    fn amax_for(&self, method: CalibMethod) -> Option<Result<f32, CalibError>> {
        Some(
            self.inner
                .amax_with(&MethodRule::new(method, self.percentile)),
        )
    }

    fn noise_ratio(&self, amax: f32) -> Option<f64> {
        self.inner.noise_ratio(amax)
    }

    fn statistics(&self) -> Option<TensorStats> {
        self.inner.statistics()
    }

    fn relu_image(&self) -> Option<Box<dyn RangeCollector>> {
        let inner = self.inner.relu_collector()?;
        Some(Box::new(AllMethodsCollector {
            inner,
            percentile: self.percentile,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_test_support::Rng;

    #[test]
    fn every_candidate_equals_its_own_calibrator() {
        let options = CalibOptions::default();
        let mut rng = Rng::new(7);
        // Heavy-tailed data in batches of different sizes, so the histogram regrows.
        let batches: Vec<Vec<f32>> = (1..6)
            .map(|b| {
                (0..500 * b)
                    .map(|_| {
                        let x = rng.normal() as f32;
                        x * x * x * b as f32
                    })
                    .collect()
            })
            .collect();
        let all = AllMethodsCalibrator::new(CalibMethod::Mse, &options).unwrap();
        let mut multi = all.collector();
        for b in &batches {
            multi.observe(b).unwrap();
        }
        for method in CalibMethod::ALL {
            let amax = multi.amax_for(method).unwrap().unwrap();
            let mut own = method.calibrator(&options).unwrap().collector();
            for b in &batches {
                own.observe(b).unwrap();
            }
            assert_eq!(amax, own.amax().unwrap(), "{method}");
            if method == CalibMethod::Mse {
                assert_eq!(multi.amax().unwrap(), amax, "the primary's range");
            }
        }
        // Restored from its statistics, a collector picks the same ranges and stats.
        let restored = all.restore(&multi.statistics().unwrap()).unwrap();
        assert_eq!(restored.stats(), multi.stats());
        for method in CalibMethod::ALL {
            assert_eq!(
                restored.amax_for(method).unwrap().unwrap(),
                multi.amax_for(method).unwrap().unwrap()
            );
        }
        let other = CalibOptions {
            num_bins: 1024,
            ..CalibOptions::default()
        };
        let narrow = AllMethodsCalibrator::new(CalibMethod::Mse, &other).unwrap();
        assert!(narrow.restore(&multi.statistics().unwrap()).is_err());
    }
}
