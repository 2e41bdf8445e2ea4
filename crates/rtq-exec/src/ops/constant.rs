//! Tensor sources: Constant (every value attribute form), ConstantOfShape, Range and
//! EyeLike.

use crate::ctx::OpCtx;
use crate::elem::{with_any, with_numeric, Elem, Storage};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{Attr, DType, Tensor, TensorData};

/// Source kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("Constant", constant),
    ("ConstantOfShape", constant_of_shape),
    ("Range", range),
    ("EyeLike", eye_like),
];

fn constant(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let t = if let Some(a) = ctx.attr("value") {
        a.as_tensor()
            .cloned()
            .ok_or_else(|| ctx.err("attribute `value` must be a tensor"))?
    } else if let Some(a) = ctx.attr("value_float") {
        Tensor::scalar_f32(
            a.as_float()
                .ok_or_else(|| ctx.err("`value_float` must be a float"))?,
        )
    } else if let Some(v) = ctx.attr_floats("value_floats")? {
        Tensor::from_f32(vec![v.len()], v)
    } else if let Some(a) = ctx.attr("value_int") {
        let v = a
            .as_int()
            .ok_or_else(|| ctx.err("`value_int` must be an integer"))?;
        Tensor::from_i64(vec![], vec![v])
    } else if let Some(v) = ctx.attr_ints("value_ints")? {
        Tensor::from_i64(vec![v.len()], v)
    } else if let Some(a) = ctx.attr("value_string") {
        let s = a
            .as_str()
            .ok_or_else(|| ctx.err("`value_string` must be a string"))?;
        ctx.tensor(vec![], TensorData::String(vec![s.as_bytes().to_vec()]))?
    } else if let Some(Attr::Strings(v)) = ctx.attr("value_strings") {
        let bytes = v.iter().map(|s| s.as_bytes().to_vec()).collect();
        ctx.tensor(vec![v.len()], TensorData::String(bytes))?
    } else if ctx.attr("sparse_value").is_some() {
        return Err(ctx.err("sparse_value constants are not supported"));
    } else {
        return Err(ctx.err("no value attribute is set"));
    };
    Ok(vec![t])
}

/// `n` copies of `v`.
fn fill<T: Clone>(v: &T, n: usize) -> Vec<T> {
    vec![v.clone(); n]
}

fn constant_of_shape(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let shape = ctx.ints_input(0)?;
    if shape.iter().any(|&d| d < 0) {
        return Err(ctx.err(format!("shape {shape:?} has negative extents")));
    }
    let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let n = ctx.numel(&shape)?;
    let value = match ctx.attr("value") {
        Some(a) => a
            .as_tensor()
            .cloned()
            .ok_or_else(|| ctx.err("attribute `value` must be a tensor"))?,
        None => Tensor::scalar_f32(0.0),
    };
    if value.len() != 1 {
        return Err(ctx.err(format!(
            "value must hold one element, got shape {:?}",
            value.shape()
        )));
    }
    let data = with_any!(value.data(), T, v => T::into_data(fill::<T>(&v[0], n)));
    Ok(vec![ctx.tensor(shape, data)?])
}

fn range_typed<T: Elem>(start: T, limit: T, delta: T) -> Vec<T> {
    let count = ((limit.to_f64() - start.to_f64()) / delta.to_f64())
        .ceil()
        .max(0.0) as usize;
    let mut out = Vec::with_capacity(count);
    let mut v = start;
    for _ in 0..count {
        out.push(v);
        v = v.add(delta);
    }
    out
}

