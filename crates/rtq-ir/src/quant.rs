//! Quantization parameters: the one place a calibrated range becomes a scale.
//!
//! [`QuantParams`] holds a tensor's (or channel's) range and the grid it is quantized
//! to; [`QuantParams::scale`] is the scale TensorRT's calibration cache records and
//! [`QuantParams::stored_scale`] the one written into the graph, exact in the
//! [`ScaleFormat`] the Q/DQ nodes store it in. The INT8 transform, the report and the
//! cache writer all take their scales from here.

use crate::DType;
use float8::F8E4M3;
use half::{bf16, f16};

/// The grid a tensor is quantized to (symmetric, zero point 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QuantGrid {
    /// Signed 8-bit integers, narrow range: `[-127, 127]`.
    #[default]
    Int8,
    /// FP8 E4M3 (`FLOAT8E4M3FN`): 8-bit floats up to ±448, three mantissa bits (a
    /// relative step of 1/8 to 1/16 at every magnitude down to 2^-6, subnormals below).
    Fp8E4M3,
}

impl QuantGrid {
    /// The largest quantized magnitude (127 for INT8, 448 for FP8 E4M3).
    pub const fn qmax(self) -> f32 {
        match self {
            QuantGrid::Int8 => 127.0,
            QuantGrid::Fp8E4M3 => 448.0,
        }
    }

    /// The element type of quantized tensors (and of their zero points).
    pub const fn dtype(self) -> DType {
        match self {
            QuantGrid::Int8 => DType::I8,
            QuantGrid::Fp8E4M3 => DType::F8E4M3,
        }
    }

    /// Lower-case name in reports and messages (`int8`, `fp8`).
    pub const fn name(self) -> &'static str {
        match self {
            QuantGrid::Int8 => "int8",
            QuantGrid::Fp8E4M3 => "fp8",
        }
    }

    /// The grid of a quantized element type, if it is one.
    pub fn of_dtype(dtype: DType) -> Option<QuantGrid> {
        match dtype {
            DType::I8 => Some(QuantGrid::Int8),
            DType::F8E4M3 => Some(QuantGrid::Fp8E4M3),
            _ => None,
        }
    }

    /// `x / scale` rounded onto the grid as ONNX's QuantizeLinear does (round half to
    /// even; INT8 saturates to [-128, 127], FP8 to ±448), in units of the scale.
    pub fn quantize(self, x: f32, scale: f32) -> f32 {
        match self {
            QuantGrid::Int8 => (x / scale).round_ties_even().clamp(-128.0, 127.0),
            QuantGrid::Fp8E4M3 => F8E4M3::from_f32(x / scale).to_f32(),
        }
    }

    /// `x` through a Q/DQ pair of `scale` on this grid (fake quantization).
    pub fn fake_quantize(self, x: f32, scale: f32) -> f32 {
        self.quantize(x, scale) * scale
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
        QuantParams::new(QuantGrid::Int8, amax)
    }

    /// Parameters for the range `amax` on `grid`.
    pub fn new(grid: QuantGrid, amax: f32) -> QuantParams {
        QuantParams { amax, grid }
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
    /// bfloat16 (mixed builds whose high-precision type is BF16).
    BF16,
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
            ScaleFormat::F16 => round_up(scale, f16::from_f32, f16::to_f32, |h| {
                f16::from_bits(h.to_bits() + 1)
            }),
            ScaleFormat::BF16 => round_up(scale, bf16::from_f32, bf16::to_f32, |h| {
                bf16::from_bits(h.to_bits() + 1)
            }),
        }
    }
}

/// The smallest value of a 16-bit float type at least `scale` (positive, finite), if
/// it is finite and positive: round to nearest (`from`), and where that went down the
/// next value up (`next`; positive values of these types are ordered like their bits).
fn round_up<T: Copy>(
    scale: f32,
    from: fn(f32) -> T,
    to: fn(T) -> f32,
    next: fn(T) -> T,
) -> Option<f32> {
    let mut h = from(scale);
    if to(h) < scale {
        h = next(h);
    }
    let up = to(h);
    (up.is_finite() && up > 0.0).then_some(up)
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
    fn fp8_scale_is_amax_over_448_and_rounds_like_e4m3() {
        let p = QuantParams::new(QuantGrid::Fp8E4M3, 44.8);
        assert_eq!(p.scale(), 44.8f32 / 448.0);
        let g = QuantGrid::Fp8E4M3;
        // Three mantissa bits: 1.0625 is a tie between 1.0 and 1.125 (to even: 1.0).
        assert_eq!(g.quantize(1.0625, 1.0), 1.0);
        assert_eq!(g.quantize(1.1875, 1.0), 1.25);
        assert_eq!(g.quantize(1e6, 1.0), 448.0);
        assert_eq!(g.quantize(-1e6, 1.0), -448.0);
        // The smallest subnormal is 2^-9; half of it rounds to 0 (even).
        assert_eq!(g.quantize(2f32.powi(-9), 1.0), 2f32.powi(-9));
        assert_eq!(g.quantize(2f32.powi(-10), 1.0), 0.0);
        assert_eq!(g.fake_quantize(3.0, 0.5), 3.0);
        assert_eq!(QuantGrid::of_dtype(g.dtype()), Some(g));
        assert_eq!(QuantGrid::Int8.quantize(-1000.0, 1.0), -128.0);
        assert_eq!(QuantGrid::Int8.fake_quantize(0.75, 0.5), 1.0);
    }

    #[test]
    fn bf16_rounds_up_to_an_exact_bfloat16() {
        for s in [0.1f32, 3.0 / 448.0, 1e-30, 7.3e-6, 1e30] {
            let r = ScaleFormat::BF16.representable(s).unwrap();
            assert!(r >= s && bf16::from_f32(r).to_f32() == r, "{s} -> {r}");
            let below = bf16::from_bits(bf16::from_f32(r).to_bits() - 1).to_f32();
            assert!(below < s, "{below} >= {s}");
        }
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
