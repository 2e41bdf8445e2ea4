//! Model inputs as the data loader sees them, and fitting arrays to them.

use crate::CalibError;
use rtq_ir::{DType, Graph, Tensor, TensorData};

/// A model input to feed: name, element type and shape (`None` = dynamic dim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputSpec {
    /// The input's name.
    pub name: String,
    /// The element type the model expects.
    pub dtype: DType,
    /// The dimensions; `None` for a dynamic (symbolic) one.
    pub shape: Vec<Option<usize>>,
}

impl InputSpec {
    /// An input spec.
    pub fn new(name: impl Into<String>, dtype: DType, shape: Vec<Option<usize>>) -> InputSpec {
        InputSpec {
            name: name.into(),
            dtype,
            shape,
        }
    }

    /// The specs of `graph`'s run-time inputs, in order; fails (naming the
    /// input) if one has no known element type or rank, or is FP8 or INT4 (no `.npy`
    /// array or image can hold such data).
    pub fn from_graph(graph: &Graph) -> Result<Vec<InputSpec>, CalibError> {
        graph
            .inputs
            .iter()
            .map(|&id| {
                let v = graph.value(id);
                let unknown = |what: &str| CalibError::ModelInput {
                    input: v.name.clone(),
                    reason: format!("no known {what}"),
                };
                let dtype = v.dtype.ok_or_else(|| unknown("element type"))?;
                let missing = match dtype {
                    DType::F8E4M3 => Some("FP8"),
                    DType::I4 => Some("INT4"),
                    _ => None,
                };
                if let Some(kind) = missing {
                    return Err(CalibError::ModelInput {
                        input: v.name.clone(),
                        reason: format!(
                            "is {dtype}, which calibration data cannot hold (NumPy has no \
                             {kind} type, so .npy/.npz arrays cannot feed it)"
                        ),
                    });
                }
                let shape = v.shape.as_ref().ok_or_else(|| unknown("shape"))?;
                Ok(InputSpec::new(
                    v.name.clone(),
                    dtype,
                    shape.iter().map(|d| d.known()).collect(),
                ))
            })
            .collect()
    }

    /// The shape as `[1,3,?,?]`.
    pub fn shape_string(&self) -> String {
        let parts: Vec<String> = self
            .shape
            .iter()
            .map(|d| d.map_or_else(|| "?".to_string(), |n| n.to_string()))
            .collect();
        format!("[{}]", parts.join(","))
    }
}

/// How an array's shape fits an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The array is `samples` consecutive batches along dim 0 (1 = as is).
    Batches(usize),
    /// The array lacks the input's leading batch dim of 1 (or dynamic): add it.
    AddBatch,
}

/// How `shape` fits `spec`, or `None` if it does not.
///
/// Same rank: every dim matches (dynamic dims match anything), except that
/// when the input's leading dim is fixed to `B`, a leading dim of `k * B`
/// (k >= 1) fits as `k` batches. One rank short: fits if the input's leading
/// dim is 1 or dynamic and the rest matches (a batch of 1 is added).
pub(crate) fn fit(spec: &InputSpec, shape: &[usize]) -> Option<Fit> {
    let dims_match = |want: &[Option<usize>], got: &[usize]| {
        want.len() == got.len() && want.iter().zip(got).all(|(w, g)| w.is_none_or(|w| w == *g))
    };
    let want = spec.shape.as_slice();
    if want.len() == shape.len() {
        let Some((&lead, rest)) = want.split_first() else {
            return Some(Fit::Batches(1));
        };
        if !dims_match(rest, &shape[1..]) {
            return None;
        }
        return match lead {
            None => Some(Fit::Batches(1)),
            Some(b) if b == shape[0] => Some(Fit::Batches(1)),
            Some(b) if b > 0 && shape[0] > 0 && shape[0] % b == 0 => {
                Some(Fit::Batches(shape[0] / b))
            }
            Some(_) => None,
        };
    }
    if want.len() == shape.len() + 1
        && matches!(want[0], None | Some(1))
        && dims_match(&want[1..], shape)
    {
        return Some(Fit::AddBatch);
    }
    None
}

