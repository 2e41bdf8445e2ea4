//! The per-value kernels of calibration: extremes and non-finite count of a
//! slice, optionally with every value's |x| histogram bin.
//!
//! They run once per value of every observed tensor, so they are written as
//! fixed-width lane loops the compiler vectorises, and compiled again with AVX2
//! and with AVX-512 (chosen at run time) on x86-64.

/// Lanes kept apart so the compiler can vectorise the loops.
const LANES: usize = 16;

/// Below this many values [`largest_magnitude`] is a plain loop: a vector scan's
/// dispatch and lane set-up would cost more.
const SHORT: usize = 64;

/// Extremes and non-finite count of a slice of a batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Extremes {
    /// Smallest finite-or-infinite value (NaN never becomes an extreme).
    pub min: f32,
    /// Largest value.
    pub max: f32,
    /// Values that are NaN or ±Inf.
    pub bad: usize,
}

impl Extremes {
    /// The extremes of an empty slice.
    pub const EMPTY: Extremes = Extremes {
        min: f32::INFINITY,
        max: f32::NEG_INFINITY,
        bad: 0,
    };

    /// The extremes of two slices together.
    pub fn merge(self, other: Extremes) -> Extremes {
        Extremes {
            min: self.min.min(other.min),
            max: self.max.max(other.max),
            bad: self.bad + other.bad,
        }
    }

    /// Scans `values`.
    pub fn of(values: &[f32]) -> Extremes {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                return unsafe { x86::extremes_avx512(values) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { x86::extremes_avx2(values) };
            }
        }
        extremes_lanes(values)
    }
}

/// The largest magnitude in `values` (0 for none), or `None` when one of them is NaN
/// or infinite; vectorised like the calibration scans, except for short slices (such
/// as the channel runs of a tensor whose channels are its last axis).
pub fn largest_magnitude(values: &[f32]) -> Option<f32> {
    if values.len() < SHORT {
        return values
            .iter()
            .try_fold(0.0f32, |m, &x| x.is_finite().then(|| m.max(x.abs())));
    }
    let e = Extremes::of(values);
    match (e.bad, values.is_empty()) {
        (0, true) => Some(0.0),
        (0, false) => Some(e.min.abs().max(e.max.abs())),
        _ => None,
    }
}

/// Scans `values` and writes the histogram bin of every value to `bins` (same
/// length): `floor(|x| * per_unit)` (in f32) capped at `last`, which must be below
/// 2^24 so that every bin index is exact in f32. NaN lands in bin `last`; the
/// caller rejects batches holding it.
pub(crate) fn extremes_and_bins(
    values: &[f32],
    per_unit: f32,
    last: f32,
    bins: &mut [i32],
) -> Extremes {
    assert!(bins.len() == values.len() && (0.0..16_777_216.0).contains(&last));
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { x86::extremes_and_bins_avx512(values, per_unit, last, bins) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { x86::extremes_and_bins_avx2(values, per_unit, last, bins) };
        }
    }
    extremes_and_bins_lanes(values, per_unit, last, bins)
}

/// [`extremes_and_bins`] with the signs binned apart: a value `x` that is not below
/// zero (`-0.0` included) lands in `floor(x * positive)` capped at `last`, a negative
/// one in `offset + floor(-x * negative)` capped at `offset + last` (`offset + last`
/// below 2^31). NaN lands in bin `last`; the caller rejects batches holding it.
pub(crate) fn extremes_and_split_bins(
    values: &[f32],
    (positive, negative): (f32, f32),
    last: f32,
    offset: i32,
    bins: &mut [i32],
) -> Extremes {
    assert!(bins.len() == values.len() && (0.0..16_777_216.0).contains(&last));
    assert!(offset >= 0 && offset as i64 + last as i64 <= i32::MAX as i64);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe {
                x86::extremes_and_split_bins_avx512(
                    values,
                    (positive, negative),
                    last,
                    offset,
                    bins,
                )
            };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe {
                x86::extremes_and_split_bins_avx2(values, (positive, negative), last, offset, bins)
            };
        }
    }
    extremes_and_split_bins_lanes(values, (positive, negative), last, offset, bins)
}

