//! Turning a computed threshold into a usable range.

use crate::CalibError;

/// The range given to a tensor that was all zeros: `127 * 2^-14`, so its
/// int8 scale is `2^-14`, the smallest normal `f16`, and survives an FP16
/// cast of the Q/DQ scale. Scales are thereby always strictly positive.
pub const ZERO_RANGE_AMAX: f32 = 127.0 / 16384.0;

/// The smallest range returned for non-zero data: keeps the scale `amax / 127`
/// a normal (not subnormal) `f32`.
pub const MIN_AMAX: f32 = 128.0 * f32::MIN_POSITIVE;

/// Final range from a threshold candidate and the observed |x| maximum.
///
/// `absmax` is `None` when nothing was observed (an error); an all-zero tensor
/// gets [`ZERO_RANGE_AMAX`]. The candidate is clamped into
/// `[MIN_AMAX, absmax]`: no range wider than the data, never 0, NaN or Inf.
pub(crate) fn finalize(candidate: f64, absmax: Option<f32>) -> Result<f32, CalibError> {
    let absmax = absmax.ok_or(CalibError::NoData)?;
    if absmax <= 0.0 {
        return Ok(ZERO_RANGE_AMAX);
    }
    let a = if candidate.is_finite() {
        (candidate as f32).min(absmax)
    } else {
        absmax
    };
    Ok(a.max(MIN_AMAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_range_scale_is_smallest_normal_f16() {
        let scale = ZERO_RANGE_AMAX / 127.0;
        assert_eq!(half::f16::from_f32(scale), half::f16::MIN_POSITIVE);
        assert_eq!(scale, half::f16::MIN_POSITIVE.to_f32());
    }

    #[test]
    fn finalize_guards() {
        assert!(matches!(finalize(1.0, None), Err(CalibError::NoData)));
        assert_eq!(finalize(0.0, Some(0.0)).unwrap(), ZERO_RANGE_AMAX);
        assert_eq!(finalize(5.0, Some(3.0)).unwrap(), 3.0);
        assert_eq!(finalize(2.0, Some(3.0)).unwrap(), 2.0);
        assert_eq!(finalize(f64::NAN, Some(3.0)).unwrap(), 3.0);
        assert_eq!(finalize(0.0, Some(3.0)).unwrap(), MIN_AMAX);
        assert!((MIN_AMAX / 127.0).is_normal());
    }
}
