//! Keyword options (the command line's flag names, with `_` for `-`) into the
//! pipeline's [`CompileOptions`] and the data loader's [`DataOptions`].

use crate::errors::OptionsError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rtq::pipeline::{CompileOptions, Int4Method, MethodChoice, Shard, StopAfter};
use rtq_calib::{DataOptions, Layout};
use std::path::PathBuf;

/// The options [`apply_compile_option`] knows, for the error on any other.
const COMPILE_OPTIONS: &[&str] = &[
    "fp16",
    "int8",
    "calib_method",
    "accuracy_target",
    "strict_accuracy",
    "equalize",
    "bias_correction",
    "percentile",
    "save_stats",
    "stats",
    "calib_cache",
    "shard",
    "calib_samples",
    "holdout",
    "exclude_nodes",
    "exclude_ops",
    "quantize_ops",
    "per_tensor_weights",
    "residual_add",
    "quantize_gemv",
    "fp16_io",
    "disable_pass",
    "verify_each",
    "trt_version",
    "stop_after",
];

/// The data options [`apply_data_option`] knows.
const DATA_OPTIONS: &[&str] = &["input_shape", "mean", "std", "layout", "bgr", "input_scale"];

/// `options` (keyword arguments of `rtq.compile`) over the command line's defaults.
pub fn compile_options(
    model: PathBuf,
    out_dir: PathBuf,
    calib_dir: Option<PathBuf>,
    options: &Bound<'_, PyDict>,
) -> PyResult<CompileOptions> {
    let mut opts = CompileOptions::new(model, out_dir);
    opts.calib_dir = calib_dir;
    for (key, value) in options.iter() {
        let key: String = key.extract()?;
        if value.is_none() {
            continue;
        }
        let known = apply_compile_option(&mut opts, &key, &value)?
            || apply_data_option(&mut opts.data, &key, &value)?;
        if !known {
            return Err(unknown(&key, &[COMPILE_OPTIONS, DATA_OPTIONS].concat()));
        }
    }
    Ok(opts)
}

/// `options` (keyword arguments of `rtq.eval`) over the loader's defaults.
pub fn data_options(options: &Bound<'_, PyDict>) -> PyResult<DataOptions> {
    let mut data = DataOptions::default();
    for (key, value) in options.iter() {
        let key: String = key.extract()?;
        if !value.is_none() && !apply_data_option(&mut data, &key, &value)? {
            return Err(unknown(&key, DATA_OPTIONS));
        }
    }
    Ok(data)
}

fn unknown(key: &str, known: &[&str]) -> PyErr {
    OptionsError::new_err(format!(
        "unknown option `{key}` (options: {})",
        known.join(", ")
    ))
}

/// `value` as `T`, or an [`OptionsError`] naming the option.
fn get<'py, T: FromPyObjectOwned<'py>>(key: &str, value: &Bound<'py, PyAny>) -> PyResult<T> {
    value.extract::<T>().map_err(|e| {
        let e: PyErr = e.into();
        OptionsError::new_err(format!("option `{key}`: {e}"))
    })
}

/// A string option parsed with `FromStr`, its error naming the option.
fn parsed<T: std::str::FromStr<Err = String>>(key: &str, value: &Bound<'_, PyAny>) -> PyResult<T> {
    let text: String = get(key, value)?;
    text.parse::<T>()
        .map_err(|e| OptionsError::new_err(format!("option `{key}`: {e}")))
}

/// Sets compile option `key`; false when it is not one.
fn apply_compile_option(
    opts: &mut CompileOptions,
    key: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    match key {
        "fp16" => opts.fp16 = get(key, value)?,
        "int8" => opts.int8 = get(key, value)?,
        "fp8" => opts.fp8 = get(key, value)?,
        "int4_weights" => opts.int4_weights = get(key, value)?,
        "int4_block_size" => opts.int4_block_size = get(key, value)?,
        "int4_method" => {
            let name: String = get(key, value)?;
            opts.int4_method = match Int4Method::parse(&name) {
                Some(method) => Some(method),
                None => {
                    return Err(OptionsError::new_err(format!(
                        "option `{key}`: `{name}` is not awq, gptq or rtn"
                    )))
                }
            };
        }
        "high_precision" => {
            let name: String = get(key, value)?;
            (opts.fp16, opts.bf16) = match name.as_str() {
                "fp32" => (false, false),
                "fp16" => (true, false),
                "bf16" => (false, true),
                _ => {
                    return Err(OptionsError::new_err(format!(
                        "option `{key}`: `{name}` is not fp32, fp16 or bf16"
                    )))
                }
            };
        }
        "calib_method" => opts.set_method(parsed::<MethodChoice>(key, value)?),
        "accuracy_target" => opts.accuracy_target = parsed(key, value)?,
        "strict_accuracy" => opts.strict_accuracy = get(key, value)?,
        "equalize" => opts.equalize = Some(get(key, value)?),
        "bias_correction" => opts.bias_correction = Some(get(key, value)?),
        "percentile" => opts.calib.percentile = get(key, value)?,
        "save_stats" => opts.save_stats = Some(get(key, value)?),
        "stats" => opts.stats = get(key, value)?,
        "calib_cache" => opts.calib_cache = Some(get(key, value)?),
        "shard" => opts.shard = Some(parsed::<Shard>(key, value)?),
        "calib_samples" => opts.max_calib_files = Some(get(key, value)?),
        "holdout" => opts.holdout = Some(get(key, value)?),
        "exclude_nodes" => {
            opts.int8_opts.exclude.names = get(key, value)?;
            opts.fp16_exclude.names = opts.int8_opts.exclude.names.clone();
        }
        "exclude_ops" => {
            opts.int8_opts.exclude.op_types = get(key, value)?;
            opts.fp16_exclude.op_types = opts.int8_opts.exclude.op_types.clone();
        }
        "quantize_ops" => opts.int8_opts.extra_ops = get(key, value)?,
        "per_tensor_weights" => opts.int8_opts.per_channel = !get::<bool>(key, value)?,
        "residual_add" => opts.int8_opts.residual_add = get(key, value)?,
        "quantize_gemv" => opts.int8_opts.quantize_gemv = get(key, value)?,
        "fp16_io" => opts.fp16_keep_io = !get::<bool>(key, value)?,
        "disable_pass" => opts.optimize.disabled = get(key, value)?,
        "verify_each" => opts.optimize.verify_each = get(key, value)?,
        "trt_version" => opts.trt_version = get(key, value)?,
        "stop_after" => opts.stop_after = Some(parsed::<StopAfter>(key, value)?),
        _ => return Ok(false),
    }
    Ok(true)
}

/// Sets data option `key`; false when it is not one.
fn apply_data_option(
    data: &mut DataOptions,
    key: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    match key {
        "input_shape" => data.input_shape = Some(get(key, value)?),
        "mean" => data.mean = get(key, value)?,
        "std" => data.std = get(key, value)?,
        "layout" => {
            data.layout = match get::<String>(key, value)?.to_ascii_lowercase().as_str() {
                "nchw" => Layout::Nchw,
                "nhwc" => Layout::Nhwc,
                other => {
                    return Err(OptionsError::new_err(format!(
                        "option `layout`: `{other}` is not nchw or nhwc"
                    )))
                }
            }
        }
        "bgr" => data.bgr = get(key, value)?,
        "input_scale" => data.input_scale = Some(get(key, value)?),
        _ => return Ok(false),
    }
    Ok(true)
}
