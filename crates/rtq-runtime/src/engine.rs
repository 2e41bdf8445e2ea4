//! [`Engine`]: a loaded model behind one of the backends.

use crate::backend::{BackendKind, InferBackend};
use crate::options::{Backend, LoadOptions, ModelFormat};
use crate::{HostTensor, LayerTime, RuntimeError, TensorInfo};
use std::path::{Path, PathBuf};

/// A model loaded for inference. `Send + Sync`: threads may share one engine (see
/// `examples/serve_threads.rs`).
///
/// On the CPU backend a warm engine keeps the buffers its inferences free
/// (intermediate tensors, kernels' scratch, converted inputs) and reuses them, so an
/// inference asks the program's allocator only for the outputs it returns, whatever
/// that allocator is: about one inference's intermediates are kept per inference
/// that runs at the same time as another, until the engine is dropped.
///
/// ```no_run
/// use rtq_runtime::{Engine, HostTensor, LoadOptions};
/// let engine = Engine::load("model.onnx", &LoadOptions::default())?;
/// let x = HostTensor::from_f32("input", vec![1, 4], &[0.0, 1.0, 2.0, 3.0])?;
/// let outputs = engine.infer(&[x])?;
/// println!("{:?}", outputs[0].to_f32_vec()?);
/// # Ok::<(), rtq_runtime::RuntimeError>(())
/// ```
pub struct Engine {
    backend: Box<dyn InferBackend>,
    source: PathBuf,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("source", &self.source)
            .field("backend", &self.backend.description())
            .finish()
    }
}

impl Engine {
    /// Loads `path` with the backend `options` select: `.onnx` files run on the CPU
    /// (or are built into a TensorRT engine with [`Backend::TensorRt`]/[`Backend::Cuda`]);
    /// `.plan`/`.engine` files are TensorRT engines.
    pub fn load(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Engine, RuntimeError> {
        let path = path.as_ref();
        let format =
            ModelFormat::from_path(path).ok_or_else(|| RuntimeError::UnknownModelFormat {
                path: path.to_path_buf(),
            })?;
        let backend: Box<dyn InferBackend> = match (options.backend, format) {
            (Backend::Cpu, ModelFormat::TensorRtPlan) => {
                return Err(RuntimeError::BackendMismatch {
                    path: path.to_path_buf(),
                    reason: "a TensorRT plan runs only on the TensorRT backend, not on the CPU"
                        .to_string(),
                })
            }
            (Backend::Cpu, ModelFormat::Onnx) => load_cpu(path, options)?,
            (Backend::Auto, ModelFormat::Onnx) => {
                if cfg!(feature = "cpu") || !cfg!(feature = "tensorrt") {
                    load_cpu(path, options)?
                } else {
                    crate::tensorrt::load_onnx(path, options)?
                }
            }
            (Backend::Auto | Backend::TensorRt, ModelFormat::TensorRtPlan) => {
                crate::tensorrt::load_plan(path, options)?
            }
            (Backend::TensorRt, ModelFormat::Onnx) => crate::tensorrt::load_onnx(path, options)?,
            (Backend::Cuda, format) => {
                crate::cuda::probe(options.device)?;
                match format {
                    ModelFormat::Onnx => crate::tensorrt::load_onnx(path, options)?,
                    ModelFormat::TensorRtPlan => crate::tensorrt::load_plan(path, options)?,
                }
            }
        };
        Ok(Engine {
            backend,
            source: path.to_path_buf(),
        })
    }

    /// Wraps a custom backend; `source` names the model in messages and reports.
    pub fn from_backend(backend: Box<dyn InferBackend>, source: impl Into<PathBuf>) -> Engine {
        Engine {
            backend,
            source: source.into(),
        }
    }

    /// The model inputs (dynamic dimensions are -1).
    pub fn inputs(&self) -> &[TensorInfo] {
        self.backend.inputs()
    }

    /// The model outputs (dynamic dimensions are -1).
    pub fn outputs(&self) -> &[TensorInfo] {
        self.backend.outputs()
    }

    /// Runs one inference; see [`InferBackend::infer`]. Threads may share one engine
    /// (`Arc<Engine>`) and call this at once: the CPU backend runs the calls in
    /// parallel, the TensorRT backend one after the other on its execution context.
    pub fn infer(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        self.backend.infer(inputs)
    }

    /// Runs one inference timing every layer; `None` where the backend cannot (see
    /// [`InferBackend::profile`]).
    pub fn profile(&self, inputs: &[HostTensor]) -> Result<Option<Vec<LayerTime>>, RuntimeError> {
        self.backend.profile(inputs)
    }

    /// The backend kind running the model.
    pub fn backend_kind(&self) -> BackendKind {
        self.backend.kind()
    }

    /// A one-line description of the backend.
    pub fn description(&self) -> String {
        self.backend.description()
    }

    /// The file the model came from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Device compute time of the last inference (GPU backends).
    pub fn last_device_time_ms(&self) -> Option<f64> {
        self.backend.last_device_time_ms()
    }

    /// A preferred concrete shape for a dynamic input (TensorRT: the profile's opt shape).
    pub fn preferred_input_shape(&self, name: &str) -> Option<Vec<usize>> {
        self.backend.preferred_input_shape(name)
    }
}

#[cfg(feature = "cpu")]
fn load_cpu(path: &Path, options: &LoadOptions) -> Result<Box<dyn InferBackend>, RuntimeError> {
    Ok(Box::new(crate::cpu::CpuBackend::load(
        path,
        options.integer_kernels,
    )?))
}

#[cfg(not(feature = "cpu"))]
fn load_cpu(_path: &Path, _options: &LoadOptions) -> Result<Box<dyn InferBackend>, RuntimeError> {
    Err(RuntimeError::CpuNotBuilt)
}
