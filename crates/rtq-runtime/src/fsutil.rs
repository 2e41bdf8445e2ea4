//! Atomic file writes ([`rtq_fsutil`]) reporting [`RuntimeError::Io`].

use crate::RuntimeError;
use std::path::Path;

/// Writes `bytes` to `path` atomically, creating missing parent directories.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RuntimeError> {
    rtq_fsutil::write_atomic(path, bytes).map_err(|e| RuntimeError::io(e.path, e.source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn writes_into_new_directories() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("repo").join("1").join("model.plan");
        write_atomic(&path, b"plan").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"plan");
    }

    #[test]
    fn failure_is_an_io_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        // The target is an existing directory: the rename fails.
        let target = dir.path().join("taken");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("x"), b"x").unwrap();
        let err = write_atomic(&target, b"data").unwrap_err();
        assert!(
            matches!(&err, RuntimeError::Io { path, .. } if *path == target),
            "{err:?}"
        );
        assert!(
            err.to_string().starts_with(&target.display().to_string()),
            "{err}"
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "temp file left"
        );
    }
}
