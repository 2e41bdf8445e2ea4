//! The TensorRT backend (feature `tensorrt`): a deserialized engine, one execution
//! context, device buffers reused across calls, event timing and optional CUDA graphs.

use crate::backend::{BackendKind, InferBackend};
use crate::cuda::{CudaDevice, CudaGraphExec, DeviceBuffer, GpuTimer};
use crate::tensor::element_count;
use crate::validate::match_inputs;
use crate::{DataType, HostTensor, LoadOptions, RuntimeError, TensorInfo};
use rtq_tensorrt_sys as trt;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The runtime's type for a TensorRT I/O type.
fn data_type(name: &str, dtype: trt::DataType) -> Result<DataType, RuntimeError> {
    Ok(match dtype {
        trt::DataType::Float => DataType::F32,
        trt::DataType::Half => DataType::F16,
        trt::DataType::BF16 => DataType::BF16,
        trt::DataType::Int8 => DataType::I8,
        trt::DataType::UInt8 => DataType::U8,
        trt::DataType::Int32 => DataType::I32,
        trt::DataType::Int64 => DataType::I64,
        trt::DataType::Bool => DataType::Bool,
        trt::DataType::Fp8 => DataType::Fp8E4M3,
        trt::DataType::Int4 => DataType::Int4,
        trt::DataType::Fp4 => DataType::Fp4E2M1,
        trt::DataType::E8M0 => DataType::E8M0,
        trt::DataType::Unknown(raw) => {
            return Err(RuntimeError::tensor(
                name,
                format!("TensorRT data type {raw} is not known to rtq"),
            ))
        }
    })
}

/// A captured graph and the bindings it was captured with.
struct CapturedGraph {
    key: Vec<(Vec<usize>, u64)>,
    graph: CudaGraphExec,
}

/// A TensorRT engine ready to run on host tensors: the session behind a lock, since
/// one execution context runs one inference at a time (threads sharing the backend
/// take turns; load one engine per thread for concurrent streams).
pub struct TensorRtBackend {
    session: std::sync::Mutex<TrtSession>,
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
    preferred: HashMap<String, Vec<usize>>,
    source: PathBuf,
}

/// The engine's execution context with its device buffers and timing state.
struct TrtSession {
    // Field order is drop order: TensorRT and CUDA objects before the device.
    graph: Option<CapturedGraph>,
    context: trt::Context,
    buffers: HashMap<String, DeviceBuffer>,
    timer: GpuTimer,
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
    preferred: HashMap<String, Vec<usize>>,
    use_graph: bool,
    graph_failure: Option<String>,
    last_device_ms: Option<f64>,
    description: String,
    source: PathBuf,
    device: CudaDevice,
}

impl std::fmt::Debug for TensorRtBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorRtBackend")
            .field("source", &self.source)
            .field("description", &self.description())
            .finish()
    }
}

impl TensorRtBackend {
    /// The session, whichever thread last panicked while holding it (its state is
    /// rebuilt per call).
    fn session(&self) -> std::sync::MutexGuard<'_, TrtSession> {
        self.session.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Why CUDA graph replay was turned off, if capture failed for this engine.
    pub fn graph_failure(&self) -> Option<String> {
        self.session().graph_failure.clone()
    }

    /// Deserializes the plan at `path` on device `options.device`.
    pub fn load_plan(path: &Path, options: &LoadOptions) -> Result<TensorRtBackend, RuntimeError> {
        let plan = std::fs::read(path).map_err(|e| RuntimeError::io(path, e))?;
        let device = CudaDevice::new(options.device)?;
        TrtSession::from_plan(device, &plan, path, options.cuda_graph).map(TensorRtBackend::new)
    }

    /// Builds the ONNX model at `path` in memory with `options.build`, then loads it.
    pub fn build_from_onnx(
        path: &Path,
        options: &LoadOptions,
    ) -> Result<TensorRtBackend, RuntimeError> {
        let mut build = options.build.clone();
        build.device = options.device;
        let built = super::builder::build_plan(path, &build)?;
        TrtSession::from_plan(built.device, &built.plan, path, options.cuda_graph)
            .map(TensorRtBackend::new)
    }

