//! QuantizeLinear, DequantizeLinear (per-tensor, per-axis and blocked; 4-, 8-, 16- and
//! 32-bit integers and FP8 E4M3) and DynamicQuantizeLinear. Quantization rounds half
//! to even and saturates (INT4 to [-8, 7]); the zero point's type (else the
//! `output_dtype` attribute) decides the quantized type (uint8 when absent). FP8
//! follows the `saturate` attribute: out-of-range values clamp to ±448, or become NaN
//! with `saturate=0`.

use crate::ctx::OpCtx;
use crate::elem::{with_numeric, Elem};
use crate::float::{f32_view, from_f32};
use crate::fp8::{f8_from_f32, f8_to_f32};
use crate::par::{self, PIECE};
use crate::registry::Kernel;
use crate::simd::multiversioned;
use crate::ExecError;
use rtq_ir::{DType, Tensor, TensorData, F8E4M3};
use std::mem::MaybeUninit;

/// Quantization kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("QuantizeLinear", quantize_linear),
    ("DequantizeLinear", dequantize_linear),
    ("DynamicQuantizeLinear", dynamic_quantize_linear),
];

/// How scale (and zero point) elements map onto the data.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Granularity {
    /// One scale for the whole tensor.
    Tensor,
    /// One scale per index of the axis: (outer, axis extent, inner).
    Axis {
        outer: usize,
        dim: usize,
        inner: usize,
    },
    /// One scale per block of `block` indices along the axis.
    Block {
        outer: usize,
        dim: usize,
        inner: usize,
        block: usize,
        sdim: usize,
    },
}

impl Granularity {
    /// Calls `f(range, scale_index_of_first, scale_step)` for consecutive runs of
    /// elements: within a run, element `k` uses scale `first + k * step` (`step` is 0
    /// or 1).
    fn for_each_run(&self, len: usize, mut f: impl FnMut(std::ops::Range<usize>, usize, usize)) {
        match *self {
            Granularity::Tensor => f(0..len, 0, 0),
            Granularity::Axis { outer, dim, inner } => {
                for o in 0..outer {
                    for a in 0..dim {
                        let start = (o * dim + a) * inner;
                        f(start..start + inner, a, 0);
                    }
                }
            }
            Granularity::Block {
                outer,
                dim,
                inner: 1,
                block,
                sdim,
            } => {
                // Blocks along the last axis: each block is one run of one scale.
                for o in 0..outer {
                    for b in 0..sdim {
                        let start = o * dim + b * block;
                        let end = (start + block).min((o + 1) * dim);
                        f(start..end, o * sdim + b, 0);
                    }
                }
            }
            Granularity::Block {
                outer,
                dim,
                inner,
                block,
                sdim,
            } => {
                for o in 0..outer {
                    for a in 0..dim {
                        let start = (o * dim + a) * inner;
                        f(start..start + inner, (o * sdim + a / block) * inner, 1);
                    }
                }
            }
        }
    }
}

/// Works out how `scale` (shape) applies to `x` (shape) from `axis` and `block_size`.
fn granularity(ctx: &OpCtx<'_>, x: &[usize], scale: &[usize]) -> Result<Granularity, ExecError> {
    let block = ctx.attr_int("block_size", 0)?;
    let count: usize = scale.iter().product();
    if block <= 0 && count == 1 && scale.len() <= 1 {
        return Ok(Granularity::Tensor);
    }
    let axis = ctx.axis(ctx.attr_int("axis", 1)?, x.len())?;
    let (outer, dim, inner) = (
        x[..axis].iter().product::<usize>(),
        x[axis],
        x[axis + 1..].iter().product::<usize>(),
    );
    if block > 0 {
        let block = block as usize;
        let ok = scale.len() == x.len()
            && (0..x.len()).all(|a| {
                if a == axis {
                    scale[a] == x[a].div_ceil(block)
                } else {
                    scale[a] == x[a]
                }
            });
        if !ok {
            return Err(ctx.err(format!(
                "scale of shape {scale:?} does not fit data {x:?} with block_size={block} on axis {axis}"
            )));
        }
        return Ok(Granularity::Block {
            outer,
            dim,
            inner,
            block,
            sdim: scale[axis],
        });
    }
    if scale.len() != 1 || scale[0] != dim {
        return Err(ctx.err(format!(
            "scale of shape {scale:?} is neither a scalar nor a 1-D tensor of the {dim} indices of axis {axis} (data {x:?})"
        )));
    }
    Ok(Granularity::Axis { outer, dim, inner })
}

fn check_zero_point(ctx: &OpCtx<'_>, scale: &Tensor, zp: Option<&Tensor>) -> Result<(), ExecError> {
    if let Some(z) = zp {
        if z.len() != scale.len() {
            return Err(ctx.err(format!(
                "zero point of shape {:?} does not match scale of shape {:?}",
                z.shape(),
                scale.shape()
            )));
        }
    }
    Ok(())
}

/// `2^23 + 2^22`: adding and subtracting it rounds an f32 of magnitude below `2^22` to
/// an integer, half to even (the FPU's default rounding), in code that vectorizes on
/// any x86-64 (`round_ties_even` is a library call without SSE4.1).
const ROUNDER: f32 = 12_582_912.0;

/// The 8-bit code, as an f32, that QuantizeLinear gives `v` with scale `s` and zero
/// point `z`; `lo` and `hi` are the type's bounds minus `z`. Clamping to integral
/// bounds before rounding gives the rounded value clamped. NaN gives 0 (as
/// `quantize_typed`'s conversion does); every other value gives an integer inside the
/// 8-bit range, so converting it is exact and needs no saturation checks (which would
/// keep the loops calling this scalar).
#[inline(always)]
pub(crate) fn level_8bit(v: f32, s: f32, z: f32, (lo, hi): (f32, f32)) -> f32 {
    let r = (((v / s).clamp(lo, hi) + ROUNDER) - ROUNDER) + z;
    if r.is_nan() {
        0.0
    } else {
        r
    }
}

