//! The calibration histograms the HTML report shows: the quantized activations whose
//! calibration methods disagree most, each with every method's range and the one used.

use crate::calibrate::CalibrationResult;
use rtq_calib::CalibMethod;
use rtq_emit::TensorHistogram;
use rtq_ir::Graph;
use rtq_passes::quant::Int8Plan;
use std::collections::HashSet;

/// At most this many histograms in the report.
const SHOWN: usize = 12;
/// Bars per histogram.
const BARS: usize = 96;

/// Histograms of up to [`SHOWN`] of `plan`'s activations, those whose methods' ranges
/// differ most (largest over smallest) first; empty when the calibration kept no
/// histograms.
pub fn report_histograms(
    graph: &Graph,
    result: &mut CalibrationResult,
    plan: &Int8Plan,
) -> Vec<TensorHistogram> {
    let Some(stats) = result.statistics(graph) else {
        return Vec::new();
    };
    let mut by_method = Vec::new();
    if result.has_all_methods() {
        for method in CalibMethod::ALL {
            if let Some(Ok(ranges)) = result.ranges_for(graph, method) {
                by_method.push((method, ranges));
            }
        }
    }
    let quantized: HashSet<_> = plan.activations.iter().copied().collect();
    let mut rows: Vec<(f32, TensorHistogram)> = Vec::new();
    for ((v, _), (name, s)) in result.stats.iter().zip(&stats) {
        if !quantized.contains(v) {
            continue;
        }
        let thresholds: Vec<(String, f32)> = by_method
            .iter()
            .filter_map(|(m, ranges)| Some((m.name().to_string(), *ranges.get(v)?)))
            .collect();
        let (lo, hi) = thresholds
            .iter()
            .fold((f32::MAX, 0f32), |(lo, hi), (_, a)| {
                (lo.min(*a), hi.max(*a))
            });
        let spread = if thresholds.is_empty() {
            1.0
        } else {
            hi / lo.max(f32::MIN_POSITIVE)
        };
        let absmax = s.min.abs().max(s.max.abs());
        let used = s.histogram.used_bins(absmax);
        let per_bar = used.div_ceil(BARS).max(1);
        let counts: Vec<u64> = s.histogram.counts()[..used]
            .chunks(per_bar)
            .map(|c| c.iter().sum())
            .collect();
        rows.push((
            spread,
            TensorHistogram {
                tensor: name.clone(),
                upper: (counts.len() * per_bar) as f64 * s.histogram.bin_width(),
                counts,
                thresholds,
                chosen: result.ranges[v],
            },
        ));
    }
    // A stable sort: ties keep graph order.
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    rows.into_iter().take(SHOWN).map(|(_, h)| h).collect()
}
