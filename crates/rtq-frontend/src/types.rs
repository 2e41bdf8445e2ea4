use crate::FrontendError;
use rtq_ir::{DType, Dim, Shape};
use rtq_onnx_proto::{tensor_shape_proto::dimension, type_proto, ValueInfoProto};

/// The element type and shape declared by a `ValueInfoProto`, when it is a tensor type.
pub(crate) fn value_info_type(
    info: &ValueInfoProto,
) -> Result<(Option<DType>, Option<Shape>), FrontendError> {
    let name = info.name.clone().unwrap_or_default();
    let Some(tp) = info.r#type.as_ref() else {
        return Ok((None, None));
    };
    let tensor = match &tp.value {
        Some(type_proto::Value::TensorType(t)) => t,
        Some(_) => {
            return Err(FrontendError::bad_tensor(
                &name,
                "only tensor types are supported (not sequences, maps or optionals)",
            ))
        }
        None => return Ok((None, None)),
    };
    let dtype = match tensor.elem_type {
        Some(0) | None => None,
        Some(code) => Some(DType::from_onnx_code(code).ok_or_else(|| {
            FrontendError::bad_tensor(&name, format!("element type {code} is not supported"))
        })?),
    };
    let shape = tensor.shape.as_ref().map(|s| {
        s.dim
            .iter()
            .map(|d| match &d.value {
                Some(dimension::Value::DimValue(v)) if *v >= 0 => Dim::Known(*v as usize),
                Some(dimension::Value::DimParam(p)) if !p.is_empty() => Dim::Sym(p.clone()),
                _ => Dim::Sym("?".to_string()),
            })
            .collect()
    });
    Ok((dtype, shape))
}
