//! Saved calibration statistics: a build from `--stats` is byte for byte the build
//! that calibrated, shards calibrated apart merge into exactly one calibration (in any
//! order), other methods need no new forward passes, and statistics that do not fit
//! the model, the split or the options are refused with a reason.

mod common;

use common::*;
use std::path::{Path, PathBuf};

/// The bundled model compiled to INT8 with the bundled calibration data and `extra`.
fn compile(out: &Path, extra: &[&str]) -> String {
    let calib = demo_calib();
    let mut args = vec!["--int8", "--calib", calib.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    compile_ok(&demo_model(), out, &args)
}

fn read(path: impl AsRef<Path>) -> Vec<u8> {
    std::fs::read(path.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()))
}

/// The model and cache a build wrote.
fn outputs(out: &Path) -> (Vec<u8>, Vec<u8>) {
    (
        read(out.join("tinyresnet_int8.onnx")),
        read(out.join("tinyresnet_calibration.cache")),
    )
}

#[test]
fn saved_statistics_and_merged_shards_reproduce_the_build_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let s = |path: &PathBuf| path.to_str().unwrap().to_string();
    compile(&p("full"), &["--save-stats", &s(&p("full.json"))]);
    for i in 0..3 {
        let shard = format!("{i}/3");
        compile(
            &p(&format!("shard{i}")),
            &[
                "--shard",
                &shard,
                "--save-stats",
                &s(&p(&format!("s{i}.json"))),
            ],
        );
        // A shard stops after calibration: no quantized model.
        assert!(!p(&format!("shard{i}/tinyresnet_int8.onnx")).exists());
    }
    // Merged in two orders: the same bytes as one calibration over every file.
    for (name, order) in [("m1.json", [0, 1, 2]), ("m2.json", [2, 0, 1])] {
        let mut args = vec!["stats".to_string(), "merge".to_string()];
        args.extend(order.iter().map(|i| s(&p(&format!("s{i}.json")))));
        args.extend(["-o".to_string(), s(&p(name))]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        rtq_ok(&args);
        assert!(read(p(name)) == read(p("full.json")), "{name} differs");
    }
    let full = outputs(&p("full"));
    compile(&p("reused"), &["--stats", &s(&p("m2.json"))]);
    assert!(outputs(&p("reused")) == full, "--stats build differs");
    // Repeated --stats merges on the fly.
    let shards: Vec<String> = (0..3).map(|i| s(&p(&format!("s{i}.json")))).collect();
    compile(
        &p("repeated"),
        &[
            "--stats", &shards[1], "--stats", &shards[0], "--stats", &shards[2],
        ],
    );
    assert!(
        outputs(&p("repeated")) == full,
        "repeated --stats build differs"
    );
    // Another method from the same statistics: what calibrating with it gives.
    for method in ["max", "percentile", "mse", "entropy"] {
        compile(&p(&format!("{method}-calib")), &["--calib-method", method]);
        compile(
            &p(&format!("{method}-stats")),
            &["--calib-method", method, "--stats", &s(&p("full.json"))],
        );
        assert!(
            outputs(&p(&format!("{method}-calib"))) == outputs(&p(&format!("{method}-stats"))),
            "{method}: build from statistics differs"
        );
    }
    let report: serde_json::Value =
        serde_json::from_slice(&read(p("max-stats/report.json"))).unwrap();
    let timings: Vec<&str> = report["timings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t[0].as_str().unwrap())
        .collect();
    assert!(
        timings.contains(&"load-stats") && !timings.contains(&"calibrate"),
        "{timings:?}"
    );
    let shown = rtq_ok(&["stats", "show", &s(&p("full.json")), "--top", "3"]);
    assert!(
        shown.contains("32 sample(s) from 32 file(s)") && shown.contains("more (--top N)"),
        "{shown}"
    );
}

#[test]
fn statistics_that_do_not_fit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let stats = p("s.json");
    let stats = stats.to_str().unwrap();
    compile(&p("full"), &["--save-stats", stats, "--calib-samples", "8"]);
    let model = demo_model();
    let model = model.to_str().unwrap();
    let calib = demo_calib();
    let calib = calib.to_str().unwrap();
    let out = p("out");
    let out = out.to_str().unwrap();
    let fails = |extra: &[&str]| {
        let mut args = vec!["compile", model, "--int8", "-o", out, "--quiet"];
        args.extend_from_slice(extra);
        rtq_fails(&args)
    };
    // Another graph: a pass left out computes other tensors.
    let err = fails(&["--stats", stats, "--disable-pass", "fold-batch-norm"]);
    assert!(
        err.contains("another model or with other optimization options"),
        "{err}"
    );
    // A held-out file the statistics were calibrated on.
    let err = fails(&["--calib", calib, "--stats", stats, "--holdout", "36"]);
    assert!(err.contains("was part of the saved calibration"), "{err}");
    let err = fails(&["--calib", calib, "--shard", "0/2"]);
    assert!(err.contains("add --save-stats"), "{err}");
    let err = fails(&["--stats", stats, "--save-stats", stats]);
    assert!(err.contains("read, not collected"), "{err}");
    let err = fails(&["--calib", calib, "--shard", "2/2", "--save-stats", stats]);
    assert!(err.contains("INDEX/COUNT"), "{err}");
    std::fs::write(
        p("bad.json"),
        "{\"format\":\"rtq-calibration-stats\",\"version\":7}",
    )
    .unwrap();
    let err = fails(&["--stats", p("bad.json").to_str().unwrap()]);
    assert!(
        err.contains("bad.json") && err.contains("format version 7"),
        "{err}"
    );
    assert!(!Path::new(out).join("tinyresnet_int8.onnx").exists());
    // Other files than this split's: built, but said out loud.
    let report = compile(&p("other"), &["--stats", stats, "--json"]);
    assert!(
        report.contains("the saved statistics cover 8 file(s)"),
        "{report}"
    );
    // Without --calib: built, and the unchecked accuracy said out loud.
    let report = compile_ok(
        &demo_model(),
        &p("no-data"),
        &["--int8", "--stats", stats, "--json"],
    );
    assert!(report.contains("accuracy was not checked"), "{report}");
}

#[test]
fn a_sample_pack_of_the_files_builds_the_same_model_and_cache() {
    use rtq_calib::{PackWriter, PackedKind};
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("calib.rtqpack");
    let mut writer = PackWriter::new(std::fs::File::create(&pack).unwrap());
    for file in files_in(&demo_calib()) {
        writer.append(PackedKind::Npy, &read(&file)).unwrap();
    }
    writer.finish().unwrap();
    compile(&dir.path().join("dir"), &["--calib-method", "entropy"]);
    let out = dir.path().join("pack");
    compile_ok(
        &demo_model(),
        &out,
        &[
            "--int8",
            "--calib",
            pack.to_str().unwrap(),
            "--calib-method",
            "entropy",
            "--quiet",
        ],
    );
    assert!(outputs(&out) == outputs(&dir.path().join("dir")));
}
