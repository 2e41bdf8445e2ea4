//! The interface every execution backend implements, and the backend kinds.

use crate::{HostTensor, LayerTime, RuntimeError, TensorInfo};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which concrete backend runs a loaded model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// rtq's CPU executor on an ONNX model.
    Cpu,
    /// A TensorRT engine on a CUDA device.
    #[serde(rename = "tensorrt")]
    TensorRt,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Cpu => "cpu",
            BackendKind::TensorRt => "tensorrt",
        })
    }
}

/// A loaded model that can run inference on host tensors.
///
/// Implemented by the CPU backend (feature `cpu`) and the TensorRT backend (feature
/// `tensorrt`); applications may implement it to plug their own executor into
/// [`Engine`](crate::Engine) and the benchmark. A backend is shared between threads
/// ([`Engine`](crate::Engine) is `Send + Sync`): [`InferBackend::infer`] may be called
/// from several threads at once, and a backend with per-call state (a TensorRT
/// execution context) serializes the calls itself.
pub trait InferBackend: Send + Sync {
    /// The backend kind.
    fn kind(&self) -> BackendKind;

    /// A one-line description (executor, device, library version).
    fn description(&self) -> String;

    /// The model inputs, in the model's order.
    fn inputs(&self) -> &[TensorInfo];

    /// The model outputs, in the model's order.
    fn outputs(&self) -> &[TensorInfo];

    /// Runs one inference. `inputs` holds every model input once, in any order; the
    /// result holds every output in [`InferBackend::outputs`] order.
    fn infer(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RuntimeError>;

    /// Device compute time of the last [`InferBackend::infer`] in milliseconds, measured
    /// with device events (excludes host/device copies); `None` for host backends. With
    /// calls from several threads, "last" is whichever finished last.
    fn last_device_time_ms(&self) -> Option<f64> {
        None
    }

    /// Runs one inference timing every layer, in execution order; `None` when the
    /// backend cannot (the default). A profiled run is slower than a plain one by the
    /// timing itself: compare layers with each other, not with [`InferBackend::infer`].
    fn profile(&self, inputs: &[HostTensor]) -> Result<Option<Vec<LayerTime>>, RuntimeError> {
        let _ = inputs;
        Ok(None)
    }

    /// A preferred concrete shape for input `name` when its shape is dynamic (e.g. the
    /// TensorRT optimization profile's `opt` shape).
    fn preferred_input_shape(&self, name: &str) -> Option<Vec<usize>> {
        let _ = name;
        None
    }
}
