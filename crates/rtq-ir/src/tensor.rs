use crate::int4::{int4_from_f64, pack_int4, unpack_int4};
use crate::{DType, IrError, Result};
use float8::F8E4M3;
use half::{bf16, f16};

/// Element storage of a [`Tensor`], one variant per supported element type.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    /// 32-bit floats.
    F32(Vec<f32>),
    /// Half floats.
    F16(Vec<f16>),
    /// bfloat16.
    BF16(Vec<bf16>),
    /// FP8 E4M3 (`FLOAT8E4M3FN`).
    F8E4M3(Vec<F8E4M3>),
    /// 64-bit floats.
    F64(Vec<f64>),
    /// Signed 8-bit integers.
    I8(Vec<i8>),
    /// Signed 4-bit integers (ONNX `INT4`), one per element in `[-8, 7]` (unpacked;
    /// [`Tensor::to_le_bytes`] packs them two per byte).
    I4(Vec<i8>),
    /// Unsigned 8-bit integers.
    U8(Vec<u8>),
    /// Signed 16-bit integers.
    I16(Vec<i16>),
    /// Unsigned 16-bit integers.
    U16(Vec<u16>),
    /// Signed 32-bit integers.
    I32(Vec<i32>),
    /// Unsigned 32-bit integers.
    U32(Vec<u32>),
    /// Signed 64-bit integers.
    I64(Vec<i64>),
    /// Unsigned 64-bit integers.
    U64(Vec<u64>),
    /// Booleans.
    Bool(Vec<bool>),
    /// Byte strings.
    String(Vec<Vec<u8>>),
}

/// A dense, row-major tensor with a fixed shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: TensorData,
}

macro_rules! for_each_variant {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            TensorData::F32($v) => $body,
            TensorData::F16($v) => $body,
            TensorData::BF16($v) => $body,
            TensorData::F8E4M3($v) => $body,
            TensorData::F64($v) => $body,
            TensorData::I8($v) => $body,
            TensorData::I4($v) => $body,
            TensorData::U8($v) => $body,
            TensorData::I16($v) => $body,
            TensorData::U16($v) => $body,
            TensorData::I32($v) => $body,
            TensorData::U32($v) => $body,
            TensorData::I64($v) => $body,
            TensorData::U64($v) => $body,
            TensorData::Bool($v) => $body,
            TensorData::String($v) => $body,
        }
    };
}

impl TensorData {
    /// Number of elements held.
    pub fn len(&self) -> usize {
        for_each_variant!(self, v => v.len())
    }

