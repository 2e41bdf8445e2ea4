//! rtq-tensorrt-sys
