//! Rendering Triton's `config.pbtxt` (protobuf text format of `ModelConfig`).

use super::{validate_model_name, InstanceKind, TritonModel, TritonOptions, TritonPlatform};
use crate::{DataType, RuntimeError, TensorInfo};
use std::fmt::Write;

/// Triton's `data_type` enum name (`TYPE_FP32`, ...); `None` for types Triton lacks.
fn triton_type(dtype: DataType) -> Option<&'static str> {
    Some(match dtype {
        DataType::F32 => "TYPE_FP32",
        DataType::F16 => "TYPE_FP16",
        DataType::BF16 => "TYPE_BF16",
        DataType::F64 => "TYPE_FP64",
        DataType::I8 => "TYPE_INT8",
        DataType::U8 => "TYPE_UINT8",
        DataType::I16 => "TYPE_INT16",
        DataType::U16 => "TYPE_UINT16",
        DataType::I32 => "TYPE_INT32",
        DataType::U32 => "TYPE_UINT32",
        DataType::I64 => "TYPE_INT64",
        DataType::U64 => "TYPE_UINT64",
        DataType::Bool => "TYPE_BOOL",
        DataType::Fp8E4M3 | DataType::Int4 | DataType::Fp4E2M1 | DataType::E8M0 => return None,
    })
}

/// A protobuf text-format string literal (quotes and backslashes escaped).
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `dims` Triton expects for `info`: the shape without the batch dimension when
/// Triton batches (`max_batch_size > 0`), -1 kept for dynamic dimensions.
fn triton_dims(
    model: &str,
    info: &TensorInfo,
    max_batch_size: u32,
) -> Result<Vec<i64>, RuntimeError> {
    let err = |message: String| RuntimeError::Triton {
        model: model.to_string(),
        message: format!("tensor `{}`: {message}", info.name),
    };
    let shape = info
        .shape
        .as_ref()
        .ok_or_else(|| err("the model does not declare its shape; Triton needs dims".into()))?;
    if max_batch_size == 0 {
        return Ok(shape.clone());
    }
    match shape.first() {
        None => Err(err(format!(
            "is a scalar, but max_batch_size {max_batch_size} needs a leading batch dimension"
        ))),
        Some(&first) if first >= 0 => Err(err(format!(
            "has a fixed first dimension {first} ({info}); Triton batching (max_batch_size \
             {max_batch_size}) needs a dynamic batch dimension: rebuild with a dynamic batch or \
             set max_batch_size 0"
        ))),
        Some(_) => Ok(shape[1..].to_vec()),
    }
}

fn write_io_block(
    out: &mut String,
    section: &str,
    model: &str,
    infos: &[TensorInfo],
    max_batch_size: u32,
) -> Result<(), RuntimeError> {
    let _ = writeln!(out, "{section} [");
    for (i, info) in infos.iter().enumerate() {
        if info.name.is_empty() || info.name.chars().any(char::is_control) {
            return Err(RuntimeError::Triton {
                model: model.to_string(),
                message: format!(
                    "{section} name {:?} is empty or has control characters",
                    info.name
                ),
            });
        }
        let data_type = triton_type(info.dtype).ok_or_else(|| RuntimeError::Triton {
            model: model.to_string(),
            message: format!(
                "tensor `{}`: Triton has no data type for {}",
                info.name, info.dtype
            ),
        })?;
        let dims = triton_dims(model, info, max_batch_size)?;
        let _ = writeln!(out, "  {{");
        let _ = writeln!(out, "    name: {}", quoted(&info.name));
        let _ = writeln!(out, "    data_type: {data_type}");
        if dims.is_empty() {
            // Triton needs non-empty dims: a scalar per batch item is [1] reshaped to [].
            let _ = writeln!(out, "    dims: [ 1 ]");
            let _ = writeln!(out, "    reshape: {{ shape: [ ] }}");
        } else {
            let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            let _ = writeln!(out, "    dims: [ {} ]", dims.join(", "));
        }
        let _ = writeln!(out, "  }}{}", if i + 1 < infos.len() { "," } else { "" });
    }
    let _ = writeln!(out, "]");
    Ok(())
}