    /// Whether no element is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::F16(_) => DType::F16,
            TensorData::BF16(_) => DType::BF16,
            TensorData::F8E4M3(_) => DType::F8E4M3,
            TensorData::F64(_) => DType::F64,
            TensorData::I8(_) => DType::I8,
            TensorData::I4(_) => DType::I4,
            TensorData::U8(_) => DType::U8,
            TensorData::I16(_) => DType::I16,
            TensorData::U16(_) => DType::U16,
            TensorData::I32(_) => DType::I32,
            TensorData::U32(_) => DType::U32,
            TensorData::I64(_) => DType::I64,
            TensorData::U64(_) => DType::U64,
            TensorData::Bool(_) => DType::Bool,
            TensorData::String(_) => DType::String,
        }
    }

    /// Storage of `len` zero elements of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> TensorData {
        match dtype {
            DType::F32 => TensorData::F32(vec![0.0; len]),
            DType::F16 => TensorData::F16(vec![f16::ZERO; len]),
            DType::BF16 => TensorData::BF16(vec![bf16::ZERO; len]),
            DType::F8E4M3 => TensorData::F8E4M3(vec![F8E4M3::ZERO; len]),
            DType::F64 => TensorData::F64(vec![0.0; len]),
            DType::I8 => TensorData::I8(vec![0; len]),
            DType::I4 => TensorData::I4(vec![0; len]),
            DType::U8 => TensorData::U8(vec![0; len]),
            DType::I16 => TensorData::I16(vec![0; len]),
            DType::U16 => TensorData::U16(vec![0; len]),
            DType::I32 => TensorData::I32(vec![0; len]),
            DType::U32 => TensorData::U32(vec![0; len]),
            DType::I64 => TensorData::I64(vec![0; len]),
            DType::U64 => TensorData::U64(vec![0; len]),
            DType::Bool => TensorData::Bool(vec![false; len]),
            DType::String => TensorData::String(vec![Vec::new(); len]),
        }
    }

    /// Element `i` as f64 (strings read as NaN).
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            TensorData::F32(v) => v[i] as f64,
            TensorData::F16(v) => v[i].to_f64(),
            TensorData::BF16(v) => v[i].to_f64(),
            TensorData::F8E4M3(v) => v[i].to_f64(),
            TensorData::F64(v) => v[i],
            TensorData::I8(v) | TensorData::I4(v) => v[i] as f64,
            TensorData::U8(v) => v[i] as f64,
            TensorData::I16(v) => v[i] as f64,
            TensorData::U16(v) => v[i] as f64,
            TensorData::I32(v) => v[i] as f64,
            TensorData::U32(v) => v[i] as f64,
            TensorData::I64(v) => v[i] as f64,
            TensorData::U64(v) => v[i] as f64,
            TensorData::Bool(v) => v[i] as u8 as f64,
            TensorData::String(_) => f64::NAN,
        }
    }

    /// Every element as f64 (strings read as NaN); one pass per variant, unlike
    /// repeated [`TensorData::get_f64`].
    pub fn to_f64_vec(&self) -> Vec<f64> {
        macro_rules! widen {
            ($v:expr, $f:expr) => {
                $v.iter().map($f).collect()
            };
        }
        match self {
            TensorData::F32(v) => widen!(v, |&x| x as f64),
            TensorData::F16(v) => widen!(v, |x| x.to_f64()),
            TensorData::BF16(v) => widen!(v, |x| x.to_f64()),
            TensorData::F8E4M3(v) => widen!(v, |x| x.to_f64()),
            TensorData::F64(v) => v.clone(),
            TensorData::I8(v) | TensorData::I4(v) => widen!(v, |&x| x as f64),
            TensorData::U8(v) => widen!(v, |&x| x as f64),
            TensorData::I16(v) => widen!(v, |&x| x as f64),
            TensorData::U16(v) => widen!(v, |&x| x as f64),
            TensorData::I32(v) => widen!(v, |&x| x as f64),
            TensorData::U32(v) => widen!(v, |&x| x as f64),
            TensorData::I64(v) => widen!(v, |&x| x as f64),
            TensorData::U64(v) => widen!(v, |&x| x as f64),
            TensorData::Bool(v) => widen!(v, |&x| x as u8 as f64),
            TensorData::String(v) => vec![f64::NAN; v.len()],
        }
    }

    /// Element `i` as i64 (floats truncate toward zero; strings read as 0).
    pub fn get_i64(&self, i: usize) -> i64 {
        match self {
            TensorData::I64(v) => v[i],
            TensorData::I32(v) => v[i] as i64,
            TensorData::U64(v) => v[i] as i64,
            TensorData::String(_) => 0,
            _ => self.get_f64(i) as i64,
        }
    }

    /// Copies the elements picked by `indices` into new storage of the same type.
    pub fn gather(&self, indices: &[usize]) -> TensorData {
        match self {
            TensorData::F32(v) => TensorData::F32(indices.iter().map(|&i| v[i]).collect()),
            TensorData::F16(v) => TensorData::F16(indices.iter().map(|&i| v[i]).collect()),
            TensorData::BF16(v) => TensorData::BF16(indices.iter().map(|&i| v[i]).collect()),
            TensorData::F8E4M3(v) => TensorData::F8E4M3(indices.iter().map(|&i| v[i]).collect()),
            TensorData::F64(v) => TensorData::F64(indices.iter().map(|&i| v[i]).collect()),
            TensorData::I8(v) => TensorData::I8(indices.iter().map(|&i| v[i]).collect()),
            TensorData::I4(v) => TensorData::I4(indices.iter().map(|&i| v[i]).collect()),
            TensorData::U8(v) => TensorData::U8(indices.iter().map(|&i| v[i]).collect()),
            TensorData::I16(v) => TensorData::I16(indices.iter().map(|&i| v[i]).collect()),
            TensorData::U16(v) => TensorData::U16(indices.iter().map(|&i| v[i]).collect()),
            TensorData::I32(v) => TensorData::I32(indices.iter().map(|&i| v[i]).collect()),
            TensorData::U32(v) => TensorData::U32(indices.iter().map(|&i| v[i]).collect()),
            TensorData::I64(v) => TensorData::I64(indices.iter().map(|&i| v[i]).collect()),
            TensorData::U64(v) => TensorData::U64(indices.iter().map(|&i| v[i]).collect()),
            TensorData::Bool(v) => TensorData::Bool(indices.iter().map(|&i| v[i]).collect()),
            TensorData::String(v) => {
                TensorData::String(indices.iter().map(|&i| v[i].clone()).collect())
            }
        }
    }

    /// Converts every element to `dtype` (numeric casts saturate as Rust's `as` does;
    /// INT4 targets round half to even, as QuantizeLinear does, and saturate to
    /// `[-8, 7]`).
    pub fn cast(&self, dtype: DType) -> TensorData {
        if self.dtype() == dtype {
            return self.clone();
        }
        let n = self.len();
        match dtype {
            DType::F32 => TensorData::F32(match self {
                TensorData::F64(v) => v.iter().map(|&x| x as f32).collect(),
                _ => (0..n).map(|i| self.get_f64(i) as f32).collect(),
            }),
            DType::F16 => TensorData::F16((0..n).map(|i| f16::from_f64(self.get_f64(i))).collect()),
            DType::BF16 => {
                TensorData::BF16((0..n).map(|i| bf16::from_f64(self.get_f64(i))).collect())
            }
            // Saturating round-to-nearest-even, as ONNX's Cast with `saturate=1`.
            DType::F8E4M3 => {
                TensorData::F8E4M3((0..n).map(|i| F8E4M3::from_f64(self.get_f64(i))).collect())
            }
            DType::F64 => TensorData::F64(self.to_f64_vec()),
            DType::I8 => TensorData::I8((0..n).map(|i| self.get_f64(i) as i8).collect()),
            DType::I4 => TensorData::I4((0..n).map(|i| int4_from_f64(self.get_f64(i))).collect()),
            DType::U8 => TensorData::U8((0..n).map(|i| self.get_f64(i) as u8).collect()),
            DType::I16 => TensorData::I16((0..n).map(|i| self.get_f64(i) as i16).collect()),
            DType::U16 => TensorData::U16((0..n).map(|i| self.get_f64(i) as u16).collect()),
            DType::I32 => TensorData::I32((0..n).map(|i| self.get_i64(i) as i32).collect()),
            DType::U32 => TensorData::U32((0..n).map(|i| self.get_i64(i) as u32).collect()),
            DType::I64 => TensorData::I64((0..n).map(|i| self.get_i64(i)).collect()),
            DType::U64 => TensorData::U64((0..n).map(|i| self.get_i64(i) as u64).collect()),
            DType::Bool => TensorData::Bool((0..n).map(|i| self.get_f64(i) != 0.0).collect()),
            DType::String => TensorData::String(
                (0..n)
                    .map(|i| self.get_f64(i).to_string().into_bytes())
                    .collect(),
            ),
        }
    }
}

