//! Choosing a calibrator by name.

use crate::entropy::EntropyCalibrator;
use crate::max::MaxCalibrator;
use crate::mse::MseCalibrator;
use crate::percentile::PercentileCalibrator;
use crate::{CalibError, CalibOptions, Calibrator};

/// The calibrator used when none is named.
pub const DEFAULT_CALIBRATOR: &str = "entropy";

const NAMES: &[&str] = &["entropy", "max", "percentile", "mse"];

/// Names of the registered calibrators, the default (`entropy`) first.
pub fn calibrator_names() -> &'static [&'static str] {
    NAMES
}

/// The calibrator registered as `name` (ASCII case-insensitive), configured by `options`.
///
/// Fails on an unknown name (the error lists the known ones) or invalid options.
pub fn calibrator_by_name(
    name: &str,
    options: &CalibOptions,
) -> Result<Box<dyn Calibrator>, CalibError> {
    options.validate()?;
    let key = name.trim().to_ascii_lowercase();
    Ok(match key.as_str() {
        "entropy" => Box::new(EntropyCalibrator::new(options)),
        "max" => Box::new(MaxCalibrator),
        "percentile" => Box::new(PercentileCalibrator::new(options)),
        "mse" => Box::new(MseCalibrator::new(options)),
        _ => {
            return Err(CalibError::UnknownCalibrator {
                name: name.to_string(),
                known: NAMES.join(", "),
            })
        }
    })
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
        let c = calibrator_by_name(" MSE ", &CalibOptions::default()).unwrap();
        assert_eq!(c.name(), "mse");
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
