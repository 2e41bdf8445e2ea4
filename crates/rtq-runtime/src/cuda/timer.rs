//! Device-side timing with a pair of CUDA events.

use super::device::guarded;
use super::CudaDevice;
use crate::RuntimeError;
use cudarc::driver::{sys, CudaEvent};

/// Start/end events recorded on a device stream; the elapsed time is device time.
#[derive(Debug)]
pub(crate) struct GpuTimer {
    start: CudaEvent,
    end: CudaEvent,
}

impl GpuTimer {
    pub(crate) fn new(device: &CudaDevice) -> Result<GpuTimer, RuntimeError> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = guarded("creating a CUDA event", || {
            device.context().new_event(flags)
        })?;
        let end = guarded("creating a CUDA event", || {
            device.context().new_event(flags)
        })?;
        Ok(GpuTimer { start, end })
    }

    /// Records the start event on the device's stream.
    pub(crate) fn start(&self, device: &CudaDevice) -> Result<(), RuntimeError> {
        guarded("recording a CUDA event", || {
            self.start.record(device.stream())
        })
    }

    /// Records the end event on the device's stream.
    pub(crate) fn stop(&self, device: &CudaDevice) -> Result<(), RuntimeError> {
        guarded("recording a CUDA event", || {
            self.end.record(device.stream())
        })
    }

    /// Milliseconds between the two events (waits for the end event).
    pub(crate) fn elapsed_ms(&self) -> Result<f64, RuntimeError> {
        guarded("reading CUDA event times", || {
            self.start.elapsed_ms(&self.end)
        })
        .map(f64::from)
    }
}
