//! Indexed reads: Gather, GatherElements and GatherND (negative indices count from the
//! end; out-of-range indices are errors).

use crate::ctx::OpCtx;
use crate::elem::{with_any, Storage};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::Tensor;

/// Gather kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("Gather", gather),
    ("GatherElements", gather_elements),
    ("GatherND", gather_nd),
];

/// The indices input (`slot`) as i64, validated to be integers.
pub(crate) fn indices(ctx: &OpCtx<'_>, slot: usize) -> Result<Vec<i64>, ExecError> {
    ctx.ints_input(slot)
}

/// `i` normalised into `0..dim`, or an error naming it.
pub(crate) fn wrap_index(ctx: &OpCtx<'_>, i: i64, dim: usize) -> Result<usize, ExecError> {
    let d = dim as i64;
    let j = if i < 0 { i + d } else { i };
    if j < 0 || j >= d {
        return Err(ctx.err(format!(
            "index {i} is out of range for an axis of extent {dim}"
        )));
    }
    Ok(j as usize)
}

fn gather(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let idx_t = ctx.input(1)?;
    if x.rank() == 0 {
        return Err(ctx.err("data must be at least 1-D"));
    }
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, x.rank())?;
    let dim = x.shape()[axis];
    let idx: Vec<usize> = indices(ctx, 1)?
        .into_iter()
        .map(|i| wrap_index(ctx, i, dim))
        .collect::<Result<_, _>>()?;
    let outer: usize = x.shape()[..axis].iter().product();
    let inner: usize = x.shape()[axis + 1..].iter().product();
    let mut shape = x.shape()[..axis].to_vec();
    shape.extend_from_slice(idx_t.shape());
    shape.extend_from_slice(&x.shape()[axis + 1..]);
    let data = with_any!(x.data(), T, v => {
        let mut out: Vec<T> = Vec::with_capacity(outer * idx.len() * inner);
        for o in 0..outer {
            for &i in &idx {
                let base = (o * dim + i) * inner;
                out.extend_from_slice(&v[base..base + inner]);
            }
        }
        T::into_data(out)
    });
    Ok(vec![ctx.tensor(shape, data)?])
}

/// Row-major coordinates of flat index `flat` in `shape`, written into `coords`.
fn unravel(mut flat: usize, shape: &[usize], coords: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        coords[d] = flat % shape[d];
        flat /= shape[d];
    }
}

/// The elements of `v` at `offsets`.
fn pick<T: Clone>(v: &[T], offsets: &[usize]) -> Vec<T> {
    offsets.iter().map(|&o| v[o].clone()).collect()
}

fn gather_elements(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let idx_t = ctx.input(1)?;
    let rank = x.rank();
    if idx_t.rank() != rank || rank == 0 {
        return Err(ctx.err(format!(
            "indices {:?} must have the rank of data {:?}",
            idx_t.shape(),
            x.shape()
        )));
    }
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, rank)?;
    let ishape = idx_t.shape();
    if (0..rank).any(|a| a != axis && ishape[a] > x.shape()[a]) {
        return Err(ctx.err(format!(
            "indices {ishape:?} exceed data {:?} outside axis {axis}",
            x.shape()
        )));
    }
    let strides: Vec<usize> = (0..rank)
        .map(|a| x.shape()[a + 1..].iter().product())
        .collect();
    let raw = indices(ctx, 1)?;
    let mut coords = vec![0usize; rank];
    let mut offsets = Vec::with_capacity(raw.len());
    for (flat, &i) in raw.iter().enumerate() {
        unravel(flat, ishape, &mut coords);
        coords[axis] = wrap_index(ctx, i, x.shape()[axis])?;
        offsets.push(
            coords
                .iter()
                .zip(&strides)
                .map(|(c, s)| c * s)
                .sum::<usize>(),
        );
    }
    let data = with_any!(x.data(), T, v => {
        T::into_data(pick::<T>(v, &offsets))
    });
    Ok(vec![ctx.tensor(ishape.to_vec(), data)?])
}

