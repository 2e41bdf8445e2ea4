//! Atomic file writes: a temporary file in the target directory, then a rename.

use crate::RuntimeError;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `bytes` to `path` atomically: readers see the old file or the complete new
/// one, never a partial write. Creates missing parent directories.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RuntimeError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|e| RuntimeError::io(&dir, e))?;
    let file_name = path.file_name().ok_or_else(|| {
        RuntimeError::option("output path", format!("{} names no file", path.display()))
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        file_name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(RuntimeError::io(path, e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replaces_and_leaves_no_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("model.plan");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let entries: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(entries, vec![std::ffi::OsString::from("model.plan")]);
    }

    #[test]
    fn failure_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        // The target is an existing directory: the rename fails.
        let target = dir.path().join("taken");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("x"), b"x").unwrap();
        let err = write_atomic(&target, b"data").unwrap_err();
        assert!(
            err.to_string().starts_with(&target.display().to_string()),
            "{err}"
        );
        let leftovers = fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "temporary file was not removed");
    }
}