/// Per-tensor QuantizeLinear of `x` into `out`, as the QuantizeLinear kernel computes
/// it: int8 or uint8 (`unsigned`; `cast` narrows an in-range i32), zero point `zero`;
/// every element of `out` is written.
pub(crate) fn quantize_8bit_tensor<T: Copy>(
    x: &[f32],
    scale: f32,
    zero: f32,
    unsigned: bool,
    out: &mut [std::mem::MaybeUninit<T>],
    cast: impl Fn(i32) -> T,
) {
    quantize_8bit_mapped(x, |v| v, (scale, zero, unsigned), out, cast)
}

/// [`quantize_8bit_tensor`] of `pre(v)` for every `v` of `x`, in one pass (`pre`
/// inlined into the quantization's loop, computed in registers): the same values as
/// `pre` applied to the whole of `x` first.
pub(crate) fn quantize_8bit_mapped<T: Copy>(
    x: &[f32],
    pre: impl Fn(f32) -> f32,
    (scale, zero, unsigned): (f32, f32, bool),
    out: &mut [std::mem::MaybeUninit<T>],
    cast: impl Fn(i32) -> T,
) {
    assert_eq!(x.len(), out.len(), "quantized output size");
    let (lo, hi) = if unsigned {
        (0.0, 255.0)
    } else {
        (-128.0, 127.0)
    };
    wide::quantize_into(out, x, (pre, scale, zero), (lo - zero, hi - zero), cast);
}

/// Quantizes `x` into 8-bit integers (`lo..=hi` the type's range; `cast` narrows an
/// in-range i32): the same values as [`quantize_typed`], faster.
fn quantize_8bit<T: Copy + Default + Send>(
    x: &[f32],
    scale: &[f32],
    zp: &[f64],
    g: &Granularity,
    (lo, hi): (f32, f32),
    cast: impl Fn(i32) -> T + Copy + Sync + Send,
) -> Vec<T> {
    if *g == Granularity::Tensor {
        // One scale: a single pass, in the widest vectors the CPU has, in pieces
        // spread over threads for big tensors.
        let (s, z) = (scale[0], zp[0] as f32);
        return par::written(x.len(), PIECE, x.len(), |i, dst| {
            let src = &x[i * PIECE..][..dst.len()];
            wide::quantize_into(dst, src, (|v| v, s, z), (lo - z, hi - z), cast);
        });
    }
    let mut out = crate::arena::filled(x.len(), T::default());
    g.for_each_run(x.len(), |range, s0, step| {
        for (k, i) in range.enumerate() {
            let si = s0 + k * step;
            let z = zp[si] as f32;
            let r = ((x[i] / scale[si]).clamp(lo - z, hi - z) + ROUNDER) - ROUNDER;
            // NaN stays NaN through the clamp and converts to 0.
            out[i] = cast((r + z) as i32);
        }
    });
    out
}

/// The per-tensor quantization loop, compiled for AVX-512 and AVX2 besides the
/// baseline and chosen at run time.
mod wide {
    use std::mem::MaybeUninit;

