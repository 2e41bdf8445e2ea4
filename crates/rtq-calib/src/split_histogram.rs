//! A tensor's |x| histogram kept as two: its values that are not below zero and its
//! negative ones, each over its own power-of-two range.
//!
//! Both halves are [`AbsHistogram`]s, whose counts depend only on the values they
//! saw (see its doc), so the tensor's own |x| histogram is exactly their merge, and
//! the histogram of `Relu` of the tensor is exactly the upper half with every
//! negative value moved to bin 0 (where a zero lands): the upper half's range is the
//! one `Relu`'s output would have had. Calibration observes a tensor once this way
//! and derives its `Relu`'s statistics instead of counting that output again.

use crate::histogram::AbsHistogram;
use crate::observed::BatchSummary;

/// The two halves of a tensor's |x| histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitHistogram {
    /// Values that are not below zero (`-0.0` included).
    upper: AbsHistogram,
    /// Negative values, by |x|.
    lower: AbsHistogram,
}

impl SplitHistogram {
    /// Empty halves of `num_bins` bins each.
    pub fn new(num_bins: usize) -> SplitHistogram {
        SplitHistogram {
            upper: AbsHistogram::new(num_bins),
            lower: AbsHistogram::new(num_bins),
        }
    }

    /// Counts `values` (not empty), whose extremes are checked by `check` first: one
    /// pass against the current ranges, which usually cover the batch; a batch beyond
    /// them grows them and is counted again. Nothing is added if `check` fails.
    pub(crate) fn add<E>(
        &mut self,
        values: &[f32],
        check: impl Fn(crate::scan::Extremes) -> Result<BatchSummary, E>,
    ) -> Result<BatchSummary, E> {
        let (extremes, upper, lower) = AbsHistogram::count_split(&self.upper, &self.lower, values);
        let batch = check(extremes)?;
        if self.covers(&batch) {
            self.upper.add_counts(&upper);
            self.lower.add_counts(&lower);
        } else {
            if batch.max > 0.0 {
                self.upper.cover(batch.max);
            }
            if batch.min < 0.0 {
                self.lower.cover(-batch.min);
            }
            let (_, upper, lower) = AbsHistogram::count_split(&self.upper, &self.lower, values);
            self.upper.add_counts(&upper);
            self.lower.add_counts(&lower);
        }
        Ok(batch)
    }

    /// Whether both halves' ranges lie strictly above the batch's values of their sign
    /// (a half that gets no non-zero value needs no range).
    fn covers(&self, batch: &BatchSummary) -> bool {
        let upper = batch.max <= 0.0 || self.upper.covers(batch.max);
        let lower = batch.min >= 0.0 || self.lower.covers(-batch.min);
        upper && lower
    }

    /// The tensor's |x| histogram: both halves merged.
    pub fn abs(&self) -> AbsHistogram {
        let mut all = self.upper.clone();
        all.merge(&self.lower);
        all
    }

    /// The |x| histogram of `Relu` of the tensor: the upper half, with every negative
    /// value counted as a zero.
    pub fn relu(&self) -> AbsHistogram {
        let mut upper = self.upper.clone();
        upper.add_zeros(self.lower.total());
        upper
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::Extremes;

    fn add(h: &mut SplitHistogram, values: &[f32]) {
        h.add(values, |e: Extremes| {
            (e.bad == 0)
                .then_some(BatchSummary {
                    min: e.min,
                    max: e.max,
                })
                .ok_or(())
        })
        .unwrap();
    }

    /// The |x| histogram of `batches` built directly.
    fn direct(batches: &[Vec<f32>], bins: usize) -> AbsHistogram {
        let mut h = AbsHistogram::new(bins);
        for b in batches.iter().filter(|b| !b.is_empty()) {
            h.add(b, b.iter().fold(0.0f32, |m, x| m.max(x.abs())));
        }
        h
    }

    #[test]
    fn halves_give_the_histograms_of_the_tensor_and_of_its_relu() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 40) as f32 / (1u64 << 24) as f32
        };
        // Batches that grow either side's range, all-zero and all-negative batches,
        // negative zeros, values on power-of-two edges, long batches (sub-histograms).
        let mut batches: Vec<Vec<f32>> = vec![
            vec![0.0, -0.0, 0.0],
            vec![-0.5, -0.25],
            vec![1.0, 0.0, -0.0],
            (0..70_000).map(|_| (next() - 0.7) * 6.0).collect(),
            vec![-8.0, 4.0],
            (0..3000).map(|_| next() * 40.0).collect(),
            vec![],
            (0..50_000).map(|_| -next() * 100.0).collect(),
        ];
        batches.push((0..20_000).map(|_| (next() - 0.5) * 0.01).collect());
        for bins in [2048, 128, 100] {
            let mut split = SplitHistogram::new(bins);
            for (i, b) in batches.iter().enumerate() {
                if !b.is_empty() {
                    add(&mut split, b);
                }
                let seen = &batches[..=i];
                assert_eq!(split.abs(), direct(seen, bins), "{bins} bins, batch {i}");
                let relu: Vec<Vec<f32>> = seen
                    .iter()
                    .map(|b| b.iter().map(|&x| if x > 0.0 { x } else { 0.0 }).collect())
                    .collect();
                assert_eq!(
                    split.relu(),
                    direct(&relu, bins),
                    "relu, {bins} bins, batch {i}"
                );
            }
        }
    }

    #[test]
    fn a_rejected_batch_adds_nothing() {
        let mut split = SplitHistogram::new(64);
        add(&mut split, &[1.0, -2.0]);
        let before = split.clone();
        assert!(split
            .add(&[0.5, f32::NAN, -40.0], |e: Extremes| {
                (e.bad == 0)
                    .then_some(BatchSummary {
                        min: e.min,
                        max: e.max,
                    })
                    .ok_or(())
            })
            .is_err());
        assert_eq!(split, before);
    }
}
