//! TensorRT `EntropyCalibration2`: the threshold minimising the KL divergence
//! between the clipped |x| distribution and its 128-level quantization.
//!
//! For a histogram `hist` of `n` bins and each candidate bin count `i` in
//! `128..=n`:
//!
//! * **P** (reference) = `hist[0..i]` with the outliers `sum(hist[i..])` added
//!   to the last kept bin `P[i-1]`;
//! * **Q** (candidate) = `hist[0..i]` merged into 128 groups, then expanded
//!   back: each group's total is spread uniformly over the group's bins where
//!   `P` is non-zero; bins where `P` is zero stay zero. With `m = i / 128`
//!   (integer division), group `g < 127` covers bins `[g*m, (g+1)*m)` and the
//!   last group covers `[127*m, i)` (it absorbs the remainder);
//! * both are normalised to sum 1 and `KL(P||Q) = sum P ln(P/Q)` over the bins
//!   where `P > 0`. `Q` can only be zero where `P > 0` in the last kept bin
//!   (clipped outliers over an empty last group); there `Q` is replaced by the
//!   probability floor [`KL_EPSILON`] (the smoothing constant onnxruntime and
//!   MXNet use), without renormalising.
//!
//! The chosen `i` is the first one with the smallest divergence, and the range
//! is the **upper edge** of the last kept bin, `amax = i * bin_width`, as in
//! TensorRT and NVIDIA's pytorch-quantization.

use crate::hist_collector::{HistogramCollector, HistogramRule};
use crate::histogram::AbsHistogram;
use crate::{CalibOptions, Calibrator, RangeCollector};

/// Positive int8 quantization levels the candidate distribution is merged into.
pub const INT8_LEVELS: usize = 128;

/// Probability floor for `Q` where `P > 0` but `Q == 0`.
pub const KL_EPSILON: f64 = 1e-4;

/// The result of the entropy search over one histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EntropyChoice {
    /// Number of leading bins kept (the threshold is this bin's upper edge).
    pub bins: usize,
    /// `KL(P||Q)` at that bin count.
    pub divergence: f64,
}

