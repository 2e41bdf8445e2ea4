//! A CUDA device: its primary context and one non-blocking stream.

use super::{CudaGraphExec, DeviceInfo, GpuTimer};
use crate::RuntimeError;
use cudarc::driver::{sys, CudaContext, CudaStream, DriverError};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Runs a cudarc call, turning its error, or a panic inside cudarc (e.g. a symbol the
/// installed driver lacks), into [`RuntimeError::Cuda`] naming `op`.
pub(crate) fn guarded<T>(
    op: &str,
    f: impl FnOnce() -> Result<T, DriverError>,
) -> Result<T, RuntimeError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(RuntimeError::Cuda {
            op: op.to_string(),
            message: e.to_string(),
        }),
        Err(payload) => Err(RuntimeError::Cuda {
            op: op.to_string(),
            message: format!("the CUDA bindings panicked: {}", panic_message(&payload)),
        }),
    }
}

fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Whether libcuda (libcuda.so.1 / nvcuda.dll) can be loaded.
pub(crate) fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the candidate library names and closes them again.
    catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false)
}

/// Opens the primary context of device `ordinal` after checking the driver and device.
pub(crate) fn open_context(ordinal: usize) -> Result<(Arc<CudaContext>, DeviceInfo), RuntimeError> {
    if !driver_present() {
        return Err(RuntimeError::NoCudaDriver);
    }
    let count = guarded("counting CUDA devices", CudaContext::device_count).map_err(|e| {
        RuntimeError::NoCudaDevice {
            ordinal,
            detail: match e {
                RuntimeError::Cuda { message, .. } => format!("the CUDA driver reports {message}"),
                other => other.to_string(),
            },
        }
    })?;
    if ordinal >= count.max(0) as usize {
        return Err(RuntimeError::NoCudaDevice {
            ordinal,
            detail: format!("the CUDA driver reports {count} device(s)"),
        });
    }
    let ctx = guarded(&format!("opening CUDA device {ordinal}"), || {
        CudaContext::new(ordinal)
    })?;
    let name = guarded("reading the device name", || ctx.name())?;
    let compute_capability = guarded("reading the compute capability", || {
        ctx.compute_capability()
    })?;
    let total_memory_bytes = guarded("reading the device memory size", || ctx.total_mem())?;
    Ok((
        ctx,
        DeviceInfo {
            ordinal,
            name,
            compute_capability,
            total_memory_bytes,
        },
    ))
}

/// A CUDA device with one non-blocking stream that all work of this device goes to.
#[derive(Debug)]
pub(crate) struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
}

impl CudaDevice {
    /// Opens device `ordinal` and creates its stream.
    ///
    /// Single-stream use lets rtq turn off cudarc's per-buffer event tracking; all
    /// buffers of this device must be used on its stream only.
    pub(crate) fn new(ordinal: usize) -> Result<CudaDevice, RuntimeError> {
        let (ctx, info) = open_context(ordinal)?;
        // SAFETY: every buffer rtq allocates on this context is used on `stream` only,
        // so cross-stream synchronisation events are not needed.
        unsafe { ctx.disable_event_tracking() };
        let stream = guarded("creating a CUDA stream", || ctx.new_stream())?;
        Ok(CudaDevice { ctx, stream, info })
    }

    /// Facts about the device.
    pub(crate) fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Makes the device's context current on the calling thread (needed before calling
    /// libraries such as TensorRT that use the current context).
    pub(crate) fn bind(&self) -> Result<(), RuntimeError> {
        guarded("binding the CUDA context to this thread", || {
            self.ctx.bind_to_thread()
        })
    }

    /// The device's stream.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The stream as a raw `CUstream`/`cudaStream_t`, for libraries like TensorRT.
    pub(crate) fn raw_stream(&self) -> *mut c_void {
        self.stream.cu_stream().cast()
    }

    /// Waits for all work queued on the stream.
    pub(crate) fn synchronize(&self) -> Result<(), RuntimeError> {
        guarded("synchronizing the CUDA stream", || {
            self.stream.synchronize()
        })
    }

    /// A pair of timing events on this device.
    pub(crate) fn timer(&self) -> Result<GpuTimer, RuntimeError> {
        GpuTimer::new(self)
    }

    /// Captures the work `enqueue` puts on the stream into a replayable CUDA graph.
    pub(crate) fn capture(
        &self,
        enqueue: impl FnOnce() -> Result<(), RuntimeError>,
    ) -> Result<CudaGraphExec, RuntimeError> {
        CudaGraphExec::capture(self, enqueue)
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
}
