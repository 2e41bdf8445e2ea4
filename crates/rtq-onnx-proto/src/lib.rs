//! rtq-onnx-proto
