//! Symmetric INT8 quantization of constant tensors.

use rtq_ir::{QuantParams, ScaleFormat};

/// Quantizes `x / scale` to int8 with round-half-to-even and narrow-range clamping to [-127, 127].
pub fn quantize_symmetric(x: f32, scale: f32) -> i8 {
    // Clamping first keeps |q| small, where adding and removing 1.5 * 2^23 rounds to
    // the nearest integer with ties to even (IEEE-754's default rounding) -- the same
    // as `round_ties_even`, which is a libm call on baseline x86-64.
    const ROUNDER: f32 = 12_582_912.0;
    let q = (x / scale).clamp(-127.0, 127.0);
    ((q + ROUNDER) - ROUNDER) as i8
}

/// Per-channel symmetric quantization of `data` (row-major `shape`) along `axis`.
/// Returns the int8 values and one scale per channel ([`QuantParams::stored_scale`] of
/// `max|w_c|` in `format`, or 1.0 for an all-zero
/// channel so every scale stays strictly positive).
/// The values are quantized against the returned (exact) scales.
pub fn quantize_per_channel(
    data: &[f32],
    shape: &[usize],
    axis: usize,
    format: ScaleFormat,
) -> (Vec<i8>, Vec<f32>) {
    let channels = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    // Row k of `inner` consecutive values belongs to channel k % channels.
    let rows = || data.chunks(inner.max(1)).enumerate();
    let mut amax = vec![0f32; channels];
    for (k, row) in rows() {
        let c = k % channels;
        amax[c] = row.iter().fold(amax[c], |m, &v| m.max(v.abs()));
    }
    let scales: Vec<f32> = amax
        .iter()
        .map(|&a| {
            let params = QuantParams::int8(a);
            if params.is_valid() {
                params.stored_scale(format)
            } else {
                1.0
            }
        })
        .collect();
    let mut q = Vec::with_capacity(data.len());
    for (k, row) in rows() {
        let scale = scales[k % channels];
        q.extend(row.iter().map(|&v| quantize_symmetric(v, scale)));
    }
    (q, scales)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_half_to_even_and_saturates() {
        assert_eq!(quantize_symmetric(2.5, 1.0), 2);
        assert_eq!(quantize_symmetric(3.5, 1.0), 4);
        assert_eq!(quantize_symmetric(-2.5, 1.0), -2);
        assert_eq!(quantize_symmetric(1000.0, 1.0), 127);
        assert_eq!(quantize_symmetric(-1000.0, 1.0), -127);
    }

    #[test]
    fn per_channel_scales_follow_the_axis() {
        // shape [2, 3]: channel 0 max 3, channel 1 all zero.
        let (q, s) = quantize_per_channel(
            &[1.0, -3.0, 1.5, 0.0, 0.0, 0.0],
            &[2, 3],
            0,
            ScaleFormat::F32,
        );
        assert_eq!(s, vec![3.0 / 127.0, 1.0]);
        assert_eq!(q, vec![42, -127, 64, 0, 0, 0]);
        // Along axis 1 of the same tensor: per-column maxima.
        let (_, s) = quantize_per_channel(
            &[1.0, -3.0, 1.5, 2.0, 0.0, 0.0],
            &[2, 3],
            1,
            ScaleFormat::F32,
        );
        assert_eq!(s, vec![2.0 / 127.0, 3.0 / 127.0, 1.5 / 127.0]);
    }

    #[test]
    fn f16_scales_are_exact_halves_and_never_clip() {
        let data = [0.3f32, -0.77, 0.01, 1e-5, 2.0e-6, -3.0e-6];
        let (q, s) = quantize_per_channel(&data, &[3, 2], 0, ScaleFormat::F16);
        for (&scale, amax) in s.iter().zip([0.77f32, 0.01, 3.0e-6]) {
            assert_eq!(half::f16::from_f32(scale).to_f32(), scale);
            assert!(scale >= amax / 127.0);
        }
        // The largest value of a channel lands within one step of +-127; a channel
        // below the smallest half scale gets fewer steps, still within range.
        assert!(q[1] <= -126 && q[2] >= 126 && (-127..0).contains(&q[5]));
    }
}
