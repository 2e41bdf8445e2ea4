//! Calibration statistics saved to a file and read back: every observed tensor's
//! extremes and |x| histogram, enough to re-pick any method's ranges without new
//! forward passes, and to merge the statistics of shards calibrated apart.

use crate::histogram::AbsHistogram;
use crate::CalibError;
use serde::{Deserialize, Serialize};

/// What calibration observed on one tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorStats {
    /// Smallest value seen (0 when nothing was seen).
    pub min: f32,
    /// Largest value seen (0 when nothing was seen).
    pub max: f32,
    /// Number of values seen.
    pub count: u64,
    /// Histogram of |x|.
    pub histogram: AbsHistogram,
}

impl TensorStats {
    /// Folds in `other` (same bin count): the statistics of both sets of values,
    /// exactly, in either order. `false` (nothing added) if the bin counts differ.
    pub fn merge(&mut self, other: &TensorStats) -> bool {
        if !self.histogram.merge(&other.histogram) {
            return false;
        }
        if other.count > 0 {
            if self.count == 0 {
                (self.min, self.max) = (other.min, other.max);
            } else {
                self.min = self.min.min(other.min);
                self.max = self.max.max(other.max);
            }
        }
        self.count += other.count;
        true
    }
}

/// Every observed tensor's statistics from one calibration (or several merged).
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationStats {
    /// The model's file name (informational).
    pub model: String,
    /// Bins per histogram.
    pub num_bins: usize,
    /// Samples streamed through the model.
    pub samples: u64,
    /// Names of the calibration files observed, sorted.
    pub files: Vec<String>,
    /// Per tensor, in the order the tensors were observed.
    pub tensors: Vec<(String, TensorStats)>,
}

/// The `format` field of a statistics file.
pub const STATS_FORMAT: &str = "rtq-calibration-stats";
/// The newest statistics format version this build reads and the one it writes.
pub const STATS_VERSION: u32 = 1;

/// The file's layout (version 1).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StatsFile {
    format: String,
    version: u32,
    model: String,
    num_bins: usize,
    samples: u64,
    files: Vec<String>,
    tensors: Vec<TensorEntry>,
}

/// One tensor in the file; `counts` stops at the last non-zero bin.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TensorEntry {
    name: String,
    min: f32,
    max: f32,
    count: u64,
    range: f64,
    counts: Vec<u64>,
}

fn invalid(reason: impl Into<String>) -> CalibError {
    CalibError::Stats {
        reason: reason.into(),
    }
}

impl CalibrationStats {
    /// The statistics of `name`, if observed.
    pub fn get(&self, name: &str) -> Option<&TensorStats> {
        self.tensors.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }

    /// The file's text (JSON). The same statistics always give the same bytes.
    pub fn to_json(&self) -> String {
        let file = StatsFile {
            format: STATS_FORMAT.to_string(),
            version: STATS_VERSION,
            model: self.model.clone(),
            num_bins: self.num_bins,
            samples: self.samples,
            files: self.files.clone(),
            tensors: self
                .tensors
                .iter()
                .map(|(name, s)| {
                    let counts = s.histogram.counts();
                    let used = counts.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
                    TensorEntry {
                        name: name.clone(),
                        min: s.min,
                        max: s.max,
                        count: s.count,
                        range: s.histogram.range(),
                        counts: counts[..used].to_vec(),
                    }
                })
                .collect(),
        };
        let mut text = serde_json::to_string(&file).expect("statistics serialize");
        text.push('\n');
        text
    }

    /// Parses and checks a statistics file's text.
    pub fn from_json(text: &str) -> Result<CalibrationStats, CalibError> {
        #[derive(Deserialize)]
        struct Header {
            format: Option<String>,
            version: Option<u32>,
        }
        let header: Header = serde_json::from_str(text)
            .map_err(|e| invalid(format!("not a statistics file (JSON: {e})")))?;
        if header.format.as_deref() != Some(STATS_FORMAT) {
            return Err(invalid(format!(
                "not a statistics file (`format` is not \"{STATS_FORMAT}\")"
            )));
        }
        match header.version {
            Some(STATS_VERSION) => {}
            Some(v) => {
                return Err(invalid(format!(
                    "format version {v}; this rtq reads version {STATS_VERSION}"
                )))
            }
            None => return Err(invalid("no `version`")),
        }
        let file: StatsFile = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if file.num_bins == 0 || file.num_bins > crate::MAX_BINS {
            return Err(invalid(format!("num_bins {} out of range", file.num_bins)));
        }
        let mut tensors = Vec::with_capacity(file.tensors.len());
        for t in file.tensors {
            let bad = |why: &str| invalid(format!("tensor `{}`: {why}", t.name));
            let histogram = AbsHistogram::from_parts(file.num_bins, t.range, &t.counts)
                .ok_or_else(|| bad("histogram range is not a power of two or has too many bins"))?;
            if histogram.total() != t.count {
                return Err(bad("histogram counts do not add up to `count`"));
            }
            if !(t.min.is_finite() && t.max.is_finite()) || t.min > t.max {
                return Err(bad("min/max are not finite and ordered"));
            }
            if t.range > 0.0 && t.min.abs().max(t.max.abs()) as f64 >= t.range {
                return Err(bad("min/max fall outside the histogram's range"));
            }
            tensors.push((
                t.name,
                TensorStats {
                    min: t.min,
                    max: t.max,
                    count: t.count,
                    histogram,
                },
            ));
        }
        Ok(CalibrationStats {
            model: file.model,
            num_bins: file.num_bins,
            samples: file.samples,
            files: file.files,
            tensors,
        })
    }

