//! Matching caller-supplied input tensors against a model's input descriptions.

use crate::{HostTensor, RuntimeError, TensorInfo};

/// Orders `given` like `expected`, checking that every input is present exactly once,
/// no unknown tensor is given, and each one's type, rank and fixed dimensions match.
pub(crate) fn match_inputs<'a>(
    expected: &[TensorInfo],
    given: &'a [HostTensor],
) -> Result<Vec<&'a HostTensor>, RuntimeError> {
    for (i, t) in given.iter().enumerate() {
        if !expected.iter().any(|e| e.name == t.name) {
            let names: Vec<&str> = expected.iter().map(|e| e.name.as_str()).collect();
            return Err(RuntimeError::tensor(
                &t.name,
                format!("the model has no such input (inputs: {})", names.join(", ")),
            ));
        }
        if given[..i].iter().any(|o| o.name == t.name) {
            return Err(RuntimeError::tensor(&t.name, "given more than once"));
        }
    }
    expected
        .iter()
        .map(|info| {
            let t = given
                .iter()
                .find(|t| t.name == info.name)
                .ok_or_else(|| RuntimeError::tensor(&info.name, "missing input"))?;
            check_input(info, t)?;
            Ok(t)
        })
        .collect()
}

/// Checks one input tensor against its description.
fn check_input(info: &TensorInfo, t: &HostTensor) -> Result<(), RuntimeError> {
    if t.dtype() != info.dtype {
        return Err(RuntimeError::tensor(
            &t.name,
            format!("expected {} elements, got {}", info.dtype, t.dtype()),
        ));
    }
    let Some(shape) = &info.shape else {
        return Ok(());
    };
    if shape.len() != t.shape().len() {
        return Err(RuntimeError::tensor(
            &t.name,
            format!(
                "expected rank {} ({}), got shape {:?}",
                shape.len(),
                info,
                t.shape()
            ),
        ));
    }
    for (axis, (&want, &got)) in shape.iter().zip(t.shape()).enumerate() {
        if want >= 0 && want as usize != got {
            return Err(RuntimeError::tensor(
                &t.name,
                format!(
                    "dimension {axis} must be {want} ({info}), got shape {:?}",
                    t.shape()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataType;

    fn infos() -> Vec<TensorInfo> {
        vec![
            TensorInfo::new("a", DataType::F32, vec![-1, 2]),
            TensorInfo::new("b", DataType::I64, vec![3]),
        ]
    }

    #[test]
    fn orders_inputs_like_the_model() {
        let b = HostTensor::from_i64("b", vec![3], &[1, 2, 3]).unwrap();
        let a = HostTensor::from_f32("a", vec![5, 2], &[0.0; 10]).unwrap();
        let given = [b, a];
        let ordered = match_inputs(&infos(), &given).unwrap();
        assert_eq!(ordered[0].name, "a");
        assert_eq!(ordered[1].name, "b");
    }

    #[test]
    fn rejects_bad_inputs_naming_them() {
        let a = HostTensor::from_f32("a", vec![1, 2], &[0.0; 2]).unwrap();
        let b = HostTensor::from_i64("b", vec![3], &[0; 3]).unwrap();
        let msg = |given: &[HostTensor]| match_inputs(&infos(), given).unwrap_err().to_string();

        assert_eq!(msg(std::slice::from_ref(&a)), "tensor `b`: missing input");
        let c = HostTensor::from_f32("c", vec![1], &[0.0]).unwrap();
        assert_eq!(
            msg(&[a.clone(), b.clone(), c]),
            "tensor `c`: the model has no such input (inputs: a, b)"
        );
        assert_eq!(
            msg(&[a.clone(), a.clone(), b.clone()]),
            "tensor `a`: given more than once"
        );
        let wrong_type = HostTensor::from_i32("b", vec![3], &[0; 3]).unwrap();
        assert_eq!(
            msg(&[a.clone(), wrong_type]),
            "tensor `b`: expected int64 elements, got int32"
        );
        let wrong_dim = HostTensor::from_f32("a", vec![1, 3], &[0.0; 3]).unwrap();
        assert_eq!(
            msg(&[wrong_dim, b.clone()]),
            "tensor `a`: dimension 1 must be 2 (a: float32[?,2]), got shape [1, 3]"
        );
        let wrong_rank = HostTensor::from_f32("a", vec![2], &[0.0; 2]).unwrap();
        assert_eq!(
            msg(&[wrong_rank, b]),
            "tensor `a`: expected rank 2 (a: float32[?,2]), got shape [2]"
        );
    }
}
