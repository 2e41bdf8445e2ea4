//! `rtq._rtq`: the native half of the `rtq` Python package (python/rtq). The Python
//! half turns models, calibration iterables and NumPy arrays into what these functions
//! take: paths, option dictionaries and byte views.

mod compile;
mod engine;
mod errors;
mod observer;
mod options;

use pyo3::prelude::*;

/// The executor frees and reallocates the same activation sizes for every sample;
/// mimalloc, never handing freed pages back to the OS during a run, reuses them (the
/// command line does the same, see src/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h's `mi_option_e`.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// A model's summary as JSON text (`rtq inspect --json`).
#[pyfunction]
#[pyo3(signature = (model, baseline=None))]
fn inspect(py: Python<'_>, model: String, baseline: Option<String>) -> PyResult<String> {
    py.detach(|| {
        let summary =
            rtq::inspect::inspect(model.as_ref(), baseline.as_deref().map(AsRef::as_ref))?;
        Ok(serde_json::to_string(&summary)?)
    })
    .map_err(|e| errors::to_py(&e, false))
}

/// `candidate` against `reference` on the sample files in `data_dir`, as JSON text
/// (`rtq eval --json`).
#[pyfunction]
#[pyo3(signature = (reference, candidate, data_dir, data_options, samples=None, per_layer=false))]
fn eval(
    py: Python<'_>,
    reference: String,
    candidate: String,
    data_dir: String,
    data_options: &Bound<'_, pyo3::types::PyDict>,
    samples: Option<usize>,
    per_layer: bool,
) -> PyResult<String> {
    let data = options::data_options(data_options)?;
    py.detach(|| {
        let set = rtq_calib::CalibrationSet::open(data_dir.as_ref(), &data)
            .map_err(anyhow::Error::from)
            .map_err(|e| e.context(format!("reading samples in {data_dir}")))?;
        let comparison = rtq::comparison::compare(
            reference.as_ref(),
            candidate.as_ref(),
            &set,
            samples,
            per_layer,
        )?;
        Ok(serde_json::to_string(&comparison.to_json()?)?)
    })
    .map_err(|e| errors::to_py(&e, false))
}

#[pymodule]
fn _rtq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // SAFETY: a plain option setter; mimalloc reads options atomically.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("BUILD_REVISION", rtq::build_info::GIT_REVISION)?;
    m.add_function(wrap_pyfunction!(compile::compile, m)?)?;
    m.add_function(wrap_pyfunction!(inspect, m)?)?;
    m.add_function(wrap_pyfunction!(eval, m)?)?;
    m.add_class::<engine::Engine>()?;
    errors::register(m)
}