    /// Writes `round(clamp(pre(v) / s, lo, hi)) + z` of every `v` of `x`, cast, to
    /// `out` (as long as `x`).
    #[inline(always)]
    fn body<T>(
        out: &mut [MaybeUninit<T>],
        x: &[f32],
        (pre, s, z): (impl Fn(f32) -> f32, f32, f32),
        (lo, hi): (f32, f32),
        cast: impl Fn(i32) -> T,
    ) {
        for (d, &v) in out.iter_mut().zip(x) {
            let r = super::level_8bit(pre(v), s, z, (lo, hi));
            // SAFETY: `r` is an integer within the 8-bit range (see `level_8bit`).
            d.write(cast(unsafe { r.to_int_unchecked::<i32>() }));
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn avx512<T>(
        out: &mut [MaybeUninit<T>],
        x: &[f32],
        terms: (impl Fn(f32) -> f32, f32, f32),
        b: (f32, f32),
        cast: impl Fn(i32) -> T,
    ) {
        body(out, x, terms, b, cast)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn avx2<T>(
        out: &mut [MaybeUninit<T>],
        x: &[f32],
        terms: (impl Fn(f32) -> f32, f32, f32),
        b: (f32, f32),
        cast: impl Fn(i32) -> T,
    ) {
        body(out, x, terms, b, cast)
    }

    /// [`body`] in the best instruction set available.
    pub(super) fn quantize_into<T>(
        out: &mut [MaybeUninit<T>],
        x: &[f32],
        terms: (impl Fn(f32) -> f32, f32, f32),
        bounds: (f32, f32),
        cast: impl Fn(i32) -> T,
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                // SAFETY: the features were just detected.
                return unsafe { avx512(out, x, terms, bounds, cast) };
            }
            if is_x86_feature_detected!("avx2") {
                // SAFETY: as above.
                return unsafe { avx2(out, x, terms, bounds, cast) };
            }
        }
        body(out, x, terms, bounds, cast)
    }
}

/// Quantizes `x` into integer type `T`.
fn quantize_typed<T: Elem>(x: &[f32], scale: &[f32], zp: &[f64], g: &Granularity) -> Vec<T> {
    let (lo, hi) = (T::lowest().to_f64() as f32, T::highest().to_f64() as f32);
    let mut out = vec![T::zero(); x.len()];
    g.for_each_run(x.len(), |range, s0, step| {
        for (k, i) in range.enumerate() {
            let si = s0 + k * step;
            let q = (x[i] / scale[si]).round_ties_even() + zp[si] as f32;
            out[i] = T::from_f64(q.clamp(lo, hi) as f64);
        }
    });
    out
}

/// Quantizes `x` into FP8 E4M3: `x / scale + zero_point`, rounded to nearest even,
/// out of range saturating to ±448 or (without `saturate`) becoming NaN. A zero zero
/// point is not added, so `-0.0` keeps its sign as in onnxruntime (which requires FP8
/// zero points to be zero and ignores them).
fn quantize_fp8(
    x: &[f32],
    scale: &[f32],
    zp: &[f64],
    g: &Granularity,
    saturate: bool,
) -> Vec<F8E4M3> {
    let mut out = vec![F8E4M3::ZERO; x.len()];
    g.for_each_run(x.len(), |range, s0, step| {
        for (k, i) in range.enumerate() {
            let si = s0 + k * step;
            let (v, z) = (x[i] / scale[si], zp[si] as f32);
            out[i] = f8_from_f32(if z == 0.0 { v } else { v + z }, saturate);
        }
    });
    out
}

fn quantize_linear(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let scale_t = ctx.input(1)?;
    let zp_t = ctx.opt_input(2);
    check_zero_point(ctx, scale_t, zp_t)?;
    let xs = match f32_view(x) {
        Some(v) => v,
        None if x.dtype() == DType::I32 => std::borrow::Cow::Owned(x.to_f32_vec()),
        None => return Err(ctx.err(format!("cannot quantize {} data", x.dtype()))),
    };
    let scale = ctx.float_input(1)?;
    let out_type = match (zp_t, ctx.attr_int("output_dtype", 0)?) {
        (Some(z), _) => z.dtype(),
        (None, 0) => DType::U8,
        (None, code) => i32::try_from(code)
            .ok()
            .and_then(DType::from_onnx_code)
            .ok_or_else(|| ctx.err(format!("unsupported output_dtype {code}")))?,
    };
    let zp: Vec<f64> = match zp_t {
        Some(z) => (0..z.len()).map(|i| z.data().get_f64(i)).collect(),
        None => vec![0.0; scale.len()],
    };
    let g = granularity(ctx, x.shape(), scale_t.shape())?;
    let template = TensorData::zeros(out_type, 0);
    let data = match out_type {
        // NaN is not clamped: it converts to 0, as `quantize_typed`'s conversion does.
        DType::I8 => TensorData::I8(quantize_8bit(&xs, &scale, &zp, &g, (-128.0, 127.0), |v| {
            v as i8
        })),
        DType::U8 => TensorData::U8(quantize_8bit(&xs, &scale, &zp, &g, (0.0, 255.0), |v| {
            v as u8
        })),
        DType::I4 => TensorData::I4(quantize_8bit(&xs, &scale, &zp, &g, (-8.0, 7.0), |v| {
            v as i8
        })),
        DType::U16 | DType::I16 | DType::I32 => {
            with_numeric!(&template, T, _v => T::wrap(quantize_typed::<T>(&xs, &scale, &zp, &g)),
                _ => unreachable!("integer types listed above"))
        }
        DType::F8E4M3 => {
            let saturate = ctx.attr_int("saturate", 1)? != 0;
            TensorData::F8E4M3(quantize_fp8(&xs, &scale, &zp, &g, saturate))
        }
        other => return Err(ctx.err(format!("cannot quantize to {other}"))),
    };
    Ok(vec![ctx.tensor(x.shape().to_vec(), data)?])
}

/// Dequantizes integer data `q` with the given scales and zero points.
fn dequantize_typed<T: Elem>(q: &[T], scale: &[f32], zp: &[i64], g: &Granularity) -> Vec<f32> {
    let mut out = vec![0.0f32; q.len()];
    g.for_each_run(q.len(), |range, s0, step| {
        for (k, i) in range.enumerate() {
            let si = s0 + k * step;
            // Wrapping: only 64-bit data (which ONNX does not dequantize) can overflow.
            out[i] = q[i].to_i64().wrapping_sub(zp[si]) as f32 * scale[si];
        }
    });
    out
}

/// Dequantizes 8-bit (and INT4) data (`widen` to i32): the same values as
/// [`dequantize_typed`].
fn dequantize_8bit<T: Copy>(
    q: &[T],
    scale: &[f32],
    zp: &[i64],
    g: &Granularity,
    widen: impl Fn(T) -> i32 + Copy,
) -> Vec<f32> {
    let mut out = vec![0.0f32; q.len()];
    g.for_each_run(q.len(), |range, s0, step| {
        if step != 0 {
            // A run of consecutive scales (blocked, inner axes): zipped, so it vectorizes.
            let n = range.len();
            let (s, z) = (&scale[s0..s0 + n], &zp[s0..s0 + n]);
            let lanes = out[range.clone()]
                .iter_mut()
                .zip(&q[range])
                .zip(s.iter().zip(z));
            for ((o, &v), (&s, &z)) in lanes {
                *o = (widen(v) - z as i32) as f32 * s;
            }
            return;
        }
        let (s, z) = (scale[s0], zp[s0] as i32);
        for (o, &v) in out[range.clone()].iter_mut().zip(&q[range]) {
            *o = (widen(v) - z) as f32 * s;
        }
    });
    out
}

/// Per-tensor dequantization of 8-bit data by `piece` (one of the multiversioned loops
/// below), in parallel for big tensors: the same values as [`dequantize_8bit`].
fn dequantize_tensor<T: Sync>(
    q: &[T],
    s: f32,
    z: i32,
    piece: fn(&[T], &mut [MaybeUninit<f32>], i32, f32),
) -> Vec<f32> {
    par::written(q.len(), PIECE, q.len(), |i, dst| {
        piece(&q[i * PIECE..][..dst.len()], dst, z, s)
    })
}

multiversioned! {
    /// `dst[i] = (src[i] - z) as f32 * s` for INT8 data.
    fn dequantize_i8(src: &[i8], dst: &mut [MaybeUninit<f32>], z: i32, s: f32)
        => dequantize_run::<i8>
}

multiversioned! {
    /// `dst[i] = (src[i] - z) as f32 * s` for UINT8 data.
    fn dequantize_u8(src: &[u8], dst: &mut [MaybeUninit<f32>], z: i32, s: f32)
        => dequantize_run::<u8>
}

/// The loop of [`dequantize_i8`] and [`dequantize_u8`].
#[inline(always)]
fn dequantize_run<T: Copy + Into<i32>>(src: &[T], dst: &mut [MaybeUninit<f32>], z: i32, s: f32) {
    for (d, &v) in dst.iter_mut().zip(src) {
        d.write((v.into() - z) as f32 * s);
    }
}

/// Dequantizes FP8 data: `(q - zero_point) * scale` in f32 (a zero zero point is not
/// subtracted, so `-0.0` keeps its sign).
fn dequantize_fp8(q: &[F8E4M3], scale: &[f32], zp: &[f32], g: &Granularity) -> Vec<f32> {
    let mut out = vec![0.0f32; q.len()];
    g.for_each_run(q.len(), |range, s0, step| {
        for (k, i) in range.enumerate() {
            let si = s0 + k * step;
            let (v, z) = (f8_to_f32(q[i]), zp[si]);
            out[i] = if z == 0.0 { v } else { v - z } * scale[si];
        }
    });
    out
}

fn dequantize_linear(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let scale_t = ctx.input(1)?;
    let zp_t = ctx.opt_input(2);
    check_zero_point(ctx, scale_t, zp_t)?;
    if let Some(z) = zp_t {
        if z.dtype() != x.dtype() {
            return Err(ctx.err(format!(
                "zero point type {} differs from data type {}",
                z.dtype(),
                x.dtype()
            )));
        }
    }
    let out_type = ctx.float_dtype(1)?;
    let scale = ctx.float_input(1)?;
    let g = granularity(ctx, x.shape(), scale_t.shape())?;
    if let TensorData::F8E4M3(v) = x.data() {
        let zp = match zp_t {
            Some(z) => z.to_f32_vec(),
            None => vec![0.0; scale.len()],
        };
        let out = dequantize_fp8(v, &scale, &zp, &g);
        return Ok(vec![
            ctx.tensor(x.shape().to_vec(), from_f32(out_type, out))?
        ]);
    }
    let zp: Vec<i64> = match zp_t {
        Some(z) => z.to_i64_vec(),
        None => vec![0; scale.len()],
    };
    let out = match x.data() {
        // 8-bit data: through i32, exact like the i64 path, and vectorizable.
        TensorData::I8(v) if g == Granularity::Tensor => {
            dequantize_tensor(v, scale[0], zp[0] as i32, dequantize_i8)
        }
        TensorData::U8(v) if g == Granularity::Tensor => {
            dequantize_tensor(v, scale[0], zp[0] as i32, dequantize_u8)
        }
        TensorData::I8(v) => dequantize_8bit(v, &scale, &zp, &g, i32::from),
        TensorData::U8(v) => dequantize_8bit(v, &scale, &zp, &g, i32::from),
        TensorData::I4(v) => dequantize_8bit(v, &scale, &zp, &g, i32::from),
        TensorData::F32(_) | TensorData::F16(_) | TensorData::BF16(_) | TensorData::F64(_) => {
            return Err(ctx.err(format!("cannot dequantize {} data", x.dtype())))
        }
        d => with_numeric!(d, T, v => dequantize_typed::<T>(v, &scale, &zp, &g),
            _ => return Err(ctx.err(format!("cannot dequantize {} data", x.dtype())))),
    };
    Ok(vec![
        ctx.tensor(x.shape().to_vec(), from_f32(out_type, out))?
    ])
}

fn dynamic_quantize_linear(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let v = ctx.float_input(0)?;
    let lo = v.iter().copied().fold(0.0f32, f32::min);
    let hi = v.iter().copied().fold(0.0f32, f32::max);
    let scale = if hi == lo { 1.0 } else { (hi - lo) / 255.0 };
    let zp = (-lo / scale).round_ties_even().clamp(0.0, 255.0);
    let q: Vec<u8> = v
        .iter()
        .map(|&a| ((a / scale).round_ties_even() + zp).clamp(0.0, 255.0) as u8)
        .collect();
    Ok(vec![
        ctx.tensor(x.shape().to_vec(), TensorData::U8(q))?,
        Tensor::scalar_f32(scale),
        ctx.tensor(vec![], TensorData::U8(vec![zp as u8]))?,
    ])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use half::f16;
    use rtq_ir::{Attr, DType, Tensor, TensorData};
    use rtq_test_support::node;

    fn q(attrs: &[(&str, Attr)], x: &Tensor, s: &Tensor, z: Option<&Tensor>) -> Tensor {
        eval_node(&node("QuantizeLinear", attrs, 1), &[Some(x), Some(s), z])
            .unwrap()
            .remove(0)
    }

    fn dq(attrs: &[(&str, Attr)], x: &Tensor, s: &Tensor, z: Option<&Tensor>) -> Tensor {
        eval_node(&node("DequantizeLinear", attrs, 1), &[Some(x), Some(s), z])
            .unwrap()
            .remove(0)
    }

    #[test]
    fn per_tensor_rounds_half_to_even_and_saturates() {
        let x = Tensor::from_f32(vec![6], vec![0.5, 1.5, 2.5, -0.5, 1000.0, -1000.0]);
        let s = Tensor::scalar_f32(1.0);
        let y = q(&[], &x, &s, None);
        assert_eq!(y.data(), &TensorData::U8(vec![0, 2, 2, 0, 255, 0]));
        let z = Tensor::new(vec![], TensorData::I8(vec![1])).unwrap();
        let y = q(&[], &x, &s, Some(&z));
        assert_eq!(y.data(), &TensorData::I8(vec![1, 3, 3, 1, 127, -128]));
        let back = dq(&[], &y, &s, Some(&z));
        assert_eq!(back.as_f32().unwrap(), &[0.0, 2.0, 2.0, 0.0, 126.0, -129.0]);
    }

    #[test]
    fn per_axis_quantize_and_dequantize() {
        // Weights [2 out-channels, 3]: channel scales 0.5 and 2, axis 0.
        let w = Tensor::from_f32(vec![2, 3], vec![0.25, 0.75, -1.0, 3.0, 5.0, -300.0]);
        let s = Tensor::from_f32(vec![2], vec![0.5, 2.0]);
        let z = Tensor::new(vec![2], TensorData::I8(vec![0, 0])).unwrap();
        let axis = [("axis", Attr::Int(0))];
        let y = q(&axis, &w, &s, Some(&z));
        // 0.5 -> 0 (even), 1.5 -> 2, -2 ; 1.5 -> 2, 2.5 -> 2, -150 -> -128
        assert_eq!(y.data(), &TensorData::I8(vec![0, 2, -2, 2, 2, -128]));
        let back = dq(&axis, &y, &s, Some(&z));
        assert_eq!(back.as_f32().unwrap(), &[0.0, 1.0, -1.0, 4.0, 4.0, -256.0]);
        // Axis 1 (default) on NCHW-like data with per-channel uint8 zero points.
        let x = Tensor::from_f32(vec![1, 2, 2], vec![0.0, 1.0, 0.0, 1.0]);
        let s = Tensor::from_f32(vec![2], vec![1.0, 0.5]);
        let z = Tensor::new(vec![2], TensorData::U8(vec![10, 20])).unwrap();
        let y = q(&[], &x, &s, Some(&z));
        assert_eq!(y.data(), &TensorData::U8(vec![10, 11, 20, 22]));
        let bad = Tensor::from_f32(vec![3], vec![1.0; 3]);
        assert!(eval_node(&node("QuantizeLinear", &[], 1), &[Some(&x), Some(&bad)]).is_err());
    }

    #[test]
    fn dequantize_int32_bias_and_f16_scale() {
        let b = Tensor::new(vec![3], TensorData::I32(vec![-1000, 0, 70000])).unwrap();
        let s = Tensor::from_f32(vec![3], vec![0.001, 1.0, 0.5]);
        let y = dq(&[("axis", Attr::Int(0))], &b, &s, None);
        let v = y.as_f32().unwrap();
        assert!((v[0] + 1.0).abs() < 1e-6 && v[1] == 0.0 && v[2] == 35000.0);
        let s16 = Tensor::new(vec![], TensorData::F16(vec![f16::from_f32(0.1)])).unwrap();
        let x = Tensor::new(vec![2], TensorData::U8(vec![0, 30])).unwrap();
        let y = dq(&[], &x, &s16, None);
        assert_eq!(y.dtype(), DType::F16);
        assert_eq!(
            y.to_f32_vec()[1],
            f16::from_f32(30.0 * f16::from_f32(0.1).to_f32()).to_f32()
        );
    }

    #[test]
    fn blocked_quantization() {
        // 1x4 data, blocks of 2 along axis 1 -> scale shape [1, 2].
        let x = Tensor::from_f32(vec![1, 4], vec![1.0, 2.0, 30.0, 40.0]);
        let s = Tensor::from_f32(vec![1, 2], vec![1.0, 10.0]);
        let z = Tensor::new(vec![1, 2], TensorData::I8(vec![0, 0])).unwrap();
        let attrs = [("axis", Attr::Int(1)), ("block_size", Attr::Int(2))];
        let y = q(&attrs, &x, &s, Some(&z));
        assert_eq!(y.data(), &TensorData::I8(vec![1, 2, 3, 4]));
        assert_eq!(
            dq(&attrs, &y, &s, Some(&z)).as_f32().unwrap(),
            &[1.0, 2.0, 30.0, 40.0]
        );
    }

    #[test]
    fn dynamic_quantization_matches_onnxruntime_values() {
        let x = Tensor::from_f32(vec![3], vec![-1.0, 0.5, 2.0]);
        let out = eval_node(&node("DynamicQuantizeLinear", &[], 3), &[Some(&x)]).unwrap();
        assert_eq!(out[0].data(), &TensorData::U8(vec![0, 127, 255]));
        assert!((out[1].as_f32().unwrap()[0] - 3.0 / 255.0).abs() < 1e-9);
        assert_eq!(out[2].data(), &TensorData::U8(vec![85]));
        let zeros = Tensor::from_f32(vec![2], vec![0.0, 0.0]);
        let out = eval_node(&node("DynamicQuantizeLinear", &[], 3), &[Some(&zeros)]).unwrap();
        assert_eq!(out[1].as_f32().unwrap(), &[1.0]);
    }
}

#[cfg(test)]
mod fp8_tests {
    use crate::eval_node;
    use half::f16;
    use rtq_ir::{Attr, DType, Tensor, TensorData, F8E4M3};
    use rtq_test_support::node;