    /// Folds in the statistics of another shard of the same model's calibration:
    /// the result is exactly what one calibration over both shards' files gives,
    /// whatever the order of merging. Fails if the shards observed other tensors,
    /// used other bin counts or share a file.
    pub fn merge(&mut self, other: &CalibrationStats) -> Result<(), CalibError> {
        if other.num_bins != self.num_bins {
            return Err(invalid(format!(
                "histograms of {} and {} bins cannot be merged (calibrate every shard with \
                 the same --calib-bins)",
                self.num_bins, other.num_bins
            )));
        }
        let names = |s: &CalibrationStats| s.tensors.iter().map(|(n, _)| n.clone()).collect();
        let (mine, theirs): (Vec<String>, Vec<String>) = (names(self), names(other));
        if mine != theirs {
            let differing = mine
                .iter()
                .zip(&theirs)
                .find(|(a, b)| a != b)
                .map(|(a, b)| format!("`{a}` vs `{b}`"))
                .unwrap_or_else(|| format!("{} vs {} tensors", mine.len(), theirs.len()));
            return Err(invalid(format!(
                "the shards observed different tensors ({differing}): another model or other \
                 optimization options"
            )));
        }
        if let Some(shared) = other.files.iter().find(|f| self.files.contains(f)) {
            return Err(invalid(format!(
                "file `{shared}` is in both shards; it would be counted twice"
            )));
        }
        for ((_, a), (_, b)) in self.tensors.iter_mut().zip(&other.tensors) {
            a.merge(b);
        }
        self.samples += other.samples;
        self.files.extend(other.files.iter().cloned());
        self.files.sort();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats_of(values: &[f32], bins: usize) -> TensorStats {
        let mut histogram = AbsHistogram::new(bins);
        let absmax = values.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        histogram.add(values, absmax);
        TensorStats {
            min: values.iter().copied().fold(f32::INFINITY, f32::min),
            max: values.iter().copied().fold(f32::NEG_INFINITY, f32::max),
            count: values.len() as u64,
            histogram,
        }
    }

    fn shard(file: &str, values: &[f32]) -> CalibrationStats {
        CalibrationStats {
            model: "m.onnx".into(),
            num_bins: 16,
            samples: 1,
            files: vec![file.into()],
            tensors: vec![("t".into(), stats_of(values, 16))],
        }
    }

    #[test]
    fn json_round_trips_exactly() {
        let s = shard("a.npy", &[0.1, -3.3, 1e-7, 2.25]);
        let text = s.to_json();
        let back = CalibrationStats::from_json(&text).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.to_json(), text);
    }

    #[test]
    fn shards_merge_to_the_whole_in_any_order() {
        let (a, b, c) = ([0.5f32, -0.25], [7.0f32, 1.0], [-2.0f32]);
        let whole = {
            let all: Vec<f32> = a.iter().chain(&b).chain(&c).copied().collect();
            stats_of(&all, 16)
        };
        for order in [["a", "b", "c"], ["c", "a", "b"], ["b", "c", "a"]] {
            let part = |n: &str| match n {
                "a" => shard("a.npy", &a),
                "b" => shard("b.npy", &b),
                _ => shard("c.npy", &c),
            };
            let mut merged = part(order[0]);
            merged.merge(&part(order[1])).unwrap();
            merged.merge(&part(order[2])).unwrap();
            assert_eq!(merged.tensors[0].1, whole, "{order:?}");
            assert_eq!(merged.files, ["a.npy", "b.npy", "c.npy"]);
            assert_eq!(merged.samples, 3);
        }
    }

    #[test]
    fn merge_refuses_mismatched_shards() {
        let mut a = shard("a.npy", &[1.0]);
        let err = a.merge(&shard("a.npy", &[2.0])).unwrap_err().to_string();
        assert!(err.contains("`a.npy` is in both shards"), "{err}");
        let mut other = shard("b.npy", &[1.0]);
        other.tensors[0].0 = "u".into();
        let err = a.merge(&other).unwrap_err().to_string();
        assert!(err.contains("`t` vs `u`"), "{err}");
        let mut other = shard("b.npy", &[1.0]);
        other.num_bins = 32;
        assert!(a
            .merge(&other)
            .unwrap_err()
            .to_string()
            .contains("16 and 32 bins"));
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        let good = shard("a.npy", &[1.0, 2.0]).to_json();
        let cases = [
            ("{}".to_string(), "not a statistics file"),
            (
                good.replace("\"version\":1", "\"version\":9"),
                "format version 9",
            ),
            (good.replace("\"count\":2", "\"count\":3"), "do not add up"),
            (
                good.replace("\"range\":4.0", "\"range\":3.0"),
                "power of two",
            ),
            ("not json".to_string(), "JSON"),
        ];
        for (text, expected) in cases {
            let err = CalibrationStats::from_json(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "{err} should mention {expected}");
        }
    }
}
