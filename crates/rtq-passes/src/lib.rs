//! rtq-passes
