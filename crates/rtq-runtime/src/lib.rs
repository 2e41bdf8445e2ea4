//! rtq-runtime
