//! Axis permutations: Transpose, DepthToSpace and SpaceToDepth (as permuted views).

use crate::ctx::OpCtx;
use crate::elem::map_any;
use crate::registry::Kernel;
use crate::strided::{dense_strides, gather, View};
use crate::ExecError;
use rtq_ir::Tensor;

/// Permutation kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("Transpose", transpose),
    ("DepthToSpace", depth_to_space),
    ("SpaceToDepth", space_to_depth),
];

/// `x` viewed with extents `dims` (same element count) and permuted by `perm`,
/// materialised with shape `out_shape`.
pub(crate) fn permute(
    ctx: &OpCtx<'_>,
    x: &Tensor,
    dims: &[usize],
    perm: &[usize],
    out_shape: Vec<usize>,
) -> Result<Tensor, ExecError> {
    let strides = dense_strides(dims);
    let view = View {
        offset: 0,
        shape: perm.iter().map(|&p| dims[p]).collect(),
        strides: perm.iter().map(|&p| strides[p]).collect(),
    };
    let data = map_any!(x.data(), v => gather(v, &view));
    ctx.tensor(out_shape, data)
}

fn transpose(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let rank = x.rank();
    let perm: Vec<usize> = match ctx.attr_ints("perm")? {
        None => (0..rank).rev().collect(),
        Some(p) => {
            let mut seen = vec![false; rank];
            let mut out = Vec::with_capacity(rank);
            for &a in &p {
                let ok = a >= 0 && (a as usize) < rank && !seen[a as usize];
                if !ok || p.len() != rank {
                    return Err(ctx.err(format!("perm {p:?} is not a permutation of 0..{rank}")));
                }
                seen[a as usize] = true;
                out.push(a as usize);
            }
            out
        }
    };
    let out_shape = perm.iter().map(|&p| x.shape()[p]).collect();
    Ok(vec![permute(ctx, x, x.shape(), &perm, out_shape)?])
}

fn blocksize(ctx: &OpCtx<'_>) -> Result<usize, ExecError> {
    let b = ctx.attr_int("blocksize", 0)?;
    if b < 1 {
        return Err(ctx.err(format!("blocksize must be positive, got {b}")));
    }
    Ok(b as usize)
}

fn nchw(ctx: &OpCtx<'_>, x: &Tensor) -> Result<[usize; 4], ExecError> {
    match x.shape() {
        &[n, c, h, w] => Ok([n, c, h, w]),
        other => Err(ctx.err(format!("X must be 4-D, got shape {other:?}"))),
    }
}

fn depth_to_space(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let b = blocksize(ctx)?;
    let [n, c, h, w] = nchw(ctx, x)?;
    let bb = b
        .checked_mul(b)
        .filter(|&bb| bb <= c.max(1))
        .ok_or_else(|| ctx.err(format!("blocksize {b} is too large for {c} channels")))?;
    if c % bb != 0 {
        return Err(ctx.err(format!(
            "{c} channels are not divisible by blocksize^2 = {bb}"
        )));
    }
    let cc = c / bb;
    let out_shape = vec![n, cc, h * b, w * b];
    let y = match ctx.attr_str("mode", "DCR")? {
        "DCR" => permute(ctx, x, &[n, b, b, cc, h, w], &[0, 3, 4, 1, 5, 2], out_shape)?,
        "CRD" => permute(ctx, x, &[n, cc, b, b, h, w], &[0, 1, 4, 2, 5, 3], out_shape)?,
        other => return Err(ctx.err(format!("unknown mode `{other}`"))),
    };
    Ok(vec![y])
}

fn space_to_depth(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let b = blocksize(ctx)?;
    let [n, c, h, w] = nchw(ctx, x)?;
    if b > h.max(1) || b > w.max(1) || h % b != 0 || w % b != 0 {
        return Err(ctx.err(format!(
            "spatial extents {h}x{w} are not divisible by blocksize {b}"
        )));
    }
    let out_shape = vec![n, c * b * b, h / b, w / b];
    let y = permute(
        ctx,
        x,
        &[n, c, h / b, b, w / b, b],
        &[0, 3, 5, 1, 2, 4],
        out_shape,
    )?;
    Ok(vec![y])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(op: &str, attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node(op, attrs, 1)
    }

    fn run(op: &str, attrs: &[(&str, Attr)], x: &Tensor) -> Tensor {
        eval_node(&node(op, attrs), &[Some(x)]).unwrap().remove(0)
    }

    #[test]
    fn transpose_default_and_explicit() {
        let x = Tensor::from_i64(vec![2, 3], (0..6).collect());
        let y = run("Transpose", &[], &x);
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[3usize, 2][..], &[0, 3, 1, 4, 2, 5][..])
        );
        let x = Tensor::from_i64(vec![2, 2, 2], (0..8).collect());
        let y = run("Transpose", &[("perm", Attr::Ints(vec![1, 2, 0]))], &x);
        assert_eq!(y.as_i64().unwrap(), &[0, 4, 1, 5, 2, 6, 3, 7]);
        assert!(eval_node(
            &node("Transpose", &[("perm", Attr::Ints(vec![0, 0, 1]))]),
            &[Some(&x)]
        )
        .is_err());
    }

    #[test]
    fn depth_space_round_trip_and_modes() {
        // 1x4x1x1 with blocksize 2 -> 1x1x2x2.
        let x = Tensor::from_f32(vec![1, 4, 1, 1], vec![1.0, 2.0, 3.0, 4.0]);
        let dcr = run("DepthToSpace", &[("blocksize", Attr::Int(2))], &x);
        assert_eq!(
            (dcr.shape(), dcr.as_f32().unwrap()),
            (&[1usize, 1, 2, 2][..], &[1.0, 2.0, 3.0, 4.0][..])
        );
        // 1x8x1x1, blocksize 2: DCR and CRD differ.
        let x = Tensor::from_f32(vec![1, 8, 1, 1], (0..8).map(|v| v as f32).collect());
        let dcr = run("DepthToSpace", &[("blocksize", Attr::Int(2))], &x);
        assert_eq!(
            dcr.as_f32().unwrap(),
            &[0.0, 2.0, 4.0, 6.0, 1.0, 3.0, 5.0, 7.0]
        );
        let crd = run(
            "DepthToSpace",
            &[
                ("blocksize", Attr::Int(2)),
                ("mode", Attr::String("CRD".into())),
            ],
            &x,
        );
        assert_eq!(
            crd.as_f32().unwrap(),
            &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
        );
        // SpaceToDepth inverts DCR DepthToSpace.
        let back = run("SpaceToDepth", &[("blocksize", Attr::Int(2))], &dcr);
        assert_eq!(back, x);
    }
}
