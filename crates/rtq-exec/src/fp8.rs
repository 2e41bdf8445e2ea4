//! Conversions between `f32` and FP8 E4M3 (ONNX `FLOAT8E4M3FN`) as ONNX's Cast and
//! QuantizeLinear define them: round to nearest even, and the `saturate` attribute
//! choosing between clamping to ±448 and NaN for values out of range (the type has no
//! infinity).

use rtq_ir::F8E4M3;

/// Magnitudes above this are out of range: it is halfway between 448, the largest
/// finite value, and 480, the next step of the grid, whose code E4M3FN spends on NaN.
/// (464 itself is a tie and rounds to even, 448.)
const LARGEST_IN_RANGE: f32 = 464.0;

/// The NaN code with the sign bit clear (`S.1111.111`).
const NAN_BITS: u8 = 0x7F;

/// The sign bit of `x` (NaN included) as E4M3's sign bit.
fn sign_bit(x: f32) -> u8 {
    ((x.to_bits() >> 24) & 0x80) as u8
}

/// `x` rounded to the nearest E4M3 value, ties to even. With `saturate` (ONNX's
/// default) values beyond the range, infinities included, become ±448; without it
/// they become NaN. NaN stays NaN with its sign; values at or below 2^-10 (half the
/// smallest subnormal) become zero of the same sign.
pub(crate) fn f8_from_f32(x: f32, saturate: bool) -> F8E4M3 {
    if !saturate && x.abs() > LARGEST_IN_RANGE {
        return F8E4M3::from_bits(NAN_BITS | sign_bit(x));
    }
    // `from_f32` rounds to nearest even and saturates to ±448.
    F8E4M3::from_f32(x)
}

/// `x` as `f32` (exact). NaN becomes the quiet NaN `0x7FC00000` with `x`'s sign, as
/// onnxruntime and NumPy's `ml_dtypes` produce it.
pub(crate) fn f8_to_f32(x: F8E4M3) -> f32 {
    let bits = x.to_bits();
    if bits & NAN_BITS == NAN_BITS {
        f32::from_bits(0x7FC0_0000 | (u32::from(bits & 0x80) << 24))
    } else {
        x.to_f32()
    }
}

/// Every value of `values` converted with [`f8_from_f32`].
pub(crate) fn f8_vec_from_f32(values: &[f32], saturate: bool) -> Vec<F8E4M3> {
    values.iter().map(|&x| f8_from_f32(x, saturate)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of code `bits` computed from the E4M3 layout, independently of the
    /// `float8` crate: bias 7, subnormals at exponent field 0, `S.1111.111` NaN.
    fn decode(bits: u8) -> f32 {
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let (e, m) = (i32::from((bits >> 3) & 0xF), f32::from(bits & 0x7));
        if bits & 0x7F == 0x7F {
            return f32::NAN;
        }
        let mag = if e == 0 {
            m / 8.0 * 2f32.powi(-6)
        } else {
            (1.0 + m / 8.0) * 2f32.powi(e - 7)
        };
        sign * mag
    }

    fn bits(x: f32, saturate: bool) -> u8 {
        f8_from_f32(x, saturate).to_bits()
    }

    #[test]
    fn every_code_decodes_exactly_and_round_trips() {
        for code in 0..=255u8 {
            let v = f8_to_f32(F8E4M3::from_bits(code));
            let want = decode(code);
            if want.is_nan() {
                assert!(v.is_nan(), "{code:#x}");
                assert_eq!(v.to_bits(), 0x7FC0_0000 | (u32::from(code & 0x80) << 24));
                assert_eq!(bits(v, true), code);
                continue;
            }
            assert_eq!(v.to_bits(), want.to_bits(), "{code:#x}");
            // Exact values convert back to their own code (-0.0 included).
            assert_eq!(bits(v, true), code, "{code:#x}");
            assert_eq!(bits(v, false), code, "{code:#x}");
        }
    }

    #[test]
    fn midpoints_round_to_even_and_neighbours_to_nearest() {
        // Consecutive positive finite codes differ by one step of the grid.
        for code in 0..0x7Eu8 {
            let (a, b) = (decode(code), decode(code + 1));
            let mid = (a + b) / 2.0;
            let even = if code % 2 == 0 { code } else { code + 1 };
            assert_eq!(bits(mid, true), even, "tie {mid} between {a} and {b}");
            assert_eq!(bits(-mid, true), even | 0x80, "tie -{mid}");
            let below = f32::from_bits(mid.to_bits() - 1);
            let above = f32::from_bits(mid.to_bits() + 1);
            assert_eq!(bits(below, true), code, "just below {mid}");
            assert_eq!(bits(above, true), code + 1, "just above {mid}");
        }
    }

    #[test]
    fn subnormal_edges() {
        let p = |k: i32| 2f32.powi(k);
        // 2^-9 is the smallest subnormal; 2^-10, half of it, is a tie and rounds to
        // even: zero, keeping its sign.
        assert_eq!(bits(p(-9), true), 0x01);
        assert_eq!(bits(p(-10), true), 0x00);
        assert_eq!(bits(-p(-10), true), 0x80);
        assert_eq!(bits(f32::from_bits(p(-10).to_bits() + 1), true), 0x01);
        // 1.5 * 2^-9 is a tie between codes 1 and 2: even is 2.
        assert_eq!(bits(1.5 * p(-9), true), 0x02);
        assert_eq!(bits(2.5 * p(-9), true), 0x02);
        // The largest subnormal (7 * 2^-9) and the smallest normal (2^-6).
        assert_eq!(bits(7.0 * p(-9), true), 0x07);
        assert_eq!(bits(7.5 * p(-9), true), 0x08);
        assert_eq!(bits(p(-6), true), 0x08);
        assert_eq!(bits(1e-30, true), 0x00);
        assert_eq!(bits(-0.0, true), 0x80);
        assert_eq!(bits(0.0, false), 0x00);
    }

    #[test]
    fn range_edges_saturate_or_become_nan() {
        for (x, sat, nosat) in [
            (448.0f32, 0x7E, 0x7E),
            (460.0, 0x7E, 0x7E),
            // The tie between 448 and (missing) 480 rounds to even: 448.
            (464.0, 0x7E, 0x7E),
            (464.0001, 0x7E, 0x7F),
            (480.0, 0x7E, 0x7F),
            (1e6, 0x7E, 0x7F),
            (f32::INFINITY, 0x7E, 0x7F),
            (f32::MAX, 0x7E, 0x7F),
        ] {
            assert_eq!(bits(x, true), sat, "{x} saturate=1");
            assert_eq!(bits(x, false), nosat, "{x} saturate=0");
            assert_eq!(bits(-x, true), sat | 0x80, "-{x} saturate=1");
            assert_eq!(bits(-x, false), nosat | 0x80, "-{x} saturate=0");
        }
        assert_eq!(bits(f32::NAN, true), 0x7F);
        assert_eq!(bits(-f32::NAN, false), 0xFF);
    }

    #[test]
    fn vectors_convert_elementwise() {
        let v = f8_vec_from_f32(&[1.0, -2.0, 500.0], false);
        let b: Vec<u8> = v.iter().map(F8E4M3::to_bits).collect();
        assert_eq!(b, vec![0x38, 0xC0, 0x7F]);
    }
}
