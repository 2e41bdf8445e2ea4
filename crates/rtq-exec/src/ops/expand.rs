//! Replication: Expand (bidirectional broadcast to a shape) and Tile, as strided views
//! with zero strides.

use crate::broadcast::broadcast_shapes;
use crate::ctx::OpCtx;
use crate::elem::map_any;
use crate::registry::Kernel;
use crate::strided::{dense_strides, gather, View};
use crate::ExecError;
use rtq_ir::Tensor;

/// Replication kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("Expand", expand), ("Tile", tile)];

fn expand(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let target = ctx.ints_input(1)?;
    if target.iter().any(|&d| d < 0) {
        return Err(ctx.err(format!("shape {target:?} has negative extents")));
    }
    let target: Vec<usize> = target.iter().map(|&d| d as usize).collect();
    let out = broadcast_shapes(&[x.shape(), &target]).ok_or_else(|| {
        ctx.err(format!(
            "input of shape {:?} does not broadcast with {target:?}",
            x.shape()
        ))
    })?;
    ctx.numel(&out)?;
    let dense = dense_strides(x.shape());
    let lead = out.len() - x.rank();
    let strides = (0..out.len())
        .map(|i| {
            if i < lead || x.shape()[i - lead] == 1 {
                0
            } else {
                dense[i - lead]
            }
        })
        .collect();
    let view = View {
        offset: 0,
        shape: out.clone(),
        strides,
    };
    let data = map_any!(x.data(), v => gather(v, &view));
    Ok(vec![ctx.tensor(out, data)?])
}

fn tile(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let repeats = ctx.ints_input(1)?;
    if repeats.len() != x.rank() || repeats.iter().any(|&r| r < 0) {
        return Err(ctx.err(format!(
            "repeats {repeats:?} must hold {} non-negative values",
            x.rank()
        )));
    }
    let dense = dense_strides(x.shape());
    let mut view = View {
        offset: 0,
        shape: Vec::with_capacity(2 * x.rank()),
        strides: Vec::with_capacity(2 * x.rank()),
    };
    let mut out = Vec::with_capacity(x.rank());
    for (a, &r) in repeats.iter().enumerate() {
        view.shape.extend([r as usize, x.shape()[a]]);
        view.strides.extend([0, dense[a]]);
    }
    ctx.numel(&view.shape)?;
    for (a, &r) in repeats.iter().enumerate() {
        out.push(r as usize * x.shape()[a]);
    }
    let data = map_any!(x.data(), v => gather(v, &view));
    Ok(vec![ctx.tensor(out, data)?])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Node, Tensor};

    fn node(op: &str) -> Node {
        rtq_test_support::node(op, &[], 1)
    }

    fn run(op: &str, x: &Tensor, arg: &[i64]) -> Result<Tensor, String> {
        let a = Tensor::from_i64(vec![arg.len()], arg.to_vec());
        eval_node(&node(op), &[Some(x), Some(&a)])
            .map(|mut v| v.remove(0))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn expand_is_bidirectional() {
        let x = Tensor::from_i64(vec![3, 1], vec![1, 2, 3]);
        let y = run("Expand", &x, &[2, 1, 2]).unwrap();
        assert_eq!(y.shape(), &[2, 3, 2]);
        assert_eq!(y.as_i64().unwrap(), &[1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3]);
        // A target smaller than the input keeps the input's extents.
        let y = run("Expand", &x, &[1, 1]).unwrap();
        assert_eq!(y.shape(), &[3, 1]);
        assert!(run("Expand", &x, &[2, 2]).is_err());
    }

    #[test]
    fn tile_repeats_each_axis() {
        let x = Tensor::from_i64(vec![2, 2], vec![1, 2, 3, 4]);
        let y = run("Tile", &x, &[1, 2]).unwrap();
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[2usize, 4][..], &[1, 2, 1, 2, 3, 4, 3, 4][..])
        );
        let y = run("Tile", &x, &[2, 1]).unwrap();
        assert_eq!(y.as_i64().unwrap(), &[1, 2, 3, 4, 1, 2, 3, 4]);
        assert!(run("Tile", &x, &[2]).is_err());
    }
}
