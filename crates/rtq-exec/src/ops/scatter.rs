//! Indexed writes: ScatterND and ScatterElements (with the `reduction` attribute).

use crate::ctx::OpCtx;
use crate::elem::{max_elem, min_elem, with_any, with_numeric, Elem, Storage};
use crate::ops::gather::wrap_index;
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{Tensor, TensorData};

/// Scatter kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("ScatterND", scatter_nd),
    ("ScatterElements", scatter_elements),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

fn reduction(ctx: &OpCtx<'_>) -> Result<Reduction, ExecError> {
    Ok(match ctx.attr_str("reduction", "none")? {
        "none" => Reduction::None,
        "add" => Reduction::Add,
        "mul" => Reduction::Mul,
        "max" => Reduction::Max,
        "min" => Reduction::Min,
        other => return Err(ctx.err(format!("unknown reduction `{other}`"))),
    })
}

/// Writes `updates[u]` (runs of `run` elements) at `targets[u]` into a copy of `data`.
fn apply(
    ctx: &OpCtx<'_>,
    data: &TensorData,
    updates: &TensorData,
    targets: &[usize],
    run: usize,
    red: Reduction,
) -> Result<TensorData, ExecError> {
    if data.dtype() != updates.dtype() {
        return Err(ctx.err(format!(
            "updates are {} but data is {}",
            updates.dtype(),
            data.dtype()
        )));
    }
    if red == Reduction::None {
        return Ok(with_any!(data, T, v => {
            let mut out: Vec<T> = v.to_vec();
            let u = T::of(updates).ok_or_else(|| ctx.err("element types differ"))?;
            for (k, &t) in targets.iter().enumerate() {
                out[t..t + run].clone_from_slice(&u[k * run..(k + 1) * run]);
            }
            T::into_data(out)
        }));
    }
    fn reduce<T: Elem>(out: &mut [T], u: &[T], targets: &[usize], run: usize, red: Reduction) {
        for (k, &t) in targets.iter().enumerate() {
            for j in 0..run {
                let (o, v) = (&mut out[t + j], u[k * run + j]);
                *o = match red {
                    Reduction::Add => o.add(v),
                    Reduction::Mul => o.mul(v),
                    Reduction::Max => max_elem(*o, v),
                    Reduction::Min => min_elem(*o, v),
                    Reduction::None => v,
                };
            }
        }
    }
    let dtype = data.dtype();
    Ok(with_numeric!(data, T, v => {
        let mut out: Vec<T> = v.clone();
        let u = <T as Elem>::slice(updates).ok_or_else(|| ctx.err("element types differ"))?;
        reduce::<T>(&mut out, u, targets, run, red);
        <T as Elem>::wrap(out)
    }, _ => return Err(ctx.err(format!("reductions are not defined on {dtype} tensors")))))
}

fn scatter_nd(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (x, idx_t, upd) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let (r, q) = (x.rank(), idx_t.rank());
    let k = if q == 0 { 0 } else { idx_t.shape()[q - 1] };
    if q == 0 || k == 0 || k > r {
        return Err(ctx.err(format!(
            "indices {:?} do not fit data {:?}",
            idx_t.shape(),
            x.shape()
        )));
    }
    let mut want = idx_t.shape()[..q - 1].to_vec();
    want.extend_from_slice(&x.shape()[k..]);
    if upd.shape() != want.as_slice() {
        return Err(ctx.err(format!(
            "updates have shape {:?}, expected {want:?}",
            upd.shape()
        )));
    }
    let run: usize = x.shape()[k..].iter().product();
    let strides: Vec<usize> = (0..k)
        .map(|a| x.shape()[a + 1..].iter().product())
        .collect();
    let raw = ctx.ints_input(1)?;
    let mut targets = Vec::with_capacity(raw.len() / k);
    for tuple in raw.chunks(k) {
        let mut off = 0;
        for (j, &i) in tuple.iter().enumerate() {
            off += wrap_index(ctx, i, x.shape()[j])? * strides[j];
        }
        targets.push(off);
    }
    let data = apply(ctx, x.data(), upd.data(), &targets, run, reduction(ctx)?)?;
    Ok(vec![ctx.tensor(x.shape().to_vec(), data)?])
}

fn scatter_elements(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (x, idx_t, upd) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let rank = x.rank();
    if idx_t.shape() != upd.shape() || idx_t.rank() != rank || rank == 0 {
        return Err(ctx.err(format!(
            "indices {:?} and updates {:?} must share a shape of data's rank {rank}",
            idx_t.shape(),
            upd.shape()
        )));
    }
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, rank)?;
    let ishape = idx_t.shape();
    if (0..rank).any(|a| ishape[a] > x.shape()[a] && a != axis) {
        return Err(ctx.err(format!("indices {ishape:?} exceed data {:?}", x.shape())));
    }
    let strides: Vec<usize> = (0..rank)
        .map(|a| x.shape()[a + 1..].iter().product())
        .collect();
    let raw = ctx.ints_input(1)?;
    let mut coords = vec![0usize; rank];
    let mut targets = Vec::with_capacity(raw.len());
    for (flat, &i) in raw.iter().enumerate() {
        let mut f = flat;
        for d in (0..rank).rev() {
            coords[d] = f % ishape[d];
            f /= ishape[d];
        }
        coords[axis] = wrap_index(ctx, i, x.shape()[axis])?;
        targets.push(coords.iter().zip(&strides).map(|(c, s)| c * s).sum());
    }
    let data = apply(ctx, x.data(), upd.data(), &targets, 1, reduction(ctx)?)?;
    Ok(vec![ctx.tensor(x.shape().to_vec(), data)?])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(op: &str, attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node(op, attrs, 1)
    }

    #[test]
    fn scatter_nd_rows_and_add() {
        let x = Tensor::from_i64(vec![3, 2], vec![0; 6]);
        let i = Tensor::from_i64(vec![2, 1], vec![2, 0]);
        let u = Tensor::from_i64(vec![2, 2], vec![1, 2, 3, 4]);
        let y = eval_node(&node("ScatterND", &[]), &[Some(&x), Some(&i), Some(&u)]).unwrap();
        assert_eq!(y[0].as_i64().unwrap(), &[3, 4, 0, 0, 1, 2]);
        let i = Tensor::from_i64(vec![2, 2], vec![0, 1, 0, 1]);
        let u = Tensor::from_i64(vec![2], vec![5, 6]);
        let y = eval_node(
            &node("ScatterND", &[("reduction", Attr::String("add".into()))]),
            &[Some(&x), Some(&i), Some(&u)],
        )
        .unwrap();
        assert_eq!(y[0].as_i64().unwrap(), &[0, 11, 0, 0, 0, 0]);
    }

    #[test]
    fn scatter_elements_along_axis() {
        let x = Tensor::from_f32(vec![2, 3], vec![0.0; 6]);
        let i = Tensor::from_i64(vec![2, 1], vec![2, -3]);
        let u = Tensor::from_f32(vec![2, 1], vec![7.0, 8.0]);
        let y = eval_node(
            &node("ScatterElements", &[("axis", Attr::Int(1))]),
            &[Some(&x), Some(&i), Some(&u)],
        )
        .unwrap();
        assert_eq!(y[0].as_f32().unwrap(), &[0.0, 0.0, 7.0, 8.0, 0.0, 0.0]);
        let bad = Tensor::from_i64(vec![2, 1], vec![3, 0]);
        assert!(eval_node(
            &node("ScatterElements", &[("axis", Attr::Int(1))]),
            &[Some(&x), Some(&bad), Some(&u)]
        )
        .is_err());
    }
}