    fn f8(bits: &[u8]) -> Tensor {
        let v = bits.iter().map(|&b| F8E4M3::from_bits(b)).collect();
        Tensor::new(vec![bits.len()], TensorData::F8E4M3(v)).unwrap()
    }

    fn f8_zero(n: usize) -> Tensor {
        let t = f8(&vec![0; n]);
        if n == 1 {
            t.reshaped(vec![]).unwrap()
        } else {
            t
        }
    }

    fn codes(t: &Tensor) -> Vec<u8> {
        match t.data() {
            TensorData::F8E4M3(v) => v.iter().map(F8E4M3::to_bits).collect(),
            other => panic!("not FP8: {other:?}"),
        }
    }

    fn bits(t: &Tensor) -> Vec<u32> {
        t.as_f32().unwrap().iter().map(|v| v.to_bits()).collect()
    }

    fn run(op: &str, attrs: &[(&str, Attr)], ins: &[Option<&Tensor>]) -> Tensor {
        eval_node(&node(op, attrs, 1), ins).unwrap().remove(0)
    }

    /// Edge cases with scale 1: what saturate=1 and saturate=0 make of them.
    fn edge_cases() -> Vec<(f32, u8, u8)> {
        let p = |k: i32| 2f32.powi(k);
        vec![
            (448.0, 0x7E, 0x7E),
            (-448.0, 0xFE, 0xFE),
            // Tie between 448 and the missing 480: even, 448.
            (464.0, 0x7E, 0x7E),
            (480.0, 0x7E, 0x7F),
            (1e6, 0x7E, 0x7F),
            (-1e6, 0xFE, 0xFF),
            (f32::INFINITY, 0x7E, 0x7F),
            (f32::NEG_INFINITY, 0xFE, 0xFF),
            (f32::NAN, 0x7F, 0x7F),
            // Smallest subnormal, and half of it (a tie with zero: even, zero).
            (p(-9), 0x01, 0x01),
            (p(-10), 0x00, 0x00),
            (-p(-10), 0x80, 0x80),
            (3.0 * p(-10), 0x02, 0x02),
            (-0.0, 0x80, 0x80),
            // Ties between 1 and 1.125 (to 1.0) and 1.125 and 1.25 (to 1.25).
            (1.0625, 0x38, 0x38),
            (1.1875, 0x3A, 0x3A),
            (-1.1875, 0xBA, 0xBA),
        ]
    }

