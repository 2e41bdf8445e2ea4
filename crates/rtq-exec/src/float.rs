//! Float storage helpers: float kernels read any float tensor as `f32` and write their
//! result back in the input's float type, so an FP16 graph is emulated with a rounding
//! to half precision at every op boundary.

use crate::fp8::{f8_to_f32, f8_vec_from_f32};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use rtq_ir::{DType, Tensor, TensorData};
use std::borrow::Cow;

/// The elements of a float tensor as `f32` (borrowed when already `f32`), or `None`
/// when the tensor is not of a float type.
pub(crate) fn f32_view(t: &Tensor) -> Option<Cow<'_, [f32]>> {
    Some(match t.data() {
        TensorData::F32(v) => Cow::Borrowed(v.as_slice()),
        TensorData::F16(v) => {
            let mut out = vec![0.0f32; v.len()];
            v.convert_to_f32_slice(&mut out);
            Cow::Owned(out)
        }
        TensorData::BF16(v) => {
            let mut out = vec![0.0f32; v.len()];
            v.convert_to_f32_slice(&mut out);
            Cow::Owned(out)
        }
        TensorData::F64(v) => Cow::Owned(v.iter().map(|&x| x as f32).collect()),
        TensorData::F8E4M3(v) => Cow::Owned(v.iter().map(|&x| f8_to_f32(x)).collect()),
        _ => return None,
    })
}

/// Storage of float type `dtype` holding `values` rounded to that type (FP8 saturates
/// to ±448, as ONNX's Cast does by default). `dtype` must be a float type; any other
/// type yields `f32` storage.
pub(crate) fn from_f32(dtype: DType, values: Vec<f32>) -> TensorData {
    match dtype {
        DType::F16 => {
            let mut out = vec![f16::ZERO; values.len()];
            out.convert_from_f32_slice(&values);
            TensorData::F16(out)
        }
        DType::BF16 => {
            let mut out = vec![bf16::ZERO; values.len()];
            out.convert_from_f32_slice(&values);
            TensorData::BF16(out)
        }
        DType::F64 => TensorData::F64(values.into_iter().map(f64::from).collect()),
        DType::F8E4M3 => TensorData::F8E4M3(f8_vec_from_f32(&values, true)),
        _ => TensorData::F32(values),
    }
}

/// A tensor of float type `dtype` and shape `shape` holding `values` (whose length the
/// caller guarantees to fill the shape).
pub(crate) fn tensor_from_f32(dtype: DType, shape: Vec<usize>, values: Vec<f32>) -> Tensor {
    let data = from_f32(dtype, values);
    // The kernels compute `values` for exactly `shape`; a mismatch is an executor bug.
    Tensor::new(shape, data).expect("kernel output fills its shape")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trip_rounds_to_half_precision() {
        let tie_down = 1.0 + 1.0 / 2048.0;
        let tie_up = 1.0 + 3.0 / 2048.0;
        let data = from_f32(DType::F16, vec![1.0, 0.1, 65520.0, tie_down, tie_up]);
        let t = Tensor::new(vec![5], data).unwrap();
        let back = f32_view(&t).unwrap();
        assert_eq!(back[0], 1.0);
        assert_eq!(back[1], f16::from_f32(0.1).to_f32());
        assert_ne!(back[1], 0.1);
        // 65520 is past half's largest finite value and rounds to infinity.
        assert!(back[2].is_infinite());
        // Ties between neighbouring halves (spaced 2^-10 apart) round to even.
        assert_eq!(back[3], 1.0);
        assert_eq!(back[4], 1.0 + 2.0 / 1024.0);
    }

    #[test]
    fn views_reject_integers_and_borrow_f32() {
        let i = Tensor::from_i64(vec![1], vec![3]);
        assert!(f32_view(&i).is_none());
        let f = Tensor::from_f32(vec![2], vec![1.0, 2.0]);
        assert!(matches!(f32_view(&f), Some(Cow::Borrowed(_))));
    }
}
