//! Rules for ops that rearrange elements without changing their count: Reshape,
//! Flatten, Squeeze, Unsqueeze, Transpose, DepthToSpace, SpaceToDepth.

use super::ctx::{Fact, NodeCtx};
use super::dims::{product, quotient, unknown, unknown_shape};
use super::symbolic::{to_dim, SymInt};
use crate::PassError;
use rtq_ir::{format_shape, Dim, Shape};

/// `Reshape(data, shape)` with a constant or symbolically known target: `0` copies the
/// input extent (unless `allowzero`), `-1` is inferred from the element count.
pub(crate) fn reshape(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let input = ctx.shape(0);
    let Some(target) = ctx.sym_ints(1) else {
        // Only the rank is known when the target's length is.
        let shape = match ctx.shape(1) {
            Some([Dim::Known(n)]) => Some(unknown_shape(*n)),
            _ => None,
        };
        return Ok(vec![Fact::new(dtype, shape)]);
    };
    let allow_zero = ctx.attr_int("allowzero", 0) != 0;
    let mut out: Shape = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, t) in target.iter().enumerate() {
        let d = match t {
            SymInt::Int(0) if !allow_zero => match input {
                Some(x) => x.get(i).cloned().ok_or_else(|| {
                    ctx.invalid(format!(
                        "target dimension {i} is 0 (copy) but the input has rank {}",
                        x.len()
                    ))
                })?,
                None => unknown(),
            },
            SymInt::Int(-1) => {
                if infer_at.replace(i).is_some() {
                    return Err(ctx.invalid("target shape has more than one -1"));
                }
                unknown()
            }
            SymInt::Int(v) if *v < 0 => {
                return Err(ctx.invalid(format!("target dimension {i} is {v}")));
            }
            other => to_dim(other).unwrap_or_else(unknown),
        };
        out.push(d);
    }
    if let Some(x) = input {
        let others: Vec<Dim> = out
            .iter()
            .enumerate()
            .filter(|&(i, _)| Some(i) != infer_at)
            .map(|(_, d)| d.clone())
            .collect();
        let counts_differ = || {
            ctx.conflict(
                "element counts differ",
                ctx.describe(0),
                format!("target {}", format_shape(&out)),
            )
        };
        match infer_at {
            Some(i) => out[i] = quotient(x, &others).map_err(|_| counts_differ())?,
            None => match quotient(x, &out) {
                Ok(Dim::Known(1)) | Ok(Dim::Sym(_)) => {}
                Ok(Dim::Known(_)) | Err(()) => return Err(counts_differ()),
            },
        }
    }
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `Flatten(axis)`: `[prod(d[..axis]), prod(d[axis..])]`.
pub(crate) fn flatten(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::shaped(dtype, unknown_shape(2))]);
    };
    let rank = x.len() as i64;
    let axis = ctx.attr_int("axis", 1);
    let a = if axis < 0 { axis + rank } else { axis };
    if !(0..=rank).contains(&a) {
        return Err(ctx.invalid(format!("axis {axis} is out of range for rank {rank}")));
    }
    let (head, tail) = x.split_at(a as usize);
    Ok(vec![Fact::shaped(
        dtype,
        vec![product(head), product(tail)],
    )])
}

