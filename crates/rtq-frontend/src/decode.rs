use crate::FrontendError;
use rtq_onnx_proto::{Message, ModelProto};
use std::path::Path;

/// Reads and decodes an ONNX file (memory-mapped, so large weights are not copied twice).
pub fn read_model_proto(path: &Path) -> Result<ModelProto, FrontendError> {
    let io = |source| FrontendError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(FrontendError::NotOnnx {
            origin: path.display().to_string(),
            reason: "is a directory".into(),
        });
    }
    if meta.len() == 0 {
        return Err(FrontendError::NotOnnx {
            origin: path.display().to_string(),
            reason: "the file is empty".into(),
        });
    }
    // SAFETY: the map is read-only and dropped before this function returns; a file
    // truncated concurrently by another process is outside what rtq guards against.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    decode(&map, &path.display().to_string())
}

/// Decodes ONNX `ModelProto` bytes.
pub fn decode_model_proto(bytes: &[u8]) -> Result<ModelProto, FrontendError> {
    decode(bytes, "<memory>")
}

fn decode(bytes: &[u8], origin: &str) -> Result<ModelProto, FrontendError> {
    let not_onnx = |reason: String| FrontendError::NotOnnx {
        origin: origin.to_string(),
        reason,
    };
    let model = ModelProto::decode(bytes)
        .map_err(|e| not_onnx(format!("{e} (truncated or not protobuf)")))?;
    // Random bytes sometimes decode as a protobuf; a real model has a graph and an IR version.
    if model.graph.is_none() {
        return Err(not_onnx("it has no graph".into()));
    }
    match model.ir_version {
        Some(v) if (1..=20).contains(&v) => {}
        Some(v) => {
            return Err(not_onnx(format!(
                "ir_version {v} is not an ONNX IR version"
            )))
        }
        None => return Err(not_onnx("ir_version is missing".into())),
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_not_onnx() {
        let err = decode_model_proto(b"\xff\xff\xff\xffhello")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a valid ONNX model"), "{err}");
        let err = decode_model_proto(b"").unwrap_err().to_string();
        assert!(err.contains("no graph"), "{err}");
    }
}
