//! The per-layer profile of a benchmark (`--profile`, trtexec's `--dumpProfile`): each
//! layer's mean time over separate profiled runs, and the totals by op type.

use crate::LayerTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One layer's mean time over the profiled runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerProfile {
    /// Node name.
    pub name: String,
    /// Op type.
    pub op: String,
    /// Mean wall time per run in milliseconds.
    pub mean_ms: f64,
    /// Share of the profiled runs' summed layer time, in percent.
    pub percent: f64,
}

/// The layers' times over `runs` profiled runs (separate from the timed ones).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Profiled runs.
    pub runs: usize,
    /// Every layer, in execution order.
    pub layers: Vec<LayerProfile>,
}

impl Profile {
    /// Averages `runs` (each one inference's [`LayerTime`]s, in the same order).
    pub fn from_runs(runs: &[Vec<LayerTime>]) -> Option<Profile> {
        let first = runs.first()?;
        let n = runs.len() as f64;
        let mut layers: Vec<LayerProfile> = first
            .iter()
            .enumerate()
            .map(|(i, l)| LayerProfile {
                name: l.name.clone(),
                op: l.op.clone(),
                mean_ms: runs
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|t| t.ms)
                    .sum::<f64>()
                    / n,
                percent: 0.0,
            })
            .collect();
        let total: f64 = layers.iter().map(|l| l.mean_ms).sum();
        for l in &mut layers {
            l.percent = if total > 0.0 {
                100.0 * l.mean_ms / total
            } else {
                0.0
            };
        }
        Some(Profile {
            runs: runs.len(),
            layers,
        })
    }

    /// Mean time per run and layer count by op type, largest first.
    pub fn by_op(&self) -> Vec<(String, usize, f64)> {
        let mut by: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
        for l in &self.layers {
            let e = by.entry(&l.op).or_default();
            e.0 += 1;
            e.1 += l.mean_ms;
        }
        let mut out: Vec<(String, usize, f64)> = by
            .into_iter()
            .map(|(op, (n, ms))| (op.to_string(), n, ms))
            .collect();
        out.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        out
    }

    /// The text section of the report: totals by op type, then the `top` slowest layers.
    pub fn to_text(&self, top: usize) -> String {
        let total: f64 = self.layers.iter().map(|l| l.mean_ms).sum();
        let mut out = format!(
            "=== Profile ({} runs, {} layers, {total:.4} ms summed per run) ===\n",
            self.runs,
            self.layers.len()
        );
        out.push_str(&format!(
            "{:<28} {:>7} {:>11} {:>7}\n",
            "op", "layers", "ms/run", "%"
        ));
        for (op, n, ms) in self.by_op() {
            let pct = if total > 0.0 { 100.0 * ms / total } else { 0.0 };
            out.push_str(&format!("{op:<28} {n:>7} {ms:>11.4} {pct:>6.1}%\n"));
        }
        let mut slowest: Vec<&LayerProfile> = self.layers.iter().collect();
        slowest.sort_by(|a, b| b.mean_ms.total_cmp(&a.mean_ms));
        out.push_str(&format!("slowest {} layers:\n", top.min(slowest.len())));
        for l in slowest.into_iter().take(top) {
            out.push_str(&format!(
                "  {:<40} {:<20} {:>9.4} ms {:>5.1}%\n",
                l.name, l.op, l.mean_ms, l.percent
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, op: &str, ms: f64) -> LayerTime {
        LayerTime {
            name: name.into(),
            op: op.into(),
            ms,
        }
    }

    #[test]
    fn averages_runs_and_sums_by_op() {
        let runs = vec![
            vec![
                t("c1", "Conv", 2.0),
                t("r", "Relu", 0.5),
                t("c2", "Conv", 1.0),
            ],
            vec![
                t("c1", "Conv", 4.0),
                t("r", "Relu", 0.5),
                t("c2", "Conv", 3.0),
            ],
        ];
        let p = Profile::from_runs(&runs).unwrap();
        assert_eq!(p.runs, 2);
        assert_eq!(p.layers[0].mean_ms, 3.0);
        assert_eq!(p.layers[2].mean_ms, 2.0);
        assert!((p.layers.iter().map(|l| l.percent).sum::<f64>() - 100.0).abs() < 1e-9);
        assert_eq!(
            p.by_op(),
            vec![("Conv".to_string(), 2, 5.0), ("Relu".to_string(), 1, 0.5)]
        );
        let text = p.to_text(1);
        assert!(
            text.contains("Conv") && text.contains("slowest 1 layers:\n  c1"),
            "{text}"
        );
        assert!(Profile::from_runs(&[]).is_none());
    }
}
