//! Per-pass statistics collected by the [`crate::PassManager`].

use serde::Serialize;
use std::fmt;

/// What one pass of a pipeline did over all iterations of a [`crate::PassManager::run`].
///
/// A pass that appears twice in a pipeline (e.g. shape inference) has two entries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassStat {
    /// The pass name.
    pub name: String,
    /// How many times it ran.
    pub runs: usize,
    /// How many of those runs changed the graph.
    pub changes: usize,
    /// Live nodes before its first run.
    pub nodes_before: usize,
    /// Live nodes after its last run.
    pub nodes_after: usize,
    /// Wall time spent in it over all runs, in milliseconds.
    pub wall_ms: f64,
}

/// Statistics of one pipeline run, serialisable for reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PassStats {
    /// One entry per pass, in pipeline order.
    pub entries: Vec<PassStat>,
    /// Iterations of the whole pipeline that ran (the last one may have changed nothing).
    pub iterations: usize,
    /// Whether the pipeline reached a fixed point (an iteration in which no pass changed
    /// anything) before the iteration cap; false also when a hook stopped it early.
    pub converged: bool,
    /// The pass after which a hook stopped the pipeline, if one did.
    pub stopped_after: Option<String>,
}

impl PassStats {
    /// The first entry for the pass named `name`.
    pub fn get(&self, name: &str) -> Option<&PassStat> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// Total wall time of all passes, in milliseconds.
    pub fn total_wall_ms(&self) -> f64 {
        self.entries.iter().map(|e| e.wall_ms).sum()
    }
}

impl fmt::Display for PassStats {
    /// A fixed-width table, one line per pass, for human-readable reports.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .entries
            .iter()
            .map(|e| e.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            f,
            "{:<width$}  {:>4}  {:>7}  {:>6}  {:>6}  {:>10}",
            "pass", "runs", "changes", "before", "after", "time (ms)"
        )?;
        for e in &self.entries {
            writeln!(
                f,
                "{:<width$}  {:>4}  {:>7}  {:>6}  {:>6}  {:>10.3}",
                e.name, e.runs, e.changes, e.nodes_before, e.nodes_after, e.wall_ms
            )?;
        }
        let state = match (&self.stopped_after, self.converged) {
            (Some(p), _) => format!("stopped after `{p}`"),
            (None, true) => "converged".to_string(),
            (None, false) => "iteration cap reached".to_string(),
        };
        write!(
            f,
            "{} iteration(s), {state}, {:.3} ms total",
            self.iterations,
            self.total_wall_ms()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(name: &str, wall_ms: f64) -> PassStat {
        PassStat {
            name: name.into(),
            runs: 2,
            changes: 1,
            nodes_before: 10,
            nodes_after: 7,
            wall_ms,
        }
    }

    #[test]
    fn lookup_and_totals() {
        let stats = PassStats {
            entries: vec![stat("a", 1.5), stat("b", 2.0)],
            iterations: 2,
            converged: true,
            stopped_after: None,
        };
        assert_eq!(stats.get("b").map(|s| s.wall_ms), Some(2.0));
        assert!(stats.get("c").is_none());
        assert!((stats.total_wall_ms() - 3.5).abs() < 1e-12);
        let table = stats.to_string();
        assert!(table.lines().nth(1).unwrap().starts_with("a "), "{table}");
        assert!(table.contains("converged"), "{table}");
    }
}
