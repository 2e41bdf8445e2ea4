//! Calibration depends on the data, not on its packaging: the same samples packed
//! one, four or sixteen per file, in different orders, give byte-identical
//! calibration caches and models for every calibration method.

mod common;

use common::*;
use std::path::Path;

fn build(calib: &Path, method: &str) -> (Vec<u8>, Vec<u8>) {
    let out = tempfile::tempdir().unwrap();
    compile_ok(
        &demo_model(),
        out.path(),
        &[
            "--int8",
            "--calib",
            calib.to_str().unwrap(),
            "--holdout",
            "0",
            "--calib-method",
            method,
            "--quiet",
        ],
    );
    let read = |name: &str| std::fs::read(out.path().join(name)).unwrap();
    (
        read("tinyresnet_calibration.cache"),
        read("tinyresnet_int8.onnx"),
    )
}

#[test]
fn packing_and_order_of_the_samples_do_not_change_the_result() {
    if skip_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    python_inline(&format!(
        r#"
import glob, os, numpy as np
xs = [np.load(f) for f in sorted(glob.glob(r"{calib}/*.npy"))[:16]]
assert len(xs) == 16 and xs[0].shape[0] == 1
root = r"{root}"
for d in ("one", "four", "sixteen"):
    os.makedirs(os.path.join(root, d))
for i, x in enumerate(xs):
    np.save(os.path.join(root, "one", f"s{{i:02d}}.npy"), x)
perm = np.random.default_rng(0).permutation(16)
for k in range(4):
    np.save(os.path.join(root, "four", f"b{{k}}.npy"), np.concatenate([xs[j] for j in perm[4 * k:4 * k + 4]]))
np.save(os.path.join(root, "sixteen", "all.npy"), np.concatenate(xs[::-1]))
"#,
        calib = demo_calib().display(),
        root = dir.path().display()
    ));
    for method in ["entropy", "percentile", "mse", "max"] {
        let one = build(&dir.path().join("one"), method);
        for packed in ["four", "sixteen"] {
            let other = build(&dir.path().join(packed), method);
            assert!(
                one.0 == other.0,
                "{method}: cache differs with {packed} per file"
            );
            assert!(
                one.1 == other.1,
                "{method}: model differs with {packed} per file"
            );
        }
    }
}
