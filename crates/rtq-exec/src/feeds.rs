//! Checking fed tensors against a graph input's declared element type and shape.

use crate::ExecError;
use rtq_ir::{format_shape, DType, Dim, Tensor};

/// A graph input as the plan declares it.
#[derive(Debug, Clone)]
pub(crate) struct InputDecl {
    /// The input's name.
    pub name: String,
    /// Declared element type, if any.
    pub dtype: Option<DType>,
    /// Declared shape, if any (symbolic dimensions match any extent).
    pub shape: Option<Vec<Dim>>,
}

impl InputDecl {
    fn describe(&self) -> String {
        let dtype = self.dtype.map_or("?".to_string(), |d| d.to_string());
        let shape = self
            .shape
            .as_deref()
            .map_or("[?]".to_string(), format_shape);
        format!("{dtype}{shape}")
    }

    /// Checks `t` against the declaration.
    pub fn check(&self, t: &Tensor) -> Result<(), ExecError> {
        let dtype_ok = self.dtype.is_none_or(|d| d == t.dtype());
        let shape_ok = self.shape.as_ref().is_none_or(|dims| {
            dims.len() == t.rank()
                && dims
                    .iter()
                    .zip(t.shape())
                    .all(|(d, &n)| d.known().is_none_or(|k| k == n))
        });
        if dtype_ok && shape_ok {
            return Ok(());
        }
        let got_dims: Vec<Dim> = t.shape().iter().map(|&n| Dim::Known(n)).collect();
        Err(ExecError::FeedMismatch {
            input: self.name.clone(),
            expected: self.describe(),
            got: format!("{}{}", t.dtype(), format_shape(&got_dims)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl() -> InputDecl {
        InputDecl {
            name: "images".into(),
            dtype: Some(DType::F32),
            shape: Some(vec![Dim::Sym("N".into()), Dim::Known(3)]),
        }
    }

    #[test]
    fn symbolic_dims_match_anything() {
        decl()
            .check(&Tensor::zeros(DType::F32, vec![7, 3]))
            .unwrap();
        decl()
            .check(&Tensor::zeros(DType::F32, vec![0, 3]))
            .unwrap();
    }

    #[test]
    fn mismatches_are_described() {
        let err = decl()
            .check(&Tensor::zeros(DType::F32, vec![2, 4]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("images") && err.contains("float[N,3]") && err.contains("float[2,4]"),
            "{err}"
        );
        let err = decl()
            .check(&Tensor::zeros(DType::F16, vec![2, 3]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("float16[2,3]"), "{err}");
        assert!(decl().check(&Tensor::zeros(DType::F32, vec![3])).is_err());
    }
}
