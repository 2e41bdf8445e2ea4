//! Versions of the linked TensorRT library and of the headers the shim was built with.

use crate::{ffi, TrtVersion};

/// Version of the TensorRT library loaded at run time (`getInferLibVersion()`).
pub fn library_version() -> TrtVersion {
    // SAFETY: takes no arguments and only reads a constant from the library.
    TrtVersion::from_encoded(unsafe { ffi::rtq_trt_library_version() })
}

/// Version of the TensorRT headers the shim was compiled against.
pub fn header_version() -> TrtVersion {
    // SAFETY: takes no arguments and returns a compile-time constant.
    TrtVersion::from_encoded(unsafe { ffi::rtq_trt_header_version() })
}
