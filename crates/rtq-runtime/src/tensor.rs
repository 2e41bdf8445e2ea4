//! Host tensors: the named, typed byte buffers passed to and returned by [`Engine::infer`].
//!
//! [`Engine::infer`]: crate::Engine::infer

use crate::dtype::{fp8_e4m3_to_f32, int4_at};
use crate::{DataType, RuntimeError};
use half::{bf16, f16};

/// A tensor in host memory: name, element type, concrete shape and element bytes
/// (little-endian, row-major; 4-bit types pack two elements per byte, low nibble first).
///
/// The byte length always matches `dtype.byte_len(product(shape))`: the constructors
/// check it and the type, shape and length cannot change afterwards (only the name and
/// the bytes' values can).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostTensor {
    /// Tensor name (an engine input or output name).
    pub name: String,
    dtype: DataType,
    shape: Vec<usize>,
    data: Vec<u8>,
}

/// Number of elements of `shape`, or an error naming `name` on overflow.
pub(crate) fn element_count(name: &str, shape: &[usize]) -> Result<usize, RuntimeError> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| RuntimeError::tensor(name, format!("shape {shape:?} has too many elements")))
}

impl HostTensor {
    /// A tensor over `data`; fails unless `data` holds exactly the shape's elements.
    pub fn new(
        name: impl Into<String>,
        dtype: DataType,
        shape: Vec<usize>,
        data: Vec<u8>,
    ) -> Result<HostTensor, RuntimeError> {
        let name = name.into();
        let expected = dtype.byte_len(element_count(&name, &shape)?);
        if data.len() != expected {
            return Err(RuntimeError::tensor(
                name,
                format!(
                    "{} bytes do not fill a {dtype} tensor of shape {shape:?} ({expected} bytes)",
                    data.len()
                ),
            ));
        }
        Ok(HostTensor {
            name,
            dtype,
            shape,
            data,
        })
    }

    /// A tensor of zeros.
    pub fn zeros(
        name: impl Into<String>,
        dtype: DataType,
        shape: Vec<usize>,
    ) -> Result<HostTensor, RuntimeError> {
        let name = name.into();
        let bytes = dtype.byte_len(element_count(&name, &shape)?);
        HostTensor::new(name, dtype, shape, vec![0; bytes])
    }

