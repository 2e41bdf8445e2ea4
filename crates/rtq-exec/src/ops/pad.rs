//! Pad: constant, reflect, edge and wrap modes; `pads`, `constant_value` and `axes` as
//! inputs (negative pads crop).

use crate::ctx::OpCtx;
use crate::elem::{with_any, Storage};
use crate::par;
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::Tensor;

/// Pad kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("Pad", pad)];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

/// For each output coordinate along an axis, the input coordinate it copies (`None`:
/// the constant).
fn axis_map(mode: Mode, dim: usize, begin: i64, out: usize) -> Vec<Option<usize>> {
    let d = dim as i64;
    (0..out as i64)
        .map(|o| {
            let i = o - begin;
            if (0..d).contains(&i) {
                return Some(i as usize);
            }
            if d == 0 {
                return None;
            }
            Some(match mode {
                Mode::Constant => return None,
                Mode::Edge => i.clamp(0, d - 1) as usize,
                Mode::Wrap => i.rem_euclid(d) as usize,
                Mode::Reflect => {
                    if d == 1 {
                        0
                    } else {
                        let period = 2 * (d - 1);
                        let m = i.rem_euclid(period);
                        (if m >= d { period - m } else { m }) as usize
                    }
                }
            })
        })
        .collect()
}

fn pad_typed<T: Storage>(
    src: &[T],
    shape: &[usize],
    out_shape: &[usize],
    maps: &[Vec<Option<usize>>],
    value: T,
) -> Vec<T> {
    let n: usize = out_shape.iter().product();
    let mut out = vec![value.clone(); n];
    if n == 0 {
        return out;
    }
    let rank = shape.len();
    if rank == 0 {
        out[0] = src[0].clone();
        return out;
    }
    let inner = out_shape[rank - 1];
    let strides: Vec<usize> = (0..rank).map(|a| shape[a + 1..].iter().product()).collect();
    let last = &maps[rank - 1];
    par::chunks_mut(&mut out, inner.max(1), n, |row, dst| {
        // Input offset of this output row, or None if an outer coordinate is padding.
        let mut rem = row;
        let mut base = Some(0usize);
        for a in (0..rank - 1).rev() {
            let o = rem % out_shape[a];
            rem /= out_shape[a];
            base = match (base, maps[a][o]) {
                (Some(b), Some(i)) => Some(b + i * strides[a]),
                _ => None,
            };
        }
        if let Some(b) = base {
            for (d, m) in dst.iter_mut().zip(last) {
                if let Some(i) = m {
                    *d = src[b + i].clone();
                }
            }
        }
    });
    out
}

fn pad(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let rank = x.rank();
    let mode_name = ctx.attr_str("mode", "constant")?;
    let mode = match mode_name {
        "constant" => Mode::Constant,
        "reflect" => Mode::Reflect,
        "edge" => Mode::Edge,
        "wrap" => Mode::Wrap,
        other => return Err(ctx.err(format!("unknown mode `{other}`"))),
    };
    let pads = match ctx.opt_ints_input(1)? {
        Some(p) => p,
        None => ctx
            .attr_ints("pads")?
            .ok_or_else(|| ctx.err("pads are required"))?,
    };
    let axes = match ctx.opt_ints_input(3)? {
        Some(a) => ctx.axes(&a, rank)?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(ctx.err(format!(
            "pads {pads:?} must hold 2 values per padded axis ({} axes)",
            axes.len()
        )));
    }
    let mut begin = vec![0i64; rank];
    let mut end = vec![0i64; rank];
    for (k, &a) in axes.iter().enumerate() {
        begin[a] = pads[k];
        end[a] = pads[k + axes.len()];
    }
    let mut out_shape = Vec::with_capacity(rank);
    for a in 0..rank {
        let o = (x.shape()[a] as i64)
            .checked_add(begin[a])
            .and_then(|v| v.checked_add(end[a]))
            .ok_or_else(|| ctx.err(format!("pads {pads:?} overflow")))?;
        if o < 0 {
            return Err(ctx.err(format!("pads {pads:?} crop axis {a} below zero")));
        }
        if mode != Mode::Constant && x.shape()[a] == 0 && o > 0 {
            return Err(ctx.err(format!("cannot {mode_name}-pad the empty axis {a}")));
        }
        out_shape.push(o as usize);
    }
    ctx.numel(&out_shape)?;
    let maps: Vec<Vec<Option<usize>>> = (0..rank)
        .map(|a| axis_map(mode, x.shape()[a], begin[a], out_shape[a]))
        .collect();
    let value = match ctx.opt_input(2) {
        Some(v) if v.len() == 1 => v.cast(x.dtype()),
        Some(v) => {
            return Err(ctx.err(format!(
                "constant_value must hold one element, got {:?}",
                v.shape()
            )))
        }
        None => match ctx.attr("value").and_then(|a| a.as_float()) {
            Some(f) => Tensor::scalar_f32(f).cast(x.dtype()),
            None => Tensor::zeros(x.dtype(), vec![]),
        },
    };
    let data = with_any!(x.data(), T, v => {
        let c = T::of(value.data()).and_then(|s| s.first().cloned()).unwrap_or_default();
        T::into_data(pad_typed::<T>(v, x.shape(), &out_shape, &maps, c))
    });
    Ok(vec![ctx.tensor(out_shape, data)?])
}

