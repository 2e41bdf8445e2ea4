//! One module per subcommand, plus the options they share.

pub mod bench;
pub mod compile;
pub mod data_args;
pub mod engine_args;
pub mod eval;
pub mod inspect;
pub mod stats;