    #[test]
    fn quantize_per_tensor_edge_cases_both_saturation_modes() {
        let cases = edge_cases();
        let xs: Vec<f32> = cases.iter().map(|c| c.0).collect();
        let x = Tensor::from_f32(vec![xs.len()], xs);
        let s = Tensor::scalar_f32(1.0);
        let z = f8_zero(1);
        let y = run("QuantizeLinear", &[], &[Some(&x), Some(&s), Some(&z)]);
        assert_eq!(y.dtype(), DType::F8E4M3);
        assert_eq!(codes(&y), cases.iter().map(|c| c.1).collect::<Vec<_>>());
        let y = run(
            "QuantizeLinear",
            &[("saturate", Attr::Int(0))],
            &[Some(&x), Some(&s), Some(&z)],
        );
        assert_eq!(codes(&y), cases.iter().map(|c| c.2).collect::<Vec<_>>());
    }

    #[test]
    fn quantize_divides_by_the_scale_in_f32_then_rounds_once() {
        let x = Tensor::from_f32(vec![3], vec![0.3, 100.0, 2000.0]);
        let s = Tensor::scalar_f32(0.1);
        let y = run(
            "QuantizeLinear",
            &[],
            &[Some(&x), Some(&s), Some(&f8_zero(1))],
        );
        let want: Vec<u8> = [0.3f32 / 0.1, 100.0 / 0.1, 2000.0 / 0.1]
            .iter()
            .map(|&v| F8E4M3::from_f32(v).to_bits())
            .collect();
        assert_eq!(codes(&y), want);
        assert_eq!(codes(&y), vec![0x44, 0x7E, 0x7E]);
    }

