//! Rules for quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
//!
//! Quantized types are any the zero point or `output_dtype` names (INT8, UINT8, INT4,
//! FP8, ...); with `block_size` (opset 21) the scale (and zero point) have the data's
//! shape except on the blocked axis, whose extent is `ceil(D / block_size)`.

use super::ctx::{Fact, NodeCtx};
use crate::PassError;
use rtq_ir::{format_shape, Attr, DType, Dim};

/// The type named by a non-zero `output_dtype` attribute (opset 21+).
fn output_dtype(ctx: &NodeCtx<'_>) -> Result<Option<DType>, PassError> {
    match ctx.node.attr("output_dtype").and_then(Attr::as_int) {
        None | Some(0) => Ok(None),
        Some(code) => i32::try_from(code)
            .ok()
            .and_then(DType::from_onnx_code)
            .map(Some)
            .ok_or_else(|| {
                ctx.invalid(format!(
                    "attribute `output_dtype` names unknown data type {code}"
                ))
            }),
    }
}

/// Checks a blocked scale's known extents against the data's: the same rank, the
/// same extent on every axis but the blocked one, `ceil(D / block_size)` there.
fn check_blocks(ctx: &NodeCtx<'_>) -> Result<(), PassError> {
    let block = ctx.attr_int("block_size", 0);
    if block <= 0 {
        return Ok(());
    }
    let (Some(x), Some(scale)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(());
    };
    let axis = ctx.axis(ctx.attr_int("axis", 1), x.len())?;
    let fits = scale.len() == x.len()
        && x.iter()
            .zip(scale)
            .enumerate()
            .all(|(a, (d, s))| match (d, s) {
                (Dim::Known(d), Dim::Known(s)) if a == axis => d.div_ceil(block as usize) == *s,
                (Dim::Known(d), Dim::Known(s)) => d == s,
                _ => true,
            });
    if fits {
        return Ok(());
    }
    Err(ctx.invalid(format!(
        "scale of shape {} does not fit data {} in blocks of {block} on axis {axis}",
        format_shape(scale),
        format_shape(x)
    )))
}

/// `QuantizeLinear(x, scale, zero_point?)`: `x`'s shape; the zero point's type, or
/// `output_dtype` (which must then agree with the zero point's type), or uint8.
pub(crate) fn quantize(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    check_blocks(ctx)?;
    let zero_point = ctx.input(2).and(ctx.dtype(2));
    let dtype = match (output_dtype(ctx)?, zero_point) {
        (Some(d), Some(z)) if d != z => {
            return Err(ctx.invalid(format!("`output_dtype` is {d} but the zero point is {z}")))
        }
        (Some(d), _) => Some(d),
        (None, _) if ctx.input(2).is_some() => zero_point,
        (None, _) => Some(DType::U8),
    };
    Ok(vec![Fact::new(dtype, ctx.shape(0).map(<[_]>::to_vec))])
}

/// `DequantizeLinear(x, scale, zero_point?)`: `x`'s shape, the scale's type (or
/// `output_dtype`).
pub(crate) fn dequantize(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    check_blocks(ctx)?;
    let dtype = output_dtype(ctx)?.or(ctx.dtype(1));
    Ok(vec![Fact::new(dtype, ctx.shape(0).map(<[_]>::to_vec))])
}