fn gather_nd(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let idx_t = ctx.input(1)?;
    let b = ctx.attr_int("batch_dims", 0)?;
    let (r, q) = (x.rank(), idx_t.rank());
    if b < 0 || q == 0 || b as usize >= q.min(r.max(1)) {
        return Err(ctx.err(format!(
            "batch_dims={b} is invalid for data rank {r} and indices rank {q}"
        )));
    }
    let b = b as usize;
    let k = idx_t.shape()[q - 1];
    if k < 1 || b + k > r || x.shape()[..b] != idx_t.shape()[..b] {
        return Err(ctx.err(format!(
            "indices {:?} do not fit data {:?} with batch_dims={b}",
            idx_t.shape(),
            x.shape()
        )));
    }
    let batches: usize = x.shape()[..b].iter().product();
    let slice: usize = x.shape()[b + k..].iter().product();
    let batch_len: usize = x.shape()[b..].iter().product();
    let tuples_per_batch: usize = idx_t.shape()[b..q - 1].iter().product();
    let strides: Vec<usize> = (b..b + k)
        .map(|a| x.shape()[a + 1..].iter().product())
        .collect();
    let raw = indices(ctx, 1)?;
    let mut starts = Vec::with_capacity(batches * tuples_per_batch);
    for bi in 0..batches {
        for t in 0..tuples_per_batch {
            let tuple = &raw[(bi * tuples_per_batch + t) * k..][..k];
            let mut off = bi * batch_len;
            for (j, &i) in tuple.iter().enumerate() {
                off += wrap_index(ctx, i, x.shape()[b + j])? * strides[j];
            }
            starts.push(off);
        }
    }
    let mut shape = idx_t.shape()[..q - 1].to_vec();
    shape.extend_from_slice(&x.shape()[b + k..]);
    let data = with_any!(x.data(), T, v => {
        let mut out: Vec<T> = Vec::with_capacity(starts.len() * slice);
        for &s in &starts {
            out.extend_from_slice(&v[s..s + slice]);
        }
        T::into_data(out)
    });
    Ok(vec![ctx.tensor(shape, data)?])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(op: &str, attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node(op, attrs, 1)
    }

    fn run(op: &str, attrs: &[(&str, Attr)], x: &Tensor, i: &Tensor) -> Result<Tensor, String> {
        eval_node(&node(op, attrs), &[Some(x), Some(i)])
            .map(|mut v| v.remove(0))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn gather_axes_and_negative_indices() {
        let x = Tensor::from_f32(vec![3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let i = Tensor::from_i64(vec![2, 2], vec![0, -1, 1, 0]);
        let y = run("Gather", &[], &x, &i).unwrap();
        assert_eq!(y.shape(), &[2, 2, 2]);
        assert_eq!(
            y.as_f32().unwrap(),
            &[1.0, 2.0, 5.0, 6.0, 3.0, 4.0, 1.0, 2.0]
        );
        let s = Tensor::from_i64(vec![], vec![1]);
        let y = run("Gather", &[("axis", Attr::Int(1))], &x, &s).unwrap();
        assert_eq!(
            (y.shape(), y.as_f32().unwrap()),
            (&[3usize][..], &[2.0, 4.0, 6.0][..])
        );
        // Shape arithmetic on i64 data.
        let shape = Tensor::from_i64(vec![4], vec![1, 3, 224, 224]);
        let y = run("Gather", &[], &shape, &s).unwrap();
        assert_eq!(y.as_i64().unwrap(), &[3]);
        let bad = Tensor::from_i64(vec![1], vec![3]);
        assert!(run("Gather", &[], &x, &bad)
            .unwrap_err()
            .contains("out of range"));
    }

    #[test]
    fn gather_elements_and_nd() {
        let x = Tensor::from_i64(vec![2, 2], vec![1, 2, 3, 4]);
        let i = Tensor::from_i64(vec![2, 2], vec![0, 0, 1, 0]);
        let y = run("GatherElements", &[("axis", Attr::Int(1))], &x, &i).unwrap();
        assert_eq!(y.as_i64().unwrap(), &[1, 1, 4, 3]);
        let i = Tensor::from_i64(vec![1, 2], vec![1, -2]);
        let y = run("GatherElements", &[], &x, &i).unwrap();
        assert_eq!(y.as_i64().unwrap(), &[3, 2]);
        // GatherND: pick rows and elements.
        let i = Tensor::from_i64(vec![2, 2], vec![0, 0, 1, 1]);
        assert_eq!(
            run("GatherND", &[], &x, &i).unwrap().as_i64().unwrap(),
            &[1, 4]
        );
        let i = Tensor::from_i64(vec![2, 1], vec![1, 0]);
        assert_eq!(
            run("GatherND", &[], &x, &i).unwrap().as_i64().unwrap(),
            &[3, 4, 1, 2]
        );
        // batch_dims = 1: one index per batch row.
        let i = Tensor::from_i64(vec![2, 1], vec![1, 0]);
        let y = run("GatherND", &[("batch_dims", Attr::Int(1))], &x, &i).unwrap();
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[2usize][..], &[2, 3][..])
        );
    }
}
