//! Paths needing a feature, driver or device that is missing give clear errors, never
//! panics. These run in every feature combination and check what applies to it.

use rtq_runtime::{Backend, Engine, LoadOptions, RuntimeError};

#[cfg(not(feature = "tensorrt"))]
const NO_TENSORRT: &str = "rtq was built without the `tensorrt` feature: rebuild with \
    `--features tensorrt` and TENSORRT_ROOT=<dir with include/NvInfer.h and lib/libnvinfer.so>";
#[cfg(not(feature = "cuda"))]
const NO_CUDA_FEATURE: &str = "rtq was built without the `cuda` feature: rebuild with \
    `--features cuda` (or `--features tensorrt`, which includes it)";
#[cfg(feature = "cuda")]
const NO_DRIVER: &str = "no CUDA driver found (libcuda.so.1 could not be loaded): install the \
    NVIDIA driver or run on a machine with an NVIDIA GPU";

fn load(path: &str, backend: Backend) -> Result<Engine, RuntimeError> {
    Engine::load(
        path,
        &LoadOptions {
            backend,
            ..Default::default()
        },
    )
}

#[cfg(not(feature = "tensorrt"))]
#[test]
fn plans_need_the_tensorrt_feature() {
    use rtq_runtime::tensorrt::{build_engine, EngineBuildOptions};
    use std::path::Path;
    for path in ["x.plan", "dir/model.engine"] {
        let err = load(path, Backend::Auto).unwrap_err();
        assert_eq!(err.to_string(), NO_TENSORRT);
        let err = load(path, Backend::TensorRt).unwrap_err();
        assert_eq!(err.to_string(), NO_TENSORRT);
    }
    let err = load("model.onnx", Backend::TensorRt).unwrap_err();
    assert_eq!(err.to_string(), NO_TENSORRT);
    let err = build_engine(Path::new("model.onnx"), &EngineBuildOptions::default()).unwrap_err();
    assert_eq!(err.to_string(), NO_TENSORRT);
}

#[cfg(not(feature = "cuda"))]
#[test]
fn the_cuda_backend_needs_the_cuda_feature() {
    let err = load("x.plan", Backend::Cuda).unwrap_err();
    assert_eq!(err.to_string(), NO_CUDA_FEATURE);
    assert!(matches!(
        rtq_runtime::cuda::probe(0),
        Err(RuntimeError::CudaNotBuilt)
    ));
}

#[cfg(feature = "cuda")]
#[test]
fn the_cuda_backend_reports_a_missing_driver_or_device() {
    let result = load("x.plan", Backend::Cuda);
    if !rtq_runtime::cuda::driver_available() {
        let err = result.unwrap_err();
        assert_eq!(err.to_string(), NO_DRIVER);
        assert!(matches!(
            rtq_runtime::cuda::probe(0),
            Err(RuntimeError::NoCudaDriver)
        ));
        let err = load("model.onnx", Backend::Cuda).unwrap_err();
        assert_eq!(err.to_string(), NO_DRIVER);
    } else {
        // With a driver, a device far out of range is reported as missing.
        let err = rtq_runtime::cuda::probe(1000).unwrap_err();
        assert!(
            matches!(err, RuntimeError::NoCudaDevice { ordinal: 1000, .. }),
            "{err:?}"
        );
    }
}

#[test]
fn plans_do_not_run_on_the_cpu() {
    let err = load("model.plan", Backend::Cpu).unwrap_err();
    assert_eq!(
        err.to_string(),
        "model.plan: a TensorRT plan runs only on the TensorRT backend, not on the CPU"
    );
}

#[test]
fn unknown_extensions_are_rejected() {
    let err = load("model.pt", Backend::Auto).unwrap_err();
    assert_eq!(
        err.to_string(),
        "model.pt: cannot tell the model format from the file extension: expected .onnx, or \
         .plan / .engine for TensorRT"
    );
}

#[cfg(not(feature = "cpu"))]
#[test]
fn onnx_on_the_cpu_needs_the_cpu_feature() {
    let err = load("model.onnx", Backend::Cpu).unwrap_err();
    assert!(matches!(err, RuntimeError::CpuNotBuilt));
}