fn range(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (s, l, d) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    if s.len() != 1 || l.len() != 1 || d.len() != 1 {
        return Err(ctx.err("start, limit and delta must be scalars"));
    }
    if s.dtype() != l.dtype() || s.dtype() != d.dtype() {
        return Err(ctx.err(format!(
            "start, limit and delta types differ ({}, {}, {})",
            s.dtype(),
            l.dtype(),
            d.dtype()
        )));
    }
    if d.data().get_f64(0) == 0.0 {
        return Err(ctx.err("delta is 0"));
    }
    let count_limit = 1usize << 31;
    let approx = ((l.data().get_f64(0) - s.data().get_f64(0)) / d.data().get_f64(0)).ceil();
    if approx.is_nan() || approx > count_limit as f64 {
        return Err(ctx.err(format!("range would hold {approx} elements")));
    }
    let dtype = s.dtype();
    let widened = matches!(dtype, DType::F16 | DType::BF16);
    let (s, l, d) = if widened {
        (s.cast(DType::F32), l.cast(DType::F32), d.cast(DType::F32))
    } else {
        (s.clone(), l.clone(), d.clone())
    };
    let data = with_numeric!(s.data(), T, v => {
        let (lv, dv) = (T::slice(l.data()), T::slice(d.data()));
        match (lv, dv) {
            (Some(lv), Some(dv)) => T::wrap(range_typed::<T>(v[0], lv[0], dv[0])),
            _ => return Err(ctx.err("start, limit and delta types differ")),
        }
    }, _ => return Err(ctx.err(format!("Range is not defined on {dtype} tensors"))));
    let n = data.len();
    let t = ctx.tensor(vec![n], data)?;
    Ok(vec![if widened { t.cast(dtype) } else { t }])
}