/// `Squeeze(data, axes?)`: removes the given axes (which must have extent 1), or all
/// extent-1 axes when `axes` is omitted.
pub(crate) fn squeeze(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let axes = match ctx.input(1) {
        Some(_) => match ctx.ints(1) {
            Some(a) => Some(a),
            None => return Ok(vec![Fact::new(dtype, None)]),
        },
        None => ctx.attr_ints("axes"),
    };
    let out = match axes {
        None if x.iter().any(|d| d.known().is_none()) => return Ok(vec![Fact::new(dtype, None)]),
        None => x.iter().filter(|d| **d != Dim::Known(1)).cloned().collect(),
        Some(axes) => {
            let axes = ctx.axes(&axes, x.len())?;
            for &a in &axes {
                if matches!(x[a], Dim::Known(n) if n != 1) {
                    return Err(ctx.invalid(format!(
                        "cannot squeeze axis {a} of extent {} ({})",
                        x[a],
                        ctx.describe(0)
                    )));
                }
            }
            x.iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, d)| d.clone())
                .collect()
        }
    };
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `Unsqueeze(data, axes)`: inserts extent-1 axes at the given output positions.
pub(crate) fn unsqueeze(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let axes = match ctx.input(1) {
        Some(_) => ctx.ints(1),
        None => ctx.attr_ints("axes"),
    };
    let (Some(x), Some(axes)) = (ctx.shape(0), axes) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let rank = x.len() + axes.len();
    let axes = ctx.axes(&axes, rank)?;
    let mut rest = x.iter();
    let out = (0..rank)
        .map(|i| {
            if axes.contains(&i) {
                Dim::Known(1)
            } else {
                rest.next().cloned().unwrap_or_else(unknown)
            }
        })
        .collect();
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `Transpose(perm)`: permuted axes (reversed by default).
pub(crate) fn transpose(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let perm = ctx
        .attr_ints("perm")
        .unwrap_or_else(|| (0..x.len() as i64).rev().collect());
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..x.len() as i64).collect::<Vec<_>>() {
        return Err(ctx.invalid(format!(
            "perm {perm:?} is not a permutation of the {} axes of {}",
            x.len(),
            ctx.describe(0)
        )));
    }
    let out = perm.iter().map(|&p| x[p as usize].clone()).collect();
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `DepthToSpace` / `SpaceToDepth` with `blocksize` b on `[N, C, H, W]`.
pub(crate) fn depth_space(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    if x.len() != 4 {
        return Err(ctx.invalid(format!("expected a 4-D input, got {}", ctx.describe(0))));
    }
    let b = usize::try_from(ctx.attr_int("blocksize", 0))
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| ctx.invalid("attribute `blocksize` must be positive"))?;
    let div = |d: &Dim, k: usize, what: &str| -> Result<Dim, PassError> {
        match d {
            Dim::Known(n) if n % k == 0 => Ok(Dim::Known(n / k)),
            Dim::Known(n) => Err(ctx.invalid(format!(
                "{what} extent {n} is not divisible by {k} ({})",
                ctx.describe(0)
            ))),
            _ if k == 1 => Ok(d.clone()),
            _ => Ok(unknown()),
        }
    };
    let Some(bb) = b.checked_mul(b) else {
        return Err(ctx.invalid(format!("blocksize {b} is too large")));
    };
    let mul = |d: &Dim| super::dims::scale(d, b);
    let out = if ctx.node.op_type == "DepthToSpace" {
        vec![
            x[0].clone(),
            div(&x[1], bb, "channel")?,
            mul(&x[2]),
            mul(&x[3]),
        ]
    } else {
        vec![
            x[0].clone(),
            super::dims::scale(&x[1], bb),
            div(&x[2], b, "height")?,
            div(&x[3], b, "width")?,
        ]
    };
    Ok(vec![Fact::shaped(dtype, out)])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{s, sym, Case};
    use rtq_ir::{Attr, DType};

    #[test]
    fn reshape_zero_and_minus_one() {
        let shape = Case::new("Reshape")
            .input(DType::F32, vec![sym("N"), s(512), s(1), s(1)])
            .ints(&[0, -1])
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(512)]));
        let shape = Case::new("Reshape")
            .input(DType::F32, vec![s(2), s(3), s(4)])
            .ints(&[-1, 4, 2])
            .shape();
        assert_eq!(shape, Some(vec![s(3), s(4), s(2)]));
        let shape = Case::new("Reshape")
            .input(DType::F32, vec![sym("N"), s(6)])
            .ints(&[-1, 4])
            .shape();
        assert_eq!(shape, Some(vec![sym("?"), s(4)]));
        // allowzero keeps a literal 0.
        let shape = Case::new("Reshape")
            .input(DType::F32, vec![s(0), s(3)])
            .ints(&[0, 3])
            .attr("allowzero", Attr::Int(1))
            .shape();
        assert_eq!(shape, Some(vec![s(0), s(3)]));
    }

    #[test]
    fn reshape_count_mismatch_is_a_conflict() {
        let err = Case::new("Reshape")
            .input(DType::F32, vec![s(2), s(3)])
            .ints(&[4, 2])
            .infer()
            .unwrap_err()
            .to_string();
        assert!(err.contains("[2,3]") && err.contains("[4,2]"), "{err}");
        let err = Case::new("Reshape")
            .input(DType::F32, vec![s(2), s(3)])
            .ints(&[-1, 4])
            .infer()
            .unwrap_err()
            .to_string();
        assert!(err.contains("element counts"), "{err}");
        assert!(Case::new("Reshape")
            .input(DType::F32, vec![s(2), s(3)])
            .ints(&[12])
            .infer()
            .is_err());
        // Symbols that cancel still prove the count.
        assert!(Case::new("Reshape")
            .input(DType::F32, vec![sym("N"), s(3)])
            .ints(&[0, 4])
            .infer()
            .is_err());
    }

    #[test]
    fn reshape_with_unknown_target_keeps_its_rank() {
        let shape = Case::new("Reshape")
            .input(DType::F32, vec![s(2), s(3)])
            .input(DType::I64, vec![s(3)])
            .shape();
        assert_eq!(shape, Some(vec![sym("?"), sym("?"), sym("?")]));
    }

    #[test]
    fn flatten_squeeze_unsqueeze_transpose() {
        let shape = Case::new("Flatten")
            .input(DType::F32, vec![sym("N"), s(2), s(3), s(4)])
            .attr("axis", Attr::Int(2))
            .shape();
        assert_eq!(shape, Some(vec![sym("?"), s(12)]));
        let shape = Case::new("Flatten")
            .input(DType::F32, vec![sym("N"), s(2), s(3)])
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(6)]));
        let shape = Case::new("Flatten")
            .input(DType::F32, vec![s(2), s(3)])
            .attr("axis", Attr::Int(0))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(6)]));

        let shape = Case::new("Squeeze")
            .input(DType::F32, vec![sym("N"), s(1), s(3), s(1)])
            .ints(&[1, -1])
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(3)]));
        let shape = Case::new("Squeeze")
            .input(DType::F32, vec![s(1), s(3), s(1)])
            .shape();
        assert_eq!(shape, Some(vec![s(3)]));
        // All-axes squeeze with a symbol: the result rank is unknowable.
        let shape = Case::new("Squeeze")
            .input(DType::F32, vec![sym("N"), s(3)])
            .shape();
        assert_eq!(shape, None);
        assert!(Case::new("Squeeze")
            .input(DType::F32, vec![s(2), s(3)])
            .ints(&[0])
            .infer()
            .is_err());

        let shape = Case::new("Unsqueeze")
            .input(DType::F32, vec![s(3), s(4)])
            .ints(&[0, -1])
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(3), s(4), s(1)]));
        let shape = Case::new("Unsqueeze")
            .input(DType::F32, vec![s(3)])
            .ints(&[1, 2])
            .shape();
        assert_eq!(shape, Some(vec![s(3), s(1), s(1)]));

        let shape = Case::new("Transpose")
            .input(DType::F32, vec![sym("N"), s(3), s(4)])
            .attr("perm", Attr::Ints(vec![0, 2, 1]))
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(4), s(3)]));
        let shape = Case::new("Transpose")
            .input(DType::F32, vec![s(2), s(3)])
            .shape();
        assert_eq!(shape, Some(vec![s(3), s(2)]));
        assert!(Case::new("Transpose")
            .input(DType::F32, vec![s(2), s(3)])
            .attr("perm", Attr::Ints(vec![0, 0]))
            .infer()
            .is_err());
    }

    #[test]
    fn depth_space_round_trip() {
        let shape = Case::new("DepthToSpace")
            .input(DType::F32, vec![s(1), s(12), s(5), s(6)])
            .attr("blocksize", Attr::Int(2))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(3), s(10), s(12)]));
        let shape = Case::new("SpaceToDepth")
            .input(DType::F32, vec![s(1), s(3), s(10), s(12)])
            .attr("blocksize", Attr::Int(2))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(12), s(5), s(6)]));
    }
}
