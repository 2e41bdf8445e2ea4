//! Rules for resampling: `Resize` with constant `scales` or `sizes`, and `GridSample`.

use super::ctx::{Fact, NodeCtx};
use super::dims::unknown;
use crate::PassError;
use rtq_ir::Dim;

/// `Resize(X, roi?, scales?, sizes?)`: `sizes` give the output extents directly (on the
/// `axes` attribute's axes, if set); otherwise `floor(in * scale)`. Extents that depend on
/// float rounding too close to call, `tf_crop_and_resize`, or a non-`stretch`
/// `keep_aspect_ratio_policy` are left unknown.
pub(crate) fn resize(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let rank = x.len();
    let axes = match ctx.attr_ints("axes") {
        Some(a) => ctx.axes(&a, rank)?,
        None => (0..rank).collect(),
    };
    let mut out = x.to_vec();
    let crop = ctx
        .node
        .attr_str("coordinate_transformation_mode", "half_pixel")
        == "tf_crop_and_resize";
    let stretch = ctx.node.attr_str("keep_aspect_ratio_policy", "stretch") == "stretch";
    let sizes = ctx
        .input(3)
        .and_then(|_| ctx.ints(3))
        .filter(|s| !s.is_empty());
    let scales = ctx
        .input(2)
        .and_then(|_| ctx.floats(2))
        .filter(|s| !s.is_empty());
    let given_but_unknown = (ctx.input(3).is_some()
        && sizes.is_none()
        && ctx.constant(3).is_none_or(|t| !t.is_empty()))
        || (ctx.input(2).is_some()
            && scales.is_none()
            && ctx.constant(2).is_none_or(|t| !t.is_empty()));
    if let Some(sizes) = sizes {
        if sizes.len() != axes.len() {
            return Err(ctx.invalid(format!("sizes {sizes:?} do not match {} axes", axes.len())));
        }
        for (&a, &n) in axes.iter().zip(&sizes) {
            let n = usize::try_from(n).map_err(|_| ctx.invalid(format!("sizes hold {n}")))?;
            out[a] = if stretch { Dim::Known(n) } else { unknown() };
        }
    } else if let Some(scales) = scales {
        if scales.len() != axes.len() {
            return Err(ctx.invalid(format!(
                "scales {scales:?} do not match {} axes",
                axes.len()
            )));
        }
        for (&a, &scale) in axes.iter().zip(&scales) {
            if scale <= 0.0 || !scale.is_finite() {
                return Err(ctx.invalid(format!("scale {scale} on axis {a}")));
            }
            out[a] = match &x[a] {
                _ if crop => unknown(),
                d if scale == 1.0 => d.clone(),
                Dim::Known(n) => scaled(*n, scale),
                _ => unknown(),
            };
        }
    } else if given_but_unknown {
        for &a in &axes {
            out[a] = unknown();
        }
    }
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `GridSample(X, grid)`: `[N, C, grid[1..-1]...]` (the grid's spatial extents).
pub(crate) fn grid_sample(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let (Some(x), Some(grid)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    if x.len() < 3 || grid.len() != x.len() {
        return Err(ctx.conflict(
            "input and grid ranks do not fit",
            ctx.describe(0),
            ctx.describe(1),
        ));
    }
    let mut out = vec![x[0].clone(), x[1].clone()];
    out.extend_from_slice(&grid[1..grid.len() - 1]);
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `floor(n * scale)` as onnx and onnxruntime compute it (in float32), when float64
/// evaluation agrees; otherwise unknown, since back ends differ on such borderline cases.
fn scaled(n: usize, scale: f64) -> Dim {
    let single = f64::from((n as f32 * scale as f32).floor());
    let double = (n as f64 * scale).floor();
    if single == double && single >= 0.0 {
        Dim::Known(single as usize)
    } else {
        unknown()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{s, sym, Case};
    use rtq_ir::{Attr, DType, Tensor};

    #[test]
    fn resize_by_scales_and_sizes() {
        let shape = Case::new("Resize")
            .input(DType::F32, vec![sym("N"), s(3), s(10), s(15)])
            .none()
            .constant(Tensor::from_f32(vec![4], vec![1.0, 1.0, 2.0, 0.5]))
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(3), s(20), s(7)]));
        let shape = Case::new("Resize")
            .input(DType::F32, vec![sym("N"), s(3), s(10), s(15)])
            .constant(Tensor::from_f32(vec![0], vec![]))
            .constant(Tensor::from_f32(vec![0], vec![]))
            .ints(&[1, 3, 32, 32])
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(3), s(32), s(32)]));
        let shape = Case::new("Resize")
            .input(DType::F32, vec![s(1), s(3), s(10), s(15)])
            .none()
            .none()
            .ints(&[20, 30])
            .attr("axes", Attr::Ints(vec![2, 3]))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(3), s(20), s(30)]));
        // Non-constant scales: the resized axes are unknown.
        let shape = Case::new("Resize")
            .input(DType::F32, vec![s(1), s(3), s(10), s(15)])
            .none()
            .input(DType::F32, vec![s(4)])
            .shape();
        assert_eq!(shape, Some(vec![sym("?"); 4]));
    }

    #[test]
    fn grid_sample_takes_the_grid_extents() {
        let shape = Case::new("GridSample")
            .input(DType::F32, vec![sym("N"), s(3), s(10), s(10)])
            .input(DType::F32, vec![sym("N"), s(5), s(7), s(2)])
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(3), s(5), s(7)]));
    }

    #[test]
    fn borderline_float_products_stay_unknown() {
        // float64: 90 * 0.7 = 62.99..., float32: 63.
        assert_eq!(super::scaled(90, 0.7), sym("?"));
        assert_eq!(super::scaled(3, f64::from(1.0f32 / 3.0)), s(1));
        assert_eq!(super::scaled(10, 2.0), s(20));
        assert_eq!(super::scaled(15, 0.5), s(7));
    }
}
