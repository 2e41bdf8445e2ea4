//! Ops that change only the shape: Reshape, Flatten, Squeeze, Unsqueeze; and the shape
//! queries Shape and Size.

use crate::ctx::OpCtx;
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{Tensor, TensorData};

/// Shape kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("Reshape", reshape),
    ("Flatten", flatten),
    ("Squeeze", squeeze),
    ("Unsqueeze", unsqueeze),
    ("Shape", shape),
    ("Size", size),
];

/// `x` with the same elements under `shape`.
fn with_shape(ctx: &OpCtx<'_>, x: &Tensor, shape: Vec<usize>) -> Result<Tensor, ExecError> {
    x.clone()
        .reshaped(shape.clone())
        .map_err(|_| ctx.err(format!("cannot reshape {:?} to {shape:?}", x.shape())))
}

/// Resolves a Reshape target: 0 copies the input extent (unless `allowzero`), -1 is
/// inferred from the element count.
pub(crate) fn resolve_reshape(
    ctx: &OpCtx<'_>,
    input: &[usize],
    target: &[i64],
    allowzero: bool,
) -> Result<Vec<usize>, ExecError> {
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 => {
                if infer.replace(i).is_some() {
                    return Err(ctx.err(format!("shape {target:?} has more than one -1")));
                }
                out.push(1);
            }
            0 if !allowzero => {
                let copied = input.get(i).copied().ok_or_else(|| {
                    ctx.err(format!(
                        "shape {target:?} copies dimension {i} (0) but the input {input:?} has rank {}",
                        input.len()
                    ))
                })?;
                out.push(copied);
            }
            d if d >= 0 => out.push(d as usize),
            d => return Err(ctx.err(format!("invalid extent {d} in shape {target:?}"))),
        }
    }
    let total: usize = input.iter().product();
    if let Some(i) = infer {
        let known = out
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .try_fold(1usize, |acc, (_, &d)| acc.checked_mul(d))
            .unwrap_or(0);
        if known == 0 || !total.is_multiple_of(known) {
            return Err(ctx.err(format!(
                "cannot infer -1 in shape {target:?} for {total} elements (input {input:?})"
            )));
        }
        out[i] = total / known;
    }
    let known = out.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if known != Some(total) {
        return Err(ctx.err(format!(
            "shape {target:?} does not hold the {total} elements of input {input:?}"
        )));
    }
    Ok(out)
}

fn reshape(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let target = ctx.ints_input(1)?;
    let allowzero = ctx.attr_int("allowzero", 0)? != 0;
    let shape = resolve_reshape(ctx, x.shape(), &target, allowzero)?;
    Ok(vec![with_shape(ctx, x, shape)?])
}

fn flatten(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let r = x.rank() as i64;
    let axis = ctx.attr_int("axis", 1)?;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a > r {
        return Err(ctx.err(format!("axis {axis} is out of range for rank {r}")));
    }
    let a = a as usize;
    let outer: usize = x.shape()[..a].iter().product();
    let inner: usize = x.shape()[a..].iter().product();
    Ok(vec![with_shape(ctx, x, vec![outer, inner])?])
}

/// Axes from input 1 (opset 13) or, failing that, the `axes` attribute.
fn axes_arg(ctx: &OpCtx<'_>) -> Result<Option<Vec<i64>>, ExecError> {
    match ctx.opt_ints_input(1)? {
        Some(a) => Ok(Some(a)),
        None => ctx.attr_ints("axes"),
    }
}

fn squeeze(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let shape = x.shape();
    let out: Vec<usize> = match axes_arg(ctx)? {
        None => shape.iter().copied().filter(|&d| d != 1).collect(),
        Some(axes) if axes.is_empty() => shape.iter().copied().filter(|&d| d != 1).collect(),
        Some(axes) => {
            let axes = ctx.axes(&axes, x.rank())?;
            if let Some(&a) = axes.iter().find(|&&a| shape[a] != 1) {
                return Err(ctx.err(format!(
                    "cannot squeeze axis {a} of extent {} (shape {shape:?})",
                    shape[a]
                )));
            }
            (0..x.rank())
                .filter(|a| !axes.contains(a))
                .map(|a| shape[a])
                .collect()
        }
    };
    Ok(vec![with_shape(ctx, x, out)?])
}

fn unsqueeze(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let axes = axes_arg(ctx)?.ok_or_else(|| ctx.err("axes are required"))?;
    let rank = x.rank() + axes.len();
    let axes = ctx.axes(&axes, rank)?;
    let mut dims = x.shape().iter().copied();
    let out: Vec<usize> = (0..rank)
        .map(|a| {
            if axes.contains(&a) {
                1
            } else {
                dims.next().unwrap_or(1)
            }
        })
        .collect();
    Ok(vec![with_shape(ctx, x, out)?])
}

/// Clamps a Shape `start`/`end` attribute into `0..=rank`.
fn clamp_index(i: i64, rank: usize) -> usize {
    let r = rank as i64;
    let i = if i < 0 { i + r } else { i };
    i.clamp(0, r) as usize
}

