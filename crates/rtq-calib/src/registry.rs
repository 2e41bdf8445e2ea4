//! Choosing a calibrator by name.

use crate::entropy::EntropyCalibrator;
use crate::max::MaxCalibrator;
use crate::mse::MseCalibrator;
use crate::percentile::PercentileCalibrator;
use crate::{CalibError, CalibOptions, Calibrator};

/// The calibration methods, each a [`Calibrator`] of this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum CalibMethod {
    /// KL-divergence threshold (TensorRT `EntropyCalibration2`).
    #[default]
    Entropy,
    /// Largest magnitude seen.
    Max,
    /// Percentile of magnitudes ([`CalibOptions::percentile`]).
    Percentile,
    /// Threshold minimising the quantization mean squared error.
    Mse,
}

impl CalibMethod {
    /// Every method, the default first.
    pub const ALL: [CalibMethod; 4] = [
        CalibMethod::Entropy,
        CalibMethod::Max,
        CalibMethod::Percentile,
        CalibMethod::Mse,
    ];

    /// The method's name (`entropy`, `max`, `percentile`, `mse`).
    pub const fn name(self) -> &'static str {
        match self {
            CalibMethod::Entropy => "entropy",
            CalibMethod::Max => "max",
            CalibMethod::Percentile => "percentile",
            CalibMethod::Mse => "mse",
        }
    }

    /// One line saying what the method does (for command-line help).
    pub const fn description(self) -> &'static str {
        match self {
            CalibMethod::Entropy => "KL-divergence threshold (TensorRT EntropyCalibration2)",
            CalibMethod::Max => "largest magnitude seen",
            CalibMethod::Percentile => "percentile of magnitudes (see --percentile)",
            CalibMethod::Mse => "threshold minimising the quantization mean squared error",
        }
    }

    /// The method's calibrator, configured by `options` (validated first).
    pub fn calibrator(self, options: &CalibOptions) -> Result<Box<dyn Calibrator>, CalibError> {
        options.validate()?;
        Ok(match self {
            CalibMethod::Entropy => Box::new(EntropyCalibrator::new(options)),
            CalibMethod::Max => Box::new(MaxCalibrator),
            CalibMethod::Percentile => Box::new(PercentileCalibrator::new(options)),
            CalibMethod::Mse => Box::new(MseCalibrator::new(options)),
        })
    }
}

impl std::fmt::Display for CalibMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CalibMethod {
    type Err = CalibError;

    /// Parses a method name, ASCII case-insensitively and ignoring surrounding spaces.
    fn from_str(name: &str) -> Result<CalibMethod, CalibError> {
        let key = name.trim();
        CalibMethod::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(key))
            .ok_or_else(|| CalibError::UnknownCalibrator {
                name: name.to_string(),
                known: NAMES.join(", "),
            })
    }
}

/// The calibrator used when none is named.
pub const DEFAULT_CALIBRATOR: &str = CalibMethod::Entropy.name();

const NAMES: [&str; CalibMethod::ALL.len()] = {
    let mut names = [""; CalibMethod::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = CalibMethod::ALL[i].name();
        i += 1;
    }
    names
};

/// Names of the registered calibrators, the default (`entropy`) first.
pub fn calibrator_names() -> &'static [&'static str] {
    &NAMES
}