/// Renders `config.pbtxt` for `model` served as `model_name`, after checking the
/// options against the model (names, batch dimensions, data types).
pub fn render_config(
    model_name: &str,
    model: &TritonModel<'_>,
    options: &TritonOptions,
) -> Result<String, RuntimeError> {
    validate_model_name(model_name)?;
    let err = |message: String| RuntimeError::Triton {
        model: model_name.to_string(),
        message,
    };
    if options.instance_count == 0 {
        return Err(err("instance count must be at least 1".into()));
    }
    if options.version == 0 {
        return Err(err("model versions start at 1".into()));
    }
    if model.platform == TritonPlatform::TensorRtPlan && options.kind == InstanceKind::Cpu {
        return Err(err("TensorRT plans run only on GPUs (KIND_GPU)".into()));
    }
    if model.inputs.is_empty() || model.outputs.is_empty() {
        return Err(err(
            "the model needs at least one input and one output".into()
        ));
    }
    let mut names: Vec<&str> = model
        .inputs
        .iter()
        .chain(model.outputs)
        .map(|t| t.name.as_str())
        .collect();
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(err(format!("tensor name `{}` is used twice", pair[0])));
    }
    if let (Some(limit), true) = (model.max_model_batch, options.max_batch_size > 0) {
        if u64::from(options.max_batch_size) > limit {
            return Err(err(format!(
                "max_batch_size {} exceeds the largest batch the model accepts ({limit})",
                options.max_batch_size
            )));
        }
    }
    if let Some(batching) = &options.dynamic_batching {
        if options.max_batch_size == 0 {
            return Err(err("dynamic batching needs max_batch_size > 0".into()));
        }
        if let Some(bad) = batching
            .preferred_batch_sizes
            .iter()
            .find(|&&b| b == 0 || b > options.max_batch_size)
        {
            return Err(err(format!(
                "preferred batch size {bad} is outside 1..={}",
                options.max_batch_size
            )));
        }
    }

    let mut out = String::new();
    let _ = writeln!(out, "name: {}", quoted(model_name));
    let _ = writeln!(out, "platform: {}", quoted(model.platform.platform_name()));
    let _ = writeln!(out, "max_batch_size: {}", options.max_batch_size);
    write_io_block(
        &mut out,
        "input",
        model_name,
        model.inputs,
        options.max_batch_size,
    )?;
    write_io_block(
        &mut out,
        "output",
        model_name,
        model.outputs,
        options.max_batch_size,
    )?;
    let _ = writeln!(out, "instance_group [");
    let _ = writeln!(out, "  {{");
    let _ = writeln!(out, "    count: {}", options.instance_count);
    let _ = writeln!(out, "    kind: {}", options.kind.pbtxt_name());
    let _ = writeln!(out, "  }}");
    let _ = writeln!(out, "]");
    if let Some(batching) = &options.dynamic_batching {
        let _ = writeln!(out, "dynamic_batching {{");
        if !batching.preferred_batch_sizes.is_empty() {
            let sizes: Vec<String> = batching
                .preferred_batch_sizes
                .iter()
                .map(|b| b.to_string())
                .collect();
            let _ = writeln!(out, "  preferred_batch_size: [ {} ]", sizes.join(", "));
        }
        let _ = writeln!(
            out,
            "  max_queue_delay_microseconds: {}",
            batching.max_queue_delay_us
        );
        let _ = writeln!(out, "}}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triton_type_names() {
        assert_eq!(triton_type(DataType::F32), Some("TYPE_FP32"));
        assert_eq!(triton_type(DataType::F16), Some("TYPE_FP16"));
        assert_eq!(triton_type(DataType::I8), Some("TYPE_INT8"));
        assert_eq!(triton_type(DataType::Bool), Some("TYPE_BOOL"));
        assert_eq!(triton_type(DataType::Fp8E4M3), None);
    }

    #[test]
    fn quoting_escapes_quotes_and_backslashes() {
        assert_eq!(quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quoted("input:0"), "\"input:0\"");
    }
}
