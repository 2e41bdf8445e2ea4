//! Execution contexts: run-time shapes, tensor addresses and enqueueing.

use crate::engine::EngineHandle;
use crate::error::{c_string, TrtError};
use crate::ffi;
use crate::types::{from_ffi_dims, to_ffi_dims};
use std::ffi::c_void;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// An execution context of an [`Engine`](crate::Engine); it keeps the engine alive.
#[derive(Debug)]
pub struct Context {
    raw: NonNull<ffi::rtq_trt_context>,
    _engine: Arc<EngineHandle>,
}

// SAFETY: the context is exclusively owned (mutation needs `&mut self`) and TensorRT
// contexts may be used from any thread, one at a time.
unsafe impl Send for Context {}

impl Context {
    pub(crate) fn new(engine: Arc<EngineHandle>) -> Result<Context, TrtError> {
        let mut raw = ptr::null_mut();
        // SAFETY: the engine handle is live; `raw` is a valid out-pointer.
        TrtError::check(unsafe { ffi::rtq_trt_context_create(engine.0.as_ptr(), &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| TrtError::invalid("rtq_trt_context_create returned no context"))?;
        Ok(Context {
            raw,
            _engine: engine,
        })
    }

    /// Sets the run-time shape of input `name`.
    pub fn set_input_shape(&mut self, name: &str, shape: &[i64]) -> Result<(), TrtError> {
        let c_name = c_string("input", name)?;
        let dims = to_ffi_dims(name, shape)?;
        // SAFETY: the context is live; name and dims are valid for the call.
        TrtError::check(unsafe {
            ffi::rtq_trt_context_set_input_shape(self.raw.as_ptr(), c_name.as_ptr(), &dims)
        })
    }

    /// The shape of I/O tensor `name` given the input shapes set so far (-1 where unknown).
    pub fn tensor_shape(&self, name: &str) -> Result<Vec<i64>, TrtError> {
        let c_name = c_string("tensor", name)?;
        let mut dims = ffi::rtq_trt_dims::default();
        // SAFETY: the context is live; `dims` is a valid out-pointer.
        TrtError::check(unsafe {
            ffi::rtq_trt_context_tensor_shape(self.raw.as_ptr(), c_name.as_ptr(), &mut dims)
        })?;
        Ok(from_ffi_dims(&dims))
    }

    /// Binds I/O tensor `name` to `address`.
    ///
    /// # Safety
    /// `address` must point to memory of the tensor's location (device memory, or host
    /// memory for shape tensors) large enough for its current shape, and stay valid
    /// until every enqueued inference using it has completed.
    pub unsafe fn set_tensor_address(
        &mut self,
        name: &str,
        address: *mut c_void,
    ) -> Result<(), TrtError> {
        let c_name = c_string("tensor", name)?;
        // SAFETY: the context is live; the caller vouches for `address`.
        TrtError::check(unsafe {
            ffi::rtq_trt_context_set_tensor_address(self.raw.as_ptr(), c_name.as_ptr(), address)
        })
    }

    /// Enqueues one inference on `stream` (a `CUstream`/`cudaStream_t` of the current context).
    ///
    /// # Safety
    /// `stream` must be a live CUDA stream of the context current on this thread, and
    /// every I/O tensor must be bound to valid memory (see [`Context::set_tensor_address`]).
    pub unsafe fn enqueue(&mut self, stream: *mut c_void) -> Result<(), TrtError> {
        // SAFETY: the context is live; the caller vouches for the stream and bindings.
        TrtError::check(unsafe { ffi::rtq_trt_context_enqueue(self.raw.as_ptr(), stream) })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the handle came from rtq_trt_context_create and is released once,
        // before the engine (held by `_engine`).
        unsafe { ffi::rtq_trt_context_destroy(self.raw.as_ptr()) };
    }
}
