use crate::EmitError;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same directory and an
/// atomic rename: readers see the old file or the whole new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), EmitError> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Like [`write_atomic`], streaming the content through `fill`.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), EmitError> {
    let io = |source| EmitError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".rtq-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io)?;
    {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        fill(&mut w).map_err(io)?;
        w.flush().map_err(io)?;
    }
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_fill_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let err = write_atomic_with(&path, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("out.bin"), "{err}");
        assert!(!path.exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "temp file left behind"
        );
    }

    #[test]
    fn replaces_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        write_atomic(&path, b"old content").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_file() {
        let err = write_atomic(Path::new("/nonexistent-rtq-dir/x.onnx"), b"x").unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent-rtq-dir/x.onnx"),
            "{err}"
        );
    }
}