    #[test]
    fn quantize_per_axis_and_output_dtype() {
        // Rows scaled by 0.5 and 4 (axis 0).
        let x = Tensor::from_f32(vec![2, 2], vec![1.0, -300.0, 8.0, 2000.0]);
        let s = Tensor::from_f32(vec![2], vec![0.5, 4.0]);
        let z = f8_zero(2);
        let axis = ("axis", Attr::Int(0));
        let y = run(
            "QuantizeLinear",
            std::slice::from_ref(&axis),
            &[Some(&x), Some(&s), Some(&z)],
        );
        assert_eq!(codes(&y), vec![0x40, 0xFE, 0x40, 0x7E]);
        assert_eq!(y.shape(), &[2, 2]);
        let nosat = [axis.clone(), ("saturate", Attr::Int(0))];
        let y = run("QuantizeLinear", &nosat, &[Some(&x), Some(&s), Some(&z)]);
        assert_eq!(codes(&y), vec![0x40, 0xFF, 0x40, 0x7F]);
        // Opset 21: no zero point, the type from `output_dtype`.
        let attrs = [axis, ("output_dtype", Attr::Int(17))];
        let y = run("QuantizeLinear", &attrs, &[Some(&x), Some(&s), None]);
        assert_eq!(codes(&y), vec![0x40, 0xFE, 0x40, 0x7E]);
    }

    #[test]
    fn quantize_f16_input_and_scale() {
        let h = |v: f32| f16::from_f32(v);
        let x = Tensor::new(vec![2], TensorData::F16(vec![h(3.0), h(-1000.0)])).unwrap();
        let s = Tensor::new(vec![], TensorData::F16(vec![h(2.0)])).unwrap();
        let y = run(
            "QuantizeLinear",
            &[],
            &[Some(&x), Some(&s), Some(&f8_zero(1))],
        );
        assert_eq!(codes(&y), vec![0x3C, 0xFE]);
    }

    #[test]
    fn nonzero_zero_points_shift_values() {
        let x = Tensor::from_f32(vec![2], vec![0.5, -0.0]);
        let s = Tensor::scalar_f32(1.0);
        let z = f8(&[0x38]).reshaped(vec![]).unwrap(); // 1.0
        let y = run("QuantizeLinear", &[], &[Some(&x), Some(&s), Some(&z)]);
        assert_eq!(codes(&y), vec![0x3C, 0x38]);
        let back = run("DequantizeLinear", &[], &[Some(&y), Some(&s), Some(&z)]);
        assert_eq!(back.as_f32().unwrap(), &[0.5, 0.0]);
    }

