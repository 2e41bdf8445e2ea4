//! A Python progress callback as the pipeline's [`ProgressObserver`].

use pyo3::prelude::*;
use rtq::progress::{Progress, ProgressObserver};
use std::sync::Mutex;

/// Calls `callback(task, done, total)`; an exception it raises cancels the compile and
/// is raised again by `compile` once the pipeline has stopped.
pub struct PyObserver {
    callback: Py<PyAny>,
    progress: Mutex<Option<Progress>>,
    raised: Mutex<Option<PyErr>>,
}

impl PyObserver {
    /// An observer calling `callback`.
    pub fn new(callback: Py<PyAny>) -> PyObserver {
        PyObserver {
            callback,
            progress: Mutex::new(None),
            raised: Mutex::new(None),
        }
    }

    /// The progress its exceptions cancel.
    pub fn cancels(&self, progress: &Progress) {
        *self.progress.lock().unwrap_or_else(|e| e.into_inner()) = Some(progress.clone());
    }

    /// The exception the callback raised, if it did.
    pub fn take_raised(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl ProgressObserver for PyObserver {
    fn update(&self, task: &str, done: u64, total: u64) {
        let result = Python::attach(|py| self.callback.call1(py, (task, done, total)).map(drop));
        if let Err(err) = result {
            let mut raised = self.raised.lock().unwrap_or_else(|e| e.into_inner());
            raised.get_or_insert(err);
            if let Some(progress) = &*self.progress.lock().unwrap_or_else(|e| e.into_inner()) {
                progress.cancel();
            }
        }
    }
}
