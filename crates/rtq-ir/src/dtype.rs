use serde::Serialize;

/// Element type of a tensor, numbered as ONNX's `TensorProto.DataType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 8-bit unsigned integer.
    U8,
    /// 8-bit signed integer.
    I8,
    /// 16-bit unsigned integer.
    U16,
    /// 16-bit signed integer.
    I16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// Byte strings.
    String,
    /// Boolean.
    Bool,
    /// IEEE half precision.
    F16,
    /// 64-bit float.
    F64,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit unsigned integer.
    U64,
    /// bfloat16.
    BF16,
    /// 8-bit float, 4 exponent and 3 mantissa bits, finite only (OCP FP8 E4M3,
    /// ONNX `FLOAT8E4M3FN`: largest value 448, NaN but no infinity).
    F8E4M3,
    /// Signed 4-bit integer (ONNX `INT4`), values -8 to 7: one `i8` per element in
    /// memory, packed two per byte where ONNX stores it (see [`DType::stored_bytes`]).
    I4,
}

impl DType {
    /// The ONNX `TensorProto.DataType` code.
    pub fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::String => 8,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
            DType::F8E4M3 => 17,
            DType::I4 => 22,
        }
    }

    /// The type for an ONNX `TensorProto.DataType` code, if rtq supports it.
    pub fn from_onnx_code(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            4 => DType::U16,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            8 => DType::String,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            12 => DType::U32,
            13 => DType::U64,
            16 => DType::BF16,
            17 => DType::F8E4M3,
            22 => DType::I4,
            _ => return None,
        })
    }

    /// Bytes one element takes in memory (strings count as pointers; INT4 takes a
    /// whole byte unpacked). Bytes of stored data: [`DType::stored_bytes`].
    pub fn size_of(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool | DType::F8E4M3 | DType::I4 => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 | DType::String => 8,
        }
    }

    /// Bytes `count` elements take stored as ONNX `raw_data` (and external data) holds
    /// them: `count * size_of`, except INT4, packed two per byte (`ceil(count / 2)`).
    /// `None` on overflow.
    pub fn stored_bytes(self, count: usize) -> Option<usize> {
        match self {
            DType::I4 => Some(crate::int4::int4_packed_len(count)),
            _ => count.checked_mul(self.size_of()),
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32 | DType::F16 | DType::F64 | DType::BF16 | DType::F8E4M3
        )
    }

    /// Lower-case name as ONNX spells it (`float`, `float16`, `int8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::U16 => "uint16",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::String => "string",
            DType::Bool => "bool",
            DType::F16 => "float16",
            DType::F64 => "double",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::BF16 => "bfloat16",
            DType::F8E4M3 => "float8e4m3fn",
            DType::I4 => "int4",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onnx_codes_round_trip() {
        for code in 0..30 {
            if let Some(dt) = DType::from_onnx_code(code) {
                assert_eq!(dt.onnx_code(), code);
            }
        }
        assert_eq!(DType::from_onnx_code(1), Some(DType::F32));
        assert_eq!(DType::from_onnx_code(10), Some(DType::F16));
        assert_eq!(DType::from_onnx_code(0), None);
        assert_eq!(DType::from_onnx_code(22), Some(DType::I4));
        assert_eq!(DType::I4.name(), "int4");
        assert!(!DType::I4.is_float());
    }

    #[test]
    fn stored_bytes_pack_int4() {
        assert_eq!(DType::F32.stored_bytes(3), Some(12));
        assert_eq!(DType::I4.stored_bytes(0), Some(0));
        assert_eq!(DType::I4.stored_bytes(1), Some(1));
        assert_eq!(DType::I4.stored_bytes(7), Some(4));
        assert_eq!(DType::I4.stored_bytes(4096 * 4096), Some(8 << 20));
        assert_eq!(DType::I4.stored_bytes(usize::MAX), Some(usize::MAX / 2 + 1));
        assert_eq!(DType::I4.size_of(), 1);
        assert_eq!(DType::F32.stored_bytes(usize::MAX), None);
    }
}
