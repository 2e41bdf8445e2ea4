//! Tuning knobs shared by the calibrators.

use crate::CalibError;

/// Largest histogram size accepted: the entropy and MSE searches are
/// quadratic in the bin count.
pub const MAX_BINS: usize = 16384;

/// Smallest histogram size accepted: the entropy search needs at least as
/// many bins as int8 has positive quantization levels.
pub const MIN_BINS: usize = 128;

/// Options of the calibrators; fields not used by a calibrator are ignored by it.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibOptions {
    /// Percentile of |x| kept by the `percentile` calibrator, in (0, 100].
    pub percentile: f64,
    /// Bins of the |x| histogram used by `entropy`, `percentile` and `mse` (128 to
    /// 16384; default 2048, as TensorRT; with the histogram's power-of-two range the
    /// data covers 1024 to 2048 of them). A power of two keeps the counts exactly
    /// independent of the order and grouping of the samples.
    pub num_bins: usize,
}

impl Default for CalibOptions {
    fn default() -> Self {
        CalibOptions {
            percentile: 99.99,
            num_bins: 2048,
        }
    }
}

impl CalibOptions {
    /// Checks every field, naming the first bad one.
    pub fn validate(&self) -> Result<(), CalibError> {
        if !(self.percentile > 0.0 && self.percentile <= 100.0) {
            return Err(CalibError::InvalidOption {
                option: "percentile",
                reason: format!("{} is not in (0, 100]", self.percentile),
            });
        }
        if self.num_bins < MIN_BINS {
            return Err(CalibError::InvalidOption {
                option: "num_bins",
                reason: format!("{} is below the minimum of {MIN_BINS}", self.num_bins),
            });
        }
        if self.num_bins > MAX_BINS {
            return Err(CalibError::InvalidOption {
                option: "num_bins",
                reason: format!("{} is above the maximum of {MAX_BINS}", self.num_bins),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        let o = CalibOptions::default();
        assert_eq!(o.percentile, 99.99);
        assert_eq!(o.num_bins, 2048);
        assert!(o.validate().is_ok());
    }

    #[test]
    fn rejects_bad_values() {
        for p in [0.0, -1.0, 100.5, f64::NAN] {
            let o = CalibOptions {
                percentile: p,
                ..Default::default()
            };
            let e = o.validate().unwrap_err().to_string();
            assert!(e.contains("percentile"), "{e}");
        }
        let o = CalibOptions {
            num_bins: 64,
            ..Default::default()
        };
        assert!(o.validate().unwrap_err().to_string().contains("num_bins"));
        let o = CalibOptions {
            num_bins: MAX_BINS + 1,
            ..Default::default()
        };
        assert!(o.validate().unwrap_err().to_string().contains("maximum"));
    }
}
