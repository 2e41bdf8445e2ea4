//! Compile-time checks that the bound functions have the signatures rtq's wrapper
//! relies on. These are `const` items, so nothing is linked and no TensorRT is needed:
//! a changed header fails this test file at compile time.

#![allow(dead_code)]

use rtq_tensorrt_sys::ffi::*;
use std::ffi::{c_char, c_void};

const _: unsafe extern "C" fn() -> i32 = rtq_trt_library_version;
const _: unsafe extern "C" fn() -> i32 = rtq_trt_header_version;
const _: unsafe extern "C" fn(*mut c_char, usize) -> usize = rtq_trt_last_error;
const _: unsafe extern "C" fn(i32, *mut *mut rtq_trt_builder) -> rtq_trt_status =
    rtq_trt_builder_create;
const _: unsafe extern "C" fn(*mut rtq_trt_builder) = rtq_trt_builder_destroy;
const _: unsafe extern "C" fn(*const rtq_trt_builder, *mut c_char, usize) -> usize =
    rtq_trt_builder_log;
const _: unsafe extern "C" fn(
    *mut rtq_trt_builder,
    *const c_void,
    usize,
    *const rtq_trt_build_options,
    *mut *mut rtq_trt_blob,
    *mut *mut rtq_trt_blob,
) -> rtq_trt_status = rtq_trt_build_engine;
const _: unsafe extern "C" fn(*const rtq_trt_blob) -> *const c_void = rtq_trt_blob_data;
const _: unsafe extern "C" fn(*const rtq_trt_blob) -> usize = rtq_trt_blob_size;
const _: unsafe extern "C" fn(*mut rtq_trt_blob) = rtq_trt_blob_destroy;
const _: unsafe extern "C" fn(*const c_void, usize, *mut *mut rtq_trt_engine) -> rtq_trt_status =
    rtq_trt_engine_deserialize;
const _: unsafe extern "C" fn(*mut rtq_trt_engine) = rtq_trt_engine_destroy;
const _: unsafe extern "C" fn(*const rtq_trt_engine) -> i32 = rtq_trt_engine_num_io_tensors;
const _: unsafe extern "C" fn(
    *const rtq_trt_engine,
    i32,
    *mut rtq_trt_tensor_desc,
) -> rtq_trt_status = rtq_trt_engine_io_tensor;
const _: unsafe extern "C" fn(*const rtq_trt_engine) -> i32 = rtq_trt_engine_num_profiles;
const _: unsafe extern "C" fn(
    *const rtq_trt_engine,
    *const c_char,
    i32,
    i32,
    *mut rtq_trt_dims,
) -> rtq_trt_status = rtq_trt_engine_profile_shape;
const _: unsafe extern "C" fn(*mut rtq_trt_engine, *mut *mut rtq_trt_context) -> rtq_trt_status =
    rtq_trt_context_create;
const _: unsafe extern "C" fn(*mut rtq_trt_context) = rtq_trt_context_destroy;
const _: unsafe extern "C" fn(
    *mut rtq_trt_context,
    *const c_char,
    *const rtq_trt_dims,
) -> rtq_trt_status = rtq_trt_context_set_input_shape;
const _: unsafe extern "C" fn(
    *const rtq_trt_context,
    *const c_char,
    *mut rtq_trt_dims,
) -> rtq_trt_status = rtq_trt_context_tensor_shape;
const _: unsafe extern "C" fn(*mut rtq_trt_context, *const c_char, *mut c_void) -> rtq_trt_status =
    rtq_trt_context_set_tensor_address;
const _: unsafe extern "C" fn(*mut rtq_trt_context, *mut c_void) -> rtq_trt_status =
    rtq_trt_context_enqueue;

#[test]
fn option_struct_fields_have_the_expected_types() {
    // Building the struct field by field checks every field's name and type.
    let opts = rtq_trt_build_options {
        workspace_bytes: 1u64 << 30,
        strongly_typed: 1i32,
        fp16: 0i32,
        int8: 0i32,
        builder_optimization_level: -1i32,
        profiles: std::ptr::null::<rtq_trt_input_profile>(),
        nb_profiles: 0usize,
        timing_cache: std::ptr::null::<c_void>(),
        timing_cache_size: 0usize,
        model_path: std::ptr::null::<c_char>(),
    };
    assert_eq!(opts.workspace_bytes, 1 << 30);
    let desc = rtq_trt_tensor_desc {
        name: std::ptr::null(),
        io_mode: RTQ_TRT_IO_INPUT as i32,
        dtype: RTQ_TRT_DTYPE_HALF as i32,
        location: RTQ_TRT_LOCATION_DEVICE as i32,
        shape: rtq_trt_dims {
            nb_dims: 2,
            d: [1, 8, 0, 0, 0, 0, 0, 0],
        },
    };
    assert_eq!(desc.shape.d.len(), RTQ_TRT_MAX_DIMS as usize);
}
