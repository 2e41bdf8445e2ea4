//! Plain Rust views of the shim's enums and shapes (no TensorRT needed).

use crate::ffi;
use crate::TrtError;
use std::fmt;

/// Element type of an engine I/O tensor, as the shim reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// 32-bit float.
    Float,
    /// 16-bit float.
    Half,
    /// bfloat16.
    BF16,
    /// Signed 8-bit integer.
    Int8,
    /// Unsigned 8-bit integer.
    UInt8,
    /// Signed 32-bit integer.
    Int32,
    /// Signed 64-bit integer.
    Int64,
    /// Boolean (one byte).
    Bool,
    /// 8-bit float (E4M3).
    Fp8,
    /// Signed 4-bit integer, packed two per byte.
    Int4,
    /// 4-bit float (E2M1), packed two per byte.
    Fp4,
    /// 8-bit exponent-only scale (E8M0).
    E8M0,
    /// A type the shim does not know (the raw `rtq_trt_dtype` value).
    Unknown(i32),
}

impl DataType {
    /// The type for a raw `rtq_trt_dtype` value.
    pub fn from_raw(raw: i32) -> DataType {
        match raw {
            x if x == ffi::RTQ_TRT_DTYPE_FLOAT as i32 => DataType::Float,
            x if x == ffi::RTQ_TRT_DTYPE_HALF as i32 => DataType::Half,
            x if x == ffi::RTQ_TRT_DTYPE_BF16 as i32 => DataType::BF16,
            x if x == ffi::RTQ_TRT_DTYPE_INT8 as i32 => DataType::Int8,
            x if x == ffi::RTQ_TRT_DTYPE_UINT8 as i32 => DataType::UInt8,
            x if x == ffi::RTQ_TRT_DTYPE_INT32 as i32 => DataType::Int32,
            x if x == ffi::RTQ_TRT_DTYPE_INT64 as i32 => DataType::Int64,
            x if x == ffi::RTQ_TRT_DTYPE_BOOL as i32 => DataType::Bool,
            x if x == ffi::RTQ_TRT_DTYPE_FP8 as i32 => DataType::Fp8,
            x if x == ffi::RTQ_TRT_DTYPE_INT4 as i32 => DataType::Int4,
            x if x == ffi::RTQ_TRT_DTYPE_FP4 as i32 => DataType::Fp4,
            x if x == ffi::RTQ_TRT_DTYPE_E8M0 as i32 => DataType::E8M0,
            other => DataType::Unknown(other),
        }
    }

    /// Bytes `elements` values of this type occupy (4-bit types pack two per byte);
    /// `None` for an unknown type.
    pub fn byte_len(self, elements: usize) -> Option<usize> {
        Some(match self {
            DataType::Float | DataType::Int32 => elements * 4,
            DataType::Half | DataType::BF16 => elements * 2,
            DataType::Int64 => elements * 8,
            DataType::Int8 | DataType::UInt8 | DataType::Bool | DataType::Fp8 | DataType::E8M0 => {
                elements
            }
            DataType::Int4 | DataType::Fp4 => elements.div_ceil(2),
            DataType::Unknown(_) => return None,
        })
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Float => f.write_str("float32"),
            DataType::Half => f.write_str("float16"),
            DataType::BF16 => f.write_str("bfloat16"),
            DataType::Int8 => f.write_str("int8"),
            DataType::UInt8 => f.write_str("uint8"),
            DataType::Int32 => f.write_str("int32"),
            DataType::Int64 => f.write_str("int64"),
            DataType::Bool => f.write_str("bool"),
            DataType::Fp8 => f.write_str("fp8e4m3"),
            DataType::Int4 => f.write_str("int4"),
            DataType::Fp4 => f.write_str("fp4e2m1"),
            DataType::E8M0 => f.write_str("e8m0"),
            DataType::Unknown(raw) => write!(f, "unknown({raw})"),
        }
    }
}

/// Whether an engine tensor is an input or an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoMode {
    /// An engine input.
    Input,
    /// An engine output.
    Output,
    /// Neither.
    None,
}

impl IoMode {
    /// The mode for a raw `rtq_trt_io_mode` value.
    pub fn from_raw(raw: i32) -> IoMode {
        match raw {
            x if x == ffi::RTQ_TRT_IO_INPUT as i32 => IoMode::Input,
            x if x == ffi::RTQ_TRT_IO_OUTPUT as i32 => IoMode::Output,
            _ => IoMode::None,
        }
    }
}

/// Where TensorRT expects an I/O tensor's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// Device memory (ordinary execution tensors).
    Device,
    /// Host memory (shape tensors).
    Host,
}

impl Location {
    /// The location for a raw `rtq_trt_location` value.
    pub fn from_raw(raw: i32) -> Location {
        if raw == ffi::RTQ_TRT_LOCATION_HOST as i32 {
            Location::Host
        } else {
            Location::Device
        }
    }
}

/// Which shape of an optimization profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProfileSelector {
    /// Smallest accepted shape.
    Min,
    /// Shape the kernels are tuned for.
    Opt,
    /// Largest accepted shape.
    Max,
}