/// `EyeLike`: a matrix shaped like the 2-D input with ones on diagonal `k` (above the
/// main one when positive) and zeros elsewhere, of type `dtype` or else the input's.
fn eye_like(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let &[rows, cols] = x.shape() else {
        return Err(ctx.err(format!("input must be 2-D, got {:?}", x.shape())));
    };
    let k = ctx.attr_int("k", 0)?;
    let dtype = match ctx.attr("dtype") {
        None => x.dtype(),
        Some(_) => {
            let code = ctx.attr_int("dtype", 0)?;
            i32::try_from(code)
                .ok()
                .and_then(DType::from_onnx_code)
                .ok_or_else(|| ctx.err(format!("unsupported dtype code {code}")))?
        }
    };
    if dtype == DType::String {
        return Err(ctx.err("EyeLike is not defined on string tensors"));
    }
    let n = ctx.numel(&[rows, cols])?;
    let on_diagonal = (0..n)
        .map(|i| (i % cols) as i64 - (i / cols) as i64 == k)
        .collect();
    let data = TensorData::Bool(on_diagonal).cast(dtype);
    Ok(vec![ctx.tensor(vec![rows, cols], data)?])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, DType, Node, Tensor, TensorData};

    fn node(op: &str, attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node(op, attrs, 1)
    }

    #[test]
    fn constant_attribute_forms() {
        let t = Tensor::from_f32(vec![2], vec![1.0, 2.0]);
        let y = eval_node(
            &node("Constant", &[("value", Attr::Tensor(t.clone()))]),
            &[],
        )
        .unwrap();
        assert_eq!(y[0], t);
        let y = eval_node(
            &node("Constant", &[("value_ints", Attr::Ints(vec![3, 4]))]),
            &[],
        )
        .unwrap();
        assert_eq!(y[0], Tensor::from_i64(vec![2], vec![3, 4]));
        let y = eval_node(&node("Constant", &[("value_float", Attr::Float(0.5))]), &[]).unwrap();
        assert_eq!(y[0], Tensor::scalar_f32(0.5));
        let y = eval_node(&node("Constant", &[("value_int", Attr::Int(7))]), &[]).unwrap();
        assert_eq!(y[0].shape(), &[] as &[usize]);
        assert!(eval_node(&node("Constant", &[]), &[]).is_err());
    }

    #[test]
    fn constant_of_shape_fills() {
        let shape = Tensor::from_i64(vec![2], vec![2, 3]);
        let y = eval_node(&node("ConstantOfShape", &[]), &[Some(&shape)])
            .unwrap()
            .remove(0);
        assert_eq!(
            (y.shape(), y.as_f32().unwrap()),
            (&[2usize, 3][..], &[0.0; 6][..])
        );
        let v = Tensor::from_i64(vec![1], vec![7]);
        let y = eval_node(
            &node("ConstantOfShape", &[("value", Attr::Tensor(v))]),
            &[Some(&shape)],
        )
        .unwrap()
        .remove(0);
        assert_eq!(y.as_i64().unwrap(), &[7; 6]);
        let empty = Tensor::from_i64(vec![0], vec![]);
        let y = eval_node(&node("ConstantOfShape", &[]), &[Some(&empty)])
            .unwrap()
            .remove(0);
        assert_eq!(y.shape(), &[] as &[usize]);
        assert_eq!(y.len(), 1);
    }

    #[test]
    fn range_ints_floats_and_empty() {
        let i = |v| Tensor::from_i64(vec![], vec![v]);
        let y = eval_node(
            &node("Range", &[]),
            &[Some(&i(10)), Some(&i(1)), Some(&i(-3))],
        )
        .unwrap()
        .remove(0);
        assert_eq!(y.as_i64().unwrap(), &[10, 7, 4]);
        let f = Tensor::scalar_f32;
        let y = eval_node(
            &node("Range", &[]),
            &[Some(&f(0.0)), Some(&f(1.0)), Some(&f(0.25))],
        )
        .unwrap()
        .remove(0);
        assert_eq!(y.as_f32().unwrap(), &[0.0, 0.25, 0.5, 0.75]);
        let y = eval_node(
            &node("Range", &[]),
            &[Some(&i(5)), Some(&i(1)), Some(&i(1))],
        )
        .unwrap()
        .remove(0);
        assert_eq!(y.shape(), &[0]);
        assert!(eval_node(
            &node("Range", &[]),
            &[Some(&i(0)), Some(&i(1)), Some(&i(0))]
        )
        .is_err());
        let h = Tensor::new(vec![], TensorData::F16(vec![half::f16::from_f32(1.0)])).unwrap();
        let y = eval_node(
            &node("Range", &[]),
            &[
                Some(&h.cast(DType::F16)),
                Some(&Tensor::scalar_f32(3.0).cast(DType::F16)),
                Some(&h),
            ],
        )
        .unwrap()
        .remove(0);
        assert_eq!((y.dtype(), y.to_f32_vec()), (DType::F16, vec![1.0, 2.0]));
    }

    #[test]
    fn eye_like_diagonals_and_types() {
        let eye = |x: &Tensor, attrs: &[(&str, Attr)]| {
            eval_node(&node("EyeLike", attrs), &[Some(x)])
                .unwrap()
                .remove(0)
        };
        let x = Tensor::zeros(DType::F32, vec![3, 4]);
        let y = eye(&x, &[]);
        #[rustfmt::skip]
        let want = [
            1.0, 0.0, 0.0, 0.0,
            0.0, 1.0, 0.0, 0.0,
            0.0, 0.0, 1.0, 0.0,
        ];
        assert_eq!(
            (y.shape(), y.as_f32().unwrap()),
            (&[3usize, 4][..], &want[..])
        );
        // k = 1 above the main diagonal, as int64 (ONNX type code 7).
        let y = eye(&x, &[("k", Attr::Int(1)), ("dtype", Attr::Int(7))]);
        #[rustfmt::skip]
        let want = [
            0, 1, 0, 0,
            0, 0, 1, 0,
            0, 0, 0, 1,
        ];
        assert_eq!(y.as_i64().unwrap(), &want);
        // k = -2 below it; the input's type (int32) is kept.
        let x = Tensor::new(vec![4, 3], TensorData::I32(vec![5; 12])).unwrap();
        let y = eye(&x, &[("k", Attr::Int(-2))]);
        #[rustfmt::skip]
        let want = [
            0, 0, 0,
            0, 0, 0,
            1, 0, 0,
            0, 1, 0,
        ];
        assert_eq!(y.data(), &TensorData::I32(want.to_vec()));
        let y = eye(&x, &[("k", Attr::Int(3))]);
        assert_eq!(y.data(), &TensorData::I32(vec![0; 12]));
        let flat = Tensor::from_f32(vec![3], vec![0.0; 3]);
        assert!(eval_node(&node("EyeLike", &[]), &[Some(&flat)]).is_err());
    }
}
