//! A streaming, fixed-size histogram of |x|.

use crate::options::MIN_BINS;

/// Histogram of |x| over `[0, range]` in a fixed number of equal bins.
///
/// The range is set by the first batch holding a non-zero value: `range` =
/// that batch's max |x|, exactly as TensorRT builds its histogram. When a later
/// batch has a larger max |x|, the range is **doubled** (repeatedly, until the
/// batch fits) and every pair of adjacent bins is merged into one: bin `j` of
/// the wider histogram covers old bins `2j` and `2j+1`. This re-binning is
/// exact (no count is ever split or smeared; the bin width stays the first
/// width times a power of two) and memory stays constant, at the price of a
/// coarser resolution: after growing, the data covers between half and all of
/// the bins. Zeros always land in bin 0, so all-zero batches need no range.
///
/// A value `a` lands in bin `floor(a * num_bins / range)`, clamped to the last
/// bin (so `a == range` is counted in the last bin, which is closed on the
/// right; after the range grows, such a value stays in the bin just below the
/// old range's edge).
#[derive(Debug, Clone, PartialEq)]
pub struct AbsHistogram {
    counts: Vec<u64>,
    range: f64,
}

impl AbsHistogram {
    /// An empty histogram of `num_bins` bins (at least 1).
    pub fn new(num_bins: usize) -> AbsHistogram {
        AbsHistogram {
            counts: vec![0; num_bins.max(1)],
            range: 0.0,
        }
    }

    /// The number of bins (constant over the histogram's life).
    pub fn num_bins(&self) -> usize {
        self.counts.len()
    }

    /// Count per bin.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Upper end of the covered range (0 until a non-zero value was seen).
    pub fn range(&self) -> f64 {
        self.range
    }

    /// Width of one bin (0 until a non-zero value was seen).
    pub fn bin_width(&self) -> f64 {
        self.range / self.counts.len() as f64
    }

    /// Number of values counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Counts every |x| of `values`, whose largest |x| is `absmax` (finite).
    pub fn add(&mut self, values: &[f32], absmax: f32) {
        if values.is_empty() {
            return;
        }
        if absmax <= 0.0 {
            self.counts[0] += values.len() as u64;
            return;
        }
        self.cover(absmax);
        let n = self.counts.len();
        let last = n - 1;
        let per_unit = n as f64 / self.range;
        for &x in values {
            let idx = ((x.abs() as f64) * per_unit) as usize;
            self.counts[idx.min(last)] += 1;
        }
    }

    /// Adds the counts of `other`, which must have the same bin count and range.
    ///
    /// Returns `false` (and adds nothing) if the two are not aligned.
    pub fn merge_aligned(&mut self, other: &AbsHistogram) -> bool {
        if other.counts.len() != self.counts.len()
            || (other.range != self.range && other.range != 0.0 && self.range != 0.0)
        {
            return false;
        }
        if self.range == 0.0 {
            self.range = other.range;
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        true
    }

    /// Number of leading bins needed to cover `[0, absmax]`, at least
    /// `min(128, num_bins)` (the smallest histogram the entropy search accepts)
    /// and at most `num_bins`.
    pub fn used_bins(&self, absmax: f32) -> usize {
        let n = self.counts.len();
        let floor = MIN_BINS.min(n);
        if self.range <= 0.0 {
            return floor;
        }
        let needed = ((absmax as f64) * n as f64 / self.range).ceil();
        (needed.min(n as f64) as usize).max(floor)
    }

    /// Grows the range (doubling, merging bin pairs) until it covers `absmax`.
    fn cover(&mut self, absmax: f32) {
        let absmax = absmax as f64;
        if self.range <= 0.0 {
            self.range = absmax;
            return;
        }
        while absmax > self.range {
            let n = self.counts.len();
            for j in 0..n.div_ceil(2) {
                let hi = if 2 * j + 1 < n {
                    self.counts[2 * j + 1]
                } else {
                    0
                };
                self.counts[j] = self.counts[2 * j] + hi;
            }
            for c in &mut self.counts[n.div_ceil(2)..] {
                *c = 0;
            }
            self.range *= 2.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_batch_sets_range_and_bins() {
        let mut h = AbsHistogram::new(4);
        h.add(&[0.0, -0.5, 0.99, 1.0, -2.0], 2.0);
        assert_eq!(h.range(), 2.0);
        assert_eq!(h.bin_width(), 0.5);
        // |x| = 0 -> 0, 0.5 -> 1, 0.99 -> 1, 1.0 -> 2, 2.0 -> last.
        assert_eq!(h.counts(), &[1, 2, 1, 1]);
        assert_eq!(h.total(), 5);
    }

    #[test]
    fn zeros_before_any_range_land_in_bin_zero() {
        let mut h = AbsHistogram::new(4);
        h.add(&[0.0, 0.0], 0.0);
        assert_eq!(h.range(), 0.0);
        h.add(&[4.0], 4.0);
        assert_eq!(h.counts(), &[2, 0, 0, 1]);
    }

    #[test]
    fn growth_doubles_range_and_merges_pairs_exactly() {
        let mut grown = AbsHistogram::new(8);
        let first = [0.1f32, 0.3, 0.55, 0.8, 1.0];
        grown.add(&first, 1.0);
        let second = [3.9f32, 2.2, 0.05];
        grown.add(&second, 3.9);
        assert_eq!(grown.range(), 4.0);
        // Bins of width 0.5 over [0, 4]: what direct binning gives, except that
        // 1.0 (the first range's closed upper edge, counted in its last bin)
        // stays below 1.0 after the merges: it lands in bin 1, not 2.
        assert_eq!(grown.counts(), &[3, 3, 0, 0, 1, 0, 0, 1]);
        assert_eq!(grown.total(), 8);
    }

    #[test]
    fn odd_bin_counts_grow_without_losing_counts() {
        let mut h = AbsHistogram::new(5);
        h.add(&[0.1, 0.3, 0.5, 0.7, 0.9, 1.0], 1.0);
        h.add(&[2.5], 2.5);
        assert_eq!(h.range(), 4.0);
        assert_eq!(h.total(), 7);
        assert_eq!(h.counts().len(), 5);
    }

    #[test]
    fn used_bins_covers_absmax() {
        let mut h = AbsHistogram::new(2048);
        assert_eq!(h.used_bins(0.0), 128);
        h.add(&[1.0], 1.0);
        assert_eq!(h.used_bins(1.0), 2048);
        h.add(&[1.5], 1.5);
        assert_eq!(h.range(), 2.0);
        assert_eq!(h.used_bins(1.5), 1536);
        assert_eq!(h.used_bins(0.01), 128);
    }

    #[test]
    fn merge_aligned_requires_same_layout() {
        let mut a = AbsHistogram::new(4);
        a.add(&[1.0, 0.1], 1.0);
        let mut b = AbsHistogram::new(4);
        b.add(&[-1.0, 0.6], 1.0);
        assert!(a.merge_aligned(&b));
        assert_eq!(a.counts(), &[1, 0, 1, 2]);
        let mut c = AbsHistogram::new(4);
        c.add(&[2.0], 2.0);
        assert!(!a.merge_aligned(&c));
        assert!(!a.merge_aligned(&AbsHistogram::new(5)));
    }
}
