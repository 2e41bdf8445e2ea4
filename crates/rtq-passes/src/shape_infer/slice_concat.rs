//! Rules for ops that change extents along axes: Concat, Split, Slice, Pad, Expand, Tile.

use super::ctx::{Fact, NodeCtx};
use super::dims::{broadcast_shapes, offset, unify, unknown, unknown_shape};
use super::symbolic::{slice_indices, to_dim};
use crate::PassError;
use rtq_ir::{format_shape, Dim, Shape};

/// Slice ends at or past this bound mean "to the end" whatever the extent.
const OPEN_END: i64 = i32::MAX as i64;

/// `Concat(axis)`: non-axis extents must agree; the axis extent is the sum.
pub(crate) fn concat(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = (0..ctx.num_inputs()).find_map(|s| ctx.dtype(s));
    let mut shapes: Vec<(usize, &[Dim])> = Vec::new();
    let mut all_known = true;
    for slot in 0..ctx.num_inputs() {
        match ctx.shape(slot) {
            Some(s) => shapes.push((slot, s)),
            None => all_known = false,
        }
    }
    let Some(&(first_slot, first)) = shapes.first() else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let rank = first.len();
    let axis = ctx.axis(ctx.attr_int("axis", 0), rank.max(1))?;
    let mut out: Shape = first.to_vec();
    let mut sum = Some(0usize);
    for &(slot, s) in &shapes {
        if s.len() != rank {
            return Err(ctx.conflict(
                "input ranks differ",
                ctx.describe(first_slot),
                ctx.describe(slot),
            ));
        }
        for (i, d) in s.iter().enumerate() {
            if i == axis {
                sum = sum.zip(d.known()).and_then(|(a, b)| a.checked_add(b));
            } else {
                out[i] = unify(&out[i], d).ok_or_else(|| {
                    ctx.conflict(
                        format!("extents differ on axis {i} (concatenating on axis {axis})"),
                        ctx.describe(first_slot),
                        ctx.describe(slot),
                    )
                })?;
            }
        }
    }
    if rank > 0 {
        out[axis] = match sum {
            Some(n) if all_known => Dim::Known(n),
            _ if all_known && shapes.len() == 1 => first[axis].clone(),
            _ => unknown(),
        };
    }
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `Split(input, split?)` along `axis`: sizes from `split`, the `num_outputs` attribute
/// (last chunk smaller) or equal parts.
pub(crate) fn split(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let n = ctx.node.outputs.len();
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None); n]);
    };
    let axis = ctx.axis(ctx.attr_int("axis", 0), x.len())?;
    let sizes: Vec<Dim> = if ctx.input(1).is_some() {
        match ctx.ints(1) {
            Some(split) => {
                if split.len() != n {
                    return Err(ctx.invalid(format!(
                        "split {split:?} has {} entries for {n} outputs",
                        split.len()
                    )));
                }
                if split.iter().any(|&v| v < 0) {
                    return Err(ctx.invalid(format!("split {split:?} holds a negative size")));
                }
                let total: i128 = split.iter().map(|&v| i128::from(v)).sum();
                if let Dim::Known(d) = x[axis] {
                    if total != d as i128 {
                        return Err(ctx.conflict(
                            format!("split sizes {split:?} do not add up to axis {axis}"),
                            ctx.describe(0),
                            ctx.describe(1),
                        ));
                    }
                }
                split.iter().map(|&v| Dim::Known(v as usize)).collect()
            }
            None => vec![unknown(); n],
        }
    } else if let Some(Dim::Known(d)) = x.get(axis) {
        let d = *d;
        let parts = usize::try_from(ctx.attr_int("num_outputs", n as i64))
            .unwrap_or(n)
            .max(1);
        if ctx.node.attr("num_outputs").is_some() {
            let chunk = d.div_ceil(parts);
            (0..n)
                .map(|i| Dim::Known(d.saturating_sub(i.saturating_mul(chunk)).min(chunk)))
                .collect()
        } else if d % n.max(1) == 0 {
            vec![Dim::Known(d / n.max(1)); n]
        } else {
            return Err(ctx.invalid(format!(
                "axis {axis} of extent {d} does not split evenly into {n} outputs"
            )));
        }
    } else {
        vec![if n == 1 { x[axis].clone() } else { unknown() }; n]
    };
    Ok(sizes
        .into_iter()
        .map(|d| {
            let mut s = x.to_vec();
            s[axis] = d;
            Fact::shaped(dtype, s)
        })
        .collect())
}

