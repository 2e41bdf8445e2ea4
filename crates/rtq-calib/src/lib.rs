//! rtq-calib