#[cfg(test)]
mod tests {
    use super::{axis_map, Mode};
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(mode: &str) -> Node {
        rtq_test_support::node("Pad", &[("mode", Attr::String(mode.into()))], 1)
    }

    #[test]
    fn axis_maps_for_each_mode() {
        let m = |mode, b, out| axis_map(mode, 3, b, out);
        assert_eq!(
            m(Mode::Constant, 1, 5),
            vec![None, Some(0), Some(1), Some(2), None]
        );
        assert_eq!(
            m(Mode::Edge, 2, 6),
            vec![Some(0), Some(0), Some(0), Some(1), Some(2), Some(2)]
        );
        assert_eq!(
            m(Mode::Reflect, 2, 7),
            vec![
                Some(2),
                Some(1),
                Some(0),
                Some(1),
                Some(2),
                Some(1),
                Some(0)
            ]
        );
        assert_eq!(
            m(Mode::Wrap, 2, 7),
            vec![
                Some(1),
                Some(2),
                Some(0),
                Some(1),
                Some(2),
                Some(0),
                Some(1)
            ]
        );
        // Negative begin crops.
        assert_eq!(m(Mode::Constant, -1, 2), vec![Some(1), Some(2)]);
    }

    #[test]
    fn pads_2d_with_constant_and_axes() {
        let x = Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let pads = Tensor::from_i64(vec![4], vec![1, 0, 0, 1]);
        let v = Tensor::scalar_f32(9.0);
        let y = eval_node(&node("constant"), &[Some(&x), Some(&pads), Some(&v)])
            .unwrap()
            .remove(0);
        assert_eq!(y.shape(), &[3, 3]);
        assert_eq!(
            y.as_f32().unwrap(),
            &[9.0, 9.0, 9.0, 1.0, 2.0, 9.0, 3.0, 4.0, 9.0]
        );
        let pads = Tensor::from_i64(vec![2], vec![1, 1]);
        let axes = Tensor::from_i64(vec![1], vec![-1]);
        let y = eval_node(&node("edge"), &[Some(&x), Some(&pads), None, Some(&axes)])
            .unwrap()
            .remove(0);
        assert_eq!(
            y.as_f32().unwrap(),
            &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]
        );
        let yi = eval_node(
            &node("reflect"),
            &[
                Some(&Tensor::from_i64(vec![3], vec![1, 2, 3])),
                Some(&Tensor::from_i64(vec![2], vec![2, 1])),
            ],
        )
        .unwrap()
        .remove(0);
        assert_eq!(yi.as_i64().unwrap(), &[3, 2, 1, 2, 3, 2]);
        let bad = Tensor::from_i64(vec![3], vec![1, 1, 1]);
        assert!(eval_node(&node("constant"), &[Some(&x), Some(&bad)]).is_err());
    }
}
