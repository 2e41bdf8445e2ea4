//! The CPU runtime's integer kernels on whole quantized models: an INT8 build loaded
//! with them (the default) computes what the float emulation of its Q/DQ nodes
//! computes, up to the emulation's f32 rounding, on the bundled model, PP-OCR cls and
//! PP-OCRv4 det (the last two from `rapidocr-onnxruntime`, when installed).

mod common;

use common::*;
use rtq_runtime::{Engine, HostTensor, LoadOptions};
use rtq_test_support::python_package_path;
use std::path::Path;

/// Seeded inputs of `shape`, roughly in [-2, 2].
fn input(shape: &[usize], seed: u64) -> Vec<f32> {
    seeded_values(shape.iter().product(), seed)
}

/// A page-like input of `shape` ([1, 3, H, W], PP-OCR's normalization: white 1.0,
/// black -1.0): a light, slightly noisy background with dark text-line-sized bars, so
/// that a text detector's output is a real probability map (on noise it is ~1e-6
/// everywhere, where any rounding difference is a large relative one).
fn page(shape: &[usize], seed: u64) -> Vec<f32> {
    let (h, w) = (shape[2], shape[3]);
    let noise = input(shape, seed);
    let mut v: Vec<f32> = noise.iter().map(|n| 0.9 + 0.02 * n).collect();
    let mut s = seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
    let mut next = |n: usize| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 33) as usize % n.max(1)
    };
    for _ in 0..6 {
        let (bh, bw) = (4 + next(6), 16 + next(w / 2));
        let (y0, x0) = (next(h - bh), next(w - bw.min(w - 1)));
        for c in 0..3 {
            for y in y0..y0 + bh {
                for x in x0..(x0 + bw).min(w) {
                    v[(c * h + y) * w + x] = -0.8 + 0.02 * noise[(c * h + y) * w + x];
                }
            }
        }
    }
    v
}

/// Builds `model` in INT8 (entropy, calibrated on `shape` inputs made by `make`) and
/// checks the integer-kernel run against the float emulation on three more; returns
/// the integer-kernel engine's description.
fn check(
    model: &Path,
    stem: &str,
    name: &str,
    shape: &[usize],
    make: fn(&[usize], u64) -> Vec<f32>,
) -> String {
    let calib = tempfile::tempdir().unwrap();
    for seed in 0..6 {
        let file = calib.path().join(format!("s{seed}.npy"));
        rtq_test_support::write_npy_f32(&file, shape, &make(shape, 100 + seed));
    }
    let out = tempfile::tempdir().unwrap();
    compile_ok(
        model,
        out.path(),
        &[
            "--int8",
            "--calib",
            calib.path().to_str().unwrap(),
            "--calib-method",
            "entropy",
            "--quiet",
        ],
    );
    let int8 = out.path().join(format!("{stem}_int8.onnx"));
    let load = |integer_kernels| {
        Engine::load(
            &int8,
            &LoadOptions {
                integer_kernels,
                ..Default::default()
            },
        )
        .unwrap()
    };
    let (integer, emulated) = (load(true), load(false));
    for seed in 0..3 {
        let x = HostTensor::from_f32(name, shape.to_vec(), &make(shape, seed)).unwrap();
        let got = integer.infer(std::slice::from_ref(&x)).unwrap();
        let want = emulated.infer(&[x]).unwrap();
        for (g, w) in got.iter().zip(&want) {
            let (g, w) = (g.to_f32_vec().unwrap(), w.to_f32_vec().unwrap());
            let range = w.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
            let worst = g
                .iter()
                .zip(&w)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            let dot: f64 = g.iter().zip(&w).map(|(a, b)| *a as f64 * *b as f64).sum();
            let norm = |v: &[f32]| v.iter().map(|a| *a as f64 * *a as f64).sum::<f64>().sqrt();
            let cosine = dot / (norm(&g) * norm(&w)).max(1e-30);
            eprintln!(
                "{stem} seed {seed}: cosine {cosine:.8}, max diff {worst:.3e} of range {range:.3e}"
            );
            // A value that lands on a rounding boundary of a later QuantizeLinear can
            // move one step there (the emulation's float convolutions round in another
            // order than the integer kernels' exact sums): allowed rarely, so bounded by
            // the cosine. An output with nothing in it (every value under 1e-3: a
            // detector's map of an input where it finds nothing) has no direction to
            // compare, as one such step turns its cosine: it is judged by the absolute
            // difference alone.
            let empty = range < 1e-3;
            assert!(
                (cosine > 0.99999 || empty) && worst <= 0.05 * range.max(1e-3),
                "{stem} seed {seed}: cosine {cosine}, max diff {worst} of range {range}"
            );
        }
    }
    integer.description()
}

fn uses_integer_kernels(description: &str) {
    if rtq_exec::igemm::Isa::detect() != rtq_exec::igemm::Isa::Portable {
        assert!(description.contains("integer kernels"), "{description}");
    }
}

#[test]
fn bundled_model_integer_kernels_match_the_float_emulation() {
    let d = check(&demo_model(), "tinyresnet", "input", &[1, 3, 32, 32], input);
    uses_integer_kernels(&d);
}

#[test]
fn pp_ocr_models_integer_kernels_match_the_float_emulation() {
    if let Some(cls) = python_package_path(
        "rapidocr_onnxruntime",
        "models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
    ) {
        let d = check(
            &cls,
            "ch_ppocr_mobile_v2.0_cls_infer",
            "x",
            &[1, 3, 48, 192],
            input,
        );
        uses_integer_kernels(&d);
    }
    if let Some(det) =
        python_package_path("rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx")
    {
        let d = check(&det, "ch_PP-OCRv4_det_infer", "x", &[1, 3, 96, 96], page);
        uses_integer_kernels(&d);
    }
}