    #[test]
    fn dequantize_edge_codes() {
        let q = f8(&[0x7E, 0xFE, 0x01, 0x80, 0x00, 0x7F, 0xFF, 0x38]);
        let s = Tensor::scalar_f32(2.0);
        let y = run(
            "DequantizeLinear",
            &[],
            &[Some(&q), Some(&s), Some(&f8_zero(1))],
        );
        let want = [
            896.0f32,
            -896.0,
            2f32.powi(-8),
            -0.0,
            0.0,
            f32::from_bits(0x7FC0_0000),
            f32::from_bits(0xFFC0_0000),
            2.0,
        ];
        assert_eq!(
            bits(&y),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        // Without a zero point, the same.
        let y2 = run("DequantizeLinear", &[], &[Some(&q), Some(&s), None]);
        assert_eq!(bits(&y2), bits(&y));
    }

    #[test]
    fn dequantize_per_axis_with_f16_scales() {
        let q = f8(&[0x38, 0x40, 0x38, 0x40]).reshaped(vec![2, 2]).unwrap(); // 1, 2; 1, 2
        let h = |v: f32| f16::from_f32(v);
        let s = Tensor::new(vec![2], TensorData::F16(vec![h(0.1), h(3.0)])).unwrap();
        let y = run(
            "DequantizeLinear",
            &[("axis", Attr::Int(1))],
            &[Some(&q), Some(&s)],
        );
        assert_eq!(y.dtype(), DType::F16);
        let s01 = h(0.1).to_f32();
        assert_eq!(
            y.to_f32_vec(),
            vec![s01, 6.0, s01, 6.0]
                .into_iter()
                .map(|v| h(v).to_f32())
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn every_code_survives_dequantize_then_quantize() {
        let all: Vec<u8> = (0..=255).collect();
        let q = f8(&all);
        let s = Tensor::scalar_f32(1.0);
        let z = f8_zero(1);
        let x = run("DequantizeLinear", &[], &[Some(&q), Some(&s), Some(&z)]);
        for sat in [0, 1] {
            let attrs = [("saturate", Attr::Int(sat))];
            let back = run("QuantizeLinear", &attrs, &[Some(&x), Some(&s), Some(&z)]);
            assert_eq!(codes(&back), all);
        }
    }

    #[test]
    fn fp8_zero_point_type_must_match_data() {
        let q = f8(&[0x38]);
        let z = Tensor::new(vec![], TensorData::I8(vec![0])).unwrap();
        let s = Tensor::scalar_f32(1.0);
        let e = eval_node(
            &node("DequantizeLinear", &[], 1),
            &[Some(&q), Some(&s), Some(&z)],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("differs"), "{e}");
    }
}

#[cfg(test)]
mod int4_tests {
    use crate::eval_node;
    use rtq_ir::{Attr, DType, Tensor, TensorData};
    use rtq_test_support::node;

    fn int4(shape: &[usize], values: &[i8]) -> Tensor {
        Tensor::new(shape.to_vec(), TensorData::I4(values.to_vec())).unwrap()
    }

    fn values(t: &Tensor) -> Vec<i8> {
        match t.data() {
            TensorData::I4(v) => v.clone(),
            other => panic!("not INT4: {other:?}"),
        }
    }

    fn run(op: &str, attrs: &[(&str, Attr)], ins: &[Option<&Tensor>]) -> Tensor {
        eval_node(&node(op, attrs, 1), ins).unwrap().remove(0)
    }

    /// Seeded INT4 values covering the range.
    fn pattern(n: usize, seed: usize) -> Vec<i8> {
        (0..n)
            .map(|i| ((i * 7 + seed * 3) % 16) as i8 - 8)
            .collect()
    }

    /// Blocked dequantization written out index by index: element `idx` uses the
    /// scale at `idx` with the axis coordinate divided by `block`.
    fn blocked_reference(
        shape: &[usize],
        q: &[i8],
        scale: &[f32],
        zp: &[i8],
        axis: usize,
        block: usize,
    ) -> Vec<f32> {
        let mut sshape = shape.to_vec();
        sshape[axis] = shape[axis].div_ceil(block);
        (0..q.len())
            .map(|flat| {
                let (mut rest, mut coords) = (flat, vec![0; shape.len()]);
                for d in (0..shape.len()).rev() {
                    coords[d] = rest % shape[d];
                    rest /= shape[d];
                }
                coords[axis] /= block;
                let si = coords
                    .iter()
                    .zip(&sshape)
                    .fold(0, |acc, (&c, &n)| acc * n + c);
                (f32::from(q[flat]) - f32::from(zp[si])) * scale[si]
            })
            .collect()
    }

    #[test]
    fn blocked_dequantize_with_a_short_last_block() {
        // [K, N] weights blocked along K (axis 0) and along N (axis 1, contiguous
        // blocks), and a rank-3 tensor blocked on its middle axis; K = 7 and block 3
        // leave a last block of one.
        for (shape, axis, block) in [
            (vec![7usize, 5], 0usize, 3usize),
            (vec![5, 7], 1, 3),
            (vec![2, 7, 3], 1, 3),
            (vec![3, 4], 1, 4),
            (vec![3, 4], 1, 9),
            (vec![100, 24], 0, 32),
        ] {
            let n: usize = shape.iter().product();
            let mut sshape = shape.clone();
            sshape[axis] = shape[axis].div_ceil(block);
            let sn: usize = sshape.iter().product();
            let q = pattern(n, 1);
            let scales: Vec<f32> = (0..sn).map(|i| 0.125 * (1 + i % 5) as f32).collect();
            let zp = pattern(sn, 2);
            let want = blocked_reference(&shape, &q, &scales, &zp, axis, block);
            let attrs = [
                ("axis", Attr::Int(axis as i64)),
                ("block_size", Attr::Int(block as i64)),
            ];
            let qt = int4(&shape, &q);
            let st = Tensor::from_f32(sshape.clone(), scales.clone());
            let zt = int4(&sshape, &zp);
            let y = run(
                "DequantizeLinear",
                &attrs,
                &[Some(&qt), Some(&st), Some(&zt)],
            );
            assert_eq!(y.shape(), shape.as_slice());
            assert_eq!(
                y.as_f32().unwrap(),
                want.as_slice(),
                "{shape:?} axis {axis}"
            );
            // And back: QuantizeLinear of the dequantized values gives the codes.
            let back = run("QuantizeLinear", &attrs, &[Some(&y), Some(&st), Some(&zt)]);
            assert_eq!(values(&back), q, "{shape:?} axis {axis}");
        }
    }

    #[test]
    fn blocked_scale_shapes_are_checked() {
        let q = int4(&[4, 3], &pattern(12, 0));
        let attrs = [("axis", Attr::Int(0)), ("block_size", Attr::Int(3))];
        // ceil(4 / 3) = 2 rows of scales, not 1.
        let s = Tensor::from_f32(vec![1, 3], vec![1.0; 3]);
        let e = eval_node(&node("DequantizeLinear", &attrs, 1), &[Some(&q), Some(&s)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("block_size=3"), "{e}");
    }

    #[test]
    fn per_axis_and_per_tensor_dequantize() {
        let q = int4(&[2, 3], &[-8, 7, 0, -1, 3, -4]);
        let s = Tensor::from_f32(vec![3], vec![0.5, 2.0, 0.25]);
        let z = int4(&[3], &[1, -1, 0]);
        let y = run(
            "DequantizeLinear",
            &[("axis", Attr::Int(1))],
            &[Some(&q), Some(&s), Some(&z)],
        );
        assert_eq!(y.as_f32().unwrap(), &[-4.5, 16.0, 0.0, -1.0, 8.0, -1.0]);
        let s = Tensor::scalar_f32(0.5);
        let z = int4(&[], &[-8]);
        let y = run("DequantizeLinear", &[], &[Some(&q), Some(&s), Some(&z)]);
        assert_eq!(y.as_f32().unwrap(), &[0.0, 7.5, 4.0, 3.5, 5.5, 2.0]);
        let y = run("DequantizeLinear", &[], &[Some(&q), Some(&s)]);
        assert_eq!(y.as_f32().unwrap(), &[-4.0, 3.5, 0.0, -0.5, 1.5, -2.0]);
    }

    #[test]
    fn quantize_saturates_and_rounds_ties_to_even() {
        let xs = [
            0.5f32, 1.5, 2.5, -0.5, -1.5, -2.5, 6.5, 7.49, 7.5, 100.0, -7.5, -8.5, -1e9, 3.25,
        ];
        let want = [0i8, 2, 2, 0, -2, -2, 6, 7, 7, 7, -8, -8, -8, 3];
        let x = Tensor::from_f32(vec![xs.len()], xs.to_vec());
        let s = Tensor::scalar_f32(1.0);
        let z = int4(&[], &[0]);
        let y = run("QuantizeLinear", &[], &[Some(&x), Some(&s), Some(&z)]);
        assert_eq!(y.dtype(), DType::I4);
        assert_eq!(values(&y), want);
        // Opset 21: no zero point, the type from `output_dtype` (22 = INT4).
        let attrs = [("output_dtype", Attr::Int(22))];
        let y = run("QuantizeLinear", &attrs, &[Some(&x), Some(&s), None]);
        assert_eq!(values(&y), want);
        // A zero point shifts the range: 0.5 / 0.5 + 3 = 4; saturation still at 7.
        let x = Tensor::from_f32(vec![3], vec![0.5, 3.0, -20.0]);
        let s = Tensor::scalar_f32(0.5);
        let y = run(
            "QuantizeLinear",
            &[],
            &[Some(&x), Some(&s), Some(&int4(&[], &[3]))],
        );
        assert_eq!(values(&y), [4, 7, -8]);
    }

    #[test]
    fn quantize_per_axis() {
        let x = Tensor::from_f32(vec![2, 2], vec![1.0, -1.0, 5.0, 40.0]);
        let s = Tensor::from_f32(vec![2], vec![0.25, 4.0]);
        let z = int4(&[2], &[0, -2]);
        let y = run(
            "QuantizeLinear",
            &[("axis", Attr::Int(0))],
            &[Some(&x), Some(&s), Some(&z)],
        );
        // 4 -> 4, -4 -> -4; 1.25 -> 1 - 2, 10 -> 8 -> 7.
        assert_eq!(values(&y), [4, -4, -1, 7]);
    }

    #[test]
    fn every_value_survives_dequantize_then_quantize() {
        let all: Vec<i8> = (-8..=7).collect();
        let q = int4(&[16], &all);
        let s = Tensor::scalar_f32(0.3);
        let z = int4(&[], &[-3]);
        let x = run("DequantizeLinear", &[], &[Some(&q), Some(&s), Some(&z)]);
        let back = run("QuantizeLinear", &[], &[Some(&x), Some(&s), Some(&z)]);
        assert_eq!(values(&back), all);
    }

    #[test]
    fn int4_zero_point_type_must_match_data() {
        let q = int4(&[1], &[3]);
        let z = Tensor::new(vec![], TensorData::I8(vec![0])).unwrap();
        let s = Tensor::scalar_f32(1.0);
        let e = eval_node(
            &node("DequantizeLinear", &[], 1),
            &[Some(&q), Some(&s), Some(&z)],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("differs"), "{e}");
    }
}

#[cfg(test)]
mod fast_paths {
    use super::*;

    #[test]
    fn eight_bit_paths_equal_the_generic_ones() {
        // Ties at every half, both signs, beyond the range, NaN and infinities.
        let mut x: Vec<f32> = (-700..700).map(|k| k as f32 * 0.5).collect();
        x.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e30,
            -1e-30,
            0.0,
            -0.0,
        ]);
        x.extend((0..500).map(|i| ((i * 7919) % 1000) as f32 * 0.0137 - 6.8));
        for scale in [1.0f32, 0.37, 0.0123] {
            for zp in [0.0f64, 3.0, -5.0] {
                let g = Granularity::Tensor;
                let fast = quantize_8bit(&x, &[scale], &[zp], &g, (-128.0, 127.0), |v| v as i8);
                assert_eq!(
                    fast,
                    quantize_typed::<i8>(&x, &[scale], &[zp], &g),
                    "{scale} {zp}"
                );
                let zu = zp.abs();
                let fast = quantize_8bit(&x, &[scale], &[zu], &g, (0.0, 255.0), |v| v as u8);
                assert_eq!(
                    fast,
                    quantize_typed::<u8>(&x, &[scale], &[zu], &g),
                    "{scale} {zu}"
                );
                let q: Vec<i8> = (-128..=127).collect();
                let z = zp as i64;
                assert_eq!(
                    dequantize_8bit(&q, &[scale], &[z], &g, i32::from),
                    dequantize_typed(&q, &[scale], &[z], &g)
                );
                // The per-tensor loops, over several parallel pieces.
                let wide: Vec<f32> = (0..3 * PIECE + 5)
                    .map(|i| (i as f32 * 0.37).sin() * 300.0 * scale)
                    .collect();
                assert_eq!(
                    quantize_8bit(&wide, &[scale], &[zp], &g, (-128.0, 127.0), |v| v as i8),
                    quantize_typed::<i8>(&wide, &[scale], &[zp], &g),
                    "{scale} {zp}"
                );
                let long: Vec<i8> = (0..3 * PIECE + 5).map(|i| i as i8).collect();
                assert_eq!(
                    dequantize_tensor(&long, scale, z as i32, dequantize_i8),
                    dequantize_typed(&long, &[scale], &[z], &g)
                );
                let long: Vec<u8> = long.iter().map(|&v| v as u8).collect();
                let zu = zu as i64;
                assert_eq!(
                    dequantize_tensor(&long, scale, zu as i32, dequantize_u8),
                    dequantize_typed(&long, &[scale], &[zu], &g)
                );
            }
        }
        // Per-axis runs.
        let g = Granularity::Axis {
            outer: 2,
            dim: 3,
            inner: 4,
        };
        let xs: Vec<f32> = (0..24).map(|i| i as f32 * 0.75 - 9.0).collect();
        let (s, z) = ([0.5f32, 0.25, 1.5], [0.0f64, 1.0, -2.0]);
        let fast = quantize_8bit(&xs, &s, &z, &g, (-128.0, 127.0), |v| v as i8);
        assert_eq!(fast, quantize_typed::<i8>(&xs, &s, &z, &g));
    }
}
