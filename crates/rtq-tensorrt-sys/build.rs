//! Build script of rtq-tensorrt-sys.
//!
//! 1. With the `regenerate-bindings` feature only: runs bindgen on `shim/rtq_trt.h`
//!    (pure C, no TensorRT needed) and writes `$OUT_DIR/bindings.rs`. bindgen needs
//!    libclang (Debian/Ubuntu: `apt-get install libclang-dev`; elsewhere set
//!    `LIBCLANG_PATH`). A default build uses the committed `src/bindings.rs` and needs
//!    neither; `scripts/gen-trt-bindings.sh` refreshes it.
//! 2. With the `link` feature: compiles `shim/rtq_trt.cpp` (C++17) against the TensorRT
//!    headers under `TENSORRT_ROOT` and the CUDA headers under `CUDA_HOME`/`CUDA_PATH`
//!    (default `/usr/local/cuda`), then links `nvinfer`, `nvonnxparser` and `cudart`;
//!    unless `RTQ_TRT_CHECK_ONLY` is set, for `cargo check` on machines without TensorRT.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

const HEADER: &str = "shim/rtq_trt.h";
const SOURCE: &str = "shim/rtq_trt.cpp";

fn main() {
    println!("cargo:rerun-if-changed={HEADER}");
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed=build.rs");
    for var in [
        "TENSORRT_ROOT",
        "TENSORRT_INCLUDE_DIR",
        "TENSORRT_LIB_DIR",
        "CUDA_HOME",
        "CUDA_PATH",
        "LIBCLANG_PATH",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    #[cfg(feature = "regenerate-bindings")]
    {
        let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        generate_bindings(&out_dir.join("bindings.rs"));
    }

    println!("cargo:rerun-if-env-changed=RTQ_TRT_CHECK_ONLY");
    // `RTQ_TRT_CHECK_ONLY=1 cargo check --features tensorrt` type-checks the Rust side
    // of the TensorRT backend on a machine without TensorRT (nothing is linked by a
    // check); a build made this way cannot link.
    if env::var_os("CARGO_FEATURE_LINK").is_some() && env::var_os("RTQ_TRT_CHECK_ONLY").is_none() {
        compile_and_link_shim();
    }
}

/// Runs bindgen on the shim header; fails the build with install advice when libclang is missing.
#[cfg(feature = "regenerate-bindings")]
fn generate_bindings(out: &Path) {
    let builder = bindgen::Builder::default()
        .header(HEADER)
        .allowlist_function("rtq_trt_.*")
        .allowlist_type("rtq_trt_.*")
        .allowlist_var("RTQ_TRT_.*")
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_debug(true)
        .derive_copy(true)
        .layout_tests(true)
        .generate_comments(true)
        .use_core()
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));

    // bindgen panics (instead of returning an error) when it cannot load libclang.
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()));
    std::panic::set_hook(previous_hook);

    let bindings = match result {
        Ok(Ok(bindings)) => bindings,
        Ok(Err(e)) => panic!("rtq-tensorrt-sys: bindgen could not process {HEADER}: {e}"),
        Err(payload) => {
            let detail = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "rtq-tensorrt-sys: bindgen needs libclang to read {HEADER} and could not load it \
                 ({detail}). Install libclang (Debian/Ubuntu: `apt-get install libclang-dev`, \
                 Fedora: `dnf install clang-devel`) or set LIBCLANG_PATH to the directory that \
                 holds libclang.so"
            );
        }
    };
    bindings
        .write_to_file(out)
        .unwrap_or_else(|e| panic!("rtq-tensorrt-sys: writing {}: {e}", out.display()));
}