/// The lane loops compiled for wider vector units.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{extremes_and_bins_lanes, extremes_and_split_bins_lanes, extremes_lanes, Extremes};

    /// Both kernels compiled with one target feature.
    macro_rules! compiled_with {
        ($feature:literal, $extremes:ident, $extremes_and_bins:ident, $split:ident) => {
            #[target_feature(enable = $feature)]
            pub(super) fn $extremes(values: &[f32]) -> Extremes {
                extremes_lanes(values)
            }

            #[target_feature(enable = $feature)]
            pub(super) fn $extremes_and_bins(
                values: &[f32],
                per_unit: f32,
                last: f32,
                bins: &mut [i32],
            ) -> Extremes {
                extremes_and_bins_lanes(values, per_unit, last, bins)
            }

            #[target_feature(enable = $feature)]
            pub(super) fn $split(
                values: &[f32],
                per_unit: (f32, f32),
                last: f32,
                offset: i32,
                bins: &mut [i32],
            ) -> Extremes {
                extremes_and_split_bins_lanes(values, per_unit, last, offset, bins)
            }
        };
    }

    compiled_with!(
        "avx2",
        extremes_avx2,
        extremes_and_bins_avx2,
        extremes_and_split_bins_avx2
    );
    compiled_with!(
        "avx512f",
        extremes_avx512,
        extremes_and_bins_avx512,
        extremes_and_split_bins_avx512
    );
}

/// Per-lane running extremes.
struct Lanes {
    min: [f32; LANES],
    max: [f32; LANES],
    bad: [u32; LANES],
}

impl Lanes {
    fn new() -> Lanes {
        Lanes {
            min: [f32::INFINITY; LANES],
            max: [f32::NEG_INFINITY; LANES],
            bad: [0; LANES],
        }
    }

    /// Folds `x` into lane `k`. NaN fails both comparisons, so it never becomes an
    /// extreme; it is counted with ±Inf.
    #[inline(always)]
    fn update(&mut self, k: usize, x: f32) {
        self.min[k] = if x < self.min[k] { x } else { self.min[k] };
        self.max[k] = if x > self.max[k] { x } else { self.max[k] };
        self.bad[k] += u32::from(!x.is_finite());
    }

    fn finish(self, tail: &[f32]) -> Extremes {
        let mut e = Extremes::EMPTY;
        for k in 0..LANES {
            e.min = e.min.min(self.min[k]);
            e.max = e.max.max(self.max[k]);
            e.bad += self.bad[k] as usize;
        }
        for &x in tail {
            e.min = e.min.min(x);
            e.max = e.max.max(x);
            e.bad += usize::from(!x.is_finite());
        }
        e
    }
}

/// The lane counters are u32: slices longer than this are scanned in pieces.
const PIECE: usize = LANES << 30;

#[inline(always)]
fn extremes_lanes(values: &[f32]) -> Extremes {
    let mut total = Extremes::EMPTY;
    for piece in values.chunks(PIECE) {
        let mut lanes = Lanes::new();
        let mut groups = piece.chunks_exact(LANES);
        for group in &mut groups {
            for (k, &x) in group.iter().enumerate() {
                lanes.update(k, x);
            }
        }
        total = total.merge(lanes.finish(groups.remainder()));
    }
    total
}

#[inline(always)]
fn bin_of(x: f32, per_unit: f32, last: f32) -> i32 {
    let at = (x.abs() * per_unit).min(last);
    // SAFETY: `at` lies in [0, last] (|x| >= 0; `min` caps it and maps NaN to
    // `last`), and the caller guarantees `last` < 2^24, so it is representable.
    unsafe { at.to_int_unchecked::<i32>() }
}

#[inline(always)]
fn extremes_and_bins_lanes(values: &[f32], per_unit: f32, last: f32, bins: &mut [i32]) -> Extremes {
    extremes_and_bins_by(values, bins, |x| bin_of(x, per_unit, last))
}

#[inline(always)]
fn extremes_and_split_bins_lanes(
    values: &[f32],
    (positive, negative): (f32, f32),
    last: f32,
    offset: i32,
    bins: &mut [i32],
) -> Extremes {
    extremes_and_bins_by(values, bins, |x| {
        let below = x < 0.0;
        let per_unit = if below { negative } else { positive };
        bin_of(x, per_unit, last) + if below { offset } else { 0 }
    })
}

