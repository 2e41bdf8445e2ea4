//! TensorRT calibration-cache text.
//!
//! The format TensorRT reads and writes (`IInt8Calibrator::readCalibrationCache`):
//! a header line such as `TRT-8601-EntropyCalibration2`, then one line per
//! tensor, `name: hex`, where `hex` is the big-endian IEEE-754 bit pattern of
//! the tensor's int8 scale (`amax / 127`) in lowercase hexadecimal.

use crate::CalibError;
use rtq_ir::QuantParams;

/// The calibration algorithm written in the header.
pub const CACHE_ALGORITHM: &str = "EntropyCalibration2";

/// Lowercase hex of the big-endian IEEE-754 bits of `amax / 127`
/// (`127.0` -> scale 1.0 -> `3f800000`).
pub fn scale_to_cache_hex(amax: f32) -> String {
    format!("{:08x}", QuantParams::int8(amax).scale().to_bits())
}

/// The numeric tag TensorRT writes for a dotted version in a cache header
/// (`TRT-<tag>-EntropyCalibration2`): `M*10000 + m*100 + p` from TensorRT 10 on
/// (`10.1.0` -> `100100`), `M*1000 + m*100 + p` before (`8.6.1` -> `8601`).
pub fn trt_version_tag(version: &str) -> Result<String, CalibError> {
    let bad = || CalibError::InvalidOption {
        option: "trt_version",
        reason: format!("bad TensorRT version `{version}` (expected e.g. 10.1.0)"),
    };
    let parts: Vec<u32> = version
        .split('.')
        .map(|p| p.parse::<u32>().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if parts.len() > 3 {
        return Err(bad());
    }
    let (major, minor, patch) = (
        parts[0],
        *parts.get(1).unwrap_or(&0),
        *parts.get(2).unwrap_or(&0),
    );
    let n = if major >= 10 {
        major * 10000 + minor * 100 + patch
    } else {
        major * 1000 + minor * 100 + patch
    };
    Ok(n.to_string())
}

/// A TensorRT calibration cache (for TensorRT <= 10's implicit INT8, `trtexec --calib`):
/// the header's version tag and one INT8 range per tensor, in the order added. The
/// text is always checked ([`checked_cache_text`]) before it is handed out.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationCache {
    version_tag: String,
    entries: Vec<(String, f32)>,
}

impl CalibrationCache {
    /// An empty cache for the dotted TensorRT `version` (e.g. `10.1.0`).
    pub fn for_trt_version(version: &str) -> Result<CalibrationCache, CalibError> {
        Ok(CalibrationCache {
            version_tag: trt_version_tag(version)?,
            entries: Vec::new(),
        })
    }

    /// Adds `tensor` with its INT8 parameters (the cache records [`QuantParams::scale`]).
    pub fn push(&mut self, tensor: &str, params: QuantParams) {
        self.entries.push((tensor.to_string(), params.amax));
    }

    /// The cache text; fails, naming the tensor, on an entry TensorRT could not read.
    pub fn to_text(&self) -> Result<String, CalibError> {
        checked_cache_text(&self.version_tag, &self.entries)
    }
}

/// A cache text: `TRT-<version_tag>-EntropyCalibration2`, then one
/// `name: hex` line per entry in the given order (`entries` hold `amax`).
///
/// Names are written as given; a name holding a line break cannot be read
/// back, and non-finite or non-positive ranges make scales TensorRT rejects:
/// use [`checked_cache_text`] for names and ranges not known to be sound.
pub fn write_cache_text(version_tag: &str, entries: &[(String, f32)]) -> String {
    let mut out = format!("TRT-{version_tag}-{CACHE_ALGORITHM}\n");
    for (name, amax) in entries {
        out.push_str(name);
        out.push_str(": ");
        out.push_str(&scale_to_cache_hex(*amax));
        out.push('\n');
    }
    out
}

/// Like [`write_cache_text`], but fails (naming the tensor) on an empty name,
/// a name with a line break, a non-finite or non-positive range, or a version
/// tag with a line break.
pub fn checked_cache_text(
    version_tag: &str,
    entries: &[(String, f32)],
) -> Result<String, CalibError> {
    if version_tag.contains(['\n', '\r']) {
        return Err(CalibError::InvalidOption {
            option: "version_tag",
            reason: format!("{version_tag:?} contains a line break"),
        });
    }
    for (name, amax) in entries {
        let reason = if name.trim().is_empty() {
            Some("empty tensor name".to_string())
        } else if name.contains(['\n', '\r']) {
            Some("the name contains a line break".to_string())
        } else if !(amax.is_finite() && *amax > 0.0) {
            Some(format!("range {amax} is not finite and positive"))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(CalibError::CacheEntry {
                tensor: name.clone(),
                reason,
            });
        }
    }
    Ok(write_cache_text(version_tag, entries))
}

