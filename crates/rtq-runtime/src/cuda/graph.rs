//! Replayable CUDA graphs captured from a stream.

use super::device::guarded;
use super::CudaDevice;
use crate::RuntimeError;
use cudarc::driver::{sys, CudaGraph};

/// An instantiated CUDA graph, replayed on the stream it was captured from.
pub(crate) struct CudaGraphExec {
    graph: CudaGraph,
}

impl std::fmt::Debug for CudaGraphExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CudaGraphExec")
    }
}

// SAFETY: the graph is owned exclusively and only used through `&mut`/owned access
// from one thread at a time, which is all CUDA requires of graph objects.
unsafe impl Send for CudaGraphExec {}

impl CudaGraphExec {
    /// Captures what `enqueue` puts on the device's stream. The stream leaves capture
    /// mode whatever happens.
    pub(crate) fn capture(
        device: &CudaDevice,
        enqueue: impl FnOnce() -> Result<(), RuntimeError>,
    ) -> Result<CudaGraphExec, RuntimeError> {
        let stream = device.stream();
        guarded("starting CUDA graph capture", || {
            stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        })?;
        let enqueued = enqueue();
        let ended = guarded("ending CUDA graph capture", || {
            stream.end_capture(sys::CUgraphInstantiate_flags(0))
        });
        enqueued?;
        let graph = ended?.ok_or_else(|| RuntimeError::Cuda {
            op: "ending CUDA graph capture".into(),
            message: "the capture recorded no work".into(),
        })?;
        Ok(CudaGraphExec { graph })
    }

    /// Launches the graph on the stream it was captured from.
    pub(crate) fn launch(&self) -> Result<(), RuntimeError> {
        guarded("launching the CUDA graph", || self.graph.launch())
    }
}
