//! Rules for indexing ops: Gather, GatherElements, GatherND, TopK, OneHot, NonZero,
//! NonMaxSuppression.

use super::ctx::{Fact, NodeCtx};
use super::dims::unknown;
use crate::PassError;
use rtq_ir::{DType, Dim};

/// `Gather(data, indices, axis)`: `data[..axis] + indices + data[axis+1..]`.
pub(crate) fn gather(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let (Some(data), Some(indices)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    if data.is_empty() {
        return Err(ctx.invalid(format!("cannot gather from a scalar ({})", ctx.describe(0))));
    }
    let axis = ctx.axis(ctx.attr_int("axis", 0), data.len())?;
    let mut out = data[..axis].to_vec();
    out.extend_from_slice(indices);
    out.extend_from_slice(&data[axis + 1..]);
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `GatherElements`: the shape of `indices`.
pub(crate) fn gather_elements(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    Ok(vec![Fact::new(
        ctx.dtype(0),
        ctx.shape(1).map(<[_]>::to_vec),
    )])
}

/// `GatherND(data, indices, batch_dims)`: `indices[..-1] + data[batch_dims + q..]` with
/// `q = indices[-1]`.
pub(crate) fn gather_nd(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let (Some(data), Some(indices)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let Some((Dim::Known(q), lead)) = indices.split_last() else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let batch = usize::try_from(ctx.attr_int("batch_dims", 0)).unwrap_or(usize::MAX);
    let Some(rest) = batch.checked_add(*q).and_then(|k| data.get(k..)) else {
        return Err(ctx.conflict(
            "index depth exceeds the data rank",
            ctx.describe(0),
            ctx.describe(1),
        ));
    };
    let mut out = lead.to_vec();
    out.extend_from_slice(rest);
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `TopK(X, K, axis)`: values and int64 indices with the axis extent replaced by K.
pub(crate) fn top_k(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![
            Fact::new(dtype, None),
            Fact::new(Some(DType::I64), None),
        ]);
    };
    let axis = ctx.axis(ctx.attr_int("axis", -1), x.len())?;
    let k = match ctx.ints(1).as_deref() {
        Some(&[k]) => usize::try_from(k)
            .map(Dim::Known)
            .map_err(|_| ctx.invalid(format!("K is {k}")))?,
        _ => unknown(),
    };
    let mut out = x.to_vec();
    out[axis] = k;
    Ok(vec![
        Fact::shaped(dtype, out.clone()),
        Fact::shaped(Some(DType::I64), out),
    ])
}

/// `OneHot(indices, depth, values, axis)`: a new axis of extent `depth`, type of `values`.
pub(crate) fn one_hot(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(2);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let rank = x.len() + 1;
    let axis = ctx.axis(ctx.attr_int("axis", -1), rank)?;
    let depth = match ctx
        .floats(1)
        .or_else(|| Some(ctx.ints(1)?.iter().map(|&v| v as f64).collect()))
    {
        Some(d) if d.len() == 1 && d[0] >= 1.0 => Dim::Known(d[0] as usize),
        _ => unknown(),
    };
    let mut out = x.to_vec();
    out.insert(axis, depth);
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `NonZero`: `[rank, ?]` int64.
pub(crate) fn non_zero(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let shape = ctx.rank(0).map(|r| vec![Dim::Known(r), unknown()]);
    Ok(vec![Fact::new(Some(DType::I64), shape)])
}

/// `NonMaxSuppression`: `[?, 3]` int64.
pub(crate) fn non_max_suppression(_ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    Ok(vec![Fact::shaped(
        Some(DType::I64),
        vec![unknown(), Dim::Known(3)],
    )])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{s, sym, Case};
    use rtq_ir::{Attr, DType, Tensor};

    #[test]
    fn gather_inserts_index_shape() {
        let shape = Case::new("Gather")
            .input(DType::F32, vec![s(5), s(6), s(7)])
            .input(DType::I64, vec![sym("N"), s(2)])
            .attr("axis", Attr::Int(1))
            .shape();
        assert_eq!(shape, Some(vec![s(5), sym("N"), s(2), s(7)]));
        let shape = Case::new("Gather")
            .input(DType::F32, vec![s(5), s(6)])
            .constant(Tensor::from_i64(vec![], vec![0]))
            .shape();
        assert_eq!(shape, Some(vec![s(6)]));
    }

    #[test]
    fn gather_nd_and_elements() {
        let shape = Case::new("GatherND")
            .input(DType::F32, vec![s(2), s(3), s(4)])
            .input(DType::I64, vec![s(2), s(5), s(1)])
            .attr("batch_dims", Attr::Int(1))
            .shape();
        assert_eq!(shape, Some(vec![s(2), s(5), s(4)]));
        let shape = Case::new("GatherElements")
            .input(DType::F32, vec![s(2), s(3)])
            .input(DType::I64, vec![s(2), s(7)])
            .shape();
        assert_eq!(shape, Some(vec![s(2), s(7)]));
    }

    #[test]
    fn top_k_one_hot_non_zero() {
        let f = Case::new("TopK")
            .input(DType::F32, vec![sym("N"), s(100)])
            .ints(&[5])
            .outputs(2)
            .infer()
            .unwrap();
        assert_eq!(f[0].shape, Some(vec![sym("N"), s(5)]));
        assert_eq!(f[1].dtype, Some(DType::I64));
        let f = Case::new("OneHot")
            .input(DType::I64, vec![s(4)])
            .ints(&[10])
            .input(DType::F32, vec![s(2)])
            .infer()
            .unwrap();
        assert_eq!(f[0].shape, Some(vec![s(4), s(10)]));
        assert_eq!(f[0].dtype, Some(DType::F32));
        let shape = Case::new("NonZero")
            .input(DType::F32, vec![s(2), s(3)])
            .shape();
        assert_eq!(shape, Some(vec![s(2), sym("?")]));
    }
}
