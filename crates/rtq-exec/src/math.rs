//! Scalar special functions the standard library lacks.

use std::f64::consts::PI;

/// The error function, accurate to a few ulps of f64 over the whole real line.
///
/// A Maclaurin series below |x| = 2.5 and a continued fraction for `erfc` above
/// (where the series would cancel catastrophically).
pub(crate) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a < 2.5 {
        let x2 = x * x;
        let mut term = x;
        let mut sum = x;
        for n in 1..100 {
            term *= -x2 / n as f64;
            let t = term / (2 * n + 1) as f64;
            sum += t;
            if t.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        return 2.0 / PI.sqrt() * sum;
    }
    if a >= 6.0 {
        return 1.0f64.copysign(x);
    }
    // erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...))))
    let mut f = a;
    for n in (1..=60).rev() {
        f = a + (n as f64 / 2.0) / f;
    }
    let erfc = (-a * a).exp() / (PI.sqrt() * f);
    (1.0 - erfc).copysign(x)
}

/// `2^23 + 2^22`: adding and subtracting it rounds an f32 of magnitude below `2^22` to
/// an integer (half to even), and the sum's low mantissa bits hold that integer.
const ROUNDER: f32 = 12_582_912.0;

/// Below this e^x is under half the smallest f32 subnormal (e^-104 is 6.8e-46).
const EXP_UNDERFLOW: f32 = -104.0;

/// e^x for x <= 0 as `(q, n)` with e^x = (1 + q) 2^n, in branch-free f32 arithmetic
/// that the compiler vectorizes (Cephes' `expf`): x = n ln2 + r with |r| <= ln2/2 (ln2
/// split in two parts so that `n ln2` is subtracted exactly) and e^r - 1 = q from a
/// degree-7 polynomial. Keeping `q` apart from the 1 leaves its rounding (and the
/// polynomial's) at about a quarter of an f32 ulp of `1 + q`. x below -104 is taken as
/// -104 (so that n stays in -150..=0); NaN gives a NaN `q` and an arbitrary `n`.
#[inline(always)]
fn exp_split(x: f32) -> (f32, i32) {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // NaN compares false and passes through.
    let x = if x < EXP_UNDERFLOW { EXP_UNDERFLOW } else { x };
    let shifted = x * std::f32::consts::LOG2_E + ROUNDER;
    let n = shifted - ROUNDER;
    let k = (shifted.to_bits() as i32).wrapping_sub(ROUNDER.to_bits() as i32);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.987_569_2e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    (p * (r * r) + r, k)
}

/// 2^n as f64, for n in -1022..=1023 (other values give garbage, never a panic).
#[inline(always)]
fn pow2_f64(n: i32) -> f64 {
    f64::from_bits((i64::from(n).wrapping_add(1023) as u64) << 52)
}

/// e^x for x <= 0 (NaN stays NaN; 0 in f32 below -104), in f64 from [`exp_split`],
/// within half an f32 ulp relative: callers that finish in f64 and round once to f32
/// stay within about an ulp. Branch-free: vectorizes inside a loop.
#[inline(always)]
pub(crate) fn exp_nonpositive(x: f32) -> f64 {
    let (q, n) = exp_split(x);
    (1.0 + f64::from(q)) * pow2_f64(n)
}

/// e^x - 1 for x <= 0 (NaN stays NaN; -1 below -104), in f64 from [`exp_split`],
/// within an f32 ulp relative. There is no cancellation near 0: there n = 0 and the
/// result is `q` itself. Branch-free: vectorizes inside a loop.
#[inline(always)]
pub(crate) fn exp_m1_nonpositive(x: f32) -> f64 {
    let (q, n) = exp_split(x);
    let scale = pow2_f64(n);
    (scale - 1.0) + f64::from(q) * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relative error of `got` against `want`, in f32 ulps of 1 (2^-23).
    fn rel_ulps(got: f64, want: f64) -> f64 {
        (got / want - 1.0).abs() * 2f64.powi(23)
    }

    #[test]
    fn exp_and_exp_m1_are_within_an_ulp() {
        let (mut worst_exp, mut worst_m1) = ((0.0, 0.0f32), (0.0, 0.0f32));
        let mut check = |x: f32| {
            let e = rel_ulps(exp_nonpositive(x), f64::from(x).exp());
            if e > worst_exp.0 {
                worst_exp = (e, x);
            }
            if x != 0.0 {
                let e = rel_ulps(exp_m1_nonpositive(x), f64::from(x).exp_m1());
                if e > worst_m1.0 {
                    worst_m1 = (e, x);
                }
            }
        };
        let mut x = 0.0f32;
        while x > -104.0 {
            check(x);
            x -= 1.3e-4;
        }
        // Every 997th float in [-1, 0], tiny ones included.
        for bits in (0u32..(1.0f32).to_bits()).step_by(997) {
            check(-f32::from_bits(bits));
        }
        assert!(worst_exp.0 <= 0.5, "exp: {worst_exp:?}");
        assert!(worst_m1.0 <= 1.0, "exp_m1: {worst_m1:?}");
    }

    #[test]
    fn exp_special_values() {
        for x in [0.0, -0.0] {
            assert_eq!(exp_nonpositive(x), 1.0);
            assert_eq!(exp_m1_nonpositive(x), 0.0);
        }
        for x in [f32::NAN, -f32::NAN] {
            assert!(exp_nonpositive(x).is_nan());
            assert!(exp_m1_nonpositive(x).is_nan());
        }
        // Clamped far below: e^-104 and less round to 0 in f32.
        for x in [-104.0, -1000.0, f32::NEG_INFINITY] {
            assert_eq!(exp_nonpositive(x) as f32, 0.0, "{x}");
            assert_eq!(exp_m1_nonpositive(x) as f32, -1.0, "{x}");
        }
        // Subnormal f32 results.
        let tiny = exp_nonpositive(-100.0) as f32;
        assert!(tiny > 0.0 && tiny < f32::MIN_POSITIVE);
    }

    #[test]
    fn erf_matches_known_values() {
        // Reference values from the standard tables.
        let cases = [
            (0.0, 0.0),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (-1.5, -0.966_105_146_475_310_7),
        ];
        for (x, want) in cases {
            let got = erf(x);
            assert!((got - want).abs() < 1e-14, "erf({x}) = {got}, want {want}");
        }
        assert_eq!(erf(10.0), 1.0);
        assert_eq!(erf(-10.0), -1.0);
        assert!(erf(f64::NAN).is_nan());
        // Tiny arguments keep their relative accuracy.
        assert!((erf(1e-8) / (2.0 / PI.sqrt() * 1e-8) - 1.0).abs() < 1e-12);
    }
}
