//! The accuracy a reduced-precision build must keep against FP32, and the verdict on
//! a measured [`AccuracyReport`].

use crate::AccuracyReport;
use serde::Serialize;
use std::str::FromStr;

/// Minimum agreement with FP32, per output (`--accuracy-target cosine=0.99,top1=0.99`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AccuracyTarget {
    /// Mean cosine similarity over the held-out samples.
    pub cosine: f64,
    /// Share of arg-max agreement, where the output has a class axis (classifiers,
    /// per-position for sequences).
    pub top1: f64,
}

impl Default for AccuracyTarget {
    fn default() -> Self {
        AccuracyTarget {
            cosine: 0.99,
            top1: 0.99,
        }
    }
}

impl FromStr for AccuracyTarget {
    type Err = String;

    /// `cosine=F`, `top1=F` or both, comma separated; unnamed metrics keep their defaults.
    fn from_str(text: &str) -> Result<AccuracyTarget, String> {
        let mut target = AccuracyTarget::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not METRIC=VALUE (e.g. cosine=0.995)"))?;
            let value: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| (0.0..=1.0).contains(v))
                .ok_or_else(|| format!("`{part}`: the value must be a number in [0, 1]"))?;
            match key.trim() {
                "cosine" => target.cosine = value,
                "top1" => target.top1 = value,
                other => return Err(format!("unknown metric `{other}` (cosine, top1)")),
            }
        }
        Ok(target)
    }
}

impl AccuracyTarget {
    /// The outputs that miss the target, one line each naming output, metric, value
    /// and target; empty when the target holds.
    pub fn misses(&self, report: &AccuracyReport) -> Vec<String> {
        // NaN never meets a target.
        let meets = |value: f64, target: f64| value >= target;
        let mut misses = Vec::new();
        for o in &report.outputs {
            if !meets(o.cosine_mean, self.cosine) {
                misses.push(format!(
                    "output `{}`: cosine mean {:.5} < {}",
                    o.output, o.cosine_mean, self.cosine
                ));
            }
            if let Some(top1) = o.top1_agreement.filter(|t| !meets(*t, self.top1)) {
                misses.push(format!(
                    "output `{}`: top-1 agreement {:.2}% < {:.2}%",
                    o.output,
                    100.0 * top1,
                    100.0 * self.top1
                ));
            }
        }
        misses
    }

    /// How far the worst metric of the worst output is above (positive) or below its
    /// target: a single number to rank builds by.
    pub fn margin(&self, report: &AccuracyReport) -> f64 {
        report
            .outputs
            .iter()
            .flat_map(|o| {
                let cosine = o.cosine_mean - self.cosine;
                let top1 = o.top1_agreement.map_or(f64::INFINITY, |t| t - self.top1);
                [cosine, top1]
            })
            .map(|m| if m.is_nan() { f64::NEG_INFINITY } else { m })
            .fold(f64::INFINITY, f64::min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OutputAccuracy;

    fn report(cosine: f64, top1: Option<f64>) -> AccuracyReport {
        AccuracyReport {
            variant: "int8".into(),
            samples: 4,
            scatter: None,
            outputs: vec![OutputAccuracy {
                output: "y".into(),
                cosine_mean: cosine,
                top1_agreement: top1,
                ..Default::default()
            }],
        }
    }

    #[test]
    fn parses_either_metric_and_keeps_defaults() {
        let t: AccuracyTarget = "cosine=0.995".parse().unwrap();
        assert_eq!((t.cosine, t.top1), (0.995, 0.99));
        let t: AccuracyTarget = " top1=0.9 , cosine=0.5".parse().unwrap();
        assert_eq!((t.cosine, t.top1), (0.5, 0.9));
        for bad in ["cosine", "cosine=2", "psnr=30", "top1=x"] {
            assert!(bad.parse::<AccuracyTarget>().is_err(), "{bad}");
        }
    }

    #[test]
    fn misses_name_output_metric_and_target() {
        let t = AccuracyTarget::default();
        assert!(t.misses(&report(0.995, Some(1.0))).is_empty());
        let m = t.misses(&report(0.75, Some(0.5)));
        assert_eq!(m.len(), 2);
        assert!(m[0].contains("`y`") && m[0].contains("0.75000") && m[0].contains("0.99"));
        assert!(m[1].contains("top-1") && m[1].contains("50.00%"));
        assert_eq!(
            t.misses(&report(f64::NAN, None)).len(),
            1,
            "NaN never meets it"
        );
        assert!((t.margin(&report(0.995, Some(0.95))) - -0.04).abs() < 1e-12);
        assert_eq!(t.margin(&report(f64::NAN, None)), f64::NEG_INFINITY);
    }
}