/// `KL(P||Q)` for every candidate bin count `i` in `levels..=hist.len()`
/// (element `k` is for `i = levels + k`); empty if `hist` is shorter than
/// `levels`, `levels` is 0, or `hist` holds no count.
pub fn kl_divergences(hist: &[u64], levels: usize) -> Vec<f64> {
    let n = hist.len();
    if levels == 0 || n < levels {
        return Vec::new();
    }
    // prefix[j] = sum(hist[..j]); nonzero[j] = bins of hist[..j] that are > 0;
    // clnc[j] = sum(c ln c) over hist[..j]. With them every group's part of the
    // divergence costs O(1).
    let mut prefix = Vec::with_capacity(n + 1);
    let mut nonzero = Vec::with_capacity(n + 1);
    let mut clnc = Vec::with_capacity(n + 1);
    prefix.push(0u64);
    nonzero.push(0usize);
    clnc.push(0.0f64);
    for &c in hist {
        prefix.push(prefix[prefix.len() - 1] + c);
        nonzero.push(nonzero[nonzero.len() - 1] + usize::from(c > 0));
        let term = if c > 0 {
            c as f64 * (c as f64).ln()
        } else {
            0.0
        };
        clnc.push(clnc[clnc.len() - 1] + term);
    }
    let total = prefix[n];
    if total == 0 {
        return Vec::new();
    }
    let total_f = total as f64;

    let ln_total = total_f.ln();

    // For a fixed group width m = i / levels, every candidate i in
    // [levels*m, levels*(m+1)) shares the boundaries and the content of groups
    // 0..levels-1: only the last group (which ends at i and takes the outliers)
    // differs. Times `total`, group g contributes
    //   C_g - G_g (ln G_g - ln s_g) - G_g (ln total - ln kept)
    // (C_g = sum c ln c, G_g = sum c, s_g = non-zero bins), so the shared groups
    // reduce to one sum per m, and each candidate costs O(1).
    let mut shared: Option<(usize, f64)> = None;
    let mut out = Vec::with_capacity(n - levels + 1);
    for i in levels..=n {
        let kept = prefix[i];
        let outliers = total - kept;
        let m = i / levels;
        let shared_sum = match shared {
            Some((width, sum)) if width == m => sum,
            _ => {
                let mut sum = 0.0f64;
                for g in 0..levels - 1 {
                    let (start, end) = (g * m, (g + 1) * m);
                    let group_total = prefix[end] - prefix[start];
                    if group_total > 0 {
                        let support = (nonzero[end] - nonzero[start]) as f64;
                        let g_f = group_total as f64;
                        sum += (clnc[end] - clnc[start]) - g_f * (g_f / support).ln();
                    }
                }
                shared = Some((m, sum));
                sum
            }
        };
        let shared_start = (levels - 1) * m;
        let ln_kept = if kept > 0 { (kept as f64).ln() } else { 0.0 };
        let mut kl = (shared_sum - prefix[shared_start] as f64 * (ln_total - ln_kept)) / total_f;

        // The last group: [shared_start, i), plus the outliers in bin i-1.
        let (start, end) = (shared_start, i);
        let group_total = prefix[end] - prefix[start];
        // Bins where P > 0: hist's non-zero bins, plus the last kept bin
        // when it is empty in hist but receives outliers.
        let mut support = nonzero[end] - nonzero[start];
        let last_gets_outliers = outliers > 0;
        if last_gets_outliers && hist[i - 1] == 0 {
            support += 1;
        }
        // Normalised Q on this group's support: total / support / kept.
        let q = if group_total > 0 {
            group_total as f64 / support as f64 / kept as f64
        } else {
            0.0
        };
        let inner_end = if last_gets_outliers { end - 1 } else { end };
        if group_total > 0 {
            // sum over bins of p ln(p/q), p = c / total:
            // (1/total) * sum c (ln c - ln(total * q)), from the prefix sums.
            let ln_tq = (total_f * q).ln();
            let kept_in_group = (prefix[inner_end] - prefix[start]) as f64;
            kl += ((clnc[inner_end] - clnc[start]) - ln_tq * kept_in_group) / total_f;
        }
        if last_gets_outliers {
            let p = (hist[i - 1] + outliers) as f64 / total_f;
            let q_last = if q > 0.0 { q } else { KL_EPSILON };
            kl += p * (p / q_last).ln();
        }
        out.push(kl);
    }
    out
}

/// `hist` with its first bin (|x| near 0) levelled to the count of the second.
///
/// Post-ReLU tensors put up to half their values at exactly 0. In the candidate
/// distribution Q that spike is spread over its whole merged group, so every wider
/// threshold looks far worse than it is and the search collapses onto the narrowest
/// candidate, clipping most of the range. NVIDIA's TensorRT-aligned calibrators
/// (pytorch-quantization's `_compute_amax_entropy`) level the zero bin the same way
/// before the search; the zero spike carries no information about the threshold.
pub fn level_zero_bin(hist: &[u64]) -> Vec<u64> {
    let mut levelled = hist.to_vec();
    if levelled.len() > 1 {
        levelled[0] = levelled[1];
    }
    levelled
}

/// The EntropyCalibration2 choice for `hist` (see the module docs), or `None`
/// if `hist` is shorter than 128 bins or empty. The zero bin is levelled first
/// ([`level_zero_bin`]).
pub fn entropy_threshold(hist: &[u64]) -> Option<EntropyChoice> {
    entropy_threshold_from(hist, INT8_LEVELS)
}

/// Like [`entropy_threshold`], with candidates of at least `min_bins` bins only.
pub fn entropy_threshold_from(hist: &[u64], min_bins: usize) -> Option<EntropyChoice> {
    let curve = kl_divergences(&level_zero_bin(hist), INT8_LEVELS);
    let mut best: Option<EntropyChoice> = None;
    for (k, &d) in curve.iter().enumerate() {
        if INT8_LEVELS + k < min_bins {
            continue;
        }
        if best.is_none_or(|b| d < b.divergence) {
            best = Some(EntropyChoice {
                bins: INT8_LEVELS + k,
                divergence: d,
            });
        }
    }
    best
}

