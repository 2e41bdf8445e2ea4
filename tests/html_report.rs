//! `report.html`: written beside report.json by every compile, self-contained
//! (well-formed XHTML with inline SVG, no script, nothing fetched), with the
//! calibration histograms of an INT8 build; rendered by headless Chromium where it is
//! installed (Debian's `chromium`), which must draw it without a console error.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[test]
fn int8_build_writes_a_self_contained_html_report_a_browser_renders() {
    let out = tempfile::tempdir().unwrap();
    let calib = demo_calib();
    compile_ok(
        &demo_model(),
        out.path(),
        &["--int8", "--calib", calib.to_str().unwrap(), "--quiet"],
    );
    let path = out.path().join("report.html");
    let html = std::fs::read_to_string(&path).unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("report.json")).unwrap()).unwrap();
    assert!(report["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|o| o.as_str().unwrap().ends_with("report.html")));
    assert!(!html.contains("<script"), "no script");
    assert!(
        !html.contains("src=") && !html.contains("href=") && !html.contains("url("),
        "nothing fetched"
    );
    let histograms = html.matches("class=\"histogram\"").count();
    assert!(
        histograms > 0 && histograms <= 12,
        "{histograms} histograms"
    );
    assert!(html.contains("Accuracy of int8 against FP32"));
    if !skip_python() {
        // Well-formed XML: every tag closed, every entity known.
        let code = format!(
            "import xml.etree.ElementTree as ET\nt = ET.parse(r\"{}\")\n\
             print(sum(1 for _ in t.iter('{{http://www.w3.org/2000/svg}}svg')))",
            path.display()
        );
        let svgs: usize = python_inline(&code).trim().parse().unwrap();
        assert_eq!(svgs, histograms + 1, "every chart is an inline SVG");
    }
    let Some(browser) = chromium() else {
        eprintln!("no chromium: the report is not rendered");
        return;
    };
    screenshot(browser, &path, &out.path().join("report.png"));
}

/// Renders `page` in headless `browser` to `png`; fails on a console error or an
/// empty image.
fn screenshot(browser: &str, page: &Path, png: &Path) {
    let run = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--window-size=1280,1600",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        !stderr.contains(":CONSOLE(") && !stderr.contains("Uncaught"),
        "console messages: {stderr}"
    );
    let size = std::fs::metadata(png).map(|m| m.len()).unwrap_or(0);
    assert!(size > 20_000, "screenshot of {size} bytes");
}
