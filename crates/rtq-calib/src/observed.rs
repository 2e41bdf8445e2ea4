//! Running min / max / count over the batches a collector has seen.

use crate::scan::Extremes;
use crate::{CalibError, RangeStats};

/// Summary of one batch: its extremes, checked to be finite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BatchSummary {
    /// Smallest value.
    pub min: f32,
    /// Largest value.
    pub max: f32,
}

impl BatchSummary {
    /// Largest |x| of the batch.
    pub fn absmax(&self) -> f32 {
        self.min.abs().max(self.max.abs())
    }

    /// Scans `values` once; `None` for an empty batch, an error if any value is NaN/Inf.
    ///
    /// Large batches are split over rayon's threads ([`crate::chunked`]).
    pub fn scan(values: &[f32]) -> Result<Option<BatchSummary>, CalibError> {
        if values.is_empty() {
            return Ok(None);
        }
        let extremes = crate::chunked::fold_reduce(
            values,
            || Extremes::EMPTY,
            |extremes, piece| extremes.merge(Extremes::of(piece)),
            Extremes::merge,
        );
        BatchSummary::checked(extremes, values.len()).map(Some)
    }

    /// The summary of a batch of `total` values with these extremes; an error if
    /// any was NaN/Inf.
    pub fn checked(extremes: Extremes, total: usize) -> Result<BatchSummary, CalibError> {
        if extremes.bad > 0 {
            return Err(CalibError::NonFinite {
                count: extremes.bad,
                total,
            });
        }
        Ok(BatchSummary {
            min: extremes.min,
            max: extremes.max,
        })
    }
}

/// Extremes and count over every batch observed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Observed {
    range: Option<BatchSummary>,
    count: u64,
}

impl Observed {
    /// Folds in a scanned batch of `len` values.
    pub fn add(&mut self, batch: BatchSummary, len: usize) {
        self.range = Some(match self.range {
            None => batch,
            Some(r) => BatchSummary {
                min: r.min.min(batch.min),
                max: r.max.max(batch.max),
            },
        });
        self.count += len as u64;
    }

    /// Folds in what `other` observed.
    pub fn merge(&mut self, other: Observed) {
        if let Some(batch) = other.range {
            self.add(batch, 0);
        }
        self.count += other.count;
    }

    /// The observations a report describes (its extremes and count).
    pub fn from_stats(stats: &RangeStats) -> Observed {
        Observed::from_parts(stats.min, stats.max, stats.count)
    }

    /// Observations with these extremes over `count` values (none if `count` is 0).
    pub fn from_parts(min: f32, max: f32, count: u64) -> Observed {
        Observed {
            range: (count > 0).then_some(BatchSummary { min, max }),
            count,
        }
    }

    /// What these observations become through `Relu`: each extreme that is not
    /// above zero becomes (positive) zero, as `Relu` makes every such value.
    pub fn relu(&self) -> Observed {
        let relu = |x: f32| if x > 0.0 { x } else { 0.0 };
        Observed {
            range: self.range.map(|r| BatchSummary {
                min: relu(r.min),
                max: relu(r.max),
            }),
            count: self.count,
        }
    }

    /// Largest |x| observed, `None` before the first value.
    pub fn absmax(&self) -> Option<f32> {
        self.range.map(|r| r.absmax())
    }

    /// The report for these observations with the chosen `amax`.
    pub fn stats(&self, amax: f32) -> RangeStats {
        let r = self.range.unwrap_or(BatchSummary { min: 0.0, max: 0.0 });
        RangeStats {
            min: r.min,
            max: r.max,
            absmax: r.absmax(),
            count: self.count,
            amax,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_finds_extremes_and_rejects_non_finite() {
        let s = BatchSummary::scan(&[1.0, -3.0, 2.0]).unwrap().unwrap();
        assert_eq!((s.min, s.max, s.absmax()), (-3.0, 2.0, 3.0));
        assert!(BatchSummary::scan(&[]).unwrap().is_none());
        match BatchSummary::scan(&[1.0, f32::NAN, f32::INFINITY, 2.0]) {
            Err(CalibError::NonFinite { count, total }) => assert_eq!((count, total), (2, 4)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn observed_accumulates() {
        let mut o = Observed::default();
        assert_eq!(o.stats(0.0).count, 0);
        o.add(
            BatchSummary {
                min: -1.0,
                max: 0.5,
            },
            4,
        );
        o.add(BatchSummary { min: 0.0, max: 2.0 }, 6);
        let s = o.stats(1.5);
        assert_eq!(
            (s.min, s.max, s.absmax, s.count, s.amax),
            (-1.0, 2.0, 2.0, 10, 1.5)
        );
        // Merging: empty sides change nothing, extremes and counts combine.
        let mut merged = Observed::default();
        merged.merge(Observed::default());
        assert_eq!(merged, Observed::default());
        merged.merge(o);
        assert_eq!(merged, o);
        merged.merge(Observed::from_parts(-4.0, 1.0, 5));
        let m = merged.stats(0.0);
        assert_eq!((m.min, m.max, m.count), (-4.0, 2.0, 15));
        assert_eq!(Observed::from_stats(&m), merged);
    }
}
