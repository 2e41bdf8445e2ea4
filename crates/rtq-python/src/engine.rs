//! `Engine`: a model loaded with rtq-runtime, run from NumPy byte views.

use crate::errors::EngineError;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use rtq_runtime::{Backend, DataType, HostTensor, LoadOptions, TensorInfo};

/// A loaded model. `run` releases the GIL, and threads may call it at once on one
/// engine (the CPU backend runs the calls in parallel; see `rtq_runtime::Engine`).
#[pyclass(module = "rtq._rtq", frozen)]
pub struct Engine {
    engine: rtq_runtime::Engine,
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
    description: String,
}

/// One tensor's interface: (name, NumPy dtype name, shape with None for unknown dims
/// or None when the shape is unknown).
type Spec = (String, String, Option<Vec<Option<i64>>>);

/// One tensor handed across: (name, dtype name, shape, its bytes as a 1-D uint8 array).
/// INT4 crosses one element per byte (NumPy has no packed type): an `int8` array or
/// ml_dtypes' `int4` in, sign-extended `int8` bytes out.
type Packed<A> = (String, String, Vec<usize>, A);

fn spec(info: &TensorInfo) -> Spec {
    let shape = info
        .shape
        .as_ref()
        .map(|dims| dims.iter().map(|&d| (d >= 0).then_some(d)).collect());
    (info.name.clone(), info.dtype.name().to_string(), shape)
}

fn engine_error(err: impl std::fmt::Display) -> PyErr {
    EngineError::new_err(err.to_string())
}

#[pymethods]
impl Engine {
    /// Loads `path` (`backend`: auto, cpu, cuda or tensorrt).
    #[new]
    #[pyo3(signature = (path, backend="auto"))]
    fn new(py: Python<'_>, path: std::path::PathBuf, backend: &str) -> PyResult<Engine> {
        let backend: Backend = backend.parse().map_err(engine_error)?;
        let engine = py
            .detach(|| {
                rtq_runtime::Engine::load(
                    &path,
                    &LoadOptions {
                        backend,
                        ..Default::default()
                    },
                )
            })
            .map_err(|e| engine_error(format!("{}: {e}", path.display())))?;
        Ok(Engine {
            inputs: engine.inputs().to_vec(),
            outputs: engine.outputs().to_vec(),
            description: engine.description(),
            engine,
        })
    }

    /// The inputs, in the model's order.
    #[getter]
    fn inputs(&self) -> Vec<Spec> {
        self.inputs.iter().map(spec).collect()
    }

    /// The outputs, in the model's order.
    #[getter]
    fn outputs(&self) -> Vec<Spec> {
        self.outputs.iter().map(spec).collect()
    }

    /// The backend, in one line.
    #[getter]
    fn description(&self) -> String {
        self.description.clone()
    }

    /// Runs one inference. `feeds`: (name, dtype name, shape, the array's bytes as a
    /// 1-D uint8 view); returns the outputs the same way, their bytes handed to NumPy
    /// without a copy.
    fn run<'py>(
        &self,
        py: Python<'py>,
        feeds: Vec<Packed<PyReadonlyArray1<'py, u8>>>,
    ) -> PyResult<Vec<Packed<Bound<'py, PyArray1<u8>>>>> {
        let mut inputs = Vec::with_capacity(feeds.len());
        for (name, dtype, shape, bytes) in &feeds {
            let dtype = DataType::from_name(dtype).ok_or_else(|| {
                engine_error(format!("input `{name}`: rtq has no element type `{dtype}`"))
            })?;
            let data = bytes.as_slice().map_err(engine_error)?;
            let tensor = if dtype == DataType::Int4 {
                HostTensor::int4_from_unpacked(name.clone(), shape.clone(), data)
            } else {
                HostTensor::new(name.clone(), dtype, shape.clone(), data.to_vec())
            };
            inputs.push(tensor.map_err(engine_error)?);
        }
        let outputs = py
            .detach(|| self.engine.infer(&inputs))
            .map_err(engine_error)?;
        Ok(outputs
            .into_iter()
            .map(|t| {
                let (name, dtype, shape) = (
                    t.name.clone(),
                    t.dtype().name().to_string(),
                    t.shape().to_vec(),
                );
                let bytes = t.int4_unpacked().unwrap_or_else(|| t.into_bytes());
                (name, dtype, shape, PyArray1::from_vec(py, bytes))
            })
            .collect())
    }

    fn __repr__(&self) -> String {
        format!("Engine({})", self.description)
    }
}
