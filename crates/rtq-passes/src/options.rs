//! [`OptimizeOptions`]: user-facing knobs of the optimisation pipeline.

use crate::constant_folding::DEFAULT_FOLD_SIZE_LIMIT;
use crate::pipeline::PASS_NAMES;

/// Options of the standard optimisation pipeline ([`crate::optimization_passes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptimizeOptions {
    /// Constant-folding results larger than this many bytes stay unfolded
    /// (default [`DEFAULT_FOLD_SIZE_LIMIT`], 256 MiB).
    pub fold_size_limit: usize,
    /// Verify the graph after every pass (default off).
    pub verify_each: bool,
    /// Names of passes to leave out of the pipeline (see [`PASS_NAMES`]).
    pub disabled: Vec<String>,
}

impl Default for OptimizeOptions {
    fn default() -> Self {
        OptimizeOptions {
            fold_size_limit: DEFAULT_FOLD_SIZE_LIMIT,
            verify_each: false,
            disabled: Vec::new(),
        }
    }
}

impl OptimizeOptions {
    /// Whether the pass named `name` is disabled.
    pub fn is_disabled(&self, name: &str) -> bool {
        self.disabled.iter().any(|d| d == name)
    }

    /// The entries of [`OptimizeOptions::disabled`] that name no known pass.
    pub fn unknown_disabled(&self) -> Vec<&str> {
        self.disabled
            .iter()
            .map(String::as_str)
            .filter(|d| !PASS_NAMES.contains(d))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_disabled_lookup() {
        let opts = OptimizeOptions::default();
        assert_eq!(opts.fold_size_limit, 256 * 1024 * 1024);
        assert!(!opts.verify_each && opts.disabled.is_empty());
        let opts = OptimizeOptions {
            disabled: vec!["fold-batch-norm".into(), "no-such-pass".into()],
            ..OptimizeOptions::default()
        };
        assert!(opts.is_disabled("fold-batch-norm"));
        assert!(!opts.is_disabled("constant-folding"));
        assert_eq!(opts.unknown_disabled(), vec!["no-such-pass"]);
    }
}