/// The lane loop of both binning scans: extremes of `values`, and `bin(x)` of every
/// value written to `bins`.
#[inline(always)]
fn extremes_and_bins_by(values: &[f32], bins: &mut [i32], bin: impl Fn(f32) -> i32) -> Extremes {
    let mut total = Extremes::EMPTY;
    for (piece, piece_bins) in values.chunks(PIECE).zip(bins.chunks_mut(PIECE)) {
        let mut lanes = Lanes::new();
        let mut groups = piece.chunks_exact(LANES);
        let mut group_bins = piece_bins.chunks_exact_mut(LANES);
        for (group, out) in (&mut groups).zip(&mut group_bins) {
            for k in 0..LANES {
                let x = group[k];
                lanes.update(k, x);
                out[k] = bin(x);
            }
        }
        for (&x, out) in groups.remainder().iter().zip(group_bins.into_remainder()) {
            *out = bin(x);
        }
        total = total.merge(lanes.finish(groups.remainder()));
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extremes_over_lanes_and_tail() {
        let values: Vec<f32> = (0..37).map(|i| (i as f32 - 20.0) * 0.5).collect();
        let e = Extremes::of(&values);
        assert_eq!((e.min, e.max, e.bad), (-10.0, 8.0, 0));
        assert_eq!(Extremes::of(&[]), Extremes::EMPTY);
        assert_eq!(largest_magnitude(&[1.0, -3.5, 2.0]), Some(3.5));
        assert_eq!(largest_magnitude(&[]), Some(0.0));
        assert_eq!(largest_magnitude(&[1.0, f32::INFINITY]), None);
        assert_eq!(largest_magnitude(&[f32::NAN, 1.0]), None);
        // Long slices take the vector scan, with the same answers.
        let mut long: Vec<f32> = (0..200).map(|i| i as f32 * 0.5 - 40.0).collect();
        assert_eq!(largest_magnitude(&long), Some(59.5));
        long[150] = f32::NAN;
        assert_eq!(largest_magnitude(&long), None);
        let e = Extremes::of(&[1.0, f32::NAN, 2.0, f32::NEG_INFINITY, 0.5]);
        assert_eq!((e.min, e.max, e.bad), (f32::NEG_INFINITY, 2.0, 2));
        let e = extremes_lanes(&[f32::NAN; 11]);
        assert_eq!(e.bad, 11);
    }

    #[test]
    fn bins_match_the_scalar_formula() {
        let values: Vec<f32> = (0..101).map(|i| (i as f32 - 50.0) * 0.04).collect();
        let mut bins = vec![0; values.len()];
        let e = extremes_and_bins(&values, 8.0 / 2.0, 7.0, &mut bins);
        assert_eq!((e.min, e.max, e.bad), (-2.0, 2.0, 0));
        for (&x, &b) in values.iter().zip(&bins) {
            assert_eq!(b as usize, ((x.abs() * 4.0) as usize).min(7), "x = {x}");
        }
        let mut bins = vec![0; 3];
        let e = extremes_and_bins(&[f32::NAN, 100.0, -0.0], 1.0, 7.0, &mut bins);
        assert_eq!((bins.as_slice(), e.bad), ([7, 7, 0].as_slice(), 1));
    }

    #[test]
    fn split_bins_put_each_sign_on_its_own_scale() {
        let values: Vec<f32> = (0..101).map(|i| (i as f32 - 50.0) * 0.04).collect();
        let mut bins = vec![0; values.len()];
        let e = extremes_and_split_bins(&values, (4.0, 2.0), 7.0, 8, &mut bins);
        assert_eq!((e.min, e.max, e.bad), (-2.0, 2.0, 0));
        for (&x, &b) in values.iter().zip(&bins) {
            let want = if x < 0.0 {
                8 + ((-x * 2.0) as i32).min(7)
            } else {
                ((x * 4.0) as i32).min(7)
            };
            assert_eq!(b, want, "x = {x}");
        }
        let mut bins = vec![0; 4];
        let e = extremes_and_split_bins(
            &[f32::NAN, 100.0, -0.0, -100.0],
            (1.0, 1.0),
            7.0,
            8,
            &mut bins,
        );
        assert_eq!((bins.as_slice(), e.bad), ([7, 7, 0, 15].as_slice(), 1));
    }
}
