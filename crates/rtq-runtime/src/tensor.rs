//! Host tensors: the named, typed byte buffers passed to and returned by [`Engine::infer`].
//!
//! [`Engine::infer`]: crate::Engine::infer

use crate::dtype::fp8_e4m3_to_f32;
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
    /// integer and bool type; fails for the packed/narrow TensorRT types (INT4, FP4,
    /// E8M0).
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
            DataType::Int4 | DataType::Fp4E2M1 | DataType::E8M0 => {
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
        assert!(packed.to_f32_vec().is_err());
    }
}