/// The calibrator registered as `name` (ASCII case-insensitive), configured by `options`.
///
/// Fails on an unknown name (the error lists the known ones) or invalid options.
pub fn calibrator_by_name(
    name: &str,
    options: &CalibOptions,
) -> Result<Box<dyn Calibrator>, CalibError> {
    name.parse::<CalibMethod>()?.calibrator(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_resolves_to_itself() {
        for &n in calibrator_names() {
            let c = calibrator_by_name(n, &CalibOptions::default()).unwrap();
            assert_eq!(c.name(), n);
        }
        assert_eq!(calibrator_names()[0], DEFAULT_CALIBRATOR);
        assert_eq!(CalibMethod::default().name(), DEFAULT_CALIBRATOR);
        for m in CalibMethod::ALL {
            assert_eq!(m.name().parse::<CalibMethod>().unwrap(), m);
            assert_eq!(m.to_string(), m.name());
        }
        let c = calibrator_by_name(" MSE ", &CalibOptions::default()).unwrap();
        assert_eq!(c.name(), "mse");
    }

    /// Batches of different scales (so histograms widen as they come), with zeros.
    fn batches() -> Vec<Vec<f32>> {
        let mut rng = rtq_test_support::Rng::new(7);
        [0.01f32, 3.0, 0.0, 0.5, 40.0, 1.0]
            .iter()
            .map(|&scale| {
                (0..3000)
                    .map(|i| {
                        if i % 5 == 0 {
                            0.0
                        } else {
                            rng.normal() as f32 * scale
                        }
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn merged_collectors_equal_one_that_saw_everything() {
        let options = CalibOptions::default();
        let all_methods = crate::AllMethodsCalibrator::new(CalibMethod::Entropy, &options).unwrap();
        let mut calibrators: Vec<Box<dyn Calibrator>> = calibrator_names()
            .iter()
            .map(|n| calibrator_by_name(n, &options).unwrap())
            .collect();
        calibrators.push(Box::new(all_methods));
        let batches = batches();
        for calibrator in &calibrators {
            let mut whole = calibrator.collector();
            for b in &batches {
                whole.observe(b).unwrap();
            }
            // Every split of the batches between two collectors (by a bit mask), each
            // merged into the other.
            for mask in 0..1u32 << batches.len() {
                let (mut a, mut b) = (calibrator.collector(), calibrator.collector());
                for (i, batch) in batches.iter().enumerate() {
                    let side = if mask >> i & 1 == 1 { &mut a } else { &mut b };
                    side.observe(batch).unwrap();
                }
                let (mut ab, ba) = (a, b);
                let copy_of_a = {
                    let mut c = calibrator.collector();
                    c.merge(ab.as_ref()).unwrap();
                    c
                };
                ab.merge(ba.as_ref()).unwrap();
                let mut ba = ba;
                ba.merge(copy_of_a.as_ref()).unwrap();
                for merged in [&ab, &ba] {
                    let name = calibrator.name();
                    assert_eq!(merged.stats(), whole.stats(), "{name}, split {mask:b}");
                    assert_eq!(
                        merged.statistics(),
                        whole.statistics(),
                        "{name}, split {mask:b}"
                    );
                }
            }
        }
    }

    #[test]
    fn histograms_do_not_merge_into_other_collectors() {
        let options = CalibOptions::default();
        let mut entropy = calibrator_by_name("entropy", &options).unwrap().collector();
        let mut max = calibrator_by_name("max", &options).unwrap().collector();
        max.observe(&[1.0, -2.0]).unwrap();
        entropy.observe(&[0.5]).unwrap();
        let before = entropy.stats();
        assert!(matches!(
            entropy.merge(max.as_ref()),
            Err(CalibError::Stats { .. })
        ));
        assert_eq!(entropy.stats(), before);
        let coarse = CalibOptions {
            num_bins: 256,
            ..CalibOptions::default()
        };
        let other = calibrator_by_name("entropy", &coarse).unwrap().collector();
        assert!(entropy.merge(other.as_ref()).is_err());
        // The max of a histogram collector's values is all a max collector needs.
        max.merge(entropy.as_ref()).unwrap();
        assert_eq!(
            (max.stats().min, max.stats().max, max.stats().count),
            (-2.0, 1.0, 3)
        );
    }

    #[test]
    fn unknown_name_lists_known_ones() {
        let e = calibrator_by_name("kl", &CalibOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "unknown calibrator `kl`; known calibrators: entropy, max, percentile, mse"
        );
    }

    #[test]
    fn invalid_options_are_rejected() {
        let o = CalibOptions {
            num_bins: 10,
            ..Default::default()
        };
        assert!(calibrator_by_name("entropy", &o).is_err());
    }

    #[test]
    fn collectors_are_independent_and_sendable() {
        let cal = calibrator_by_name("percentile", &CalibOptions::default()).unwrap();
        let mut a = cal.collector();
        let b = cal.collector();
        a.observe(&[1.0, 2.0]).unwrap();
        assert_eq!(a.stats().count, 2);
        assert_eq!(b.stats().count, 0);
        // Collectors can move to worker threads.
        let handle = std::thread::spawn(move || {
            a.observe(&[3.0]).unwrap();
            a.stats().count
        });
        assert_eq!(handle.join().unwrap(), 3);
    }
}
