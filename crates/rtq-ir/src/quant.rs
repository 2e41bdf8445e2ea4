//! Quantization parameters: the one place a calibrated range becomes a scale.
//!
//! [`QuantParams`] holds a tensor's (or channel's) range and the grid it is quantized
//! to; [`QuantParams::scale`] is the scale TensorRT's calibration cache records and
//! [`QuantParams::stored_scale`] the one written into the graph, exact in the
//! [`ScaleFormat`] the Q/DQ nodes store it in. The INT8 transform, the report and the
//! cache writer all take their scales from here.

use half::f16;

/// The integer grid a tensor is quantized to (symmetric, zero point 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuantGrid {
    /// Signed 8-bit, narrow range: `[-127, 127]`.
    #[default]
    Int8,
}

impl QuantGrid {
    /// The largest quantized magnitude (127 for INT8).
    pub const fn qmax(self) -> f32 {
        match self {
            QuantGrid::Int8 => 127.0,
        }
    }
}

/// Symmetric quantization parameters: the range `[-amax, amax]` mapped onto `grid`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantParams {
    /// Largest magnitude represented (the calibrated range).
    pub amax: f32,
    /// Grid the values are quantized to.
    pub grid: QuantGrid,
}

impl QuantParams {
    /// INT8 parameters for the range `amax`.
    pub fn int8(amax: f32) -> QuantParams {
        QuantParams {
            amax,
            grid: QuantGrid::Int8,
        }
    }

    /// `amax / qmax` in single precision: the scale of TensorRT's calibration cache.
    pub fn scale(&self) -> f32 {
        self.amax / self.grid.qmax()
    }

    /// The scale as the graph stores it in `format`: [`QuantParams::scale`] rounded up
    /// to a value exact in `format` where it fits (see [`ScaleFormat::round`]).
    pub fn stored_scale(&self, format: ScaleFormat) -> f32 {
        format.round(self.scale())
    }

    /// Whether the range gives a usable scale (finite and positive).
    pub fn is_valid(&self) -> bool {
        self.amax.is_finite() && self.amax > 0.0
    }
}

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
    /// the FP16 transform's `half_qdq` option in rtq-passes).
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
    fn int8_scale_is_amax_over_127_and_stored_exactly() {
        let p = QuantParams::int8(5.6);
        assert_eq!(p.scale(), 5.6f32 / 127.0);
        assert_eq!(p.stored_scale(ScaleFormat::F32), p.scale());
        let half = p.stored_scale(ScaleFormat::F16);
        assert!(half >= p.scale() && f16::from_f32(half).to_f32() == half);
        assert!(p.is_valid() && !QuantParams::int8(0.0).is_valid());
        assert!(!QuantParams::int8(f32::INFINITY).is_valid());
    }

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