/// Bins of TensorRT's calibration histogram over `[0, absmax]`.
const TENSORRT_BINS: usize = 2048;

/// The entropy threshold rule over the bins that cover the observed data.
#[derive(Debug, Clone, Copy, Default)]
pub struct EntropyRule;

impl HistogramRule for EntropyRule {
    fn threshold(&self, hist: &AbsHistogram, absmax: f32) -> f64 {
        // Bins above the observed max are not candidates: TensorRT's histogram ends
        // at the data's max. Nor are thresholds below TensorRT's smallest, 128 of its
        // 2048 bins over [0, absmax]: absmax / 16.
        let used = hist.used_bins(absmax);
        let min_bins = used.div_ceil(TENSORRT_BINS / INT8_LEVELS).max(INT8_LEVELS);
        match entropy_threshold_from(&hist.counts()[..used], min_bins) {
            Some(choice) => choice.bins as f64 * hist.bin_width(),
            None => absmax as f64,
        }
    }
}

/// TensorRT `EntropyCalibration2` (the default calibrator).
#[derive(Debug, Clone)]
pub struct EntropyCalibrator {
    num_bins: usize,
}

impl EntropyCalibrator {
    /// A calibrator using `options.num_bins` histogram bins.
    pub fn new(options: &CalibOptions) -> Self {
        EntropyCalibrator {
            num_bins: options.num_bins,
        }
    }

    /// A collector with its concrete type (for inspection).
    pub fn new_collector(&self) -> HistogramCollector<EntropyRule> {
        HistogramCollector::new(self.num_bins, EntropyRule)
    }
}