/// Parses a cache text into its header line and `(name, scale)` entries in file order.
///
/// Blank lines are skipped. Names may contain `:` (the value follows the last
/// one). Values are 1 to 8 hex digits. Errors name the 1-based line.
pub fn parse_cache_text(text: &str) -> Result<(String, Vec<(String, f32)>), CalibError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let (header_line, header) = lines.next().ok_or(CalibError::CacheParse {
        line: 1,
        reason: "empty calibration cache".into(),
    })?;
    if !header.starts_with("TRT-") {
        return Err(CalibError::CacheParse {
            line: header_line,
            reason: format!("header `{header}` does not start with `TRT-`"),
        });
    }
    let mut entries = Vec::new();
    for (line, l) in lines {
        let (name, hex) = l.rsplit_once(':').ok_or_else(|| CalibError::CacheParse {
            line,
            reason: format!("`{l}` is not `name: hex`"),
        })?;
        let (name, hex) = (name.trim(), hex.trim());
        if name.is_empty() {
            return Err(CalibError::CacheParse {
                line,
                reason: "empty tensor name".into(),
            });
        }
        let bad_hex = || CalibError::CacheParse {
            line,
            reason: format!("tensor `{name}`: `{hex}` is not 1 to 8 hex digits"),
        };
        if hex.is_empty() || hex.len() > 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad_hex());
        }
        let bits = u32::from_str_radix(hex, 16).map_err(|_| bad_hex())?;
        entries.push((name.to_string(), f32::from_bits(bits)));
    }
    Ok((header.to_string(), entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_tags_follow_tensorrt() {
        assert_eq!(trt_version_tag("10.1.0").unwrap(), "100100");
        assert_eq!(trt_version_tag("11.0").unwrap(), "110000");
        assert_eq!(trt_version_tag("8.6.1").unwrap(), "8601");
        for bad in ["ten", "", "10..1", "10.1.0.0"] {
            assert!(trt_version_tag(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cache_checks_its_entries() {
        let mut cache = CalibrationCache::for_trt_version("8.6.1").unwrap();
        cache.push("a", QuantParams::int8(1.0));
        assert_eq!(
            cache.to_text().unwrap(),
            "TRT-8601-EntropyCalibration2\na: 3c010204\n"
        );
        cache.push("b", QuantParams::int8(0.0));
        let e = cache.to_text().unwrap_err().to_string();
        assert!(e.contains("`b`"), "{e}");
    }

    #[test]
    fn known_hex_values() {
        assert_eq!(scale_to_cache_hex(127.0), "3f800000");
        assert_eq!(scale_to_cache_hex(1.0), "3c010204");
        assert_eq!(scale_to_cache_hex(254.0), "40000000");
        assert_eq!(scale_to_cache_hex(-127.0), "bf800000");
    }

    #[test]
    fn write_then_parse_round_trips() {
        let entries = vec![
            ("input".to_string(), 2.5f32),
            ("conv1:0".to_string(), 127.0),
            ("relu_out".to_string(), 1e-3),
        ];
        let text = write_cache_text("8601", &entries);
        assert_eq!(
            text.lines().take(3).collect::<Vec<_>>(),
            [
                "TRT-8601-EntropyCalibration2",
                "input: 3ca14285",
                "conv1:0: 3f800000"
            ]
        );
        let (header, parsed) = parse_cache_text(&text).unwrap();
        assert_eq!(header, "TRT-8601-EntropyCalibration2");
        assert_eq!(parsed.len(), 3);
        for ((n, amax), (pn, scale)) in entries.iter().zip(&parsed) {
            assert_eq!(n, pn);
            assert_eq!(*scale, amax / 127.0);
        }
    }

    #[test]
    fn parse_accepts_unpadded_hex_and_blank_lines() {
        let (_, e) = parse_cache_text("TRT-100300-EntropyCalibration2\n\nx: 1\r\n").unwrap();
        assert_eq!(e, vec![("x".to_string(), f32::from_bits(1))]);
    }

    #[test]
    fn parse_errors_name_the_line() {
        assert!(parse_cache_text("")
            .unwrap_err()
            .to_string()
            .contains("empty"));
        let e = parse_cache_text("garbage\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("TRT-"), "{e}");
        let e = parse_cache_text("TRT-1-X\na: 3f800000\nb 3f80\n").unwrap_err();
        assert!(e.to_string().starts_with("calibration cache line 3"), "{e}");
        let e = parse_cache_text("TRT-1-X\nb: 3f80000g\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("`b`"), "{e}");
        let e = parse_cache_text("TRT-1-X\nb: 123456789\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn checked_writer_rejects_unwritable_entries() {
        let ok = checked_cache_text("8601", &[("a".into(), 1.0)]).unwrap();
        assert_eq!(ok, "TRT-8601-EntropyCalibration2\na: 3c010204\n");
        for (name, amax) in [("a\nb", 1.0f32), ("", 1.0), ("t", 0.0), ("t", f32::NAN)] {
            let e = checked_cache_text("8601", &[(name.into(), amax)]).unwrap_err();
            assert!(matches!(e, CalibError::CacheEntry { .. }), "{e}");
        }
        assert!(checked_cache_text("86\n01", &[]).is_err());
    }
}