impl Tensor {
    /// A tensor of `shape` over `data`; fails if the element count differs.
    pub fn new(shape: Vec<usize>, data: TensorData) -> Result<Tensor> {
        let expected: usize = shape.iter().product();
        if expected != data.len() {
            return Err(IrError::ShapeMismatch {
                name: String::new(),
                len: data.len(),
                shape,
            });
        }
        Ok(Tensor { shape, data })
    }

    /// An f32 tensor; panics if `values` does not fill `shape` (for tests and literals).
    pub fn from_f32(shape: Vec<usize>, values: Vec<f32>) -> Tensor {
        Tensor::new(shape, TensorData::F32(values)).expect("values fill the shape")
    }

    /// An i64 tensor; panics if `values` does not fill `shape` (for tests and literals).
    pub fn from_i64(shape: Vec<usize>, values: Vec<i64>) -> Tensor {
        Tensor::new(shape, TensorData::I64(values)).expect("values fill the shape")
    }

    /// A scalar (rank 0) f32 tensor.
    pub fn scalar_f32(v: f32) -> Tensor {
        Tensor::from_f32(vec![], vec![v])
    }

    /// A tensor of zeros.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Tensor {
        let n = shape.iter().product();
        Tensor {
            shape,
            data: TensorData::zeros(dtype, n),
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The rank (number of dimensions).
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the tensor has no element.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Bytes the elements take (what an ONNX `raw_data` field would hold: INT4 packs
    /// two elements per byte).
    pub fn byte_size(&self) -> usize {
        let dtype = self.dtype();
        dtype
            .stored_bytes(self.len())
            .unwrap_or(self.len() * dtype.size_of())
    }

    /// The storage.
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// The storage, mutably.
    pub fn data_mut(&mut self) -> &mut TensorData {
        &mut self.data
    }

    /// Takes the storage out.
    pub fn into_data(self) -> TensorData {
        self.data
    }

    /// Same elements under another shape of equal element count.
    pub fn reshaped(self, shape: Vec<usize>) -> Result<Tensor> {
        Tensor::new(shape, self.data)
    }

    /// The f32 elements, or an error naming the actual type.
    pub fn as_f32(&self) -> Result<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Ok(v),
            other => Err(IrError::WrongType {
                actual: other.dtype(),
                expected: "float",
            }),
        }
    }