impl Calibrator for EntropyCalibrator {
    fn name(&self) -> &'static str {
        "entropy"
    }

    fn collector(&self) -> Box<dyn RangeCollector> {
        Box::new(self.new_collector())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_test_support::Rng;

    /// The algorithm written the slow, obvious way, for cross-checking.
    fn naive_kl(hist: &[u64], i: usize) -> f64 {
        let levels = INT8_LEVELS;
        let outliers: u64 = hist[i..].iter().sum();
        let mut p: Vec<f64> = hist[..i].iter().map(|&c| c as f64).collect();
        p[i - 1] += outliers as f64;
        let m = i / levels;
        let mut q = vec![0.0; i];
        for g in 0..levels {
            let (s, e) = (g * m, if g == levels - 1 { i } else { g * m + m });
            let t: f64 = hist[s..e].iter().map(|&c| c as f64).sum();
            let nz = (s..e).filter(|&j| p[j] > 0.0).count();
            for j in s..e {
                if p[j] > 0.0 && nz > 0 {
                    q[j] = t / nz as f64;
                }
            }
        }
        let ps: f64 = p.iter().sum();
        let qs: f64 = q.iter().sum();
        let mut kl = 0.0;
        for j in 0..i {
            if p[j] > 0.0 {
                let pj = p[j] / ps;
                let qj = if q[j] > 0.0 { q[j] / qs } else { KL_EPSILON };
                kl += pj * (pj / qj).ln();
            }
        }
        kl
    }

    #[test]
    fn matches_naive_formulation() {
        let mut rng = Rng::new(7);
        let mut c = EntropyCalibrator::new(&CalibOptions::default()).new_collector();
        let v: Vec<f32> = (0..20000).map(|_| rng.normal() as f32).collect();
        c.observe(&v).unwrap();
        let hist = c.histogram().counts().to_vec();
        let curve = kl_divergences(&hist, INT8_LEVELS);
        assert_eq!(curve.len(), hist.len() - 128 + 1);
        for i in [128, 129, 300, 1000, 1777, 2048] {
            let a = curve[i - 128];
            let b = naive_kl(&hist, i);
            assert!(
                (a - b).abs() <= 1e-9 * b.abs().max(1e-12),
                "i={i}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn clipping_into_empty_bins_uses_epsilon() {
        // 128 bins: one count at bin 0, outliers beyond; last group empty.
        let mut hist = vec![0u64; 256];
        hist[0] = 10;
        hist[255] = 1;
        let curve = kl_divergences(&hist, INT8_LEVELS);
        let p_last: f64 = 1.0 / 11.0;
        let p0: f64 = 10.0 / 11.0;
        // i = 128: Q = [1, 0, ...]: p0 ln(p0/1) + p_last ln(p_last/eps).
        let expected = p0 * p0.ln() + p_last * (p_last / KL_EPSILON).ln();
        assert!(
            (curve[0] - expected).abs() < 1e-12,
            "{} vs {expected}",
            curve[0]
        );
        // Keeping every bin loses nothing at the two occupied bins' groups.
        let full = *curve.last().unwrap();
        assert!(full.abs() < 1e-12, "{full}");
        assert_eq!(entropy_threshold(&hist).unwrap().bins, 256);
    }

    #[test]
    fn too_short_or_empty_histograms_have_no_choice() {
        assert!(entropy_threshold(&[1; 100]).is_none());
        assert!(entropy_threshold(&[0; 2048]).is_none());
        assert!(kl_divergences(&[1; 10], 0).is_empty());
    }

    #[test]
    fn clips_outliers_of_a_gaussian() {
        let mut rng = Rng::new(11);
        let mut c = EntropyCalibrator::new(&CalibOptions::default()).collector();
        let mut v: Vec<f32> = (0..200_000).map(|_| rng.normal() as f32).collect();
        v[0] = 40.0;
        v[1] = -35.0;
        c.observe(&v).unwrap();
        let amax = c.amax().unwrap();
        // Far below the outliers, and around the few-sigma region.
        assert!(amax > 2.0 && amax < 10.0, "amax {amax}");
        let s = c.stats();
        assert_eq!(s.absmax, 40.0);
        assert_eq!(s.amax, amax);
    }

    #[test]
    fn uniform_data_keeps_nearly_the_whole_range() {
        let mut rng = Rng::new(3);
        let mut c = EntropyCalibrator::new(&CalibOptions::default()).collector();
        let v: Vec<f32> = (0..500_000)
            .map(|_| rng.uniform(-1.0, 1.0) as f32)
            .collect();
        c.observe(&v).unwrap();
        let amax = c.amax().unwrap();
        assert!(amax > 0.9 && amax <= 1.0, "amax {amax}");
    }

    #[test]
    fn amax_is_upper_edge_of_chosen_bin() {
        let mut rng = Rng::new(5);
        let mut c = EntropyCalibrator::new(&CalibOptions::default()).new_collector();
        let v: Vec<f32> = (0..50_000).map(|_| rng.laplace() as f32).collect();
        c.observe(&v).unwrap();
        let h = c.histogram();
        let choice = entropy_threshold(h.counts()).unwrap();
        let expected = (choice.bins as f64 * h.bin_width()) as f32;
        assert_eq!(c.amax().unwrap(), expected.min(c.stats().absmax));
    }

    #[test]
    fn histogram_size_is_constant_over_many_batches() {
        let mut rng = Rng::new(9);
        let mut c = EntropyCalibrator::new(&CalibOptions::default()).new_collector();
        let mut batch = vec![0f32; 256];
        for k in 0..1000 {
            // The scale keeps growing, so the range grows many times.
            let s = 1.0 + k as f64 * 0.05;
            for x in &mut batch {
                *x = (rng.normal() * s) as f32;
            }
            c.observe(&batch).unwrap();
            assert_eq!(
                c.histogram().counts().len(),
                CalibOptions::default().num_bins
            );
        }
        assert_eq!(c.histogram().total(), 256_000);
        assert!(c.histogram().range() >= c.stats().absmax as f64);
        let a = c.amax().unwrap();
        assert!(a > 0.0 && a <= c.stats().absmax);
    }
}
