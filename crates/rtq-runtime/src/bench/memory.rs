//! The process's resident memory around a benchmark: its peak, and whether the timed
//! inferences grew it (memory reused from call to call does not).
//!
//! Read from `/proc/self/status` (Linux); elsewhere the benchmark reports none.

use serde::{Deserialize, Serialize};

/// Resident memory of the benchmarking process, in MiB.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostMemory {
    /// Peak resident set size of the whole process (model, weights, buffers), at the
    /// end of the timed loop.
    pub peak_rss_mib: f64,
    /// Resident set size after the warm-up.
    pub rss_after_warmup_mib: f64,
    /// Resident set size after the timed loop: close to the warm-up's figure when the
    /// inferences reuse their memory.
    pub rss_after_run_mib: f64,
}

impl HostMemory {
    /// From the readings after the warm-up and after the timed loop.
    pub(crate) fn of(after_warmup: Resident, after_run: Resident) -> HostMemory {
        HostMemory {
            peak_rss_mib: after_run.peak_mib.max(after_warmup.peak_mib),
            rss_after_warmup_mib: after_warmup.current_mib,
            rss_after_run_mib: after_run.current_mib,
        }
    }

    /// One line for the text summary.
    pub fn summary_line(&self) -> String {
        format!(
            "peak RSS {:.1} MiB (resident {:.1} MiB after warm-up, {:.1} MiB after the timed runs)",
            self.peak_rss_mib, self.rss_after_warmup_mib, self.rss_after_run_mib
        )
    }
}

/// One reading of the process's resident memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Resident {
    current_mib: f64,
    peak_mib: f64,
}

/// The process's resident memory now, where the platform tells it.
pub(crate) fn resident() -> Option<Resident> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status(&status)
}

/// `VmRSS` and `VmHWM` (in kB) of a `/proc/<pid>/status` text.
fn parse_status(status: &str) -> Option<Resident> {
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: f64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb / 1024.0)
    };
    Some(Resident {
        current_mib: field("VmRSS:")?,
        peak_mib: field("VmHWM:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_resident_and_peak_sizes() {
        let status = "Name:\trtq\nVmPeak:\t  900000 kB\nVmHWM:\t  419840 kB\nVmRSS:\t  409600 kB\n";
        let r = parse_status(status).unwrap();
        assert_eq!((r.current_mib, r.peak_mib), (400.0, 410.0));
        assert_eq!(parse_status("Name:\trtq\nVmRSS:\t 1 kB\n"), None);
        assert_eq!(parse_status("VmHWM:\t x kB\nVmRSS:\t 1 kB\n"), None);
    }

    #[test]
    fn this_process_has_a_resident_size_on_linux() {
        if cfg!(target_os = "linux") {
            let r = resident().unwrap();
            assert!(r.current_mib > 0.0 && r.peak_mib >= r.current_mib);
        }
    }

    #[test]
    fn the_peak_is_the_larger_reading() {
        let a = Resident {
            current_mib: 10.0,
            peak_mib: 12.0,
        };
        let b = Resident {
            current_mib: 11.0,
            peak_mib: 11.5,
        };
        let m = HostMemory::of(a, b);
        assert_eq!(m.peak_rss_mib, 12.0);
        assert!(m.summary_line().starts_with("peak RSS 12.0 MiB"));
    }
}
