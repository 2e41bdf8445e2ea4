//! Concat and Split along one axis, for every element type.

use crate::ctx::OpCtx;
use crate::elem::{with_any, Storage};
use crate::par::{self, OutPtr, PAR_MIN_ELEMS};
use crate::registry::Kernel;
use crate::ExecError;
use rayon::prelude::*;
use rtq_ir::Tensor;

/// Concat/Split kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("Concat", concat), ("Split", split)];

/// Interleaves `outer` blocks of each part: block `o` of part `i` has `blocks[i]`
/// elements. Big outputs are copied block by block on every thread.
fn concat_typed<T: Clone + Send + Sync>(parts: &[&[T]], blocks: &[usize], outer: usize) -> Vec<T> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let row: usize = blocks.iter().sum();
    // Where part `i`'s block starts within each row of the output.
    let offsets: Vec<usize> = blocks
        .iter()
        .scan(0, |at, &b| {
            let start = *at;
            *at += b;
            Some(start)
        })
        .collect();
    let mut out = par::uninit_vec::<T>(total);
    let dst = &OutPtr(out.as_mut_ptr());
    // Copy `c`: block `c / parts` of part `c % parts`.
    let copy = |c: usize| {
        let (o, i) = (c / parts.len(), c % parts.len());
        let b = blocks[i];
        // SAFETY: copies write disjoint ranges `o * row + offsets[i]..+ b` of `out`,
        // which the blocks of every part fill exactly (`total` elements).
        let block = unsafe { std::slice::from_raw_parts_mut(dst.0.add(o * row + offsets[i]), b) };
        for (d, v) in block.iter_mut().zip(&parts[i][o * b..(o + 1) * b]) {
            d.write(v.clone());
        }
    };
    let copies = outer * parts.len();
    if total >= PAR_MIN_ELEMS && copies > 1 {
        (0..copies).into_par_iter().for_each(copy);
    } else {
        (0..copies).for_each(copy);
    }
    // SAFETY: every element was written by its block's copy.
    unsafe { par::assume_written(out) }
}

fn concat(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let inputs = ctx.variadic()?;
    let first = inputs[0];
    let rank = first.rank();
    if rank == 0 {
        return Err(ctx.err("cannot concatenate scalars"));
    }
    let axis = ctx.axis(
        ctx.attr("axis")
            .and_then(|a| a.as_int())
            .ok_or_else(|| ctx.err("attribute `axis` is required"))?,
        rank,
    )?;
    let mut out_shape = first.shape().to_vec();
    out_shape[axis] = 0;
    for t in &inputs {
        let compatible = t.rank() == rank
            && t.dtype() == first.dtype()
            && (0..rank).all(|a| a == axis || t.shape()[a] == first.shape()[a]);
        if !compatible {
            return Err(ctx.err(format!(
                "input {}{:?} does not match {}{:?} outside axis {axis}",
                t.dtype(),
                t.shape(),
                first.dtype(),
                first.shape()
            )));
        }
        out_shape[axis] += t.shape()[axis];
    }
    let outer: usize = first.shape()[..axis].iter().product();
    let inner: usize = first.shape()[axis + 1..].iter().product();
    let blocks: Vec<usize> = inputs.iter().map(|t| t.shape()[axis] * inner).collect();
    let data = with_any!(first.data(), T, _v => {
        let mut parts: Vec<&[T]> = Vec::with_capacity(inputs.len());
        for t in &inputs {
            parts.push(T::of(t.data()).ok_or_else(|| ctx.err("element types differ"))?);
        }
        T::into_data(concat_typed(&parts, &blocks, outer))
    });
    Ok(vec![ctx.tensor(out_shape, data)?])
}

/// Extents of the Split outputs along the axis of extent `dim`.
fn split_sizes(ctx: &OpCtx<'_>, dim: usize) -> Result<Vec<usize>, ExecError> {
    let explicit = match ctx.opt_ints_input(1)? {
        Some(s) => Some(s),
        None => ctx.attr_ints("split")?,
    };
    if let Some(s) = explicit {
        if s.iter().any(|&v| v < 0) || s.iter().map(|&v| v as i128).sum::<i128>() != dim as i128 {
            return Err(ctx.err(format!(
                "split {s:?} does not partition an axis of extent {dim}"
            )));
        }
        if !ctx.node.outputs.is_empty() && s.len() != ctx.node.outputs.len() {
            return Err(ctx.err(format!(
                "split {s:?} has {} parts but the node has {} outputs",
                s.len(),
                ctx.node.outputs.len()
            )));
        }
        return Ok(s.iter().map(|&v| v as usize).collect());
    }
    let parts = match ctx.attr_int("num_outputs", 0)? {
        n if n > 0 => n as usize,
        _ => ctx.num_outputs(),
    };
    // Equal parts; when uneven the last one is smaller (opset 18 rule).
    let size = dim.div_ceil(parts);
    let mut sizes = Vec::with_capacity(parts);
    let mut left = dim;
    for _ in 0..parts {
        let s = size.min(left);
        sizes.push(s);
        left -= s;
    }
    if left != 0 || (size * (parts - 1) > dim && dim > 0) {
        return Err(ctx.err(format!(
            "cannot split an axis of extent {dim} into {parts} parts"
        )));
    }
    Ok(sizes)
}

