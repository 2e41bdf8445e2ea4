//! INT4 (ONNX `INT4`) in the executor: the element type that lets the generic
//! data-movement kernels keep INT4 tensors INT4 (the IR stores them as `i8`, like
//! INT8), and the integer narrowing Cast uses.
//!
//! Cast from floats rounds half to even and saturates to `[-8, 7]` (NaN to 0), as
//! QuantizeLinear does (the spec leaves out-of-range values undefined; onnxruntime
//! rounds ties away from zero and keeps the low four bits). Cast from integers keeps
//! the low four bits, the spec's rule for integer narrowing (`8` becomes `-8`).

use crate::elem::Storage;
use rtq_ir::{int4_from_nibble, TensorData};

/// One INT4 element as the generic kernels see it: an `i8` in `[-8, 7]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct Int4(pub(crate) i8);

impl Int4 {
    /// The elements of INT4 storage, viewed without a copy.
    pub(crate) fn view(values: &[i8]) -> &[Int4] {
        // SAFETY: `Int4` is `repr(transparent)` over `i8`: same size, alignment and
        // validity, so the slice reinterprets element for element.
        unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<Int4>(), values.len()) }
    }
}

impl Storage for Int4 {
    fn of(data: &TensorData) -> Option<&[Self]> {
        match data {
            TensorData::I4(v) => Some(Int4::view(v)),
            _ => None,
        }
    }

    fn into_data(values: Vec<Self>) -> TensorData {
        // Same layout: the collection reuses the allocation.
        TensorData::I4(values.into_iter().map(|v| v.0).collect())
    }
}

/// The low four bits of `x`, sign-extended (integer narrowing: 8 -> -8, 17 -> 1).
pub(crate) fn int4_wrapping(x: i64) -> i8 {
    int4_from_nibble(x as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_and_storage_keep_the_values() {
        let raw = vec![-8i8, 7, 0, -1];
        let view = Int4::view(&raw);
        assert_eq!(view, [Int4(-8), Int4(7), Int4(0), Int4(-1)]);
        let data = TensorData::I4(raw.clone());
        assert_eq!(Int4::of(&data), Some(view));
        assert_eq!(Int4::of(&TensorData::I8(raw.clone())), None);
        assert_eq!(Int4::into_data(view.to_vec()), data);
    }

    #[test]
    fn integers_keep_their_low_four_bits() {
        for (x, want) in [
            (0, 0),
            (7, 7),
            (8, -8),
            (15, -1),
            (16, 0),
            (-9, 7),
            (-8, -8),
        ] {
            assert_eq!(int4_wrapping(x), want, "{x}");
        }
        assert_eq!(int4_wrapping(i64::MAX), -1);
    }
}
