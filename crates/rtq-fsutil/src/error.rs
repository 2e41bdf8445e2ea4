//! The error of an atomic write: the path involved and the I/O error.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A failed atomic write. Nothing was left at the target path by the failed write
/// (an existing file there is unchanged), and no temporary file remains.
#[derive(Debug)]
pub struct WriteError {
    /// The file being written, or the parent directory that could not be created.
    pub path: PathBuf,
    /// The underlying I/O error.
    pub source: io::Error,
}

impl WriteError {
    pub(crate) fn new(path: &Path, source: io::Error) -> WriteError {
        WriteError {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl From<WriteError> for io::Error {
    /// An [`io::Error`] of the same kind whose message names the path.
    fn from(e: WriteError) -> io::Error {
        io::Error::new(e.source.kind(), e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_path() {
        let e = WriteError::new(
            Path::new("out/model.onnx"),
            io::Error::new(io::ErrorKind::PermissionDenied, "Permission denied"),
        );
        assert_eq!(e.to_string(), "out/model.onnx: Permission denied");
        let io: io::Error = e.into();
        assert_eq!(io.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(io.to_string(), "out/model.onnx: Permission denied");
    }
}
