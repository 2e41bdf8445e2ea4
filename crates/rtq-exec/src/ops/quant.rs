//! QuantizeLinear, DequantizeLinear (per-tensor, per-axis and blocked; 8-, 16- and
//! 32-bit integers) and DynamicQuantizeLinear. Quantization rounds half to even and
//! saturates; the zero point's type decides the quantized type (uint8 when absent).

use crate::ctx::OpCtx;
use crate::elem::{with_numeric, Elem};
use crate::float::{f32_view, from_f32};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{DType, Tensor, TensorData};

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
    /// elements: within a run, element `k` uses scale `first + k * step`.
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

fn quantize_linear(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let scale_t = ctx.input(1)?;
    let zp_t = ctx.opt_input(2);
    check_zero_point(ctx, scale_t, zp_t)?;
    let xs: Vec<f32> = match f32_view(x) {
        Some(v) => v.into_owned(),
        None if x.dtype() == DType::I32 => x.to_f32_vec(),
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
        DType::U8 | DType::I8 | DType::U16 | DType::I16 | DType::I32 => {
            with_numeric!(&template, T, _v => T::wrap(quantize_typed::<T>(&xs, &scale, &zp, &g)),
                _ => unreachable!("integer types listed above"))
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
            out[i] = (q[i].to_i64() - zp[si]) as f32 * scale[si];
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
    let zp: Vec<i64> = match zp_t {
        Some(z) => z.to_i64_vec(),
        None => vec![0; scale.len()],
    };
    let g = granularity(ctx, x.shape(), scale_t.shape())?;
    let out = match x.data() {
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