impl ProfileSelector {
    /// The raw `rtq_trt_profile_selector` value.
    pub fn raw(self) -> i32 {
        (match self {
            ProfileSelector::Min => ffi::RTQ_TRT_PROFILE_MIN,
            ProfileSelector::Opt => ffi::RTQ_TRT_PROFILE_OPT,
            ProfileSelector::Max => ffi::RTQ_TRT_PROFILE_MAX,
        }) as i32
    }
}

/// Severity of TensorRT log messages a builder keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Unrecoverable internal errors only.
    InternalError,
    /// Errors.
    Error,
    /// Errors and warnings.
    Warning,
    /// Also informational messages.
    Info,
    /// Everything.
    Verbose,
}

impl Severity {
    /// The raw `rtq_trt_severity` value.
    pub fn raw(self) -> i32 {
        (match self {
            Severity::InternalError => ffi::RTQ_TRT_SEVERITY_INTERNAL_ERROR,
            Severity::Error => ffi::RTQ_TRT_SEVERITY_ERROR,
            Severity::Warning => ffi::RTQ_TRT_SEVERITY_WARNING,
            Severity::Info => ffi::RTQ_TRT_SEVERITY_INFO,
            Severity::Verbose => ffi::RTQ_TRT_SEVERITY_VERBOSE,
        }) as i32
    }
}

/// A TensorRT version, decoded from `major * 10000 + minor * 100 + patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrtVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch version.
    pub patch: u32,
}

impl TrtVersion {
    /// Decodes TensorRT's integer encoding (`NV_TENSORRT_VERSION`, `getInferLibVersion()`).
    pub fn from_encoded(encoded: i32) -> TrtVersion {
        let v = encoded.max(0) as u32;
        TrtVersion {
            major: v / 10000,
            minor: (v / 100) % 100,
            patch: v % 100,
        }
    }
}

impl fmt::Display for TrtVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Converts a shape to the shim's fixed-size dims; `tensor` names it in the error
/// raised when the rank exceeds [`ffi::RTQ_TRT_MAX_DIMS`].
pub fn to_ffi_dims(tensor: &str, shape: &[i64]) -> Result<ffi::rtq_trt_dims, TrtError> {
    let max = ffi::RTQ_TRT_MAX_DIMS as usize;
    if shape.len() > max {
        return Err(TrtError::invalid(format!(
            "tensor `{tensor}`: rank {} exceeds TensorRT's maximum of {max} dimensions",
            shape.len()
        )));
    }
    let mut dims = ffi::rtq_trt_dims {
        nb_dims: shape.len() as i32,
        ..Default::default()
    };
    dims.d[..shape.len()].copy_from_slice(shape);
    Ok(dims)
}

/// The shape held in the shim's dims (a negative `nb_dims` reads as rank 0).
pub fn from_ffi_dims(dims: &ffi::rtq_trt_dims) -> Vec<i64> {
    let n = (dims.nb_dims.max(0) as usize).min(dims.d.len());
    dims.d[..n].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_types_follow_the_header_values() {
        assert_eq!(DataType::from_raw(1), DataType::Float);
        assert_eq!(DataType::from_raw(2), DataType::Half);
        assert_eq!(DataType::from_raw(4), DataType::Int8);
        assert_eq!(DataType::from_raw(12), DataType::E8M0);
        assert_eq!(DataType::from_raw(0), DataType::Unknown(0));
        assert_eq!(DataType::from_raw(99), DataType::Unknown(99));
    }

    #[test]
    fn byte_lengths_pack_four_bit_types() {
        assert_eq!(DataType::Float.byte_len(3), Some(12));
        assert_eq!(DataType::Half.byte_len(3), Some(6));
        assert_eq!(DataType::Int64.byte_len(2), Some(16));
        assert_eq!(DataType::Bool.byte_len(5), Some(5));
        assert_eq!(DataType::Int4.byte_len(5), Some(3));
        assert_eq!(DataType::Fp4.byte_len(4), Some(2));
        assert_eq!(DataType::Unknown(42).byte_len(4), None);
    }

    #[test]
    fn versions_decode() {
        let v = TrtVersion::from_encoded(100_305);
        assert_eq!((v.major, v.minor, v.patch), (10, 3, 5));
        assert_eq!(v.to_string(), "10.3.5");
        assert_eq!(TrtVersion::from_encoded(110_100).to_string(), "11.1.0");
    }

    #[test]
    fn dims_round_trip_and_reject_high_rank() {
        let dims = to_ffi_dims("x", &[-1, 3, 224, 224]).unwrap();
        assert_eq!(dims.nb_dims, 4);
        assert_eq!(from_ffi_dims(&dims), vec![-1, 3, 224, 224]);
        let scalar = to_ffi_dims("s", &[]).unwrap();
        assert_eq!(from_ffi_dims(&scalar), Vec::<i64>::new());
        let err = to_ffi_dims("big", &[1; 9]).unwrap_err();
        assert!(err.to_string().contains("tensor `big`: rank 9"), "{err}");
    }

    #[test]
    fn enum_raw_values_match_the_header() {
        assert_eq!(ProfileSelector::Opt.raw(), 1);
        assert_eq!(Severity::Warning.raw(), 2);
        assert_eq!(IoMode::from_raw(1), IoMode::Input);
        assert_eq!(IoMode::from_raw(2), IoMode::Output);
        assert_eq!(Location::from_raw(1), Location::Host);
        assert_eq!(Location::from_raw(0), Location::Device);
    }
}
