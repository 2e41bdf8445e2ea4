//! A streaming, fixed-size histogram of |x|.

use crate::chunked;
use crate::options::MIN_BINS;
use crate::scan::{extremes_and_bins, extremes_and_split_bins, Extremes};

/// Histogram of |x| over `[0, range]` in a fixed number of equal bins.
///
/// The range is a power of two, the smallest one *above* every |x| seen: the first
/// batch holding a non-zero value sets it, and when a later batch reaches it, the
/// range is **doubled** (repeatedly, until the batch is below it) and every pair of
/// adjacent bins is merged into one: bin `j` of the wider histogram covers old bins
/// `2j` and `2j+1`. With a power-of-two range and bin count, `a * (num_bins / range)`
/// is exact, so merging pairs gives exactly the bins a histogram built at the wider
/// range from the start would have: the counts depend only on the values seen, not
/// on their order or on how they were grouped into batches or files (TensorRT's own
/// histogram starts at the first batch's max, and so depends on both). Memory stays
/// constant; the data covers between half and all of the bins. Zeros always land in
/// bin 0, so all-zero batches need no range.
///
/// A value `a` lands in bin `floor(a * (num_bins / range))` (computed in f32), clamped
/// to the last bin (reached only with bin counts that are not powers of two).
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
        let counted = self.count(values);
        self.add_counted(&counted);
    }

    /// Scans `values` and counts their |x| against the current range (which must
    /// be set), without adding them: values beyond the range land in the last bin.
    /// The caller checks the extremes (finite, within the range) before
    /// [`AbsHistogram::add_counted`].
    pub(crate) fn count(&self, values: &[f32]) -> Counted {
        debug_assert!(self.range > 0.0, "counting needs a range");
        let n = self.counts.len();
        // Bins are computed in f32 (as a GPU calibrator would), 16 values per
        // AVX-512 instruction; only values within an f32 rounding of a bin edge can
        // land one bin apart from an exact computation.
        let (per_unit, last) = (self.per_unit(), last_bin(n));
        let bins = |block: &[f32], out: &mut [i32]| extremes_and_bins(block, per_unit, last, out);
        chunked::fold_reduce(
            values,
            || Tally::new(n),
            |tally, piece| tally.add(piece, &bins),
            Tally::merge,
        )
        .finish()
    }

    /// Scans `values` and counts its values that are not below zero against
    /// `positive`'s range and its negative ones (by |x|) against `negative`'s (two
    /// histograms of the same bin count), without adding them: a side without a
    /// range puts every value in bin 0, and values beyond a range land in its last
    /// bin. Returns the batch's extremes and the two sides' counts; the caller checks
    /// the extremes (finite, within both ranges) before adding them.
    pub(crate) fn count_split(
        positive: &AbsHistogram,
        negative: &AbsHistogram,
        values: &[f32],
    ) -> (Extremes, Vec<u64>, Vec<u64>) {
        let n = positive.counts.len();
        assert_eq!(negative.counts.len(), n, "bin counts of the two sides");
        let per_unit = (positive.per_unit(), negative.per_unit());
        let last = last_bin(n);
        let bins = |block: &[f32], out: &mut [i32]| {
            extremes_and_split_bins(block, per_unit, last, n as i32, out)
        };
        let mut counted = chunked::fold_reduce(
            values,
            || Tally::new(2 * n),
            |tally, piece| tally.add(piece, &bins),
            Tally::merge,
        )
        .finish();
        let below = counted.counts.split_off(n);
        (counted.extremes, counted.counts, below)
    }

    /// Bins per unit of |x| at the current range (0 without a range).
    fn per_unit(&self) -> f32 {
        if self.range > 0.0 {
            (self.counts.len() as f64 / self.range) as f32
        } else {
            0.0
        }
    }

    /// Adds counts made against the current range ([`AbsHistogram::count_split`]).
    pub(crate) fn add_counts(&mut self, counts: &[u64]) {
        add_counts(&mut self.counts, counts);
    }

    /// Adds `count` zeros (they land in bin 0 at any range).
    pub(crate) fn add_zeros(&mut self, count: u64) {
        self.counts[0] += count;
    }

    /// Adds a batch counted by [`AbsHistogram::count`] against the current range.
    pub(crate) fn add_counted(&mut self, counted: &Counted) {
        add_counts(&mut self.counts, &counted.counts);
    }

    /// Adds the counts of `other`, which must have the same bin count: the narrower
    /// of the two is first widened to the other's range (both are powers of two, so
    /// widening merges bin pairs exactly), so the result is the histogram of both
    /// histograms' values, whatever their ranges and in either order.
    ///
    /// Returns `false` (and adds nothing) if the bin counts differ.
    pub fn merge(&mut self, other: &AbsHistogram) -> bool {
        if other.counts.len() != self.counts.len() {
            return false;
        }
        if other.range > self.range {
            self.widen_to(other.range);
        }
        if other.range < self.range && other.range > 0.0 {
            let mut widened = other.clone();
            widened.widen_to(self.range);
            add_counts(&mut self.counts, &widened.counts);
        } else {
            add_counts(&mut self.counts, &other.counts);
        }
        true
    }

    /// A histogram from saved parts: `counts` (at most `num_bins`, the rest zero)
    /// over `[0, range]`. `None` unless `range` is 0 or a positive power of two
    /// (with `range` 0, only bin 0 may be non-zero).
    pub fn from_parts(num_bins: usize, range: f64, counts: &[u64]) -> Option<AbsHistogram> {
        let power_of_two =
            range > 0.0 && range.is_finite() && power_of_two_above(range / 2.0) == range;
        let zero_only = range == 0.0 && counts.iter().skip(1).all(|&c| c == 0);
        if num_bins == 0 || counts.len() > num_bins || !(power_of_two || zero_only) {
            return None;
        }
        let mut all = counts.to_vec();
        all.resize(num_bins, 0);
        Some(AbsHistogram { counts: all, range })
    }

    /// Number of leading bins up to and including the one `absmax` lands in, at
    /// least `min(128, num_bins)` (the smallest histogram the entropy search accepts)
    /// and at most `num_bins`.
    pub fn used_bins(&self, absmax: f32) -> usize {
        let n = self.counts.len();
        let floor = MIN_BINS.min(n);
        if self.range <= 0.0 {
            return floor;
        }
        let needed = ((absmax as f64) * n as f64 / self.range).floor() + 1.0;
        (needed.min(n as f64) as usize).max(floor)
    }

    /// Whether a batch whose largest |x| is `absmax` is counted within the current
    /// range (strictly below it).
    pub(crate) fn covers(&self, absmax: f32) -> bool {
        (absmax as f64) < self.range
    }

    /// Grows the range (doubling, merging bin pairs) until it is above `absmax`.
    pub(crate) fn cover(&mut self, absmax: f32) {
        let absmax = absmax as f64;
        if self.range <= 0.0 {
            self.range = power_of_two_above(absmax);
            return;
        }
        while absmax >= self.range {
            self.double();
        }
    }

    /// Grows the range (doubling, merging bin pairs) to `range`, a power of two; a
    /// histogram without a range (only zeros so far) takes it as it is.
    fn widen_to(&mut self, range: f64) {
        if self.range <= 0.0 {
            self.range = range;
            return;
        }
        while self.range < range {
            self.double();
        }
    }

    /// Doubles the range, merging every pair of adjacent bins.
    fn double(&mut self) {
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

/// The smallest power of two strictly above `a` (positive and finite).
fn power_of_two_above(a: f64) -> f64 {
    let mut r = 2f64.powi(a.log2().floor() as i32 + 1);
    while r <= a {
        r *= 2.0;
    }
    while r / 2.0 > a {
        r /= 2.0;
    }
    r
}

/// A batch counted against a histogram's range, with its extremes.
pub(crate) struct Counted {
    /// Extremes and non-finite count of the batch.
    pub extremes: Extremes,
    counts: Vec<u64>,
}

/// Counts of a batch in progress (one per rayon split of the batch): exact u64
/// counts, plus four interleaved u32 sub-histograms for long pieces so that runs of
/// equal values (zeros after a ReLU) do not serialise on one counter. The
/// sub-histograms are folded into the counts before they could overflow and at the
/// end, so they are allocated and folded once per split, not once per piece.
struct Tally {
    extremes: Extremes,
    counts: Vec<u64>,
    sub: Vec<u32>,
    /// Values counted into `sub` since it was last folded.
    pending: usize,
}

impl Tally {
    /// Interleaved sub-histograms.
    const WAYS: usize = 4;

    fn new(n: usize) -> Tally {
        Tally {
            extremes: Extremes::EMPTY,
            counts: vec![0; n],
            sub: Vec::new(),
            pending: 0,
        }
    }

    /// Counts `values` into the bins `bins` gives them (each below the tally's
    /// count; `bins` also returns the extremes of what it scanned).
    fn add(mut self, values: &[f32], bins: &impl Fn(&[f32], &mut [i32]) -> Extremes) -> Tally {
        let n = self.counts.len();
        let extremes = if values.len() < 8 * n {
            // Short pieces: the sub-histograms would cost more to fold than they save.
            let counts = &mut self.counts;
            scan_blocks(values, bins, |bins| {
                for &b in bins {
                    counts[b as usize] += 1;
                }
            })
        } else {
            if self.pending + values.len() > u32::MAX as usize {
                self.fold_sub();
            }
            if self.sub.is_empty() {
                self.sub = vec![0; Self::WAYS * n];
            }
            self.pending += values.len();
            let sub = &mut self.sub;
            scan_blocks(values, bins, |bins| {
                let mut quads = bins.chunks_exact(Self::WAYS);
                for quad in &mut quads {
                    for (w, &b) in quad.iter().enumerate() {
                        let at = w * n + b as usize;
                        // SAFETY: `b` < `n` (the bin function caps every bin), so `at` <
                        // WAYS * n = sub.len(); skipping the check keeps the loop at one
                        // load-add-store per value.
                        unsafe { *sub.get_unchecked_mut(at) += 1 };
                    }
                }
                for &b in quads.remainder() {
                    sub[b as usize] += 1;
                }
            })
        };
        self.extremes = self.extremes.merge(extremes);
        self
    }

    /// Adds the sub-histograms into the counts and clears them.
    fn fold_sub(&mut self) {
        let n = self.counts.len();
        for way in self.sub.chunks_exact_mut(n) {
            for (count, c) in self.counts.iter_mut().zip(way) {
                *count += u64::from(std::mem::take(c));
            }
        }
        self.pending = 0;
    }

    fn merge(mut self, mut other: Tally) -> Tally {
        other.fold_sub();
        add_counts(&mut self.counts, &other.counts);
        self.extremes = self.extremes.merge(other.extremes);
        self
    }

    fn finish(mut self) -> Counted {
        self.fold_sub();
        Counted {
            extremes: self.extremes,
            counts: self.counts,
        }
    }
}

/// Adds `more` to `counts`, bin by bin.
fn add_counts(counts: &mut [u64], more: &[u64]) {
    for (a, b) in counts.iter_mut().zip(more) {
        *a += b;
    }
}

/// The last bin index of `n` bins, as the bin functions take it: histograms are far
/// smaller than 2^24 bins (MAX_BINS), and the cap only keeps the bin conversion exact
/// and sound for any `AbsHistogram::new` argument.
fn last_bin(n: usize) -> f32 {
    (n - 1).min((1 << 24) - 1) as f32
}

/// Scans `values` a block at a time, handing each block's bins (from `bins`) to
/// `count`; returns the extremes of all of `values`.
fn scan_blocks(
    values: &[f32],
    bins: &impl Fn(&[f32], &mut [i32]) -> Extremes,
    mut count: impl FnMut(&[i32]),
) -> Extremes {
    const BLOCK: usize = 512;
    let mut extremes = Extremes::EMPTY;
    let mut buffer = [0i32; BLOCK];
    for block in values.chunks(BLOCK) {
        let out = &mut buffer[..block.len()];
        extremes = extremes.merge(bins(block, out));
        count(out);
    }
    extremes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_batch_sets_range_and_bins() {
        let mut h = AbsHistogram::new(4);
        h.add(&[0.0, -0.5, 0.99, 1.0, -1.5], 1.5);
        // The smallest power of two above the batch's max.
        assert_eq!(h.range(), 2.0);
        assert_eq!(h.bin_width(), 0.5);
        // |x| = 0 -> 0, 0.5 -> 1, 0.99 -> 1, 1.0 -> 2, 1.5 -> 3.
        assert_eq!(h.counts(), &[1, 2, 1, 1]);
        assert_eq!(h.total(), 5);
        // A max that is itself a power of two gets the next one: no value sits on
        // the range's edge.
        let mut h = AbsHistogram::new(4);
        h.add(&[2.0, 0.3], 2.0);
        assert_eq!((h.range(), h.counts()), (4.0, &[1u64, 0, 1, 0][..]));
        assert_eq!(power_of_two_above(0.3), 0.5);
        assert_eq!(power_of_two_above(1e-30), 2f64.powi(-99));
    }

    #[test]
    fn zeros_before_any_range_land_in_bin_zero() {
        let mut h = AbsHistogram::new(4);
        h.add(&[0.0, 0.0], 0.0);
        assert_eq!(h.range(), 0.0);
        h.add(&[3.0], 3.0);
        assert_eq!(h.counts(), &[2, 0, 0, 1]);
    }

    #[test]
    fn growth_doubles_range_and_merges_pairs_exactly() {
        let mut grown = AbsHistogram::new(8);
        let first = [0.1f32, 0.3, 0.55, 0.8, 1.0];
        grown.add(&first, 1.0);
        assert_eq!(grown.range(), 2.0);
        let second = [3.9f32, 2.2, 0.05];
        grown.add(&second, 3.9);
        assert_eq!(grown.range(), 4.0);
        // Bins of width 0.5 over [0, 4]: exactly what direct binning gives.
        assert_eq!(grown.counts(), &[3, 2, 1, 0, 1, 0, 0, 1]);
        assert_eq!(grown.total(), 8);
        // The same values in another order and grouping give the same histogram.
        let mut other = AbsHistogram::new(8);
        other.add(&[3.9, 0.05], 3.9);
        other.add(&[1.0, 0.1, 2.2], 2.2);
        other.add(&[0.55, 0.3, 0.8], 0.8);
        assert_eq!(other, grown);
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
        assert_eq!(h.range(), 2.0);
        // Up to and including the bin the max lands in.
        assert_eq!(h.used_bins(1.0), 1025);
        h.add(&[1.5], 1.5);
        assert_eq!(h.used_bins(1.5), 1537);
        assert_eq!(h.used_bins(1.9995), 2048);
        assert_eq!(h.used_bins(0.01), 128);
    }

    #[test]
    fn merging_equals_one_histogram_of_all_values() {
        // Three groups of values with different ranges, merged in every order.
        let groups: [&[f32]; 3] = [&[0.3, -0.1, 0.0], &[5.5, -2.0], &[0.0, 0.0]];
        let mut all = AbsHistogram::new(64);
        for g in groups {
            let absmax = g.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            all.add(g, absmax);
        }
        let parts: Vec<AbsHistogram> = groups
            .iter()
            .map(|g| {
                let mut h = AbsHistogram::new(64);
                h.add(g, g.iter().fold(0.0f32, |m, x| m.max(x.abs())));
                h
            })
            .collect();
        for order in [[0, 1, 2], [2, 1, 0], [1, 0, 2], [2, 0, 1]] {
            let mut merged = AbsHistogram::new(64);
            for i in order {
                assert!(merged.merge(&parts[i]));
            }
            assert_eq!(merged, all, "{order:?}");
        }
        assert!(!all.clone().merge(&AbsHistogram::new(65)));
    }

    #[test]
    fn from_parts_accepts_only_power_of_two_ranges() {
        let h = AbsHistogram::from_parts(8, 4.0, &[1, 2]).unwrap();
        assert_eq!(h.counts(), &[1, 2, 0, 0, 0, 0, 0, 0]);
        assert_eq!(h.range(), 4.0);
        assert!(AbsHistogram::from_parts(8, 3.0, &[1]).is_none());
        assert!(AbsHistogram::from_parts(2, 4.0, &[1, 2, 3]).is_none());
        assert!(AbsHistogram::from_parts(4, 0.0, &[5]).is_some());
        assert!(AbsHistogram::from_parts(4, 0.0, &[5, 1]).is_none());
        assert!(AbsHistogram::from_parts(4, f64::INFINITY, &[1]).is_none());
    }

    #[test]
    fn long_batches_count_like_the_formula_on_any_thread_count() {
        // Long enough for the parallel path and the interleaved sub-histograms.
        let values: Vec<f32> = (0..600_000u64)
            .map(|i| ((i * 7919) % 10_007) as f32 * 0.001 - 5.0)
            .collect();
        let mut h = AbsHistogram::new(256);
        h.add(&values, 5.003);
        assert_eq!(h.range(), 8.0);
        let per_unit = 256.0f32 / 8.0;
        let mut expected = vec![0u64; 256];
        for &x in &values {
            expected[((x.abs() * per_unit) as usize).min(255)] += 1;
        }
        assert_eq!(h.counts(), expected.as_slice());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let mut single = AbsHistogram::new(256);
        pool.install(|| single.add(&values, 5.003));
        assert_eq!(single, h);
    }

    #[test]
    fn counting_against_the_range_matches_adding() {
        let mut h = AbsHistogram::new(64);
        h.add(&[3.0, -1.0], 3.0);
        let batch = [0.5f32, -2.9, 3.0, 0.0];
        let counted = h.count(&batch);
        assert_eq!(
            (
                counted.extremes.min,
                counted.extremes.max,
                counted.extremes.bad
            ),
            (-2.9, 3.0, 0)
        );
        let mut via_count = h.clone();
        via_count.add_counted(&counted);
        h.add(&batch, 3.0);
        assert_eq!(via_count, h);
    }
}
