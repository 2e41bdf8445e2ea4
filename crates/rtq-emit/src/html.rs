//! The compile report as one self-contained HTML page (inline CSS and SVG, no script,
//! nothing fetched): the verdict, accuracy against FP32, what the remedies did, the
//! per-layer SQNR, calibration histograms with every method's range, and the nodes
//! kept in high precision.

use crate::report::{human_bytes, CompileReport, OutputScatter, PerLayerReport, TensorHistogram};
use std::fmt::Write;

/// Colours of the calibration methods' range markers, in the order they are drawn.
const METHOD_COLOURS: &[(&str, &str)] = &[
    ("entropy", "#d62728"),
    ("max", "#1f77b4"),
    ("percentile", "#2ca02c"),
    ("mse", "#9467bd"),
];

/// Renders `report` as a self-contained XHTML page.
pub fn render_html(report: &CompileReport) -> String {
    let mut s = String::new();
    let title = format!("rtq report — {}", report.model);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head>\
         <meta charset=\"utf-8\"/><title>{}</title><style>{STYLE}</style></head><body>",
        esc(&title)
    );
    let _ = write!(s, "<h1>{}</h1>", esc(&title));
    verdict(&mut s, report);
    summary(&mut s, report);
    accuracy(&mut s, report);
    if let Some(scatter) = report.accuracy.last().and_then(|a| a.scatter.as_ref()) {
        output_scatter(&mut s, scatter);
    }
    remedies(&mut s, report);
    histograms(&mut s, &report.histograms);
    if let Some(layers) = report
        .accuracy_check
        .as_ref()
        .and_then(|c| c.per_layer.as_ref())
    {
        per_layer(&mut s, layers);
    }
    kept(&mut s, report);
    timings(&mut s, report);
    s.push_str("</body></html>\n");
    s
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:1180px;\
color:#222}h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;\
text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.ok{background:#e6f4ea;border-left:6px solid #1e8e3e;padding:8px 12px}\
.bad{background:#fce8e6;border-left:6px solid #d93025;padding:8px 12px}\
.warn{background:#fef7e0;border-left:6px solid #f9ab00;padding:8px 12px}\
.grid{display:flex;flex-wrap:wrap;gap:12px}.card{border:1px solid #ddd;padding:6px}\
.legend span{display:inline-block;margin-right:14px}code{font-size:13px}";

/// Escapes text for HTML content and attribute values.
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn verdict(s: &mut String, report: &CompileReport) {
    let (class, text) = match &report.accuracy_check {
        Some(c) if c.met => (
            "ok",
            "Accuracy target met on the held-out samples.".to_string(),
        ),
        Some(c) => (
            "bad",
            format!("Accuracy target missed: {}", c.misses.join("; ")),
        ),
        None if report.precision == "fp32" => ("ok", "FP32 build: nothing to check.".into()),
        None => ("warn", "Accuracy not checked.".into()),
    };
    let _ = write!(s, "<p class=\"{class}\">{}</p>", esc(&text));
    for w in &report.warnings {
        let _ = write!(s, "<p class=\"warn\">warning: {}</p>", esc(w));
    }
}

fn row(s: &mut String, cells: &[String]) {
    s.push_str("<tr>");
    for c in cells {
        let numeric = c
            .chars()
            .next()
            .is_some_and(|ch| ch.is_ascii_digit() || ch == '-');
        let _ = write!(
            s,
            "<td{}>{}</td>",
            if numeric { " class=\"n\"" } else { "" },
            esc(c)
        );
    }
    s.push_str("</tr>");
}

fn header(s: &mut String, cells: &[&str]) {
    s.push_str("<tr>");
    for c in cells {
        let _ = write!(s, "<th>{}</th>", esc(c));
    }
    s.push_str("</tr>");
}

fn summary(s: &mut String, report: &CompileReport) {
    s.push_str("<h2>Build</h2><table>");
    let g = &report.graph;
    let mut rows = vec![
        ("rtq", report.rtq_version.clone()),
        ("precision", report.precision.clone()),
        (
            "opset",
            format!("{} -> {}", report.source_opset, report.output_opset),
        ),
        ("nodes", format!("{} -> {}", g.nodes_in, g.nodes_out)),
    ];
    if g.weight_bytes_fp32 > 0 {
        rows.push((
            "weights",
            format!(
                "{} -> {} ({:.1}% of FP32)",
                human_bytes(g.weight_bytes_fp32),
                human_bytes(g.weight_bytes_out),
                100.0 * g.weight_bytes_out as f64 / g.weight_bytes_fp32 as f64
            ),
        ));
    }
    if let Some(line) = report.equalization_line() {
        rows.push(("equalization", line));
    }
    if let Some(q) = &report.quantization {
        rows.push((
            "calibration",
            format!("{} on {} samples", q.method, q.samples),
        ));
        rows.push((
            if q.grid == "fp8" { "fp8" } else { "int8" },
            format!(
                "{} nodes quantized, {} activation Q/DQ, {} per-channel weights{}",
                q.quantized_nodes,
                q.activation_qdq,
                q.weight_qdq,
                q.int8_mac_share.map_or(String::new(), |m| format!(
                    ", {:.1}% of MACs quantized",
                    100.0 * m
                ))
            ),
        ));
    }
    for (k, v) in rows {
        let _ = write!(s, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    s.push_str("</table>");
}

fn accuracy(s: &mut String, report: &CompileReport) {
    for acc in &report.accuracy {
        let _ = write!(
            s,
            "<h2>Accuracy of {} against FP32 ({} held-out samples)</h2><table>",
            esc(&acc.variant),
            acc.samples
        );
        header(
            s,
            &[
                "output",
                "cosine mean",
                "cosine min",
                "max |err|",
                "mean |err|",
                "top-1",
            ],
        );
        for o in &acc.outputs {
            row(
                s,
                &[
                    o.output.clone(),
                    format!("{:.5}", o.cosine_mean),
                    format!("{:.5}", o.cosine_min),
                    format!("{:.3e}", o.max_abs_error),
                    format!("{:.3e}", o.mean_abs_error),
                    o.top1_agreement
                        .map_or("—".into(), |t| format!("{:.1}%", 100.0 * t)),
                ],
            );
        }
        s.push_str("</table>");
    }
}

fn output_scatter(s: &mut String, scatter: &OutputScatter) {
    if scatter.points.is_empty() {
        return;
    }
    let (lo, hi) = scatter
        .points
        .iter()
        .fold((f32::MAX, f32::MIN), |(lo, hi), &(a, b)| {
            (lo.min(a.min(b)), hi.max(a.max(b)))
        });
    let span = ((hi - lo) as f64).max(f64::MIN_POSITIVE);
    let (size, pad) = (320.0, 30.0);
    let at = |v: f32| pad + size * (v - lo) as f64 / span;
    let _ = write!(
        s,
        "<p>Output <code>{}</code> on <code>{}</code>: FP32 (x) against this build (y), {} \
         values; on the diagonal where they agree.</p>\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{w}\" \
         class=\"scatter\" font-size=\"11\"><rect x=\"{pad}\" y=\"{pad}\" width=\"{size}\" \
         height=\"{size}\" fill=\"none\" stroke=\"#ccc\"/><line x1=\"{pad}\" y1=\"{b}\" \
         x2=\"{b}\" y2=\"{pad}\" stroke=\"#d93025\" stroke-dasharray=\"4 2\"/>",
        esc(&scatter.output),
        esc(&scatter.file),
        scatter.points.len(),
        w = size + 2.0 * pad,
        b = pad + size
    );
    // Few points are drawn large and solid, many small and translucent.
    let (r, opacity) = if scatter.points.len() < 200 {
        (3.5, 0.9)
    } else {
        (1.6, 0.5)
    };
    for &(a, b) in &scatter.points {
        let _ = write!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{r}\" fill=\"#4285f4\" fill-opacity=\"{opacity}\"/>",
            at(a),
            2.0 * pad + size - at(b)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{pad}\" y=\"{}\">{lo:.3}</text><text x=\"{}\" y=\"{}\" \
         text-anchor=\"end\">{hi:.3}</text></svg>",
        pad + size + 14.0,
        pad + size,
        pad + size + 14.0
    );
}

fn remedies(s: &mut String, report: &CompileReport) {
    let Some(check) = &report.accuracy_check else {
        return;
    };
    let _ = write!(
        s,
        "<h2>Accuracy target</h2><p>cosine &#8805; {}, top-1 &#8805; {} — ranges: {}</p>",
        check.target.cosine,
        check.target.top1,
        esc(check.method.as_deref().unwrap_or("—"))
    );
    if !check.method_search.is_empty() {
        s.push_str("<p>Method search (calibration samples):</p><table>");
        header(s, &["method", "margin", "cosine", "top-1", "samples"]);
        for t in &check.method_search {
            row(
                s,
                &[
                    t.method.clone(),
                    format!("{:+.4}", t.margin),
                    format!("{:.5}", t.cosine_mean),
                    t.top1_agreement
                        .map_or("—".into(), |v| format!("{:.1}%", 100.0 * v)),
                    t.samples.to_string(),
                ],
            );
        }
        s.push_str("</table>");
    }
    if !check.fallback_trials.is_empty() {
        let (planned, left) = check.quantized_nodes;
        let _ = write!(
            s,
            "<p>Fallback: {} of {planned} quantized nodes back in high precision ({left} left \
             quantized); trials (nodes reverted: margin): {}</p>",
            check.fallback.len(),
            esc(&check
                .fallback_trials
                .iter()
                .map(|(k, m)| format!("{k}: {m:+.4}"))
                .collect::<Vec<_>>()
                .join(", "))
        );
    }
    if !check.sensitivity.is_empty() {
        let worst: Vec<String> = check
            .sensitivity
            .iter()
            .take(8)
            .map(|(node, error)| format!("{node} ({error:.4})"))
            .collect();
        let _ = write!(
            s,
            "<p>Most sensitive nodes (error against FP32 with the node alone quantized): {}</p>",
            esc(&worst.join(", "))
        );
    }
    if let Some(b) = &check.bias_correction {
        let _ = write!(
            s,
            "<p>Bias correction: {} nodes, measured on {} samples; margin {:+.4} -> {:+.4}; {}.</p>",
            b.nodes,
            b.samples,
            b.margin_before,
            b.margin_after,
            if b.applied { "kept" } else { "not kept" }
        );
    }
}

fn per_layer(s: &mut String, layers: &PerLayerReport) {
    let _ = write!(
        s,
        "<h2>Per-layer SQNR against FP32</h2><p>Cumulative (every Q/DQ upstream on, bars) and \
         local (the tensor's own Q/DQ only, ticks); first tensor below cosine {}: <code>{}</code>.</p>",
        layers.diverged_cosine,
        esc(layers.first_diverging.as_deref().unwrap_or("none"))
    );
    let shown: Vec<_> = layers.layers.iter().take(80).collect();
    let (label_w, bar_w, row_h) = (300.0, 560.0, 14.0);
    let max_db = 60.0;
    let height = row_h * shown.len() as f64 + 24.0;
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
         class=\"per-layer\" font-size=\"11\">",
        label_w + bar_w + 60.0
    );
    for db in [0, 20, 40, 60] {
        let x = label_w + bar_w * db as f64 / max_db;
        let _ = write!(
            s,
            "<line x1=\"{x}\" y1=\"0\" x2=\"{x}\" y2=\"{}\" stroke=\"#ddd\"/>\
             <text x=\"{x}\" y=\"{}\">{db} dB</text>",
            height - 12.0,
            height - 2.0
        );
    }
    for (i, l) in shown.iter().enumerate() {
        let y = i as f64 * row_h;
        let width = bar_w * (l.sqnr_db.clamp(0.0, max_db) / max_db);
        let first = layers.first_diverging.as_deref() == Some(l.tensor.as_str());
        let colour = if first {
            "#d93025"
        } else if l.cosine < layers.diverged_cosine {
            "#f9ab00"
        } else {
            "#4285f4"
        };
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{label_w}\" y=\"{}\" width=\"{width:.1}\" height=\"{}\" fill=\"{colour}\">\
             <title>{}: cosine {:.5}, SQNR {:.1} dB</title></rect>",
            label_w - 6.0,
            y + row_h - 3.0,
            esc(&short(&l.tensor, 44)),
            y + 2.0,
            row_h - 4.0,
            esc(&l.tensor),
            l.cosine,
            l.sqnr_db
        );
        if let Some(local) = l.local_sqnr_db {
            let x = label_w + bar_w * (local.clamp(0.0, max_db) / max_db);
            let _ = write!(
                s,
                "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#222\" stroke-width=\"2\"/>",
                y + 1.0,
                y + row_h - 1.0
            );
        }
    }
    s.push_str("</svg>");
    if layers.layers.len() > shown.len() {
        let _ = write!(
            s,
            "<p>… {} more tensors in report.json</p>",
            layers.layers.len() - shown.len()
        );
    }
}

fn histograms(s: &mut String, histograms: &[TensorHistogram]) {
    if histograms.is_empty() {
        return;
    }
    s.push_str(
        "<h2>Calibration histograms</h2><p>|x| of the tensors whose methods disagree most \
         (log counts); each method's range, and the one used (black, thick).</p><p class=\"legend\">",
    );
    for (name, colour) in METHOD_COLOURS {
        let _ = write!(s, "<span style=\"color:{colour}\">&#9632; {name}</span>");
    }
    s.push_str("</p><div class=\"grid\">");
    for h in histograms {
        histogram(s, h);
    }
    s.push_str("</div>");
}

fn histogram(s: &mut String, h: &TensorHistogram) {
    let (w, plot_h, top) = (360.0, 130.0, 18.0);
    let bars = h.counts.len().max(1) as f64;
    let peak = h
        .counts
        .iter()
        .map(|&c| (c as f64 + 1.0).ln())
        .fold(0.0, f64::max)
        .max(1e-9);
    let _ = write!(
        s,
        "<div class=\"card\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" \
         class=\"histogram\" font-size=\"11\"><text x=\"0\" y=\"12\">{}</text>",
        plot_h + top + 16.0,
        esc(&short(&h.tensor, 52))
    );
    for (i, &c) in h.counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let bh = plot_h * (c as f64 + 1.0).ln() / peak;
        let _ = write!(
            s,
            "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{bh:.2}\" fill=\"#9aa0a6\"/>",
            w * i as f64 / bars,
            top + plot_h - bh,
            (w / bars).max(0.5)
        );
    }
    let x_of = |a: f32| (w * (a as f64 / h.upper.max(f64::MIN_POSITIVE))).min(w - 1.0);
    for (method, amax) in &h.thresholds {
        let colour = METHOD_COLOURS
            .iter()
            .find(|(m, _)| m == method)
            .map_or("#555", |(_, c)| c);
        let x = x_of(*amax);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"{colour}\" \
             stroke-dasharray=\"4 2\"><title>{method}: {amax}</title></line>",
            top + plot_h
        );
    }
    let x = x_of(h.chosen);
    let _ = write!(
        s,
        "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#000\" stroke-width=\"3\">\
         <title>used: {}</title></line><text x=\"0\" y=\"{}\">0</text>\
         <text x=\"{w}\" y=\"{}\" text-anchor=\"end\">{:.4}</text></svg></div>",
        top + plot_h,
        h.chosen,
        top + plot_h + 13.0,
        top + plot_h + 13.0,
        h.upper
    );
}

fn kept(s: &mut String, report: &CompileReport) {
    let fallback = report
        .accuracy_check
        .as_ref()
        .map_or(&[][..], |c| &c.fallback[..]);
    let skipped = report
        .quantization
        .as_ref()
        .map_or(&[][..], |q| &q.skipped[..]);
    if fallback.is_empty() && skipped.is_empty() {
        return;
    }
    s.push_str("<h2>Nodes kept in high precision</h2><table>");
    header(s, &["node", "why"]);
    for n in fallback {
        row(s, &[n.clone(), "reverted by the accuracy fallback".into()]);
    }
    for (n, why) in skipped {
        row(s, &[n.clone(), why.clone()]);
    }
    s.push_str("</table>");
}

fn timings(s: &mut String, report: &CompileReport) {
    if report.timings.is_empty() {
        return;
    }
    s.push_str("<h2>Time</h2><table>");
    for (stage, seconds) in &report.timings {
        row(s, &[stage.clone(), format!("{seconds:.2} s")]);
    }
    s.push_str("</table>");
}

/// `text` cut to `width` characters with an ellipsis in the middle.
fn short(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return text.to_string();
    }
    let half = (width - 1) / 2;
    let head: String = chars[..half].iter().collect();
    let tail: String = chars[chars.len() - half..].iter().collect();
    format!("{head}…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AccuracyCheck, AccuracyTarget, LayerError};

    #[test]
    fn renders_every_section_and_escapes_names() {
        let mut report = CompileReport {
            model: "a<b>.onnx".into(),
            precision: "int8".into(),
            warnings: vec!["x & y".into()],
            ..Default::default()
        };
        report.accuracy_check = Some(AccuracyCheck {
            target: AccuracyTarget::default(),
            fallback: vec!["conv_a".into()],
            fallback_trials: vec![(1, 0.01)],
            quantized_nodes: (2, 1),
            per_layer: Some(PerLayerReport {
                diverged_cosine: 0.99,
                first_diverging: Some("t1".into()),
                most_sensitive: vec![],
                layers: vec![LayerError {
                    tensor: "t1".into(),
                    node: "n".into(),
                    op: "Conv".into(),
                    cosine: 0.9,
                    sqnr_db: 12.0,
                    local_sqnr_db: Some(30.0),
                    samples: 2,
                }],
            }),
            ..Default::default()
        });
        report.histograms = vec![TensorHistogram {
            tensor: "t1".into(),
            upper: 4.0,
            counts: vec![10, 0, 3, 1],
            thresholds: vec![("entropy".into(), 1.0), ("max".into(), 4.0)],
            chosen: 4.0,
        }];
        report.accuracy.push(crate::AccuracyReport {
            scatter: Some(OutputScatter {
                output: "y".into(),
                file: "s0.npy".into(),
                points: vec![(0.0, 0.1), (1.0, 0.9)],
            }),
            ..Default::default()
        });
        let html = render_html(&report);
        assert_eq!(html.matches("<circle").count(), 2);
        assert!(html.contains("a&lt;b&gt;.onnx") && html.contains("x &amp; y"));
        assert!(html.contains("class=\"per-layer\"") && html.contains("class=\"histogram\""));
        assert!(html.contains("reverted by the accuracy fallback"));
        assert!(html.contains("Accuracy target missed"));
        assert_eq!(short("abcdefghij", 5), "ab…ij");
    }
}
