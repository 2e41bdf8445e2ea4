//! The `max` calibrator: the range is the largest |x| ever observed.

use crate::amax::finalize;
use crate::observed::{BatchSummary, Observed};
use crate::{CalibError, Calibrator, RangeCollector, RangeStats};

/// Range = running max |x| (no clipping at all).
#[derive(Debug, Clone, Copy, Default)]
pub struct MaxCalibrator;

impl Calibrator for MaxCalibrator {
    fn name(&self) -> &'static str {
        "max"
    }

    fn collector(&self) -> Box<dyn RangeCollector> {
        Box::new(MaxCollector::default())
    }
}

/// Keeps the running min, max and count of one tensor.
#[derive(Debug, Clone, Default)]
pub struct MaxCollector {
    observed: Observed,
}

impl RangeCollector for MaxCollector {
    fn observe(&mut self, values: &[f32]) -> Result<(), CalibError> {
        if let Some(batch) = BatchSummary::scan(values)? {
            self.observed.add(batch, values.len());
        }
        Ok(())
    }

    fn merge(&mut self, other: &dyn RangeCollector) -> Result<(), CalibError> {
        self.observed.merge(Observed::from_stats(&other.stats()));
        Ok(())
    }

    fn amax(&self) -> Result<f32, CalibError> {
        let absmax = self.observed.absmax();
        finalize(absmax.unwrap_or(0.0) as f64, absmax)
    }

    fn stats(&self) -> RangeStats {
        self.observed.stats(self.amax().unwrap_or(0.0))
    }

    fn relu_image(&self) -> Option<Box<dyn RangeCollector>> {
        Some(Box::new(MaxCollector {
            observed: self.observed.relu(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::amax::ZERO_RANGE_AMAX;

    #[test]
    fn max_is_exact_running_absmax() {
        let mut c = MaxCalibrator.collector();
        assert!(matches!(c.amax(), Err(CalibError::NoData)));
        c.observe(&[0.5, -2.25, 1.0]).unwrap();
        assert_eq!(c.amax().unwrap(), 2.25);
        c.observe(&[3.5, 0.0]).unwrap();
        assert_eq!(c.amax().unwrap(), 3.5);
        c.observe(&[-1.0]).unwrap();
        let s = c.stats();
        assert_eq!(
            (s.min, s.max, s.absmax, s.count, s.amax),
            (-2.25, 3.5, 3.5, 6, 3.5)
        );
    }

    #[test]
    fn relu_image_is_the_max_of_the_relu_output() {
        let mut c = MaxCalibrator.collector();
        c.observe(&[-4.0, 1.5, -0.5]).unwrap();
        let r = c.relu_image().unwrap().stats();
        assert_eq!((r.min, r.max, r.count, r.amax), (0.0, 1.5, 3, 1.5));
        let mut negative = MaxCalibrator.collector();
        negative.observe(&[-4.0]).unwrap();
        let z = negative.relu_image().unwrap();
        assert_eq!(z.amax().unwrap(), ZERO_RANGE_AMAX);
    }

    #[test]
    fn two_batches_equal_one_combined_batch() {
        let a = [0.1f32, -7.0, 3.0];
        let b = [6.5f32, -0.2];
        let mut split = MaxCalibrator.collector();
        split.observe(&a).unwrap();
        split.observe(&b).unwrap();
        let mut whole = MaxCalibrator.collector();
        whole
            .observe(&[a.as_slice(), b.as_slice()].concat())
            .unwrap();
        assert_eq!(split.stats(), whole.stats());
    }

    #[test]
    fn rejects_non_finite_and_guards_zero() {
        let mut c = MaxCalibrator.collector();
        assert!(matches!(
            c.observe(&[f32::NEG_INFINITY]),
            Err(CalibError::NonFinite { count: 1, total: 1 })
        ));
        c.observe(&[0.0, -0.0]).unwrap();
        assert_eq!(c.amax().unwrap(), ZERO_RANGE_AMAX);
    }
}
