//! `--calib-cache FILE`: INT8 ranges from an existing TensorRT calibration cache (the
//! `TRT-<version>-<algorithm>` text `trtexec --calib` and `IInt8Calibrator` write, scale =
//! amax / 127 as big-endian IEEE-754 hex) or a JSON object of tensor name -> amax,
//! instead of calibrating: the way from TensorRT <= 10's implicit INT8 to the explicit
//! Q/DQ model TensorRT 11 needs, with the ranges the deployment was tuned on.

use super::Build;
use anyhow::{bail, Context, Result};
use rtq_ir::{Graph, ValueId};
use rtq_passes::quant::{plan_int8, Int8Plan};
use std::collections::HashMap;
use std::path::Path;

/// The most unknown names an error lists.
const LISTED: usize = 8;

impl Build<'_> {
    /// The ranges `path` gives `graph`'s values, and the INT8 plan restricted to the
    /// nodes whose quantized inputs all have one (the others stay in float, as TensorRT
    /// leaves a tensor without a cache entry in higher precision; a warning names them).
    /// Every name in the file must be a tensor of the source model.
    pub(super) fn imported_ranges(
        &mut self,
        graph: &Graph,
        path: &Path,
    ) -> Result<(HashMap<ValueId, f32>, Int8Plan)> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading calibration cache {}", path.display()))?;
        let entries = parse_ranges(&text).with_context(|| format!("{}", path.display()))?;
        let unknown: Vec<&str> = entries
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| !self.source_names.contains(*name))
            .collect();
        if !unknown.is_empty() {
            let shown: Vec<String> = unknown
                .iter()
                .take(LISTED)
                .map(|n| format!("`{n}`"))
                .collect();
            let more = unknown.len().saturating_sub(LISTED);
            bail!(
                "{}: {} tensor name(s) are not in {}: {}{} (a cache of another model, or of an \
                 export whose tensor names changed)",
                path.display(),
                unknown.len(),
                self.opts.model.display(),
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
        }
        let mut ranges = HashMap::new();
        for (name, amax) in &entries {
            if let Some(id) = graph.value_by_name(name) {
                ranges.insert(id, *amax);
            }
        }
        // Nodes reading a tensor the cache has no (usable) range for stay in float.
        let mut options = self.int8_options();
        let mut uncovered: Vec<String> = Vec::new();
        let mut plan = loop {
            let plan = plan_int8(graph, &options).context("planning INT8 quantization")?;
            let missing: Vec<String> =
                plan.edges
                    .iter()
                    .filter(|&&(node, slot)| {
                        graph.node(node).input(slot).is_none_or(|v| {
                            !ranges.get(&v).is_some_and(|a| a.is_finite() && *a > 0.0)
                        })
                    })
                    .map(|&(node, _)| graph.node(node).name.clone())
                    .collect();
            if missing.is_empty() {
                break plan;
            }
            uncovered.extend(missing.iter().cloned());
            options.exclude.names.extend(missing);
        };
        if !uncovered.is_empty() {
            uncovered.sort();
            uncovered.dedup();
            for (node, why) in plan.skipped.iter_mut() {
                if uncovered.contains(node) {
                    *why = "no range in the calibration cache for an input".into();
                }
            }
            self.report.warnings.push(format!(
                "{}: no range for an input of {} node(s), kept in float: {}",
                path.display(),
                uncovered.len(),
                uncovered.join(", ")
            ));
        }
        Ok((ranges, plan))
    }
}

/// `(tensor, amax)` entries of a TensorRT cache text or a ranges JSON object.
fn parse_ranges(text: &str) -> Result<Vec<(String, f32)>> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        let doc: serde_json::Value =
            serde_json::from_str(trimmed).context("parsing the ranges JSON")?;
        let object = doc
            .as_object()
            .context("a ranges JSON is an object of tensor name -> amax")?;
        return object
            .iter()
            .map(|(name, v)| match v.as_f64() {
                Some(amax) if amax.is_finite() && amax >= 0.0 => Ok((name.clone(), amax as f32)),
                _ => bail!("tensor `{name}`: amax {v} is not a non-negative number"),
            })
            .collect();
    }
    let (header, entries) = rtq_calib::parse_cache_text(text)?;
    let algorithm = header.splitn(3, '-').nth(2).unwrap_or("");
    if algorithm.is_empty() {
        bail!("header `{header}` names no calibration algorithm (TRT-<version>-<algorithm>)");
    }
    // Every TensorRT INT8 calibrator stores the scale amax / 127.
    Ok(entries
        .into_iter()
        .map(|(name, scale)| (name, scale * 127.0))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensorrt_caches_and_json_give_amax() {
        let text = rtq_calib::write_cache_text("8601", &[("x".into(), 2.0), ("y".into(), 0.5)]);
        let text = text.replace("EntropyCalibration2", "MinMaxCalibration");
        let got = parse_ranges(&text).unwrap();
        assert_eq!(got.len(), 2);
        assert!(
            (got[0].1 - 2.0).abs() < 1e-6 && (got[1].1 - 0.5).abs() < 1e-6,
            "{got:?}"
        );
        let got = parse_ranges(r#"{"x": 3.5, "y": 0}"#).unwrap();
        assert_eq!(got, vec![("x".to_string(), 3.5), ("y".to_string(), 0.0)]);
        assert!(parse_ranges(r#"{"x": "big"}"#)
            .unwrap_err()
            .to_string()
            .contains("`x`"));
        assert!(parse_ranges("TRT-8601\nx: 3c010204\n").is_err());
        assert!(parse_ranges("garbage").is_err());
    }
}
