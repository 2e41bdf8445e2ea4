//! Rules for reductions: the `Reduce*` family and `ArgMax`/`ArgMin`.

use super::ctx::{Fact, NodeCtx};
use super::dims::unknown_shape;
use crate::PassError;
use rtq_ir::{DType, Dim, Shape};

/// `Reduce*`: axes from the `axes` attribute or (ReduceSum, and opset-18 forms) input 1;
/// `keepdims` (default 1) keeps reduced axes as 1; empty axes reduce everything unless
/// `noop_with_empty_axes`.
pub(crate) fn reduce(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let keep = ctx.attr_int("keepdims", 1) != 0;
    let axes = match (ctx.attr_ints("axes"), ctx.input(1)) {
        (Some(a), _) => a,
        (None, Some(_)) => match ctx.ints(1) {
            Some(a) => a,
            // Unknown axes: the rank survives only with keepdims.
            None => {
                let shape = keep.then(|| unknown_shape(x.len()));
                return Ok(vec![Fact::new(dtype, shape)]);
            }
        },
        (None, None) => Vec::new(),
    };
    if axes.is_empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0 {
        return Ok(vec![Fact::shaped(dtype, x.to_vec())]);
    }
    let axes = if axes.is_empty() {
        (0..x.len()).collect()
    } else {
        ctx.axes(&axes, x.len())?
    };
    Ok(vec![Fact::shaped(dtype, reduced(x, &axes, keep))])
}

/// `ArgMax` / `ArgMin`: one axis, int64 result.
pub(crate) fn arg_reduce(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(Some(DType::I64), None)]);
    };
    let axis = ctx.axis(ctx.attr_int("axis", 0), x.len().max(1))?;
    let keep = ctx.attr_int("keepdims", 1) != 0;
    Ok(vec![Fact::shaped(
        Some(DType::I64),
        reduced(x, &[axis], keep),
    )])
}

fn reduced(x: &[Dim], axes: &[usize], keep: bool) -> Shape {
    x.iter()
        .enumerate()
        .filter_map(|(i, d)| match (axes.contains(&i), keep) {
            (false, _) => Some(d.clone()),
            (true, true) => Some(Dim::Known(1)),
            (true, false) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{s, sym, Case};
    use rtq_ir::{Attr, DType};

    #[test]
    fn reduce_axes_keepdims_and_all() {
        let shape = Case::new("ReduceMean")
            .input(DType::F32, vec![sym("N"), s(3), s(4), s(5)])
            .attr("axes", Attr::Ints(vec![2, -1]))
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(3), s(1), s(1)]));
        let shape = Case::new("ReduceSum")
            .input(DType::F32, vec![sym("N"), s(3), s(4)])
            .ints(&[1])
            .attr("keepdims", Attr::Int(0))
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(4)]));
        let shape = Case::new("ReduceMax")
            .input(DType::F32, vec![s(2), s(3)])
            .attr("keepdims", Attr::Int(0))
            .shape();
        assert_eq!(shape, Some(vec![]));
        let shape = Case::new("ReduceSum")
            .input(DType::F32, vec![s(2), s(3)])
            .ints(&[])
            .attr("noop_with_empty_axes", Attr::Int(1))
            .shape();
        assert_eq!(shape, Some(vec![s(2), s(3)]));
        let shape = Case::new("ReduceSum")
            .input(DType::F32, vec![s(2), s(3)])
            .input(DType::I64, vec![s(1)])
            .shape();
        assert_eq!(shape, Some(vec![sym("?"), sym("?")]));
    }

    #[test]
    fn arg_max_is_int64() {
        let f = Case::new("ArgMax")
            .input(DType::F32, vec![sym("N"), s(10)])
            .attr("axis", Attr::Int(1))
            .attr("keepdims", Attr::Int(0))
            .infer()
            .unwrap();
        assert_eq!(f[0].dtype, Some(DType::I64));
        assert_eq!(f[0].shape, Some(vec![sym("N")]));
    }
}
