//! Running the Python reference tools (onnx, onnxruntime, numpy) that tests compare against.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// What a test needing Python says when it cannot run.
const HINT: &str = "needs python3 with the packages of requirements-test.txt \
                    (pip install -r requirements-test.txt); set RTQ_SKIP_PYTHON_TESTS=1 to skip";

/// Whether tests needing Python are skipped (`RTQ_SKIP_PYTHON_TESTS=1`).
pub fn skip_python() -> bool {
    std::env::var("RTQ_SKIP_PYTHON_TESTS").is_ok_and(|v| v == "1")
}

/// Runs the Python script `script` with `args` (under `$PYTHON`, else `python3`),
/// asserting success; returns its standard output.
pub fn run_python<I, S>(script: &Path, args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = python3();
    cmd.arg(script).args(args);
    stdout(checked(&mut cmd, &script.display().to_string()))
}

/// Runs inline Python `code` (`python3 -c`), asserting success; returns its standard output.
pub fn run_python_inline(code: &str) -> String {
    stdout(checked(python3().args(["-c", code]), "inline Python"))
}

/// The interpreter: `$PYTHON`, else `python3`.
pub(crate) fn python3() -> Command {
    Command::new(std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into()))
}

/// The output of `cmd`, which ran `what`; panics with the stderr and an installation hint
/// when it cannot start or fails.
pub(crate) fn checked(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?} ({e}): this test {HINT}", cmd.get_program()));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\nthis test {HINT}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: Output) -> String {
    String::from_utf8(out.stdout).expect("Python prints UTF-8")
}
