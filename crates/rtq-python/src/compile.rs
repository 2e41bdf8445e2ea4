//! `compile`: the pipeline on a worker thread, with the GIL released, Ctrl-C and
//! progress-callback exceptions cancelling it.

use crate::errors::{to_py, AccuracyError, OptionsError};
use crate::observer::PyObserver;
use crate::options::compile_options;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rtq::pipeline::{compile as run_pipeline, prepare_out_dir, write_outputs, write_report};
use rtq::progress::Progress;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

/// How often the waiting thread looks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Compiles `model` into `out_dir` (calibration files in `calib_dir`) with `options`;
/// returns the report as JSON text. `progress`: a callable `(task, done, total)`, or
/// None; `terminal`: show progress bars on a terminal's stderr.
#[pyfunction]
#[pyo3(signature = (model, out_dir, calib_dir, options, progress=None, terminal=false))]
pub fn compile(
    py: Python<'_>,
    model: PathBuf,
    out_dir: PathBuf,
    calib_dir: Option<PathBuf>,
    options: &Bound<'_, PyDict>,
    progress: Option<Py<PyAny>>,
    terminal: bool,
) -> PyResult<String> {
    let mut opts = compile_options(model, out_dir, calib_dir, options)?;
    let observer = progress.map(|callback| Arc::new(PyObserver::new(callback)));
    opts.progress = Progress::terminal(terminal);
    if let Some(observer) = &observer {
        opts.progress = opts.progress.with_observer(observer.clone());
        observer.cancels(&opts.progress);
    }
    opts.validate()
        .and_then(|()| Ok(opts.data.validate()?))
        .map_err(|e| OptionsError::new_err(rtq::error_message(&e)))?;
    let cancel = opts.progress.clone();
    let (done, outcome) = mpsc::channel();
    let mut interrupted = None;
    let result = std::thread::scope(|scope| {
        let opts = &opts;
        scope.spawn(move || {
            // The receiver outlives the worker (the loop below waits for its result).
            let _ = done.send(build(opts));
        });
        let mut outcome = outcome;
        loop {
            let (received, back) = py.detach(move || (outcome.recv_timeout(SIGNAL_POLL), outcome));
            outcome = back;
            match received {
                Ok(result) => return result,
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(signal) = py.check_signals() {
                        // Ctrl-C: stop the pipeline at its next file or stage, then raise.
                        cancel.cancel();
                        interrupted.get_or_insert(signal);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(anyhow::anyhow!(
                        "the compile thread stopped without a result"
                    ))
                }
            }
        }
    });
    if let Some(err) = observer.as_ref().and_then(|o| o.take_raised()) {
        return Err(err);
    }
    match result {
        Ok(Outcome::Done(json)) => Ok(json),
        Ok(Outcome::MissedTarget(message)) => Err(AccuracyError::new_err(message)),
        Err(err) => match interrupted {
            Some(signal) if cancel.is_cancelled() => Err(signal),
            _ => Err(to_py(&err, cancel.is_cancelled())),
        },
    }
}

/// A finished compile: its report, or the message of a missed `strict_accuracy` target.
enum Outcome {
    Done(String),
    MissedTarget(String),
}

/// The command line's `rtq compile` without the terminal: compile, write the outputs
/// and the report (nothing is written unless every stage succeeded).
fn build(opts: &rtq::pipeline::CompileOptions) -> anyhow::Result<Outcome> {
    use anyhow::Context;
    prepare_out_dir(&opts.out_dir)?;
    let mut output = run_pipeline(opts)?;
    write_outputs(&opts.out_dir, &mut output).context("writing outputs")?;
    write_report(&opts.out_dir, &mut output.report).context("writing the report")?;
    if opts.strict_accuracy && !output.report.warnings.is_empty() {
        return Ok(Outcome::MissedTarget(format!(
            "strict_accuracy: {} (outputs written to {})",
            output.report.warnings.join("; "),
            opts.out_dir.display()
        )));
    }
    Ok(Outcome::Done(output.report.to_json()?))
}
