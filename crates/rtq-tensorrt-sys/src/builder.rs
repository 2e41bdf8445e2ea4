//! Building serialized engines (plans) from ONNX bytes.

use crate::error::{c_string, TrtError};
use crate::types::to_ffi_dims;
use crate::{ffi, Severity};
use std::ffi::CString;
use std::path::PathBuf;
use std::ptr::{self, NonNull};

/// The min/opt/max shapes of one network input (optimization profile 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputProfile {
    /// Input tensor name.
    pub name: String,
    /// Smallest accepted shape.
    pub min: Vec<i64>,
    /// Shape the kernels are tuned for.
    pub opt: Vec<i64>,
    /// Largest accepted shape.
    pub max: Vec<i64>,
}

/// Options of [`Builder::build`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOptions {
    /// Workspace memory pool limit in bytes; 0 keeps TensorRT's default.
    pub workspace_bytes: u64,
    /// Build a strongly typed network (precisions from the model; required for Q/DQ
    /// models and always the case in TensorRT 11).
    pub strongly_typed: bool,
    /// Weakly typed TensorRT 10 builds only: allow FP16 kernels.
    pub fp16: bool,
    /// Weakly typed TensorRT 10 builds only: allow INT8 kernels.
    pub int8: bool,
    /// Builder optimization level 0..=5 (`None`: TensorRT's default, 3).
    pub builder_optimization_level: Option<u8>,
    /// Shapes for the dynamic inputs.
    pub profiles: Vec<InputProfile>,
    /// Serialized timing cache to start from.
    pub timing_cache: Option<Vec<u8>>,
    /// Path of the ONNX file, used to find external weights.
    pub model_path: Option<PathBuf>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            workspace_bytes: 0,
            strongly_typed: true,
            fp16: false,
            int8: false,
            builder_optimization_level: None,
            profiles: Vec::new(),
            timing_cache: None,
            model_path: None,
        }
    }
}

/// What a build produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOutput {
    /// The serialized engine.
    pub plan: Vec<u8>,
    /// The updated serialized timing cache.
    pub timing_cache: Option<Vec<u8>>,
}

/// A TensorRT builder with a logger that keeps its messages.
#[derive(Debug)]
pub struct Builder {
    raw: NonNull<ffi::rtq_trt_builder>,
}

// SAFETY: the handle is exclusively owned; TensorRT builders may move between threads.
unsafe impl Send for Builder {}

impl Builder {
    /// Creates a builder keeping log messages of `min_severity` and more severe
    /// (errors are always kept).
    pub fn new(min_severity: Severity) -> Result<Builder, TrtError> {
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer.
        TrtError::check(unsafe { ffi::rtq_trt_builder_create(min_severity.raw(), &mut raw) })?;
        NonNull::new(raw)
            .map(|raw| Builder { raw })
            .ok_or_else(|| TrtError::invalid("rtq_trt_builder_create returned no builder"))
    }

    /// Parses `onnx` and builds a serialized engine.
    pub fn build(&mut self, onnx: &[u8], options: &BuildOptions) -> Result<BuildOutput, TrtError> {
        if onnx.is_empty() {
            return Err(TrtError::invalid("the ONNX model is empty"));
        }
        let names: Vec<CString> = options
            .profiles
            .iter()
            .map(|p| c_string("input", &p.name))
            .collect::<Result<_, _>>()?;
        let profiles: Vec<ffi::rtq_trt_input_profile> = options
            .profiles
            .iter()
            .zip(&names)
            .map(|(p, name)| {
                Ok(ffi::rtq_trt_input_profile {
                    name: name.as_ptr(),
                    min: to_ffi_dims(&p.name, &p.min)?,
                    opt: to_ffi_dims(&p.name, &p.opt)?,
                    max: to_ffi_dims(&p.name, &p.max)?,
                })
            })
            .collect::<Result<_, TrtError>>()?;
        let model_path = options
            .model_path
            .as_ref()
            .map(|p| c_string("model path", &p.to_string_lossy()))
            .transpose()?;
        let (cache_ptr, cache_len) = match &options.timing_cache {
            Some(bytes) if !bytes.is_empty() => (bytes.as_ptr().cast(), bytes.len()),
            _ => (ptr::null(), 0),
        };
        let raw_options = ffi::rtq_trt_build_options {
            workspace_bytes: options.workspace_bytes,
            strongly_typed: options.strongly_typed as i32,
            fp16: options.fp16 as i32,
            int8: options.int8 as i32,
            builder_optimization_level: options.builder_optimization_level.map_or(-1, i32::from),
            profiles: if profiles.is_empty() {
                ptr::null()
            } else {
                profiles.as_ptr()
            },
            nb_profiles: profiles.len(),
            timing_cache: cache_ptr,
            timing_cache_size: cache_len,
            model_path: model_path.as_ref().map_or(ptr::null(), |p| p.as_ptr()),
        };
        let mut plan = ptr::null_mut();
        let mut cache = ptr::null_mut();
        // SAFETY: every pointer in `raw_options` borrows data alive for this call, and
        // the out-pointers are valid.
        let status = unsafe {
            ffi::rtq_trt_build_engine(
                self.raw.as_ptr(),
                onnx.as_ptr().cast(),
                onnx.len(),
                &raw_options,
                &mut plan,
                &mut cache,
            )
        };
        let plan = Blob(plan);
        let cache = Blob(cache);
        TrtError::check(status)?;
        Ok(BuildOutput {
            plan: plan
                .to_vec()
                .ok_or_else(|| TrtError::invalid("TensorRT returned no plan"))?,
            timing_cache: cache.to_vec(),
        })
    }

    /// The log messages kept so far, one per line tagged `[E]`, `[W]`, `[I]` or `[V]`.
    pub fn log(&self) -> String {
        // SAFETY: a NULL buffer of size 0 only queries the length.
        let len = unsafe { ffi::rtq_trt_builder_log(self.raw.as_ptr(), ptr::null_mut(), 0) };
        let mut buf = vec![0u8; len + 1];
        // SAFETY: `buf` holds `len + 1` writable bytes.
        let written = unsafe {
            ffi::rtq_trt_builder_log(self.raw.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
        };
        buf.truncate(written.min(len));
        String::from_utf8_lossy(&buf).into_owned()
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        // SAFETY: the handle came from rtq_trt_builder_create and is released once.
        unsafe { ffi::rtq_trt_builder_destroy(self.raw.as_ptr()) };
    }
}

/// Owns a shim blob (may be NULL) and frees it on drop.
struct Blob(*mut ffi::rtq_trt_blob);

impl Blob {
    fn to_vec(&self) -> Option<Vec<u8>> {
        if self.0.is_null() {
            return None;
        }
        // SAFETY: the blob is live; data/size describe its bytes.
        unsafe {
            let data = ffi::rtq_trt_blob_data(self.0);
            let size = ffi::rtq_trt_blob_size(self.0);
            if data.is_null() {
                return None;
            }
            Some(std::slice::from_raw_parts(data.cast::<u8>(), size).to_vec())
        }
    }
}

impl Drop for Blob {
    fn drop(&mut self) {
        // SAFETY: NULL is accepted; otherwise the blob came from the shim and is freed once.
        unsafe { ffi::rtq_trt_blob_destroy(self.0) };
    }
}
