//! How a compile reports progress and how it is cancelled: [`Progress`].
//!
//! The command line shows bars on a terminal; an embedding program (the Python
//! package) gives a [`ProgressObserver`] instead and may cancel from another thread.
//! Cancellation is cooperative: every pass over the calibration data stops at its next
//! file (the data set shares [`Progress::cancel_flag`]) and the pipeline checks between
//! stages, failing with [`Cancelled`].

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Receives a compile's progress. Called from the compiling thread.
pub trait ProgressObserver: Send + Sync {
    /// `done` of `total` units of `task` are finished: files of a pass over the
    /// calibration data, or a stage of the pipeline (`stage:<name>`, 1 of 1).
    fn update(&self, task: &str, done: u64, total: u64);
}

/// The error a cancelled compile fails with.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

/// Where progress goes (terminal bars, an observer, or nowhere) and the flag that
/// cancels the work. Clones share the flag.
#[derive(Clone, Default)]
pub struct Progress {
    terminal: bool,
    observer: Option<Arc<dyn ProgressObserver>>,
    cancel: Arc<AtomicBool>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("terminal", &self.terminal)
            .field("observer", &self.observer.is_some())
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl Progress {
    /// Bars on stderr when `show` is true and stderr is a terminal; nothing else.
    pub fn terminal(show: bool) -> Progress {
        Progress {
            terminal: show,
            ..Progress::default()
        }
    }

    /// The same, also telling `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn ProgressObserver>) -> Progress {
        self.observer = Some(observer);
        self
    }

    /// Asks the work to stop (from any thread).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Whether [`Progress::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// The flag [`Progress::cancel`] sets, for the calibration data set.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// Fails with [`Cancelled`] once cancelled.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Tells the observer that the stage `name` finished.
    pub fn stage_done(&self, name: &str) {
        if let Some(observer) = &self.observer {
            observer.update(&format!("stage:{name}"), 1, 1);
        }
    }

    /// A task of `total` files named `name` (e.g. `calibrating (entropy)`).
    pub fn task(&self, name: &str, total: u64) -> ProgressTask {
        ProgressTask {
            bar: file_bar(total, self.terminal, name),
            progress: self.clone(),
            name: name.to_string(),
            done: AtomicU64::new(0),
            total,
        }
    }
}

/// One task's progress: a bar and/or the observer's updates.
pub struct ProgressTask {
    bar: ProgressBar,
    progress: Progress,
    name: String,
    done: AtomicU64,
    total: u64,
}

impl ProgressTask {
    /// One more file done; fails with [`Cancelled`] once the work is cancelled.
    pub fn inc(&self) -> Result<(), Cancelled> {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        self.bar.inc(1);
        if let Some(observer) = &self.progress.observer {
            observer.update(&self.name, done, self.total);
        }
        self.progress.check()
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A bar counting files on stderr, hidden when `show` is false or stderr is not a
/// terminal.
fn file_bar(len: u64, show: bool, message: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} files {elapsed_precise} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Recorder(Mutex<Vec<(String, u64, u64)>>);

    impl ProgressObserver for Recorder {
        fn update(&self, task: &str, done: u64, total: u64) {
            self.0.lock().unwrap().push((task.to_string(), done, total));
        }
    }

    #[test]
    fn observer_hears_every_file_and_stage_and_cancel_stops_the_task() {
        let recorder = Arc::new(Recorder(Mutex::new(Vec::new())));
        let progress = Progress::terminal(false).with_observer(recorder.clone());
        let task = progress.task("calibrating", 3);
        task.inc().unwrap();
        progress.stage_done("optimize");
        let clone = progress.clone();
        clone.cancel();
        assert!(task.inc().is_err(), "a clone's cancel reaches the task");
        assert!(progress.check().is_err());
        assert!(progress.cancel_flag().load(Ordering::Relaxed));
        let seen = recorder.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                ("calibrating".to_string(), 1, 3),
                ("stage:optimize".to_string(), 1, 1),
                ("calibrating".to_string(), 2, 3),
            ]
        );
    }
}