    fn new(session: TrtSession) -> TensorRtBackend {
        TensorRtBackend {
            inputs: session.inputs.clone(),
            outputs: session.outputs.clone(),
            preferred: session.preferred.clone(),
            source: session.source.clone(),
            session: std::sync::Mutex::new(session),
        }
    }
}

impl TrtSession {
    fn from_plan(
        device: CudaDevice,
        plan: &[u8],
        source: &Path,
        use_graph: bool,
    ) -> Result<TrtSession, RuntimeError> {
        device.bind()?;
        let trt_error = |op: &str| {
            let op = format!("{op} {}", source.display());
            move |e: trt::TrtError| RuntimeError::TensorRt {
                op: op.clone(),
                message: e.to_string(),
            }
        };
        let engine = trt::Engine::deserialize(plan).map_err(trt_error("deserializing"))?;
        let descs = engine
            .io_tensors()
            .map_err(trt_error("reading the I/O tensors of"))?;
        let mut inputs = Vec::new();
        let mut outputs = Vec::new();
        let mut preferred = HashMap::new();
        for desc in &descs {
            if desc.location == trt::Location::Host {
                return Err(RuntimeError::tensor(
                    &desc.name,
                    "is a shape tensor (host memory); rtq's TensorRT backend does not support \
                     shape-tensor I/O",
                ));
            }
            let info = TensorInfo::new(
                &desc.name,
                data_type(&desc.name, desc.dtype)?,
                desc.shape.clone(),
            );
            match desc.mode {
                trt::IoMode::Input => {
                    if info.is_dynamic() && engine.num_profiles() > 0 {
                        if let Ok(opt) =
                            engine.profile_shape(&desc.name, 0, trt::ProfileSelector::Opt)
                        {
                            preferred.insert(
                                desc.name.clone(),
                                opt.iter().map(|&d| d.max(0) as usize).collect(),
                            );
                        }
                    }
                    inputs.push(info);
                }
                trt::IoMode::Output => outputs.push(info),
                trt::IoMode::None => {}
            }
        }
        let context = engine
            .create_context()
            .map_err(trt_error("creating an execution context for"))?;
        let timer = device.timer()?;
        let info = device.info();
        let description = format!(
            "TensorRT {} on {} (compute capability {}, device {})",
            trt::library_version(),
            info.name,
            info.compute_capability_string(),
            info.ordinal
        );
        Ok(TrtSession {
            graph: None,
            context,
            buffers: HashMap::new(),
            timer,
            inputs,
            outputs,
            preferred,
            use_graph,
            graph_failure: None,
            last_device_ms: None,
            description,
            source: source.to_path_buf(),
            device,
        })
    }

    fn trt_error(&self, op: String) -> impl Fn(trt::TrtError) -> RuntimeError {
        move |e| RuntimeError::TensorRt {
            op: op.clone(),
            message: e.to_string(),
        }
    }

    /// Enqueues one inference, through the captured graph when enabled.
    fn run(&mut self, key: Vec<(Vec<usize>, u64)>) -> Result<(), RuntimeError> {
        let stream = self.device.raw_stream();
        let enqueue_error = self.trt_error(format!("enqueueing {}", self.source.display()));
        if self.use_graph && self.graph.as_ref().is_none_or(|g| g.key != key) {
            self.graph = None;
            // TensorRT needs one plain enqueue after shape changes before capture.
            // SAFETY: every I/O tensor is bound to a live buffer of this device sized for
            // the current shapes; the stream belongs to the bound context.
            unsafe { self.context.enqueue(stream) }.map_err(&enqueue_error)?;
            self.device.synchronize()?;
            let context = &mut self.context;
            let captured = self.device.capture(|| {
                // SAFETY: as above.
                unsafe { context.enqueue(stream) }.map_err(&enqueue_error)
            });
            match captured {
                Ok(graph) => self.graph = Some(CapturedGraph { key, graph }),
                Err(e) => {
                    self.use_graph = false;
                    self.graph_failure = Some(e.to_string());
                }
            }
        }
        self.timer.start(&self.device)?;
        match &self.graph {
            Some(captured) if self.use_graph => captured.graph.launch()?,
            // SAFETY: as above.
            _ => unsafe { self.context.enqueue(stream) }.map_err(&enqueue_error)?,
        }
        self.timer.stop(&self.device)
    }
}

