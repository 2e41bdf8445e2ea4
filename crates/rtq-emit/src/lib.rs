//! rtq-emit
