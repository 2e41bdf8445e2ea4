//! Element types of the tensors the runtime moves between the host and a backend.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of an I/O tensor.
///
/// Covers ONNX's numeric types and TensorRT's narrow types (FP8, INT4, FP4, E8M0).
/// Host buffers hold elements little-endian; 4-bit types pack two elements per byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    /// 32-bit float.
    #[serde(rename = "float32")]
    F32,
    /// 16-bit IEEE float.
    #[serde(rename = "float16")]
    F16,
    /// bfloat16.
    #[serde(rename = "bfloat16")]
    BF16,
    /// 64-bit float.
    #[serde(rename = "float64")]
    F64,
    /// Signed 8-bit integer.
    #[serde(rename = "int8")]
    I8,
    /// Unsigned 8-bit integer.
    #[serde(rename = "uint8")]
    U8,
    /// Signed 16-bit integer.
    #[serde(rename = "int16")]
    I16,
    /// Unsigned 16-bit integer.
    #[serde(rename = "uint16")]
    U16,
    /// Signed 32-bit integer.
    #[serde(rename = "int32")]
    I32,
    /// Unsigned 32-bit integer.
    #[serde(rename = "uint32")]
    U32,
    /// Signed 64-bit integer.
    #[serde(rename = "int64")]
    I64,
    /// Unsigned 64-bit integer.
    #[serde(rename = "uint64")]
    U64,
    /// Boolean, one byte (0 or 1).
    #[serde(rename = "bool")]
    Bool,
    /// 8-bit float E4M3 (TensorRT FP8).
    #[serde(rename = "fp8e4m3")]
    Fp8E4M3,
    /// Signed 4-bit integer, two per byte (TensorRT INT4).
    #[serde(rename = "int4")]
    Int4,
    /// 4-bit float E2M1, two per byte (TensorRT FP4).
    #[serde(rename = "fp4e2m1")]
    Fp4E2M1,
    /// 8-bit exponent-only scale (TensorRT E8M0).
    #[serde(rename = "e8m0")]
    E8M0,
}

impl DataType {
    /// Every type, for tables and tests.
    pub const ALL: [DataType; 17] = [
        DataType::F32,
        DataType::F16,
        DataType::BF16,
        DataType::F64,
        DataType::I8,
        DataType::U8,
        DataType::I16,
        DataType::U16,
        DataType::I32,
        DataType::U32,
        DataType::I64,
        DataType::U64,
        DataType::Bool,
        DataType::Fp8E4M3,
        DataType::Int4,
        DataType::Fp4E2M1,
        DataType::E8M0,
    ];

    /// Lower-case name (`float32`, `float16`, `int8`, ...), as used in JSON and messages.
    pub fn name(self) -> &'static str {
        match self {
            DataType::F32 => "float32",
            DataType::F16 => "float16",
            DataType::BF16 => "bfloat16",
            DataType::F64 => "float64",
            DataType::I8 => "int8",
            DataType::U8 => "uint8",
            DataType::I16 => "int16",
            DataType::U16 => "uint16",
            DataType::I32 => "int32",
            DataType::U32 => "uint32",
            DataType::I64 => "int64",
            DataType::U64 => "uint64",
            DataType::Bool => "bool",
            DataType::Fp8E4M3 => "fp8e4m3",
            DataType::Int4 => "int4",
            DataType::Fp4E2M1 => "fp4e2m1",
            DataType::E8M0 => "e8m0",
        }
    }

    /// The type named `name` (as [`DataType::name`] spells it).
    pub fn from_name(name: &str) -> Option<DataType> {
        DataType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Bits one element takes.
    pub fn bits(self) -> usize {
        match self {
            DataType::Int4 | DataType::Fp4E2M1 => 4,
            DataType::I8 | DataType::U8 | DataType::Bool | DataType::Fp8E4M3 | DataType::E8M0 => 8,
            DataType::F16 | DataType::BF16 | DataType::I16 | DataType::U16 => 16,
            DataType::F32 | DataType::I32 | DataType::U32 => 32,
            DataType::F64 | DataType::I64 | DataType::U64 => 64,
        }
    }

    /// Bytes `elements` elements take (4-bit types round up to whole bytes).
    pub fn byte_len(self, elements: usize) -> usize {
        (elements * self.bits()).div_ceil(8)
    }

    /// Whether the type is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::F32
                | DataType::F16
                | DataType::BF16
                | DataType::F64
                | DataType::Fp8E4M3
                | DataType::Fp4E2M1
        )
    }
}

/// The value of FP8 E4M3 code `bits` (OCP E4M3 / ONNX `FLOAT8E4M3FN`: bias 7,
/// subnormals at exponent 0, no infinity, `S.1111.111` NaN). Exact.
pub(crate) fn fp8_e4m3_to_f32(bits: u8) -> f32 {
    let sign = if bits & 0x80 != 0 { -1.0f32 } else { 1.0 };
    if bits & 0x7F == 0x7F {
        return f32::NAN.copysign(sign);
    }
    let (exp, mantissa) = (i32::from((bits >> 3) & 0xF), f32::from(bits & 0x7));
    let magnitude = if exp == 0 {
        mantissa * 2f32.powi(-9)
    } else {
        (8.0 + mantissa) * 2f32.powi(exp - 10)
    };
    sign * magnitude
}

/// Element `i` of INT4 data packed two per byte, low nibble first (sign-extended).
pub(crate) fn int4_at(packed: &[u8], i: usize) -> i8 {
    let byte = packed[i / 2] >> (4 * (i % 2));
    ((byte << 4) as i8) >> 4
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for t in DataType::ALL {
            assert_eq!(DataType::from_name(t.name()), Some(t));
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.name()));
            let back: DataType = serde_json::from_str(&json).unwrap();
            assert_eq!(back, t);
        }
        assert_eq!(DataType::from_name("float"), None);
    }

    #[test]
    fn byte_lengths() {
        assert_eq!(DataType::F32.byte_len(10), 40);
        assert_eq!(DataType::F16.byte_len(3), 6);
        assert_eq!(DataType::I64.byte_len(2), 16);
        assert_eq!(DataType::Bool.byte_len(7), 7);
        assert_eq!(DataType::Int4.byte_len(7), 4);
        assert_eq!(DataType::Fp4E2M1.byte_len(8), 4);
        assert_eq!(DataType::F32.byte_len(0), 0);
    }

    #[test]
    fn int4_elements_unpack_low_nibble_first() {
        let packed = [0x8F, 0x07, 0x21];
        let got: Vec<i8> = (0..6).map(|i| int4_at(&packed, i)).collect();
        assert_eq!(got, [-1, -8, 7, 0, 1, 2]);
    }

    #[test]
    fn fp8_codes_decode() {
        assert_eq!(fp8_e4m3_to_f32(0x00), 0.0);
        assert_eq!(fp8_e4m3_to_f32(0x80).to_bits(), (-0.0f32).to_bits());
        assert_eq!(fp8_e4m3_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(fp8_e4m3_to_f32(0x07), 7.0 * 2f32.powi(-9));
        assert_eq!(fp8_e4m3_to_f32(0x08), 2f32.powi(-6));
        assert_eq!(fp8_e4m3_to_f32(0x38), 1.0);
        assert_eq!(fp8_e4m3_to_f32(0x7E), 448.0);
        assert_eq!(fp8_e4m3_to_f32(0xFE), -448.0);
        assert!(fp8_e4m3_to_f32(0x7F).is_nan());
        assert!(fp8_e4m3_to_f32(0xFF).is_nan() && fp8_e4m3_to_f32(0xFF).is_sign_negative());
    }
}
