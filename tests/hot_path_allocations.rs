//! A warm CPU engine keeps its buffers: after warm-up runs, an inference asks the
//! global allocator for no big block on the calling thread except the bytes of the
//! outputs it returns (intermediate tensors, kernels' scratch and the converted inputs
//! reuse what earlier runs freed). Checked on the bundled model in FP32 and INT8 and
//! on PP-OCRv4 det and PP-OCR cls (from `rapidocr-onnxruntime`, when installed), so
//! that a kernel that allocates its output or scratch without the plan's pool fails
//! here.
//!
//! Only the calling thread is counted: the FP32 GEMM crate packs operands into
//! buffers of its own on rayon's worker threads.

mod common;

use common::*;
use rtq_runtime::{Engine, HostTensor, LoadOptions};
use rtq_test_support::python_package_path;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;

/// Allocations of at least this many bytes are counted.
const BIG: usize = 4096;

struct Counting;

thread_local! {
    /// Whether this thread's big allocations are counted, and how many there were.
    static COUNTED: Cell<(bool, usize)> = const { Cell::new((false, 0)) };
}

fn count(size: usize) {
    if size >= BIG {
        // `try_with`: allocations during thread teardown are not counted.
        let _ = COUNTED.try_with(|c| {
            let (on, n) = c.get();
            if on {
                c.set((on, n + 1));
            }
        });
    }
}

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            count(new_size);
        }
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Big allocations of this thread while `f` runs.
fn big_allocations<R>(f: impl FnOnce() -> R) -> (R, usize) {
    COUNTED.with(|c| c.set((true, 0)));
    let r = f();
    let (_, n) = COUNTED.with(|c| c.replace((false, 0)));
    (r, n)
}

/// Runs `model` warm and checks that each inference allocates no more big blocks on
/// this thread than it returns outputs; also that the results stay those of the first
/// run (reused buffers are written before they are read).
fn check(model: &Path, input: &str, shape: &[usize]) {
    let engine = Engine::load(model, &LoadOptions::default()).unwrap();
    let x = HostTensor::from_f32(
        input,
        shape.to_vec(),
        &seeded_values(shape.iter().product(), 7),
    )
    .unwrap();
    let first = engine.infer(std::slice::from_ref(&x)).unwrap();
    for _ in 0..2 {
        engine.infer(std::slice::from_ref(&x)).unwrap();
    }
    for run in 0..3 {
        let (out, big) = big_allocations(|| engine.infer(std::slice::from_ref(&x)).unwrap());
        let returned = out.iter().filter(|t| t.bytes().len() >= BIG).count();
        eprintln!(
            "{}: run {run}: {big} big allocations, {returned} big outputs",
            model.display()
        );
        assert!(
            big <= returned,
            "{}: run {run} made {big} allocations of {BIG} bytes or more; it returns \
             {returned} outputs that big",
            model.display()
        );
        for (a, b) in out.iter().zip(&first) {
            assert_eq!(
                a.bytes(),
                b.bytes(),
                "{}: output `{}`",
                model.display(),
                a.name
            );
        }
    }
}

#[test]
fn warm_engines_allocate_only_the_outputs_they_return() {
    let model = demo_model();
    check(&model, "input", &[1, 3, 32, 32]);

    let out = tempfile::tempdir().unwrap();
    compile_ok(
        &model,
        out.path(),
        &[
            "--int8",
            "--calib",
            demo_calib().to_str().unwrap(),
            "--calib-method",
            "max",
            "--holdout",
            "0",
            "--quiet",
        ],
    );
    check(
        &out.path().join("tinyresnet_int8.onnx"),
        "input",
        &[1, 3, 32, 32],
    );

    let models = "models/ch_PP-OCRv4_det_infer.onnx";
    if let Some(det) = python_package_path("rapidocr_onnxruntime", models) {
        let shape = [1, 3, 160, 160];
        check(&det, "x", &shape);
        let cls = det.with_file_name("ch_ppocr_mobile_v2.0_cls_infer.onnx");
        check(&cls, "x", &[1, 3, 48, 192]);
        // INT8: integer convolutions (direct, GEMM, depthwise, transposed),
        // quantizing chains, Resize and Concat of the FPN.
        let calib = tempfile::tempdir().unwrap();
        for seed in 0..2 {
            let file = calib.path().join(format!("s{seed}.npy"));
            rtq_test_support::write_npy_f32(&file, &shape, &seeded_values(3 * 160 * 160, seed));
        }
        let out = tempfile::tempdir().unwrap();
        compile_ok(
            &det,
            out.path(),
            &[
                "--int8",
                "--calib",
                calib.path().to_str().unwrap(),
                "--calib-method",
                "max",
                "--holdout",
                "0",
                "--quiet",
            ],
        );
        check(&built_model(out.path()), "x", &shape);
    }
}