/// Compiles the C++ shim against TensorRT and emits the link directives.
fn compile_and_link_shim() {
    const HOW: &str = "set TENSORRT_ROOT=<dir with include/NvInfer.h and lib/libnvinfer.so> \
                       (optionally TENSORRT_INCLUDE_DIR / TENSORRT_LIB_DIR for split layouts) and \
                       CUDA_HOME=<CUDA toolkit dir> unless it is /usr/local/cuda";
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let triple_dir = multiarch_dir();
    let cuda_target = cuda_target_dir();

    let root = env::var_os("TENSORRT_ROOT").map(PathBuf::from);
    if root.is_none()
        && (env::var_os("TENSORRT_INCLUDE_DIR").is_none()
            || env::var_os("TENSORRT_LIB_DIR").is_none())
    {
        panic!(
            "rtq-tensorrt-sys: the `link` feature (rtq's `tensorrt` feature) compiles rtq's \
             TensorRT shim, but TENSORRT_ROOT is not set: {HOW}"
        );
    }

    let include_dir =
        env::var_os("TENSORRT_INCLUDE_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                let root = root.as_deref()?;
                first_with(
                    &[root.join("include"), root.join("include").join(&triple_dir)],
                    "NvInfer.h",
                )
            })
            .unwrap_or_else(|| {
                panic!(
                "rtq-tensorrt-sys: no NvInfer.h under TENSORRT_ROOT={} (looked in include/ and \
                 include/{triple_dir}/): {HOW}",
                root.as_deref().map(|p| p.display().to_string()).unwrap_or_default()
            )
            });
    for header in ["NvInfer.h", "NvInferVersion.h", "NvOnnxParser.h"] {
        if !include_dir.join(header).is_file() {
            panic!(
                "rtq-tensorrt-sys: {} is missing {header} (TensorRT's ONNX parser headers are \
                 needed too): {HOW}",
                include_dir.display()
            );
        }
    }
    let major = tensorrt_major(&include_dir.join("NvInferVersion.h")).unwrap_or_else(|| {
        panic!(
            "rtq-tensorrt-sys: cannot read NV_TENSORRT_MAJOR from {}",
            include_dir.join("NvInferVersion.h").display()
        )
    });
    if major < 10 {
        panic!(
            "rtq-tensorrt-sys: TensorRT {major} found in {}, but rtq needs TensorRT 10 or newer",
            include_dir.display()
        );
    }

    let (lib_file, versioned_lib) = if target_os == "windows" {
        ("nvinfer.lib".to_string(), format!("nvinfer_{major}.lib"))
    } else {
        (
            "libnvinfer.so".to_string(),
            format!("libnvinfer.so.{major}"),
        )
    };
    let lib_dir = env::var_os("TENSORRT_LIB_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let root = root.as_deref()?;
            let candidates = [
                root.join("lib"),
                root.join("lib64"),
                root.join("lib").join(&triple_dir),
            ];
            first_with(&candidates, &lib_file).or_else(|| first_with(&candidates, &versioned_lib))
        })
        .unwrap_or_else(|| {
            panic!(
                "rtq-tensorrt-sys: no {lib_file} under TENSORRT_ROOT={} (looked in lib/, lib64/ and \
                 lib/{triple_dir}/): {HOW}",
                root.as_deref().map(|p| p.display().to_string()).unwrap_or_default()
            )
        });

    let cuda_root = env::var_os("CUDA_HOME")
        .or_else(|| env::var_os("CUDA_PATH"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/cuda"));
    let cuda_include = first_with(
        &[
            cuda_root.join("include"),
            cuda_root.join("targets").join(&cuda_target).join("include"),
        ],
        "cuda_runtime_api.h",
    )
    .unwrap_or_else(|| {
        panic!(
            "rtq-tensorrt-sys: no cuda_runtime_api.h under {} (TensorRT's headers include it): {HOW}",
            cuda_root.display()
        )
    });
    let cuda_lib = [
        cuda_root.join("lib64"),
        cuda_root.join("lib"),
        cuda_root.join("lib").join("x64"),
        cuda_root.join("targets").join(&cuda_target).join("lib"),
    ]
    .into_iter()
    .find(|dir| dir.is_dir())
    .unwrap_or_else(|| {
        panic!(
            "rtq-tensorrt-sys: no lib64/ or lib/ directory under {}: {HOW}",
            cuda_root.display()
        )
    });

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .file(SOURCE)
        .include("shim")
        .warnings(true)
        .extra_warnings(true);
    // TensorRT's own headers are not warning-clean; include them as system headers.
    if build.get_compiler().is_like_msvc() {
        build.include(&include_dir).include(&cuda_include);
    } else {
        build
            .flag("-isystem")
            .flag(include_dir.as_os_str())
            .flag("-isystem")
            .flag(cuda_include.as_os_str());
    }
    build.compile("rtq_trt");

    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-search=native={}", cuda_lib.display());
    let windows_versioned = target_os == "windows" && lib_dir.join(&versioned_lib).is_file();
    for lib in ["nvinfer", "nvonnxparser"] {
        if windows_versioned {
            println!("cargo:rustc-link-lib=dylib={lib}_{major}");
        } else {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
    println!("cargo:rustc-link-lib=dylib=cudart");
    println!("cargo:include={}", include_dir.display());
    println!("cargo:lib={}", lib_dir.display());
    println!("cargo:version_major={major}");
}

/// The first directory of `dirs` that holds `file`.
fn first_with(dirs: &[PathBuf], file: &str) -> Option<PathBuf> {
    dirs.iter().find(|d| d.join(file).is_file()).cloned()
}

/// Debian-style multiarch directory name (`/usr/include/<it>`) for the target architecture.
fn multiarch_dir() -> String {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    match arch.as_str() {
        "aarch64" => "aarch64-linux-gnu".to_string(),
        _ => "x86_64-linux-gnu".to_string(),
    }
}

/// Directory name CUDA uses under `targets/` for the target architecture.
fn cuda_target_dir() -> String {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    match arch.as_str() {
        "aarch64" => "sbsa-linux".to_string(),
        _ => "x86_64-linux".to_string(),
    }
}

/// Reads `NV_TENSORRT_MAJOR` from NvInferVersion.h, following one level of macro
/// indirection (TensorRT 10.11+ defines it as `TRT_MAJOR_ENTERPRISE`).
fn tensorrt_major(version_header: &Path) -> Option<u32> {
    let text = fs::read_to_string(version_header).ok()?;
    let define = |name: &str| -> Option<String> {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == "#define" && words.next()? == name)
                .then(|| words.next().map(str::to_string))
                .flatten()
        })
    };
    let value = define("NV_TENSORRT_MAJOR")?;
    match value.parse() {
        Ok(major) => Some(major),
        Err(_) => define(&value)?.parse().ok(),
    }
}
