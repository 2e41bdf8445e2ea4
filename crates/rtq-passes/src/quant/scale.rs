//! The floating-point type Q/DQ scales are stored in, and scale values exact in it.

use half::f16;

/// Storage type of quantization scales.
///
/// FP32 is the default; FP16 goes with mixed INT8/FP16 builds, where every tensor
/// outside INT8 (scales included) is half precision. Each FP16 scale is rounded *up*
/// to a representable value before weights are quantized against it, so the stored
/// scale is exact and no value is clipped by the rounding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScaleFormat {
    /// IEEE-754 single precision.
    #[default]
    F32,
    /// IEEE-754 half precision.
    F16,
}

impl ScaleFormat {
    /// The scale to store for `scale` (positive and finite): the smallest value of
    /// this format that is at least `scale`, or `scale` itself where the format cannot
    /// hold it (beyond FP16's range: such a Q/DQ stays FP32, see
    /// [`super::Fp16Options::half_qdq`]).
    pub fn round(self, scale: f32) -> f32 {
        self.representable(scale).unwrap_or(scale)
    }

    /// The smallest value of this format that is at least `scale` (a positive, finite
    /// f32), never zero; `None` when the format cannot hold it.
    pub fn representable(self, scale: f32) -> Option<f32> {
        if !(scale.is_finite() && scale > 0.0) {
            return None;
        }
        match self {
            ScaleFormat::F32 => Some(scale),
            ScaleFormat::F16 => {
                let mut h = f16::from_f32(scale);
                if h.to_f32() < scale {
                    // Round-to-nearest went down: take the next value up (positive
                    // halves are ordered like their bits).
                    h = f16::from_bits(h.to_bits() + 1);
                }
                let up = h.to_f32();
                (up.is_finite() && up > 0.0).then_some(up)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_keeps_the_scale() {
        assert_eq!(ScaleFormat::F32.representable(0.1), Some(0.1));
        assert_eq!(ScaleFormat::F32.representable(0.0), None);
        assert_eq!(ScaleFormat::F32.representable(f32::NAN), None);
    }

    #[test]
    fn f16_rounds_up_to_an_exact_half() {
        for s in [0.1f32, 3.0 / 127.0, 1.0, 1e-3, 7.3e-6, 1e-9, 60000.0] {
            let r = ScaleFormat::F16.representable(s).unwrap();
            assert!(r >= s, "{r} < {s}");
            assert_eq!(f16::from_f32(r).to_f32(), r, "{r} is not a half");
            // The next half down is below the scale: r is the smallest one above it.
            let below = f16::from_bits(f16::from_f32(r).to_bits() - 1).to_f32();
            assert!(below < s || below == 0.0, "{below} >= {s}");
        }
        // Halves stay as they are.
        assert_eq!(ScaleFormat::F16.representable(0.5), Some(0.5));
        // Underflow goes to the smallest subnormal, overflow is refused.
        assert_eq!(
            ScaleFormat::F16.representable(1e-12),
            Some(f16::from_bits(1).to_f32())
        );
        assert_eq!(ScaleFormat::F16.representable(1e6), None);
        assert_eq!(ScaleFormat::F16.round(1e6), 1e6);
    }
}
