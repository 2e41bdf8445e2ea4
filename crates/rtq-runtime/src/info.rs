//! Descriptions of a model's inputs and outputs.

use crate::{DataType, RuntimeError};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Name, element type and shape of a model input or output.
///
/// `shape` uses -1 for dynamic dimensions. It is `None` only for an output whose
/// shape the model does not declare (possible for ONNX models); engine inputs and
/// TensorRT tensors always have one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorInfo {
    /// Tensor name.
    pub name: String,
    /// Element type.
    pub dtype: DataType,
    /// Dimensions, -1 where dynamic; `None` when the rank is unknown.
    pub shape: Option<Vec<i64>>,
}

impl TensorInfo {
    /// A tensor description with a known shape.
    pub fn new(name: impl Into<String>, dtype: DataType, shape: Vec<i64>) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            dtype,
            shape: Some(shape),
        }
    }

    /// The shape, or an error naming the tensor when it is unknown.
    pub fn known_shape(&self) -> Result<&[i64], RuntimeError> {
        self.shape
            .as_deref()
            .ok_or_else(|| RuntimeError::tensor(&self.name, "the model does not declare its shape"))
    }

    /// Whether any dimension is dynamic (or the shape unknown).
    pub fn is_dynamic(&self) -> bool {
        self.shape.as_ref().is_none_or(|s| s.iter().any(|&d| d < 0))
    }
}

impl fmt::Display for TensorInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.shape {
            Some(shape) => {
                let dims: Vec<String> = shape
                    .iter()
                    .map(|&d| {
                        if d < 0 {
                            "?".to_string()
                        } else {
                            d.to_string()
                        }
                    })
                    .collect();
                write!(f, "{}: {}[{}]", self.name, self.dtype, dims.join(","))
            }
            None => write!(f, "{}: {}[unknown shape]", self.name, self.dtype),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_marks_dynamic_dims() {
        let t = TensorInfo::new("images", DataType::F32, vec![-1, 3, 224, 224]);
        assert_eq!(t.to_string(), "images: float32[?,3,224,224]");
        assert!(t.is_dynamic());
        assert!(!TensorInfo::new("s", DataType::I64, vec![]).is_dynamic());
        let u = TensorInfo {
            name: "y".into(),
            dtype: DataType::F16,
            shape: None,
        };
        assert_eq!(u.to_string(), "y: float16[unknown shape]");
        assert_eq!(
            u.known_shape().unwrap_err().to_string(),
            "tensor `y`: the model does not declare its shape"
        );
    }

    #[test]
    fn json_uses_type_names() {
        let t = TensorInfo::new("x", DataType::F16, vec![-1, 8]);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, r#"{"name":"x","dtype":"float16","shape":[-1,8]}"#);
    }
}
