//! Slice (starts/ends/axes/steps inputs; negative and out-of-range indices clamp,
//! negative steps walk backwards), as a strided view.

use crate::ctx::OpCtx;
use crate::elem::map_any;
use crate::registry::Kernel;
use crate::strided::{dense_strides, gather, View};
use crate::ExecError;
use rtq_ir::Tensor;

/// Slice kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("Slice", slice)];

/// Start index and element count of slicing an axis of extent `dim` with
/// `start:end:step` (ONNX clamping rules).
pub(crate) fn slice_range(start: i64, end: i64, step: i64, dim: usize) -> (i64, usize) {
    let d = dim as i64;
    let s = if start < 0 {
        start.saturating_add(d)
    } else {
        start
    };
    let e = if end < 0 { end.saturating_add(d) } else { end };
    if step > 0 {
        let (s, e) = (s.clamp(0, d), e.clamp(0, d));
        let count = if e > s {
            (e - s) as i128 / step as i128 + i128::from((e - s) as i128 % step as i128 != 0)
        } else {
            0
        };
        (s, count as usize)
    } else {
        let (s, e) = (s.clamp(0, (d - 1).max(0)), e.clamp(-1, d - 1));
        let neg = -(step as i128);
        let count = if s > e && d > 0 {
            (s - e) as i128 / neg + i128::from((s - e) as i128 % neg != 0)
        } else {
            0
        };
        (s, count as usize)
    }
}

/// Reads a Slice argument from input `slot` or, for pre-opset-10 graphs, attribute `name`.
fn arg(ctx: &OpCtx<'_>, slot: usize, name: &str) -> Result<Option<Vec<i64>>, ExecError> {
    match ctx.opt_ints_input(slot)? {
        Some(v) => Ok(Some(v)),
        None => ctx.attr_ints(name),
    }
}

fn slice(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let rank = x.rank();
    let starts = arg(ctx, 1, "starts")?.ok_or_else(|| ctx.err("starts are required"))?;
    let ends = arg(ctx, 2, "ends")?.ok_or_else(|| ctx.err("ends are required"))?;
    let axes = match arg(ctx, 3, "axes")? {
        Some(a) => a,
        None => (0..starts.len() as i64).collect(),
    };
    let steps = ctx
        .opt_ints_input(4)?
        .unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(ctx.err(format!(
            "starts {starts:?}, ends {ends:?}, axes {axes:?} and steps {steps:?} differ in length"
        )));
    }
    let axes = ctx.axes(&axes, rank)?;
    let dense = dense_strides(x.shape());
    let mut view = View {
        offset: 0,
        shape: x.shape().to_vec(),
        strides: dense.clone(),
    };
    for (i, &a) in axes.iter().enumerate() {
        if steps[i] == 0 {
            return Err(ctx.err(format!("step for axis {a} is 0")));
        }
        let (s, count) = slice_range(starts[i], ends[i], steps[i], x.shape()[a]);
        view.shape[a] = count;
        // A step past the axis takes one element: its stride is never used, so it is
        // bounded to keep the product in range.
        let extent = (x.shape()[a] as i64).max(1);
        view.strides[a] = dense[a] * steps[i].clamp(-extent, extent) as isize;
        if count > 0 {
            view.offset += s as usize * dense[a] as usize;
        }
    }
    if view.shape.contains(&0) {
        view.offset = 0;
    }
    let data = map_any!(x.data(), v => gather(v, &view));
    Ok(vec![ctx.tensor(view.shape, data)?])
}

#[cfg(test)]
mod tests {
    use super::slice_range;
    use crate::eval_node;
    use rtq_ir::{Node, Tensor};

    fn node() -> Node {
        rtq_test_support::node("Slice", &[], 1)
    }

    fn ints(v: &[i64]) -> Tensor {
        Tensor::from_i64(vec![v.len()], v.to_vec())
    }

    fn run(
        x: &Tensor,
        s: &[i64],
        e: &[i64],
        axes: Option<&[i64]>,
        steps: Option<&[i64]>,
    ) -> Tensor {
        let (s, e) = (ints(s), ints(e));
        let a = axes.map(ints);
        let st = steps.map(ints);
        eval_node(
            &node(),
            &[Some(x), Some(&s), Some(&e), a.as_ref(), st.as_ref()],
        )
        .unwrap()
        .remove(0)
    }

    #[test]
    fn ranges_clamp_like_onnx() {
        assert_eq!(slice_range(1, 3, 1, 5), (1, 2));
        assert_eq!(slice_range(-2, i64::MAX, 1, 5), (3, 2));
        assert_eq!(slice_range(0, -1, 2, 5), (0, 2));
        assert_eq!(slice_range(i64::MAX, i64::MIN, -1, 5), (4, 5));
        assert_eq!(slice_range(-1, -4, -2, 5), (4, 2));
        assert_eq!(slice_range(3, 1, 1, 5), (3, 0));
        assert_eq!(slice_range(0, 10, -1, 0), (0, 0));
        assert_eq!(slice_range(0, 5, i64::MAX, 5), (0, 1));
        assert_eq!(slice_range(4, -10, i64::MIN, 5), (4, 1));
    }

    #[test]
    fn slices_with_negative_steps_and_axes() {
        let x = Tensor::from_i64(vec![3, 4], (0..12).collect());
        let y = run(&x, &[1], &[3], Some(&[1]), None);
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[3usize, 2][..], &[1, 2, 5, 6, 9, 10][..])
        );
        // Reverse both axes.
        let y = run(&x, &[-1, -1], &[i64::MIN, i64::MIN], None, Some(&[-1, -1]));
        assert_eq!(y.as_i64().unwrap(), &(0..12).rev().collect::<Vec<_>>()[..]);
        // Every other row, columns 3..0 backwards by 2.
        let y = run(&x, &[0, 3], &[10, 0], None, Some(&[2, -2]));
        assert_eq!(
            (y.shape(), y.as_i64().unwrap()),
            (&[2usize, 2][..], &[3, 1, 11, 9][..])
        );
        // Empty result.
        let y = run(&x, &[2], &[1], Some(&[0]), None);
        assert_eq!(y.shape(), &[0, 4]);
    }

    #[test]
    fn zero_step_is_an_error() {
        let x = Tensor::from_i64(vec![3], vec![1, 2, 3]);
        let (s, e, a, st) = (ints(&[0]), ints(&[3]), ints(&[0]), ints(&[0]));
        assert!(eval_node(
            &node(),
            &[Some(&x), Some(&s), Some(&e), Some(&a), Some(&st)]
        )
        .is_err());
    }
}