impl TrtSession {
    fn description(&self) -> String {
        match (&self.graph_failure, self.use_graph) {
            (Some(why), _) => format!("{} [CUDA graph off: {why}]", self.description),
            (None, true) => format!("{} [CUDA graph]", self.description),
            (None, false) => self.description.clone(),
        }
    }

    fn infer(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        self.last_device_ms = None;
        self.device.bind()?;
        let ordered = match_inputs(&self.inputs, inputs)?;
        let mut key = Vec::with_capacity(self.inputs.len() + self.outputs.len());

        for t in &ordered {
            let shape: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
            self.context
                .set_input_shape(&t.name, &shape)
                .map_err(self.trt_error(format!("setting the shape of input `{}`", t.name)))?;
            let buffer = self.buffers.entry(t.name.clone()).or_default();
            buffer.ensure(&self.device, &t.name, t.bytes().len())?;
            buffer.upload(&self.device, &t.name, t.bytes())?;
            key.push((t.shape().to_vec(), buffer.device_ptr(&self.device)));
        }

        let mut output_shapes = Vec::with_capacity(self.outputs.len());
        for info in &self.outputs {
            let dims = self
                .context
                .tensor_shape(&info.name)
                .map_err(self.trt_error(format!("reading the shape of output `{}`", info.name)))?;
            if dims.iter().any(|&d| d < 0) {
                return Err(RuntimeError::tensor(
                    &info.name,
                    format!(
                        "output shape {dims:?} depends on the data; rtq's TensorRT backend does \
                         not support data-dependent output shapes"
                    ),
                ));
            }
            let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            let bytes = info.dtype.byte_len(element_count(&info.name, &shape)?);
            let buffer = self.buffers.entry(info.name.clone()).or_default();
            buffer.ensure(&self.device, &info.name, bytes)?;
            key.push((shape.clone(), buffer.device_ptr(&self.device)));
            output_shapes.push(shape);
        }

        for info in self.inputs.iter().chain(&self.outputs) {
            let ptr = self
                .buffers
                .get(&info.name)
                .map_or(0, |b| b.device_ptr(&self.device));
            // SAFETY: the address is a live device buffer of this backend, sized for the
            // tensor's current shape, and outlives every enqueue (buffers only grow
            // between inferences, after the stream was synchronized).
            unsafe {
                self.context
                    .set_tensor_address(&info.name, ptr as usize as *mut std::ffi::c_void)
            }
            .map_err(self.trt_error(format!("binding `{}`", info.name)))?;
        }

        self.run(key)?;

        let mut results = Vec::with_capacity(self.outputs.len());
        for (info, shape) in self.outputs.iter().zip(output_shapes) {
            let mut host = HostTensor::zeros(&info.name, info.dtype, shape)?;
            let buffer = self.buffers.get(&info.name).ok_or_else(|| {
                RuntimeError::tensor(&info.name, "no device buffer was allocated")
            })?;
            buffer.download(&self.device, &info.name, host.bytes_mut())?;
            results.push(host);
        }
        self.device.synchronize()?;
        self.last_device_ms = Some(self.timer.elapsed_ms()?);
        Ok(results)
    }
}

impl InferBackend for TensorRtBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::TensorRt
    }

    fn description(&self) -> String {
        self.session().description()
    }

    fn inputs(&self) -> &[TensorInfo] {
        &self.inputs
    }

    fn outputs(&self) -> &[TensorInfo] {
        &self.outputs
    }

    fn infer(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        self.session().infer(inputs)
    }

    fn last_device_time_ms(&self) -> Option<f64> {
        self.session().last_device_ms
    }

    fn preferred_input_shape(&self, name: &str) -> Option<Vec<usize>> {
        self.preferred.get(name).cloned()
    }
}

impl Drop for TrtSession {
    fn drop(&mut self) {
        // TensorRT releases device memory in its destructors: make the context current
        // on this thread first. Errors cannot be reported from drop.
        let _ = self.device.bind();
        let _ = self.device.synchronize();
    }
}
