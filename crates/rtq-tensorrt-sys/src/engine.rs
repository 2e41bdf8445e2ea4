//! Deserialized engines and their I/O tensors.

use crate::error::{c_string, TrtError};
use crate::types::from_ffi_dims;
use crate::{ffi, Context, DataType, IoMode, Location, ProfileSelector};
use std::ffi::CStr;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// Description of one engine I/O tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDesc {
    /// Tensor name.
    pub name: String,
    /// Input or output.
    pub mode: IoMode,
    /// Element type.
    pub dtype: DataType,
    /// Device or host (shape tensor) memory.
    pub location: Location,
    /// Shape as built; -1 for dynamic dimensions.
    pub shape: Vec<i64>,
}

/// Owner of the raw engine handle, shared with the contexts created from it.
#[derive(Debug)]
pub(crate) struct EngineHandle(pub(crate) NonNull<ffi::rtq_trt_engine>);

// SAFETY: a TensorRT ICudaEngine is thread safe for queries and context creation.
unsafe impl Send for EngineHandle {}
// SAFETY: as above; the shim's engine calls only read the engine.
unsafe impl Sync for EngineHandle {}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        // SAFETY: every Context holds an Arc to this handle, so none outlives it.
        unsafe { ffi::rtq_trt_engine_destroy(self.0.as_ptr()) };
    }
}

/// A deserialized TensorRT engine.
#[derive(Debug, Clone)]
pub struct Engine {
    pub(crate) handle: Arc<EngineHandle>,
}

impl Engine {
    /// Deserializes a plan (needs the TensorRT version and GPU model it was built for).
    pub fn deserialize(plan: &[u8]) -> Result<Engine, TrtError> {
        if plan.is_empty() {
            return Err(TrtError::invalid("the plan is empty"));
        }
        let mut raw = ptr::null_mut();
        // SAFETY: `plan` is readable for its length; `raw` is a valid out-pointer.
        TrtError::check(unsafe {
            ffi::rtq_trt_engine_deserialize(plan.as_ptr().cast(), plan.len(), &mut raw)
        })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| TrtError::invalid("rtq_trt_engine_deserialize returned no engine"))?;
        Ok(Engine {
            handle: Arc::new(EngineHandle(raw)),
        })
    }

    /// The engine's I/O tensors in TensorRT's order.
    pub fn io_tensors(&self) -> Result<Vec<TensorDesc>, TrtError> {
        // SAFETY: the handle is live.
        let n = unsafe { ffi::rtq_trt_engine_num_io_tensors(self.handle.0.as_ptr()) };
        (0..n)
            .map(|i| {
                let mut desc = ffi::rtq_trt_tensor_desc {
                    name: ptr::null(),
                    io_mode: 0,
                    dtype: 0,
                    location: 0,
                    shape: Default::default(),
                };
                // SAFETY: the handle is live; `desc` is a valid out-pointer.
                TrtError::check(unsafe {
                    ffi::rtq_trt_engine_io_tensor(self.handle.0.as_ptr(), i, &mut desc)
                })?;
                if desc.name.is_null() {
                    return Err(TrtError::invalid(format!("I/O tensor {i} has no name")));
                }
                // SAFETY: the name is a NUL-terminated string owned by the engine.
                let name = unsafe { CStr::from_ptr(desc.name) }
                    .to_string_lossy()
                    .into_owned();
                Ok(TensorDesc {
                    name,
                    mode: IoMode::from_raw(desc.io_mode),
                    dtype: DataType::from_raw(desc.dtype),
                    location: Location::from_raw(desc.location),
                    shape: from_ffi_dims(&desc.shape),
                })
            })
            .collect()
    }

    /// Number of optimization profiles.
    pub fn num_profiles(&self) -> usize {
        // SAFETY: the handle is live.
        unsafe { ffi::rtq_trt_engine_num_profiles(self.handle.0.as_ptr()) }.max(0) as usize
    }

    /// One shape of input `name` in optimization profile `profile`.
    pub fn profile_shape(
        &self,
        name: &str,
        profile: usize,
        selector: ProfileSelector,
    ) -> Result<Vec<i64>, TrtError> {
        let c_name = c_string("input", name)?;
        let mut dims = ffi::rtq_trt_dims::default();
        let profile = i32::try_from(profile)
            .map_err(|_| TrtError::invalid(format!("profile index {profile} is too large")))?;
        // SAFETY: the handle is live; the name is NUL-terminated; `dims` is a valid out-pointer.
        TrtError::check(unsafe {
            ffi::rtq_trt_engine_profile_shape(
                self.handle.0.as_ptr(),
                c_name.as_ptr(),
                profile,
                selector.raw(),
                &mut dims,
            )
        })?;
        Ok(from_ffi_dims(&dims))
    }

    /// Creates an execution context (optimization profile 0).
    pub fn create_context(&self) -> Result<Context, TrtError> {
        Context::new(self.handle.clone())
    }
}