/// `Slice(data, starts, ends, axes?, steps?)` with constant parameters.
pub(crate) fn slice(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let rank = x.len();
    let axes = match ctx.input(3) {
        Some(_) => ctx.ints(3),
        None => ctx.ints(1).map(|s| (0..s.len() as i64).collect()),
    };
    let Some(axes) = axes else {
        return Ok(vec![Fact::shaped(dtype, unknown_shape(rank))]);
    };
    let axes = ctx.axes(&axes, rank)?;
    let (starts, ends) = (ctx.ints(1), ctx.ints(2));
    let steps = match ctx.input(4) {
        Some(_) => ctx.ints(4),
        None => Some(vec![1; axes.len()]),
    };
    let mut out = x.to_vec();
    let (Some(starts), Some(ends), Some(steps)) = (starts, ends, steps) else {
        for &a in &axes {
            out[a] = unknown();
        }
        return Ok(vec![Fact::shaped(dtype, out)]);
    };
    if starts.len() != axes.len() || ends.len() != axes.len() || steps.len() != axes.len() {
        return Err(ctx.invalid(format!(
            "starts {starts:?}, ends {ends:?}, axes and steps {steps:?} differ in length"
        )));
    }
    for (i, &a) in axes.iter().enumerate() {
        let (start, end, step) = (starts[i], ends[i], steps[i]);
        if step == 0 {
            return Err(ctx.invalid(format!("step 0 on axis {a}")));
        }
        out[a] = match &x[a] {
            Dim::Known(n) => Dim::Known(slice_indices(start, end, step, *n as i64).len()),
            d if start == 0 && step == 1 && end >= OPEN_END => d.clone(),
            d if start == -1 && step == -1 && end <= -OPEN_END => d.clone(),
            _ => unknown(),
        };
    }
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `Pad(data, pads, constant_value?, axes?)`: each extent grows by its begin and end pads.
pub(crate) fn pad(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let rank = x.len();
    let axes = match ctx.input(3) {
        Some(_) => match ctx.ints(3) {
            Some(a) => ctx.axes(&a, rank)?,
            None => return Ok(vec![Fact::shaped(dtype, unknown_shape(rank))]),
        },
        None => (0..rank).collect(),
    };
    let pads = match ctx.input(1) {
        Some(_) => ctx.ints(1),
        None => ctx.attr_ints("pads"),
    };
    let Some(pads) = pads else {
        let mut out = x.to_vec();
        for &a in &axes {
            out[a] = unknown();
        }
        return Ok(vec![Fact::shaped(dtype, out)]);
    };
    if pads.len() != 2 * axes.len() {
        return Err(ctx.invalid(format!(
            "pads {pads:?} need {} entries for {} axes",
            2 * axes.len(),
            axes.len()
        )));
    }
    let mut out = x.to_vec();
    for (i, &a) in axes.iter().enumerate() {
        let total = pads[i].saturating_add(pads[i + axes.len()]);
        out[a] = offset(&x[a], total).ok_or_else(|| {
            ctx.invalid(format!(
                "pads {pads:?} leave a negative extent on axis {a} of {}",
                ctx.describe(0)
            ))
        })?;
    }
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `Expand(input, shape)`: bidirectional broadcast of the input with the target shape.
pub(crate) fn expand(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let target: Option<Shape> = match ctx.sym_ints(1) {
        Some(t) => Some(
            t.iter()
                .map(|v| to_dim(v).ok_or_else(|| ctx.invalid(format!("target shape holds {v:?}"))))
                .collect::<Result<_, _>>()?,
        ),
        None => match ctx.shape(1) {
            Some([Dim::Known(n)]) => Some(unknown_shape(*n)),
            _ => None,
        },
    };
    let (Some(x), Some(target)) = (ctx.shape(0), target) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let out = broadcast_shapes(x, &target).map_err(|_| {
        ctx.conflict(
            "input does not broadcast to the target shape",
            ctx.describe(0),
            format!("target {}", format_shape(&target)),
        )
    })?;
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `Tile(input, repeats)`: each extent multiplied by its repeat count.
pub(crate) fn tile(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let Some(repeats) = ctx.ints(1) else {
        return Ok(vec![Fact::shaped(dtype, unknown_shape(x.len()))]);
    };
    if repeats.len() != x.len() || repeats.iter().any(|&r| r < 0) {
        return Err(ctx.invalid(format!(
            "repeats {repeats:?} do not fit {}",
            ctx.describe(0)
        )));
    }
    let out = x
        .iter()
        .zip(&repeats)
        .map(|(d, &r)| super::dims::scale(d, r as usize))
        .collect();
    Ok(vec![Fact::shaped(dtype, out)])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{s, sym, Case};
    use rtq_ir::{Attr, DType};

    #[test]
    fn concat_sums_axis_and_unifies_others() {
        let shape = Case::new("Concat")
            .input(DType::F32, vec![sym("N"), s(3), s(4)])
            .input(DType::F32, vec![s(1), s(5), s(4)])
            .attr("axis", Attr::Int(1))
            .shape();
        // Axis 0: N unified with 1 gives 1.
        assert_eq!(shape, Some(vec![s(1), s(8), s(4)]));
        let shape = Case::new("Concat")
            .input(DType::F32, vec![sym("N"), s(3)])
            .input(DType::F32, vec![sym("N"), sym("K")])
            .attr("axis", Attr::Int(-1))
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), sym("?")]));
        // One input of unknown shape: the rank and the other axes still follow.
        let shape = Case::new("Concat")
            .input(DType::F32, vec![sym("N"), s(3)])
            .unknown_input(DType::F32)
            .attr("axis", Attr::Int(1))
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), sym("?")]));
    }

    #[test]
    fn concat_conflict_names_node_and_both_shapes() {
        let err = Case::new("Concat")
            .input(DType::F32, vec![s(1), s(3), s(4)])
            .input(DType::F32, vec![s(1), s(2), s(5)])
            .attr("axis", Attr::Int(1))
            .infer()
            .unwrap_err()
            .to_string();
        assert!(err.contains("node `n`") && err.contains("Concat"), "{err}");
        assert!(err.contains("[1,3,4]") && err.contains("[1,2,5]"), "{err}");
    }

    #[test]
    fn split_variants() {
        let f = Case::new("Split")
            .input(DType::F32, vec![s(2), s(10)])
            .ints(&[3, 7])
            .attr("axis", Attr::Int(1))
            .outputs(2)
            .infer()
            .unwrap();
        assert_eq!(f[0].shape, Some(vec![s(2), s(3)]));
        assert_eq!(f[1].shape, Some(vec![s(2), s(7)]));
        let f = Case::new("Split")
            .input(DType::F32, vec![s(6), s(2)])
            .outputs(3)
            .infer()
            .unwrap();
        assert!(f.iter().all(|f| f.shape == Some(vec![s(2), s(2)])));
        let f = Case::new("Split")
            .input(DType::F32, vec![s(7)])
            .attr("num_outputs", Attr::Int(3))
            .outputs(3)
            .infer()
            .unwrap();
        let sizes: Vec<_> = f
            .iter()
            .map(|f| f.shape.clone().unwrap()[0].clone())
            .collect();
        assert_eq!(sizes, vec![s(3), s(3), s(1)]);
        assert!(Case::new("Split")
            .input(DType::F32, vec![s(2), s(10)])
            .ints(&[3, 6])
            .attr("axis", Attr::Int(1))
            .outputs(2)
            .infer()
            .is_err());
    }

    #[test]
    fn slice_with_negative_steps_and_open_ends() {
        let shape = Case::new("Slice")
            .input(DType::F32, vec![sym("N"), s(10), s(8)])
            .ints(&[0, -1, 1])
            .ints(&[i64::MAX, i64::MIN, 7])
            .ints(&[0, 1, 2])
            .ints(&[1, -2, 3])
            .shape();
        // Axis 1: 9, 7, 5, 3, 1 -> 5; axis 2: 1, 4 -> 2.
        assert_eq!(shape, Some(vec![sym("N"), s(5), s(2)]));
        let shape = Case::new("Slice")
            .input(DType::F32, vec![s(4), sym("T")])
            .ints(&[1])
            .ints(&[3])
            .ints(&[1])
            .shape();
        assert_eq!(shape, Some(vec![s(4), sym("?")]));
        // Non-constant starts: only the sliced axes become unknown.
        let shape = Case::new("Slice")
            .input(DType::F32, vec![s(4), s(5)])
            .input(DType::I64, vec![s(1)])
            .ints(&[3])
            .ints(&[1])
            .shape();
        assert_eq!(shape, Some(vec![s(4), sym("?")]));
    }

    #[test]
    fn pad_expand_tile() {
        let shape = Case::new("Pad")
            .input(DType::F32, vec![sym("N"), s(3), s(4)])
            .ints(&[0, 1, 2, 0, -1, 2])
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(3), s(8)]));
        let shape = Case::new("Pad")
            .input(DType::F32, vec![s(1), s(3), s(4), s(4)])
            .ints(&[1, 1, 1, 1])
            .none()
            .ints(&[2, 3])
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(3), s(6), s(6)]));

        let shape = Case::new("Expand")
            .input(DType::F32, vec![s(3), s(1)])
            .ints(&[2, 1, 4])
            .shape();
        assert_eq!(shape, Some(vec![s(2), s(3), s(4)]));
        assert!(Case::new("Expand")
            .input(DType::F32, vec![s(3)])
            .ints(&[4])
            .infer()
            .is_err());

        let shape = Case::new("Tile")
            .input(DType::F32, vec![s(2), sym("N")])
            .ints(&[3, 1])
            .shape();
        assert_eq!(shape, Some(vec![s(6), sym("N")]));
    }
}