/// `DynamicQuantizeLinear(x)`: uint8 `y` like `x`, float scalar scale, uint8 scalar zero point.
pub(crate) fn dynamic_quantize(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    Ok(vec![
        Fact::new(Some(DType::U8), ctx.shape(0).map(<[_]>::to_vec)),
        Fact::shaped(Some(DType::F32), vec![]),
        Fact::shaped(Some(DType::U8), vec![]),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{s, sym, Case};
    use rtq_ir::{DType, Tensor, TensorData};

    #[test]
    fn qdq_types() {
        let f = Case::new("QuantizeLinear")
            .input(DType::F32, vec![sym("N"), s(8)])
            .constant(Tensor::scalar_f32(0.1))
            .constant(Tensor::new(vec![], TensorData::I8(vec![0])).unwrap())
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::I8));
        assert_eq!(f[0].shape, Some(vec![sym("N"), s(8)]));
        let f = Case::new("QuantizeLinear")
            .input(DType::F32, vec![s(8)])
            .constant(Tensor::scalar_f32(0.1))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::U8));
        let f = Case::new("DequantizeLinear")
            .input(DType::I8, vec![s(8)])
            .constant(Tensor::new(vec![], TensorData::F16(vec![half::f16::ONE])).unwrap())
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F16));
    }

    #[test]
    fn int4_qdq_types_and_blocks() {
        use rtq_ir::Attr;
        let zero = |shape: Vec<usize>| {
            let n = shape.iter().product();
            Tensor::new(shape, TensorData::I4(vec![0; n])).unwrap()
        };
        // The zero point's type.
        let f = Case::new("QuantizeLinear")
            .input(DType::F32, vec![sym("N"), s(8)])
            .constant(Tensor::scalar_f32(0.1))
            .constant(zero(vec![]))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::I4));
        assert_eq!(f[0].shape, Some(vec![sym("N"), s(8)]));
        // `output_dtype` 22 without a zero point, in blocks of 4 along axis 1.
        let f = Case::new("QuantizeLinear")
            .input(DType::F16, vec![s(3), s(10)])
            .constant(Tensor::new(vec![3, 3], TensorData::F16(vec![half::f16::ONE; 9])).unwrap())
            .attr("output_dtype", Attr::Int(22))
            .attr("block_size", Attr::Int(4))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::I4));
        assert_eq!(f[0].shape, Some(vec![s(3), s(10)]));
        // `output_dtype` and the zero point must agree.
        let e = Case::new("QuantizeLinear")
            .input(DType::F32, vec![s(8)])
            .constant(Tensor::scalar_f32(0.1))
            .constant(Tensor::new(vec![], TensorData::I8(vec![0])).unwrap())
            .attr("output_dtype", Attr::Int(22))
            .infer()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("output_dtype` is int4 but the zero point is int8"),
            "{e}"
        );
        // Blocked INT4 weights [K = 100, N = 24] in blocks of 32 along K: scales
        // [4, 24]; the output has the scale's type and the data's shape.
        let dq = |scale_rows: usize| {
            Case::new("DequantizeLinear")
                .input(DType::I4, vec![s(100), s(24)])
                .constant(Tensor::from_f32(
                    vec![scale_rows, 24],
                    vec![0.5; scale_rows * 24],
                ))
                .constant(zero(vec![scale_rows, 24]))
                .attr("axis", Attr::Int(0))
                .attr("block_size", Attr::Int(32))
                .infer()
        };
        let f = dq(4).unwrap();
        assert_eq!(f[0].dtype, Some(DType::F32));
        assert_eq!(f[0].shape, Some(vec![s(100), s(24)]));
        let e = dq(3).unwrap_err().to_string();
        assert!(
            e.contains("scale of shape [3,24] does not fit data [100,24] in blocks of 32"),
            "{e}"
        );
        // Symbolic extents are not checked; per-axis INT4 gives the scale's type.
        let f = Case::new("DequantizeLinear")
            .input(DType::I4, vec![sym("K"), s(6)])
            .constant(Tensor::new(vec![2, 6], TensorData::F16(vec![half::f16::ONE; 12])).unwrap())
            .attr("axis", Attr::Int(0))
            .attr("block_size", Attr::Int(32))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F16));
        let f = Case::new("DequantizeLinear")
            .input(DType::I4, vec![s(4), s(6)])
            .constant(Tensor::from_f32(vec![6], vec![0.5; 6]))
            .constant(zero(vec![6]))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F32));
    }

    #[test]
    fn fp8_qdq_types() {
        use rtq_ir::{Attr, F8E4M3};
        let zero = || Tensor::new(vec![], TensorData::F8E4M3(vec![F8E4M3::ZERO])).unwrap();
        // The zero point's type.
        let f = Case::new("QuantizeLinear")
            .input(DType::F32, vec![sym("N"), s(8)])
            .constant(Tensor::scalar_f32(0.1))
            .constant(zero())
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F8E4M3));
        assert_eq!(f[0].shape, Some(vec![sym("N"), s(8)]));
        // Opset 21: `output_dtype` without a zero point (17 is FLOAT8E4M3FN).
        let f = Case::new("QuantizeLinear")
            .input(DType::F16, vec![s(8)])
            .constant(Tensor::new(vec![], TensorData::F16(vec![half::f16::ONE])).unwrap())
            .attr("output_dtype", Attr::Int(17))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F8E4M3));
        // Dequantizing FP8 gives the scale's type, per tensor or per axis.
        let f = Case::new("DequantizeLinear")
            .input(DType::F8E4M3, vec![s(4), s(3)])
            .constant(Tensor::from_f32(vec![4], vec![0.5; 4]))
            .constant(Tensor::new(vec![4], TensorData::F8E4M3(vec![F8E4M3::ZERO; 4])).unwrap())
            .attr("axis", Attr::Int(0))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F32));
        assert_eq!(f[0].shape, Some(vec![s(4), s(3)]));
        let f = Case::new("DequantizeLinear")
            .input(DType::F8E4M3, vec![s(2)])
            .constant(Tensor::new(vec![], TensorData::F16(vec![half::f16::ONE])).unwrap())
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::F16));
    }
}