fn split(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, x.rank())?;
    let dim = x.shape()[axis];
    let sizes = split_sizes(ctx, dim)?;
    let outer: usize = x.shape()[..axis].iter().product();
    let inner: usize = x.shape()[axis + 1..].iter().product();
    let mut outputs = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for &s in &sizes {
        let mut shape = x.shape().to_vec();
        shape[axis] = s;
        let data = with_any!(x.data(), T, v => {
            let mut out: Vec<T> = Vec::with_capacity(outer * s * inner);
            for o in 0..outer {
                let base = (o * dim + start) * inner;
                out.extend_from_slice(&v[base..base + s * inner]);
            }
            T::into_data(out)
        });
        outputs.push(ctx.tensor(shape, data)?);
        start += s;
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Tensor};
    use rtq_test_support::node;

    #[test]
    fn concat_middle_axis_and_errors() {
        let a = Tensor::from_i64(vec![2, 1], vec![1, 2]);
        let b = Tensor::from_i64(vec![2, 2], vec![3, 4, 5, 6]);
        let n = node("Concat", &[("axis", Attr::Int(-1))], 1);
        let y = eval_node(&n, &[Some(&a), Some(&b)]).unwrap().remove(0);
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[2usize, 3][..], &[1, 3, 4, 2, 5, 6][..])
        );
        let empty = Tensor::from_i64(vec![2, 0], vec![]);
        let y = eval_node(&n, &[Some(&empty), Some(&a)]).unwrap().remove(0);
        assert_eq!(y.as_i64().unwrap(), &[1, 2]);
        let bad = Tensor::from_i64(vec![3, 1], vec![0; 3]);
        assert!(eval_node(&n, &[Some(&a), Some(&bad)]).is_err());
        let f = Tensor::from_f32(vec![2, 1], vec![0.0; 2]);
        assert!(eval_node(&n, &[Some(&a), Some(&f)]).is_err());
        assert!(eval_node(&node("Concat", &[], 1), &[Some(&a)]).is_err());
    }

    #[test]
    fn big_concats_copy_every_block_in_place() {
        // Parts of different extents, on the middle axis, past the parallel threshold.
        let (outer, inner) = (3, 4096);
        let extents = [2usize, 5, 1];
        let parts: Vec<Vec<i64>> = extents
            .iter()
            .enumerate()
            .map(|(i, &e)| {
                (0..outer * e * inner)
                    .map(|v| (v * 10 + i) as i64)
                    .collect()
            })
            .collect();
        let tensors: Vec<Tensor> = parts
            .iter()
            .zip(extents)
            .map(|(p, e)| Tensor::from_i64(vec![outer, e, inner], p.clone()))
            .collect();
        let inputs: Vec<Option<&Tensor>> = tensors.iter().map(Some).collect();
        let n = node("Concat", &[("axis", Attr::Int(1))], 1);
        let y = eval_node(&n, &inputs).unwrap().remove(0);
        assert_eq!(y.shape(), &[outer, 8, inner]);
        let mut expected = Vec::new();
        for o in 0..outer {
            for (p, e) in parts.iter().zip(extents) {
                expected.extend_from_slice(&p[o * e * inner..(o + 1) * e * inner]);
            }
        }
        assert_eq!(y.as_i64().unwrap(), &expected[..]);
        // Strings take the same path.
        let words: Vec<String> = (0..40_000).map(|v| v.to_string()).collect();
        let (a, b) = words.split_at(15_000);
        let joined = super::concat_typed(&[a, b], &[15_000, 25_000], 1);
        assert_eq!(joined, words);
    }

    #[test]
    fn split_explicit_equal_and_uneven() {
        let x = Tensor::from_f32(vec![2, 5], (0..10).map(|v| v as f32).collect());
        let sizes = Tensor::from_i64(vec![2], vec![2, 3]);
        let out = eval_node(
            &node("Split", &[("axis", Attr::Int(1))], 2),
            &[Some(&x), Some(&sizes)],
        )
        .unwrap();
        assert_eq!(out[0].as_f32().unwrap(), &[0.0, 1.0, 5.0, 6.0]);
        assert_eq!(out[1].shape(), &[2, 3]);
        assert_eq!(out[1].as_f32().unwrap(), &[2.0, 3.0, 4.0, 7.0, 8.0, 9.0]);
        let out = eval_node(&node("Split", &[], 2), &[Some(&x)]).unwrap();
        assert_eq!(out[1].as_f32().unwrap(), &[5.0, 6.0, 7.0, 8.0, 9.0]);
        let out = eval_node(&node("Split", &[("axis", Attr::Int(1))], 3), &[Some(&x)]).unwrap();
        assert_eq!(
            out.iter().map(|t| t.shape()[1]).collect::<Vec<_>>(),
            vec![2, 2, 1]
        );
        let bad = Tensor::from_i64(vec![2], vec![2, 2]);
        assert!(eval_node(
            &node("Split", &[("axis", Attr::Int(1))], 2),
            &[Some(&x), Some(&bad)]
        )
        .is_err());
    }
}
