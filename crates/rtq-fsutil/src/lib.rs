//! Atomic file writes shared by rtq's crates.
//!
//! [`write_atomic`] and [`write_atomic_with`] create missing parent directories, write
//! to a temporary file in the target directory, fsync it and rename it over the
//! target: readers see the old file or the whole new one, never a part, and a failed
//! write leaves no temporary file behind. Errors are [`WriteError`]s naming the path.

#![warn(missing_docs)]

mod atomic;
mod error;

pub use atomic::{write_atomic, write_atomic_with};
pub use error::WriteError;
