//! Latency statistics: percentiles and the summary trtexec prints.

use serde::{Deserialize, Serialize};

/// The `p`-th percentile (0 ≤ p ≤ 100) of ascending `sorted` samples by linear
/// interpolation between closest ranks — the definition of NumPy's default
/// `numpy.percentile(..., method="linear")`: rank `r = p/100 · (n − 1)`, result
/// `s[⌊r⌋] + (r − ⌊r⌋) · (s[⌊r⌋+1] − s[⌊r⌋])`.
///
/// `None` for no samples or `p` outside `[0, 100]` (or NaN).
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = rank - lo as f64;
    Some(sorted[lo] + frac * (sorted[hi] - sorted[lo]))
}

/// Summary of latency samples, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Number of samples.
    pub count: usize,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (50th percentile).
    pub median: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Population standard deviation.
    pub std_dev: f64,
}

impl LatencyStats {
    /// Summarizes `samples` (any order; NaNs are ignored). `None` when no sample is left.
    pub fn from_samples(samples: &[f64]) -> Option<LatencyStats> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| !v.is_nan()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let variance = sorted.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        let pct = |p| percentile(&sorted, p).unwrap_or(f64::NAN);
        Some(LatencyStats {
            count: sorted.len(),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            mean,
            median: pct(50.0),
            p90: pct(90.0),
            p95: pct(95.0),
            p99: pct(99.0),
            std_dev: variance.sqrt(),
        })
    }

    /// One line like trtexec's: `min = 1.234 ms, max = ..., mean = ..., median = ...,
    /// percentile(90%) = ..., percentile(95%) = ..., percentile(99%) = ...`.
    pub fn summary_line(&self) -> String {
        format!(
            "min = {:.5} ms, max = {:.5} ms, mean = {:.5} ms, median = {:.5} ms, \
             percentile(90%) = {:.5} ms, percentile(95%) = {:.5} ms, percentile(99%) = {:.5} ms",
            self.min, self.max, self.mean, self.median, self.p90, self.p95, self.p99
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values from numpy.percentile(data, p) (method="linear", NumPy's default).
    #[test]
    fn percentile_matches_numpy_linear() {
        let data = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(percentile(&data, 0.0), Some(1.0));
        assert_eq!(percentile(&data, 100.0), Some(10.0));
        assert_eq!(percentile(&data, 50.0), Some(5.5));
        assert!((percentile(&data, 90.0).unwrap() - 9.1).abs() < 1e-12);
        assert!((percentile(&data, 95.0).unwrap() - 9.55).abs() < 1e-12);
        assert!((percentile(&data, 99.0).unwrap() - 9.91).abs() < 1e-12);
        assert!((percentile(&data, 25.0).unwrap() - 3.25).abs() < 1e-12);
        // Uneven gaps: numpy.percentile([1, 3, 7, 15, 31], [10, 50, 75, 99]) = [1.8, 7, 15, 30.36].
        let skewed = [1.0, 3.0, 7.0, 15.0, 31.0];
        assert!((percentile(&skewed, 10.0).unwrap() - 1.8).abs() < 1e-12);
        assert_eq!(percentile(&skewed, 50.0), Some(7.0));
        assert_eq!(percentile(&skewed, 75.0), Some(15.0));
        assert!((percentile(&skewed, 99.0).unwrap() - 30.36).abs() < 1e-12);
    }

    #[test]
    fn percentile_edge_cases() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[4.0], 0.0), Some(4.0));
        assert_eq!(percentile(&[4.0], 99.0), Some(4.0));
        assert_eq!(percentile(&[1.0, 2.0], -1.0), None);
        assert_eq!(percentile(&[1.0, 2.0], 100.5), None);
        assert_eq!(percentile(&[1.0, 2.0], f64::NAN), None);
    }

    #[test]
    fn stats_summarize_unsorted_samples() {
        let samples = [5.0, 1.0, 4.0, 2.0, 3.0, f64::NAN];
        let s = LatencyStats::from_samples(&samples).unwrap();
        assert_eq!(s.count, 5);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 5.0);
        assert_eq!(s.mean, 3.0);
        assert_eq!(s.median, 3.0);
        assert!((s.p90 - 4.6).abs() < 1e-12);
        assert!((s.p95 - 4.8).abs() < 1e-12);
        assert!((s.p99 - 4.96).abs() < 1e-12);
        assert!((s.std_dev - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(LatencyStats::from_samples(&[]), None);
        assert_eq!(LatencyStats::from_samples(&[f64::NAN]), None);
    }

    #[test]
    fn summary_line_reads_like_trtexec() {
        let s = LatencyStats::from_samples(&[1.0, 2.0]).unwrap();
        assert_eq!(
            s.summary_line(),
            "min = 1.00000 ms, max = 2.00000 ms, mean = 1.50000 ms, median = 1.50000 ms, \
             percentile(90%) = 1.90000 ms, percentile(95%) = 1.95000 ms, percentile(99%) = 1.99000 ms"
        );
    }
}