fn shape(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let start = clamp_index(ctx.attr_int("start", 0)?, x.rank());
    let end = match ctx.attr("end") {
        Some(_) => clamp_index(ctx.attr_int("end", 0)?, x.rank()),
        None => x.rank(),
    };
    let dims: Vec<i64> = x.shape()[start..end.max(start)]
        .iter()
        .map(|&d| d as i64)
        .collect();
    Ok(vec![ctx.tensor(vec![dims.len()], TensorData::I64(dims))?])
}

fn size(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    Ok(vec![
        ctx.tensor(vec![], TensorData::I64(vec![x.len() as i64]))?
    ])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(op: &str, attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node(op, attrs, 1)
    }

    fn zeros(shape: &[usize]) -> Tensor {
        Tensor::from_f32(shape.to_vec(), vec![0.0; shape.iter().product()])
    }

    fn out_shape(
        op: &str,
        attrs: &[(&str, Attr)],
        x: &Tensor,
        arg: Option<&[i64]>,
    ) -> Result<Vec<usize>, String> {
        let a = arg.map(|v| Tensor::from_i64(vec![v.len()], v.to_vec()));
        eval_node(&node(op, attrs), &[Some(x), a.as_ref()])
            .map(|mut o| o.remove(0).shape().to_vec())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn reshape_copies_zeros_and_infers() {
        let x = zeros(&[2, 3, 4]);
        assert_eq!(
            out_shape("Reshape", &[], &x, Some(&[0, -1])).unwrap(),
            vec![2, 12]
        );
        assert_eq!(
            out_shape("Reshape", &[], &x, Some(&[-1, 0, 2])).unwrap(),
            vec![4, 3, 2]
        );
        assert_eq!(
            out_shape("Reshape", &[], &x, Some(&[24])).unwrap(),
            vec![24]
        );
        assert!(out_shape("Reshape", &[], &x, Some(&[-1, -1])).is_err());
        assert!(out_shape("Reshape", &[], &x, Some(&[5, -1]))
            .unwrap_err()
            .contains("infer"));
        assert!(out_shape("Reshape", &[], &x, Some(&[2, 3, 5])).is_err());
        // allowzero keeps a literal 0 extent (only valid with an empty input).
        let e = zeros(&[0, 3]);
        assert_eq!(
            out_shape("Reshape", &[("allowzero", Attr::Int(1))], &e, Some(&[3, 0])).unwrap(),
            vec![3, 0]
        );
        // Values are preserved in order.
        let v = Tensor::from_i64(vec![2, 2], vec![1, 2, 3, 4]);
        let s = Tensor::from_i64(vec![1], vec![4]);
        let y = eval_node(&node("Reshape", &[]), &[Some(&v), Some(&s)]).unwrap();
        assert_eq!(y[0].as_i64().unwrap(), &[1, 2, 3, 4]);
    }

    #[test]
    fn flatten_squeeze_unsqueeze() {
        let x = zeros(&[2, 1, 3, 1]);
        assert_eq!(out_shape("Flatten", &[], &x, None).unwrap(), vec![2, 3]);
        assert_eq!(
            out_shape("Flatten", &[("axis", Attr::Int(0))], &x, None).unwrap(),
            vec![1, 6]
        );
        assert_eq!(
            out_shape("Flatten", &[("axis", Attr::Int(-1))], &x, None).unwrap(),
            vec![6, 1]
        );
        assert_eq!(out_shape("Squeeze", &[], &x, None).unwrap(), vec![2, 3]);
        assert_eq!(
            out_shape("Squeeze", &[], &x, Some(&[-1])).unwrap(),
            vec![2, 1, 3]
        );
        assert!(out_shape("Squeeze", &[], &x, Some(&[0]))
            .unwrap_err()
            .contains("cannot squeeze"));
        let y = zeros(&[3, 4]);
        assert_eq!(
            out_shape("Unsqueeze", &[], &y, Some(&[0, -1])).unwrap(),
            vec![1, 3, 4, 1]
        );
        assert_eq!(
            out_shape("Unsqueeze", &[], &y, Some(&[1])).unwrap(),
            vec![3, 1, 4]
        );
        assert!(out_shape("Unsqueeze", &[], &y, Some(&[3])).is_err());
    }

    #[test]
    fn shape_and_size() {
        let x = zeros(&[2, 3, 4]);
        let n = node("Shape", &[]);
        assert_eq!(
            eval_node(&n, &[Some(&x)]).unwrap()[0].as_i64().unwrap(),
            &[2, 3, 4]
        );
        let n = node("Shape", &[("start", Attr::Int(-2)), ("end", Attr::Int(10))]);
        assert_eq!(
            eval_node(&n, &[Some(&x)]).unwrap()[0].as_i64().unwrap(),
            &[3, 4]
        );
        let n = node("Size", &[]);
        let y = eval_node(&n, &[Some(&x)]).unwrap().remove(0);
        assert_eq!((y.shape(), y.as_i64().unwrap()), (&[][..], &[24][..]));
    }
}
