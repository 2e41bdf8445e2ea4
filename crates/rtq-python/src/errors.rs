//! The package's exceptions, and which one an error becomes.

use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;

pyo3::create_exception!(
    rtq,
    RtqError,
    PyException,
    "Base class of every error rtq raises; the message is the command line's."
);
pyo3::create_exception!(
    rtq,
    OptionsError,
    RtqError,
    "An option, or a combination of options, that cannot work."
);
pyo3::create_exception!(
    rtq,
    ModelError,
    RtqError,
    "The model cannot be read, or holds what rtq cannot compile."
);
pyo3::create_exception!(
    rtq,
    DataError,
    RtqError,
    "Calibration or evaluation data that does not fit the model."
);
pyo3::create_exception!(
    rtq,
    AccuracyError,
    RtqError,
    "strict_accuracy: the build missed its accuracy target (its outputs are written)."
);
pyo3::create_exception!(
    rtq,
    EngineError,
    RtqError,
    "Loading or running a model with rtq.Engine failed."
);

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RtqError", py.get_type::<RtqError>())?;
    m.add("OptionsError", py.get_type::<OptionsError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("DataError", py.get_type::<DataError>())?;
    m.add("AccuracyError", py.get_type::<AccuracyError>())?;
    m.add("EngineError", py.get_type::<EngineError>())?;
    Ok(())
}

/// The exception for `err`: by the first cause rtq can place (a model that cannot be
/// read, data that does not fit, a runtime failure), else [`RtqError`]; a cancelled
/// compile (`interrupted`) is a `KeyboardInterrupt`.
pub fn to_py(err: &anyhow::Error, interrupted: bool) -> PyErr {
    let message = rtq::error_message(err);
    let cancelled = err.chain().any(|c| {
        c.downcast_ref::<rtq::progress::Cancelled>().is_some()
            || matches!(
                c.downcast_ref::<rtq_calib::CalibError>(),
                Some(rtq_calib::CalibError::Cancelled)
            )
    });
    if interrupted && cancelled {
        return PyKeyboardInterrupt::new_err("rtq: cancelled");
    }
    for cause in err.chain() {
        if cause
            .downcast_ref::<rtq_frontend::FrontendError>()
            .is_some()
        {
            return ModelError::new_err(message);
        }
        if cause.downcast_ref::<rtq_calib::CalibError>().is_some() {
            return DataError::new_err(message);
        }
        if cause.downcast_ref::<rtq_runtime::RuntimeError>().is_some() {
            return EngineError::new_err(message);
        }
    }
    RtqError::new_err(message)
}
