//! The error type of the shim: a status code plus the shim's message.

use crate::ffi;
use std::fmt;

/// Category of a shim failure (`rtq_trt_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Bad argument or option.
    InvalidArgument,
    /// Not available in the linked TensorRT version.
    Unsupported,
    /// The ONNX parser rejected the model.
    Parse,
    /// Engine build failed.
    Build,
    /// Plan deserialization failed.
    Deserialize,
    /// Unknown tensor name, index or profile.
    NotFound,
    /// Shape/address setting or enqueue failed.
    Execution,
    /// Out of host or device memory.
    OutOfMemory,
    /// Unexpected C++ exception or inconsistency.
    Internal,
    /// A status code this crate does not know.
    Other(i32),
}

impl Status {
    /// The status for a raw `rtq_trt_status` code (`None` for `RTQ_TRT_OK`).
    pub fn from_raw(raw: i32) -> Option<Status> {
        Some(match raw {
            x if x == ffi::RTQ_TRT_OK as i32 => return None,
            x if x == ffi::RTQ_TRT_ERR_INVALID_ARGUMENT as i32 => Status::InvalidArgument,
            x if x == ffi::RTQ_TRT_ERR_UNSUPPORTED as i32 => Status::Unsupported,
            x if x == ffi::RTQ_TRT_ERR_PARSE as i32 => Status::Parse,
            x if x == ffi::RTQ_TRT_ERR_BUILD as i32 => Status::Build,
            x if x == ffi::RTQ_TRT_ERR_DESERIALIZE as i32 => Status::Deserialize,
            x if x == ffi::RTQ_TRT_ERR_NOT_FOUND as i32 => Status::NotFound,
            x if x == ffi::RTQ_TRT_ERR_EXECUTION as i32 => Status::Execution,
            x if x == ffi::RTQ_TRT_ERR_OUT_OF_MEMORY as i32 => Status::OutOfMemory,
            x if x == ffi::RTQ_TRT_ERR_INTERNAL as i32 => Status::Internal,
            other => Status::Other(other),
        })
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::InvalidArgument => f.write_str("invalid argument"),
            Status::Unsupported => f.write_str("unsupported"),
            Status::Parse => f.write_str("ONNX parse error"),
            Status::Build => f.write_str("build error"),
            Status::Deserialize => f.write_str("deserialization error"),
            Status::NotFound => f.write_str("not found"),
            Status::Execution => f.write_str("execution error"),
            Status::OutOfMemory => f.write_str("out of memory"),
            Status::Internal => f.write_str("internal error"),
            Status::Other(code) => write!(f, "status {code}"),
        }
    }
}

/// A failed shim call: its category and the shim's message (which names the tensor,
/// node or option involved and carries TensorRT's own error log lines).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({status})")]
pub struct TrtError {
    /// Category.
    pub status: Status,
    /// Message from the shim, or from this crate's argument checks.
    pub message: String,
}

impl TrtError {
    /// An invalid-argument error raised on the Rust side.
    pub fn invalid(message: impl Into<String>) -> TrtError {
        TrtError {
            status: Status::InvalidArgument,
            message: message.into(),
        }
    }

    /// Turns a raw status into `Ok(())` or an error carrying the calling thread's
    /// last shim message.
    #[cfg(feature = "link")]
    pub(crate) fn check(raw: ffi::rtq_trt_status) -> Result<(), TrtError> {
        match Status::from_raw(raw as i32) {
            None => Ok(()),
            Some(status) => Err(TrtError {
                status,
                message: last_error(),
            }),
        }
    }
}

/// The calling thread's last shim error message.
#[cfg(feature = "link")]
pub(crate) fn last_error() -> String {
    // SAFETY: a NULL buffer of size 0 only queries the length.
    let len = unsafe { ffi::rtq_trt_last_error(std::ptr::null_mut(), 0) };
    let mut buf = vec![0u8; len + 1];
    // SAFETY: `buf` holds `len + 1` writable bytes.
    unsafe { ffi::rtq_trt_last_error(buf.as_mut_ptr().cast(), buf.len()) };
    buf.truncate(len);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Turns a Rust string into a C string, naming `what` when it holds a NUL byte.
#[cfg(feature = "link")]
pub(crate) fn c_string(what: &str, value: &str) -> Result<std::ffi::CString, TrtError> {
    std::ffi::CString::new(value)
        .map_err(|_| TrtError::invalid(format!("{what} `{value}` contains a NUL byte")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_follow_the_header() {
        assert_eq!(Status::from_raw(0), None);
        assert_eq!(Status::from_raw(3), Some(Status::Parse));
        assert_eq!(Status::from_raw(5), Some(Status::Deserialize));
        assert_eq!(Status::from_raw(9), Some(Status::Internal));
        assert_eq!(Status::from_raw(77), Some(Status::Other(77)));
    }

    #[test]
    fn display_keeps_the_message_first() {
        let e = TrtError {
            status: Status::Parse,
            message: "node 3 `conv1` (Conv): bad weights".into(),
        };
        assert_eq!(
            e.to_string(),
            "node 3 `conv1` (Conv): bad weights (ONNX parse error)"
        );
    }
}
