//! Rules for quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.

use super::ctx::{Fact, NodeCtx};
use crate::PassError;
use rtq_ir::{Attr, DType};

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

/// `QuantizeLinear(x, scale, zero_point?)`: `x`'s shape; the zero point's type, or
/// `output_dtype`, or uint8.
pub(crate) fn quantize(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = match output_dtype(ctx)? {
        Some(d) => Some(d),
        None if ctx.input(2).is_some() => ctx.dtype(2),
        None => Some(DType::U8),
    };
    Ok(vec![Fact::new(dtype, ctx.shape(0).map(<[_]>::to_vec))])
}

/// `DequantizeLinear(x, scale, zero_point?)`: `x`'s shape, the scale's type (or
/// `output_dtype`).
pub(crate) fn dequantize(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
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
