//! The shim header is valid C and C++, and C lays its structs out exactly as the
//! bindgen-generated Rust types do.

use rtq_tensorrt_sys::ffi;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

fn shim_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("shim")
}

fn compiler(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

/// Runs `cmd`, failing the test with its output when it does not succeed.
fn run(mut cmd: Command) -> String {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (a C compiler is needed)"));
    assert!(
        output.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn header_compiles_as_strict_c99() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("use_header.c");
    std::fs::write(
        &src,
        "#include \"rtq_trt.h\"\n\
         int main(void) {\n\
           rtq_trt_build_options opts = {0};\n\
           rtq_trt_dims dims = {0};\n\
           opts.strongly_typed = 1;\n\
           dims.nb_dims = RTQ_TRT_MAX_DIMS;\n\
           return (int)(opts.workspace_bytes) + dims.nb_dims - RTQ_TRT_MAX_DIMS;\n\
         }\n",
    )
    .unwrap();
    let mut cmd = Command::new(compiler("CC", "cc"));
    cmd.args([
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Wpedantic",
        "-Werror",
        "-c",
        "-o",
    ])
    .arg(dir.path().join("use_header.o"))
    .arg("-I")
    .arg(shim_dir())
    .arg(&src);
    run(cmd);
}

#[test]
fn header_compiles_as_cpp17() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("use_header.cpp");
    std::fs::write(
        &src,
        "#include \"rtq_trt.h\"\n\
         static_assert(sizeof(rtq_trt_dims) == 72, \"dims layout\");\n\
         extern \"C\" rtq_trt_status (*const check)(rtq_trt_context*, void*) = &rtq_trt_context_enqueue;\n",
    )
    .unwrap();
    let mut cmd = Command::new(compiler("CXX", "c++"));
    cmd.args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"])
        .arg("-I")
        .arg(shim_dir())
        .arg(&src);
    run(cmd);
}

/// Facts the C compiler reports about the header: sizes, field offsets, enum values.
const C_PROBE: &str = r#"
#include <stddef.h>
#include <stdio.h>
#include "rtq_trt.h"
#define SIZE(T) printf("size %s %lu %lu\n", #T, (unsigned long)sizeof(T), (unsigned long)_Alignof(T))
#define OFF(T, f) printf("offset %s.%s %lu\n", #T, #f, (unsigned long)offsetof(T, f))
#define VALUE(c) printf("value %s %ld\n", #c, (long)(c))
int main(void) {
    SIZE(rtq_trt_dims); OFF(rtq_trt_dims, nb_dims); OFF(rtq_trt_dims, d);
    SIZE(rtq_trt_input_profile); OFF(rtq_trt_input_profile, name); OFF(rtq_trt_input_profile, min);
    OFF(rtq_trt_input_profile, opt); OFF(rtq_trt_input_profile, max);
    SIZE(rtq_trt_build_options); OFF(rtq_trt_build_options, workspace_bytes);
    OFF(rtq_trt_build_options, strongly_typed); OFF(rtq_trt_build_options, fp16);
    OFF(rtq_trt_build_options, int8); OFF(rtq_trt_build_options, builder_optimization_level);
    OFF(rtq_trt_build_options, profiles); OFF(rtq_trt_build_options, nb_profiles);
    OFF(rtq_trt_build_options, timing_cache); OFF(rtq_trt_build_options, timing_cache_size);
    OFF(rtq_trt_build_options, model_path);
    SIZE(rtq_trt_tensor_desc); OFF(rtq_trt_tensor_desc, name); OFF(rtq_trt_tensor_desc, io_mode);
    OFF(rtq_trt_tensor_desc, dtype); OFF(rtq_trt_tensor_desc, location); OFF(rtq_trt_tensor_desc, shape);
    SIZE(rtq_trt_status);
    VALUE(RTQ_TRT_MAX_DIMS); VALUE(RTQ_TRT_ERR_PARSE); VALUE(RTQ_TRT_ERR_INTERNAL);
    VALUE(RTQ_TRT_DTYPE_FLOAT); VALUE(RTQ_TRT_DTYPE_E8M0); VALUE(RTQ_TRT_IO_OUTPUT);
    VALUE(RTQ_TRT_LOCATION_HOST); VALUE(RTQ_TRT_SEVERITY_VERBOSE); VALUE(RTQ_TRT_PROFILE_MAX);
    return 0;
}
"#;

macro_rules! size_line {
    ($t:ident) => {
        format!(
            "size {} {} {}",
            stringify!($t),
            size_of::<ffi::$t>(),
            std::mem::align_of::<ffi::$t>()
        )
    };
}
macro_rules! offset_line {
    ($t:ident, $f:ident) => {
        format!(
            "offset {}.{} {}",
            stringify!($t),
            stringify!($f),
            offset_of!(ffi::$t, $f)
        )
    };
}
macro_rules! value_line {
    ($c:ident) => {
        format!("value {} {}", stringify!($c), ffi::$c as i64)
    };
}

#[test]
fn c_and_rust_agree_on_layout_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("probe.c");
    let exe = dir.path().join("probe");
    std::fs::write(&src, C_PROBE).unwrap();
    let mut cmd = Command::new(compiler("CC", "cc"));
    cmd.args(["-std=c11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg("-I")
        .arg(shim_dir())
        .arg(&src);
    run(cmd);
    let c_lines: Vec<String> = run(Command::new(&exe))
        .lines()
        .map(str::to_string)
        .collect();

    let rust_lines = vec![
        size_line!(rtq_trt_dims),
        offset_line!(rtq_trt_dims, nb_dims),
        offset_line!(rtq_trt_dims, d),
        size_line!(rtq_trt_input_profile),
        offset_line!(rtq_trt_input_profile, name),
        offset_line!(rtq_trt_input_profile, min),
        offset_line!(rtq_trt_input_profile, opt),
        offset_line!(rtq_trt_input_profile, max),
        size_line!(rtq_trt_build_options),
        offset_line!(rtq_trt_build_options, workspace_bytes),
        offset_line!(rtq_trt_build_options, strongly_typed),
        offset_line!(rtq_trt_build_options, fp16),
        offset_line!(rtq_trt_build_options, int8),
        offset_line!(rtq_trt_build_options, builder_optimization_level),
        offset_line!(rtq_trt_build_options, profiles),
        offset_line!(rtq_trt_build_options, nb_profiles),
        offset_line!(rtq_trt_build_options, timing_cache),
        offset_line!(rtq_trt_build_options, timing_cache_size),
        offset_line!(rtq_trt_build_options, model_path),
        size_line!(rtq_trt_tensor_desc),
        offset_line!(rtq_trt_tensor_desc, name),
        offset_line!(rtq_trt_tensor_desc, io_mode),
        offset_line!(rtq_trt_tensor_desc, dtype),
        offset_line!(rtq_trt_tensor_desc, location),
        offset_line!(rtq_trt_tensor_desc, shape),
        size_line!(rtq_trt_status),
        value_line!(RTQ_TRT_MAX_DIMS),
        value_line!(RTQ_TRT_ERR_PARSE),
        value_line!(RTQ_TRT_ERR_INTERNAL),
        value_line!(RTQ_TRT_DTYPE_FLOAT),
        value_line!(RTQ_TRT_DTYPE_E8M0),
        value_line!(RTQ_TRT_IO_OUTPUT),
        value_line!(RTQ_TRT_LOCATION_HOST),
        value_line!(RTQ_TRT_SEVERITY_VERBOSE),
        value_line!(RTQ_TRT_PROFILE_MAX),
    ];
    assert_eq!(c_lines, rust_lines);
}