/// Splits `t` along dim 0 into `k` equal tensors (`k` divides dim 0).
pub(crate) fn split_batches(t: Tensor, k: usize) -> Vec<Tensor> {
    if k <= 1 || t.rank() == 0 {
        return vec![t];
    }
    let mut shape = t.shape().to_vec();
    shape[0] /= k;
    let chunk: usize = shape.iter().product();
    macro_rules! split {
        ($v:expr, $variant:ident) => {
            $v.chunks(chunk.max(1))
                .take(k)
                .map(|c| TensorData::$variant(c.to_vec()))
                .collect::<Vec<_>>()
        };
    }
    let parts = match t.data() {
        TensorData::F32(v) => split!(v, F32),
        TensorData::F16(v) => split!(v, F16),
        TensorData::BF16(v) => split!(v, BF16),
        TensorData::F8E4M3(v) => split!(v, F8E4M3),
        TensorData::F64(v) => split!(v, F64),
        TensorData::I8(v) => split!(v, I8),
        TensorData::I4(v) => split!(v, I4),
        TensorData::U8(v) => split!(v, U8),
        TensorData::I16(v) => split!(v, I16),
        TensorData::U16(v) => split!(v, U16),
        TensorData::I32(v) => split!(v, I32),
        TensorData::U32(v) => split!(v, U32),
        TensorData::I64(v) => split!(v, I64),
        TensorData::U64(v) => split!(v, U64),
        TensorData::Bool(v) => split!(v, Bool),
        TensorData::String(v) => split!(v, String),
    };
    parts
        .into_iter()
        .filter_map(|d| Tensor::new(shape.clone(), d).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::Dim;

    fn spec(shape: &[Option<usize>]) -> InputSpec {
        InputSpec::new("x", DType::F32, shape.to_vec())
    }

    #[test]
    fn fitting_rules() {
        let s = spec(&[Some(2), Some(3)]);
        assert_eq!(fit(&s, &[2, 3]), Some(Fit::Batches(1)));
        assert_eq!(fit(&s, &[6, 3]), Some(Fit::Batches(3)));
        assert_eq!(fit(&s, &[5, 3]), None);
        assert_eq!(fit(&s, &[0, 3]), None);
        assert_eq!(fit(&s, &[2, 4]), None);
        assert_eq!(fit(&s, &[3]), None);
        let d = spec(&[None, Some(3), None]);
        assert_eq!(fit(&d, &[7, 3, 9]), Some(Fit::Batches(1)));
        assert_eq!(fit(&d, &[3, 9]), Some(Fit::AddBatch));
        assert_eq!(fit(&d, &[7, 4, 9]), None);
        assert_eq!(fit(&spec(&[Some(1), Some(3)]), &[3]), Some(Fit::AddBatch));
        assert_eq!(fit(&spec(&[]), &[]), Some(Fit::Batches(1)));
    }

    #[test]
    fn split_keeps_row_order() {
        let t = Tensor::from_f32(vec![4, 2], (0..8).map(|x| x as f32).collect());
        let parts = split_batches(t, 2);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].shape(), &[2, 2]);
        assert_eq!(parts[1].as_f32().unwrap(), &[4.0, 5.0, 6.0, 7.0]);
    }

    #[test]
    fn from_graph_reads_inputs() {
        let mut g = Graph::new("g", 13);
        g.add_input(
            "data",
            DType::F32,
            vec![Dim::Sym("N".into()), Dim::Known(3), Dim::Known(8)],
        );
        let specs = InputSpec::from_graph(&g).unwrap();
        assert_eq!(
            specs,
            vec![InputSpec::new(
                "data",
                DType::F32,
                vec![None, Some(3), Some(8)]
            )]
        );
        assert_eq!(specs[0].shape_string(), "[?,3,8]");
        g.add_value("other", None, None);
        let id = g.value_by_name("other").unwrap();
        g.inputs.push(id);
        let e = InputSpec::from_graph(&g).unwrap_err().to_string();
        assert_eq!(e, "model input `other`: no known element type");
    }

    #[test]
    fn fp8_inputs_are_refused_by_name() {
        let mut g = Graph::new("g", 19);
        g.add_input("codes", DType::F8E4M3, vec![Dim::Known(4)]);
        let e = InputSpec::from_graph(&g).unwrap_err().to_string();
        assert!(
            e.starts_with("model input `codes`: is float8e4m3fn") && e.contains("NumPy"),
            "{e}"
        );
    }

    #[test]
    fn int4_inputs_are_refused_by_name() {
        let mut g = Graph::new("g", 21);
        g.add_input("nibbles", DType::I4, vec![Dim::Known(4)]);
        let e = InputSpec::from_graph(&g).unwrap_err().to_string();
        assert!(
            e.starts_with("model input `nibbles`: is int4") && e.contains("NumPy has no INT4"),
            "{e}"
        );
    }

    #[test]
    fn splits_int4_batches() {
        let t = Tensor::new(vec![2, 2], TensorData::I4(vec![-8, 7, -1, 0])).unwrap();
        let parts = split_batches(t, 2);
        assert_eq!(parts[1].data(), &TensorData::I4(vec![-1, 0]));
    }

    #[test]
    fn splits_fp8_batches() {
        let codes: Vec<rtq_ir::F8E4M3> = (0..4).map(rtq_ir::F8E4M3::from_bits).collect();
        let t = Tensor::new(vec![2, 2], TensorData::F8E4M3(codes.clone())).unwrap();
        let parts = split_batches(t, 2);
        assert_eq!(parts[1].data(), &TensorData::F8E4M3(codes[2..].to_vec()));
    }
}