    /// A float32 tensor from values.
    pub fn from_f32(
        name: impl Into<String>,
        shape: Vec<usize>,
        values: &[f32],
    ) -> Result<HostTensor, RuntimeError> {
        HostTensor::new(
            name,
            DataType::F32,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    /// An int64 tensor from values.
    pub fn from_i64(
        name: impl Into<String>,
        shape: Vec<usize>,
        values: &[i64],
    ) -> Result<HostTensor, RuntimeError> {
        HostTensor::new(
            name,
            DataType::I64,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    /// An int32 tensor from values.
    pub fn from_i32(
        name: impl Into<String>,
        shape: Vec<usize>,
        values: &[i32],
    ) -> Result<HostTensor, RuntimeError> {
        HostTensor::new(
            name,
            DataType::I32,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    /// An INT4 tensor from one element per byte, each the low four bits of its byte
    /// (as NumPy holds INT4: an `int8` array, or ml_dtypes' `int4`), packed two per
    /// byte. Fails unless `unpacked` holds one byte per element of `shape`.
    pub fn int4_from_unpacked(
        name: impl Into<String>,
        shape: Vec<usize>,
        unpacked: &[u8],
    ) -> Result<HostTensor, RuntimeError> {
        let name = name.into();
        let n = element_count(&name, &shape)?;
        if unpacked.len() != n {
            return Err(RuntimeError::tensor(
                name,
                format!(
                    "{} bytes do not hold an unpacked int4 tensor of shape {shape:?} (one byte \
                     per element: {n})",
                    unpacked.len()
                ),
            ));
        }
        let packed = unpacked
            .chunks(2)
            .map(|p| (p[0] & 0x0F) | p.get(1).map_or(0, |&hi| hi << 4))
            .collect();
        HostTensor::new(name, DataType::Int4, shape, packed)
    }

    /// An INT4 tensor's elements one per byte, sign-extended (the bytes of `int8`
    /// values, which ml_dtypes' `int4` reads alike); `None` for any other type.
    pub fn int4_unpacked(&self) -> Option<Vec<u8>> {
        (self.dtype == DataType::Int4).then(|| {
            (0..self.len())
                .map(|i| int4_at(&self.data, i) as u8)
                .collect()
        })
    }

    /// Element type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// Concrete shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tensor has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The element bytes, mutably (the length cannot change).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Takes the element bytes out.
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    /// The elements converted to f32. Works for every float (FP8 E4M3 included),
    /// integer (INT4 included) and bool type; fails for the narrow TensorRT float types
    /// (FP4, E8M0).
    pub fn to_f32_vec(&self) -> Result<Vec<f32>, RuntimeError> {
        fn chunks<const N: usize>(data: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
            data.chunks_exact(N).map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                a
            })
        }
        let d = &self.data;
        Ok(match self.dtype {
            DataType::F32 => chunks::<4>(d).map(f32::from_le_bytes).collect(),
            DataType::F16 => chunks::<2>(d)
                .map(|b| f16::from_le_bytes(b).to_f32())
                .collect(),
            DataType::BF16 => chunks::<2>(d)
                .map(|b| bf16::from_le_bytes(b).to_f32())
                .collect(),
            DataType::F64 => chunks::<8>(d)
                .map(|b| f64::from_le_bytes(b) as f32)
                .collect(),
            DataType::I8 => d.iter().map(|&b| b as i8 as f32).collect(),
            DataType::U8 => d.iter().map(|&b| b as f32).collect(),
            DataType::Bool => d.iter().map(|&b| (b != 0) as u8 as f32).collect(),
            DataType::I16 => chunks::<2>(d)
                .map(|b| i16::from_le_bytes(b) as f32)
                .collect(),
            DataType::U16 => chunks::<2>(d)
                .map(|b| u16::from_le_bytes(b) as f32)
                .collect(),
            DataType::I32 => chunks::<4>(d)
                .map(|b| i32::from_le_bytes(b) as f32)
                .collect(),
            DataType::U32 => chunks::<4>(d)
                .map(|b| u32::from_le_bytes(b) as f32)
                .collect(),
            DataType::I64 => chunks::<8>(d)
                .map(|b| i64::from_le_bytes(b) as f32)
                .collect(),
            DataType::U64 => chunks::<8>(d)
                .map(|b| u64::from_le_bytes(b) as f32)
                .collect(),
            DataType::Fp8E4M3 => d.iter().map(|&b| fp8_e4m3_to_f32(b)).collect(),
            DataType::Int4 => (0..self.len()).map(|i| f32::from(int4_at(d, i))).collect(),
            DataType::Fp4E2M1 | DataType::E8M0 => {
                return Err(RuntimeError::tensor(
                    &self.name,
                    format!(
                        "cannot convert {} elements to float32 on the host",
                        self.dtype
                    ),
                ))
            }
        })
    }

    /// The elements converted to i64 (floats truncate toward zero); same coverage as
    /// [`HostTensor::to_f32_vec`].
    pub fn to_i64_vec(&self) -> Result<Vec<i64>, RuntimeError> {
        let d = &self.data;
        match self.dtype {
            DataType::I64 => Ok(d
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect()),
            DataType::I32 => Ok(d
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap_or([0; 4])) as i64)
                .collect()),
            DataType::U64 => Ok(d
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as i64)
                .collect()),
            _ => Ok(self.to_f32_vec()?.into_iter().map(|v| v as i64).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_check_the_byte_length() {
        let t = HostTensor::from_f32("x", vec![2, 2], &[1.0, -2.0, 3.5, 0.25]).unwrap();
        assert_eq!(t.bytes().len(), 16);
        assert_eq!(t.to_f32_vec().unwrap(), vec![1.0, -2.0, 3.5, 0.25]);
        let err = HostTensor::from_f32("x", vec![3], &[1.0]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tensor `x`: 4 bytes do not fill a float32 tensor of shape [3] (12 bytes)"
        );
        let err = HostTensor::zeros("big", DataType::F32, vec![usize::MAX, 2]).unwrap_err();
        assert!(err.to_string().starts_with("tensor `big`: shape"), "{err}");
    }

    #[test]
    fn int4_packs_from_and_unpacks_to_one_byte_per_element() {
        // int8 bytes (-1 = 0xFF) and ml_dtypes' (-1 = 0x0F) alike; an odd count.
        for unpacked in [[0xFFu8, 0xF8, 0x07], [0x0F, 0x08, 0x07]] {
            let t = HostTensor::int4_from_unpacked("q", vec![3], &unpacked).unwrap();
            assert_eq!(t.dtype(), DataType::Int4);
            assert_eq!(t.bytes(), [0x8F, 0x07]);
            assert_eq!(t.int4_unpacked().unwrap(), [0xFF, 0xF8, 0x07]);
        }
        let err = HostTensor::int4_from_unpacked("q", vec![4], &[0; 2]).unwrap_err();
        assert!(err.to_string().contains("one byte per element: 4"), "{err}");
        let empty = HostTensor::int4_from_unpacked("e", vec![0], &[]).unwrap();
        assert_eq!(empty.int4_unpacked().unwrap(), Vec::<u8>::new());
        assert!(HostTensor::from_f32("f", vec![1], &[1.0])
            .unwrap()
            .int4_unpacked()
            .is_none());
    }

    #[test]
    fn conversions_cover_the_numeric_types() {
        let h = HostTensor::new(
            "h",
            DataType::F16,
            vec![2],
            [f16::from_f32(1.5), f16::from_f32(-2.0)]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        )
        .unwrap();
        assert_eq!(h.to_f32_vec().unwrap(), vec![1.5, -2.0]);
        let q = HostTensor::new("q", DataType::I8, vec![3], vec![0x80, 0x7f, 0xff]).unwrap();
        assert_eq!(q.to_f32_vec().unwrap(), vec![-128.0, 127.0, -1.0]);
        let i = HostTensor::from_i64("i", vec![2], &[-5, 1 << 40]).unwrap();
        assert_eq!(i.to_i64_vec().unwrap(), vec![-5, 1 << 40]);
        let f = HostTensor::from_f32("f", vec![2], &[2.9, -2.9]).unwrap();
        assert_eq!(f.to_i64_vec().unwrap(), vec![2, -2]);
        let packed = HostTensor::zeros("p", DataType::Int4, vec![5]).unwrap();
        assert_eq!(packed.bytes().len(), 3);
        assert_eq!(packed.to_f32_vec().unwrap(), vec![0.0; 5]);
        // INT4: two per byte, low nibble first, sign-extended.
        let int4 = HostTensor::new("i4", DataType::Int4, vec![3], vec![0x8F, 0xF7]).unwrap();
        assert_eq!(int4.to_f32_vec().unwrap(), vec![-1.0, -8.0, 7.0]);
        assert_eq!(int4.to_i64_vec().unwrap(), vec![-1, -8, 7]);
        let fp4 = HostTensor::zeros("p", DataType::Fp4E2M1, vec![5]).unwrap();
        assert!(fp4.int4_unpacked().is_none());
        assert!(fp4.to_f32_vec().is_err());
    }
}
