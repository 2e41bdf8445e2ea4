//! Atomic writes of emitted files, through [`rtq_fsutil`].

use crate::EmitError;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically: readers see the old file or the whole new one,
/// never a part. Creates missing parent directories ([`rtq_fsutil::write_atomic`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), EmitError> {
    rtq_fsutil::write_atomic(path, bytes).map_err(io_error)
}

/// Like [`write_atomic`], streaming the content through `fill`.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), EmitError> {
    rtq_fsutil::write_atomic_with(path, fill).map_err(io_error)
}

fn io_error(e: rtq_fsutil::WriteError) -> EmitError {
    EmitError::Io {
        path: e.path,
        source: e.source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_fill_leaves_nothing_and_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let err = write_atomic_with(&path, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: cannot write: disk full", path.display())
        );
        assert!(!path.exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "temp file left behind"
        );
    }

    #[test]
    fn replaces_whole_file_and_creates_parents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new-dir").join("out.txt");
        write_atomic(&path, b"old content").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
    }
}
