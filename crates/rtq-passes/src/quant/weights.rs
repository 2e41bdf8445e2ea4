//! Symmetric quantization of constant tensors (INT8 or FP8 E4M3).

use rtq_ir::{QuantGrid, QuantParams, ScaleFormat, TensorData, F8E4M3};

/// Quantizes `x / scale` to int8 with round-half-to-even and narrow-range clamping to [-127, 127].
pub fn quantize_symmetric(x: f32, scale: f32) -> i8 {
    // Clamping first keeps |q| small, where adding and removing 1.5 * 2^23 rounds to
    // the nearest integer with ties to even (IEEE-754's default rounding) -- the same
    // as `round_ties_even`, which is a libm call on baseline x86-64.
    const ROUNDER: f32 = 12_582_912.0;
    let q = (x / scale).clamp(-127.0, 127.0);
    ((q + ROUNDER) - ROUNDER) as i8
}

/// Per-channel symmetric INT8 quantization of `data` (row-major `shape`) along `axis`.
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
    let scales = channel_scales(data, shape, axis, QuantGrid::Int8, format);
    let q = per_channel_map(data, shape, axis, &scales, quantize_symmetric);
    (q, scales)
}

/// Per-channel symmetric quantization of `data` onto `grid`: the values (int8, or FP8
/// E4M3 by saturating round-to-nearest-even of `w / scale`) and one scale per channel,
/// as [`quantize_per_channel`] computes them.
pub fn quantize_weights(
    data: &[f32],
    shape: &[usize],
    axis: usize,
    grid: QuantGrid,
    format: ScaleFormat,
) -> (TensorData, Vec<f32>) {
    match grid {
        QuantGrid::Int8 => {
            let (q, scales) = quantize_per_channel(data, shape, axis, format);
            (TensorData::I8(q), scales)
        }
        QuantGrid::Fp8E4M3 => {
            let scales = channel_scales(data, shape, axis, grid, format);
            let q = per_channel_map(data, shape, axis, &scales, |v, s| F8E4M3::from_f32(v / s));
            (TensorData::F8E4M3(q), scales)
        }
    }
}

/// One scale per channel of `data` along `axis` on `grid`: `max|w_c| / qmax` stored in
/// `format`, 1.0 for an all-zero channel.
fn channel_scales(
    data: &[f32],
    shape: &[usize],
    axis: usize,
    grid: QuantGrid,
    format: ScaleFormat,
) -> Vec<f32> {
    let channels = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    // Row k of `inner` consecutive values belongs to channel k % channels.
    let mut amax = vec![0f32; channels];
    for (k, row) in data.chunks(inner.max(1)).enumerate() {
        let c = k % channels;
        amax[c] = row.iter().fold(amax[c], |m, &v| m.max(v.abs()));
    }
    amax.iter()
        .map(|&a| {
            let params = QuantParams::new(grid, a);
            if params.is_valid() {
                params.stored_scale(format)
            } else {
                1.0
            }
        })
        .collect()
}

/// `quantize(w, scale of w's channel)` over `data`, channels along `axis`.
fn per_channel_map<T>(
    data: &[f32],
    shape: &[usize],
    axis: usize,
    scales: &[f32],
    quantize: impl Fn(f32, f32) -> T,
) -> Vec<T> {
    let inner: usize = shape[axis + 1..].iter().product();
    let mut q = Vec::with_capacity(data.len());
    for (k, row) in data.chunks(inner.max(1)).enumerate() {
        let scale = scales[k % scales.len()];
        q.extend(row.iter().map(|&v| quantize(v, scale)));
    }
    q
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
    fn fp8_weights_take_amax_over_448_per_channel() {
        // Channel 0: max 4.48 -> scale 4.48 / 448 (about 0.01); -1.0 lands near -100,
        // between the E4M3 values -96 and -104. Channel 1 all zero.
        let (q, s) = quantize_weights(
            &[4.48, -1.0, 0.0, 0.0],
            &[2, 2],
            0,
            QuantGrid::Fp8E4M3,
            ScaleFormat::F32,
        );
        assert_eq!(s, vec![4.48f32 / 448.0, 1.0]);
        let TensorData::F8E4M3(q) = q else {
            panic!("not fp8")
        };
        let values: Vec<f32> = q.iter().map(|v| v.to_f32()).collect();
        assert_eq!(values[0], 448.0);
        assert_eq!(values[1], F8E4M3::from_f32(-1.0 / s[0]).to_f32());
        assert!(values[1] == -96.0 || values[1] == -104.0, "{}", values[1]);
        assert_eq!(values[2..], [0.0, 0.0]);
        // The INT8 grid through the same entry point equals quantize_per_channel.
        let (i8q, i8s) =
            quantize_weights(&[1.0, -3.0], &[1, 2], 0, QuantGrid::Int8, ScaleFormat::F32);
        assert_eq!(
            (i8q, i8s),
            (TensorData::I8(vec![42, -127]), vec![3.0 / 127.0])
        );
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
