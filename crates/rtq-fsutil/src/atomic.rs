//! Writing a file atomically: a temporary file in the target directory, fsync, rename.

use crate::WriteError;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to `path` atomically; see [`write_atomic_with`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Writes what `fill` streams to `path` atomically: readers see the old file or the
/// whole new one, never a part.
///
/// Creates missing parent directories, writes through a buffer to a temporary file in
/// the target's directory, fsyncs it and renames it over `path` (replacing an existing
/// file). A new file gets the permissions [`fs::write`] would give it. When `fill` or
/// any step fails, the temporary file is removed and `path` is left as it was.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), WriteError> {
    if path.file_name().is_none() {
        return Err(WriteError::new(
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"),
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).map_err(|e| WriteError::new(dir, e))?;
    let fail = |e| WriteError::new(path, e);
    // Every early return below drops `tmp`, which removes the temporary file.
    let mut tmp = temp_builder().tempfile_in(dir).map_err(fail)?;
    {
        let mut w = io::BufWriter::new(tmp.as_file_mut());
        fill(&mut w).map_err(fail)?;
        w.flush().map_err(fail)?;
    }
    tmp.as_file().sync_all().map_err(fail)?;
    // On failure the error hands the temporary file back; dropping it removes it.
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

/// Temporary files named `.rtq-XXXXXX.tmp`, created with the default file mode (the
/// umask applies) instead of tempfile's owner-only 0o600.
fn temp_builder() -> tempfile::Builder<'static, 'static> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(".rtq-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(fs::Permissions::from_mode(0o666));
    }
    builder
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn entries(dir: &Path) -> Vec<OsString> {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn creates_missing_parent_directories() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a").join("b").join("model.plan");
        write_atomic(&path, b"plan").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"plan");
        assert_eq!(entries(path.parent().unwrap()), ["model.plan"]);
    }

    #[test]
    fn replaces_an_existing_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        write_atomic(&path, b"old, longer content").unwrap();
        write_atomic_with(&path, |w| {
            w.write_all(b"ne")?;
            w.write_all(b"w")
        })
        .unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(entries(dir.path()), ["out.txt"]);
    }

    #[test]
    fn failed_fill_leaves_no_file_and_keeps_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("out.bin");
        let failing = |w: &mut dyn Write| {
            w.write_all(b"partial")?;
            Err(io::Error::other("disk full"))
        };
        let err = write_atomic_with(&path, failing).unwrap_err();
        assert_eq!(err.path, path);
        assert_eq!(err.to_string(), format!("{}: disk full", path.display()));
        assert!(!path.exists());
        assert!(entries(path.parent().unwrap()).is_empty(), "temp file left");

        write_atomic(&path, b"old").unwrap();
        write_atomic_with(&path, failing).unwrap_err();
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(entries(path.parent().unwrap()), ["out.bin"]);
    }

    #[test]
    fn failed_rename_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a non-empty directory: the rename fails.
        let target = dir.path().join("taken");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("x"), b"x").unwrap();
        let err = write_atomic(&target, b"data").unwrap_err();
        assert_eq!(err.path, target);
        assert!(err.to_string().starts_with(&target.display().to_string()));
        assert_eq!(entries(dir.path()), ["taken"]);
        assert_eq!(entries(&target), ["x"]);
    }

    #[test]
    fn an_uncreatable_parent_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("blocker");
        fs::write(&blocker, b"a file, not a directory").unwrap();
        let parent = blocker.join("sub");
        let err = write_atomic(&parent.join("out.json"), b"{}").unwrap_err();
        assert_eq!(err.path, parent);
        assert_eq!(entries(dir.path()), ["blocker"]);
    }

    #[test]
    fn a_path_without_a_file_name_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_atomic(&dir.path().join(".."), b"x").unwrap_err();
        assert_eq!(err.source.kind(), io::ErrorKind::InvalidInput);
        assert!(entries(dir.path()).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn new_files_get_the_default_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        fs::write(&plain, b"x").unwrap();
        let atomic = dir.path().join("atomic");
        write_atomic(&atomic, b"x").unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&atomic), mode(&plain));
    }
}