    /// The f32 elements, mutably.
    pub fn as_f32_mut(&mut self) -> Result<&mut [f32]> {
        match &mut self.data {
            TensorData::F32(v) => Ok(v),
            other => Err(IrError::WrongType {
                actual: other.dtype(),
                expected: "float",
            }),
        }
    }

    /// The i64 elements, or an error naming the actual type.
    pub fn as_i64(&self) -> Result<&[i64]> {
        match &self.data {
            TensorData::I64(v) => Ok(v),
            other => Err(IrError::WrongType {
                actual: other.dtype(),
                expected: "int64",
            }),
        }
    }

    /// Every element converted to f32 (a copy unless already f32).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        match &self.data {
            TensorData::F32(v) => v.clone(),
            d => (0..d.len()).map(|i| d.get_f64(i) as f32).collect(),
        }
    }

    /// Every element converted to i64.
    pub fn to_i64_vec(&self) -> Vec<i64> {
        (0..self.len()).map(|i| self.data.get_i64(i)).collect()
    }

    /// This tensor converted to `dtype`.
    pub fn cast(&self, dtype: DType) -> Tensor {
        Tensor {
            shape: self.shape.clone(),
            data: self.data.cast(dtype),
        }
    }

    /// Little-endian bytes of the elements, as ONNX `raw_data` stores them (not for
    /// strings; INT4 packed two per byte, first element in the low nibble).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match &self.data {
            TensorData::F32(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::F16(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::BF16(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::F8E4M3(v) => v.iter().map(F8E4M3::to_bits).collect(),
            TensorData::F64(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::I8(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::I4(v) => pack_int4(v),
            TensorData::U8(v) => v.clone(),
            TensorData::I16(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::U16(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::I32(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::U32(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::I64(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::U64(v) => le_bytes(v, |x| x.to_le_bytes()),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8).collect(),
            TensorData::String(_) => Vec::new(),
        }
    }

    /// Decodes little-endian `bytes` as `dtype` elements filling `shape` (INT4: the
    /// elements packed two per byte, `ceil(n / 2)` bytes, nibbles sign-extended).
    pub fn from_le_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Result<Tensor> {
        if dtype == DType::I4 {
            let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
            return match count.and_then(|n| unpack_int4(bytes, n)) {
                Some(v) => Tensor::new(shape, TensorData::I4(v)),
                None => Err(IrError::ShapeMismatch {
                    name: String::new(),
                    len: bytes.len().saturating_mul(2),
                    shape,
                }),
            };
        }
        let size = dtype.size_of();
        if dtype == DType::String || !bytes.len().is_multiple_of(size) {
            return Err(IrError::ShapeMismatch {
                name: String::new(),
                len: bytes.len() / size.max(1),
                shape,
            });
        }
        macro_rules! decode {
            ($t:ty, $variant:ident) => {
                TensorData::$variant(
                    bytes
                        .chunks_exact(size)
                        .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk size")))
                        .collect(),
                )
            };
        }
        let data = match dtype {
            DType::F32 => decode!(f32, F32),
            DType::F16 => decode!(f16, F16),
            DType::BF16 => decode!(bf16, BF16),
            DType::F8E4M3 => {
                TensorData::F8E4M3(bytes.iter().map(|&b| F8E4M3::from_bits(b)).collect())
            }
            DType::F64 => decode!(f64, F64),
            DType::I8 => decode!(i8, I8),
            DType::U8 => TensorData::U8(bytes.to_vec()),
            DType::I16 => decode!(i16, I16),
            DType::U16 => decode!(u16, U16),
            DType::I32 => decode!(i32, I32),
            DType::U32 => decode!(u32, U32),
            DType::I64 => decode!(i64, I64),
            DType::U64 => decode!(u64, U64),
            DType::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
            DType::String | DType::I4 => unreachable!("handled above"),
        };
        Tensor::new(shape, data)
    }
}

/// The little-endian bytes of every element of `v`, written chunk by chunk into one
/// buffer (a plain copy on little-endian machines; an `extend` per element was ten
/// times slower on a 400 KB output).
fn le_bytes<T, const N: usize>(v: &[T], bytes: impl Fn(&T) -> [u8; N]) -> Vec<u8> {
    let mut out = vec![0u8; v.len() * N];
    for (chunk, x) in out.chunks_exact_mut(N).zip(v) {
        chunk.copy_from_slice(&bytes(x));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_rejects_wrong_element_count() {
        assert!(Tensor::new(vec![2, 3], TensorData::F32(vec![0.0; 5])).is_err());
        assert!(Tensor::new(vec![], TensorData::F32(vec![1.0])).is_ok());
    }

    #[test]
    fn le_bytes_round_trip() {
        let t = Tensor::from_f32(vec![2, 2], vec![1.0, -2.5, 3.25, f32::MAX]);
        let back = Tensor::from_le_bytes(DType::F32, vec![2, 2], &t.to_le_bytes()).unwrap();
        assert_eq!(t, back);
        let i = Tensor::from_i64(vec![3], vec![-1, 0, i64::MAX]);
        let back = Tensor::from_le_bytes(DType::I64, vec![3], &i.to_le_bytes()).unwrap();
        assert_eq!(i, back);
    }

    #[test]
    fn int4_packs_two_per_byte_low_nibble_first() {
        let t = Tensor::new(vec![5], TensorData::I4(vec![-8, 7, -1, 0, 3])).unwrap();
        assert_eq!(t.dtype(), DType::I4);
        assert_eq!(t.byte_size(), 3);
        assert_eq!(t.to_le_bytes(), [0x78, 0x0F, 0x03]);
        let back = Tensor::from_le_bytes(DType::I4, vec![5], &t.to_le_bytes()).unwrap();
        assert_eq!(back, t);
        // Even and odd counts, every value, and a scalar.
        for n in [0usize, 1, 2, 15, 16, 17] {
            let v: Vec<i8> = (0..n).map(|i| (i % 16) as i8 - 8).collect();
            let t = Tensor::new(vec![n], TensorData::I4(v)).unwrap();
            let bytes = t.to_le_bytes();
            assert_eq!(bytes.len(), n.div_ceil(2));
            assert_eq!(t.byte_size(), n.div_ceil(2));
            assert_eq!(
                Tensor::from_le_bytes(DType::I4, vec![n], &bytes).unwrap(),
                t
            );
        }
        let s = Tensor::from_le_bytes(DType::I4, vec![], &[0xFE]).unwrap();
        assert_eq!(s.data(), &TensorData::I4(vec![-2]));
        // ceil(n / 2) bytes exactly.
        assert!(Tensor::from_le_bytes(DType::I4, vec![2, 2], &[0; 3]).is_err());
        assert!(Tensor::from_le_bytes(DType::I4, vec![3], &[0; 1]).is_err());
        assert!(Tensor::from_le_bytes(DType::I4, vec![usize::MAX, 2], &[0]).is_err());
    }

    #[test]
    fn int4_reads_and_casts() {
        let t = Tensor::new(vec![4], TensorData::I4(vec![-8, 7, -1, 2])).unwrap();
        assert_eq!(t.data().get_f64(0), -8.0);
        assert_eq!(t.to_i64_vec(), [-8, 7, -1, 2]);
        assert_eq!(t.data().to_f64_vec(), [-8.0, 7.0, -1.0, 2.0]);
        assert_eq!(t.data().gather(&[3, 0]), TensorData::I4(vec![2, -8]));
        assert_eq!(TensorData::zeros(DType::I4, 2), TensorData::I4(vec![0, 0]));
        // To INT4: round half to even, saturate, NaN to 0, from every type.
        let f = Tensor::from_f32(vec![6], vec![2.5, -2.5, 7.5, -8.5, 100.0, f32::NAN]);
        assert_eq!(
            f.cast(DType::I4).data(),
            &TensorData::I4(vec![2, -2, 7, -8, 7, 0])
        );
        let i = Tensor::from_i64(vec![3], vec![20, -20, 5]);
        assert_eq!(i.cast(DType::I4).data(), &TensorData::I4(vec![7, -8, 5]));
        assert_eq!(
            t.cast(DType::F32).as_f32().unwrap(),
            &[-8.0, 7.0, -1.0, 2.0]
        );
        assert_eq!(
            t.cast(DType::I8).data(),
            &TensorData::I8(vec![-8, 7, -1, 2])
        );
    }

    #[test]
    fn cast_f32_to_f16_and_back() {
        let t = Tensor::from_f32(vec![3], vec![1.0, 0.1, 70000.0]);
        let h = t.cast(DType::F16);
        assert_eq!(h.dtype(), DType::F16);
        let back = h.to_f32_vec();
        assert_eq!(back[0], 1.0);
        assert!((back[1] - 0.1).abs() < 1e-3);
        assert!(back[2].is_infinite());
    }
}
