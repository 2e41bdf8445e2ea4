//! Resize: nearest (round_prefer_floor, round_prefer_ceil, floor, ceil), N-D linear and
//! N-D cubic interpolation, with every coordinate_transformation_mode, scales or sizes,
//! `axes`, keep_aspect_ratio_policy and tf_crop_and_resize extrapolation.
//!
//! Interpolation is separable: each resized axis is resampled in turn with a per-output
//! list of (input index, weight) taps, which equals the tensor-product formula.

use crate::ctx::OpCtx;
use crate::float::tensor_from_f32;
use crate::par;
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::Tensor;

/// Resize kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("Resize", resize)];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfHalfPixelForNearest,
    TfCropAndResize,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Nearest {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// Everything that decides the taps of one axis.
struct AxisSpec {
    input: usize,
    output: usize,
    scale: f32,
    roi: (f32, f32),
}

/// The settings shared by all axes.
struct Settings {
    mode: Mode,
    coord: Coord,
    nearest: Nearest,
    cubic_a: f32,
    exclude_outside: bool,
}

/// The taps of one output coordinate: weighted input indices, or the extrapolation
/// value (tf_crop_and_resize outside the input).
#[derive(Debug, Clone, PartialEq)]
enum Taps {
    Mix(Vec<(usize, f32)>),
    Extrapolate,
}

/// Maps output coordinate `x` to the input coordinate.
fn original(coord: Coord, x: f32, a: &AxisSpec) -> f32 {
    let (inp, out, s) = (a.input as f32, a.output as f32, a.scale);
    match coord {
        Coord::HalfPixel => (x + 0.5) / s - 0.5,
        Coord::HalfPixelSymmetric => {
            let adjustment = out / (s * inp);
            let center = inp / 2.0;
            let offset = center * (1.0 - adjustment);
            offset + (x + 0.5) / s - 0.5
        }
        Coord::PytorchHalfPixel => {
            if a.output > 1 {
                (x + 0.5) / s - 0.5
            } else {
                0.0
            }
        }
        Coord::AlignCorners => {
            if a.output == 1 {
                0.0
            } else {
                x * (inp - 1.0) / (out - 1.0)
            }
        }
        Coord::Asymmetric => x / s,
        Coord::TfHalfPixelForNearest => (x + 0.5) / s,
        Coord::TfCropAndResize => {
            let (start, end) = a.roi;
            if a.output > 1 {
                start * (inp - 1.0) + x * (end - start) * (inp - 1.0) / (out - 1.0)
            } else {
                0.5 * (start + end) * (inp - 1.0)
            }
        }
    }
}

fn cubic_weights(t: f32, a: f32) -> [f32; 4] {
    let w = |d: f32| {
        let d = d.abs();
        if d <= 1.0 {
            ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0
        } else if d < 2.0 {
            ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a
        } else {
            0.0
        }
    };
    [w(t + 1.0), w(t), w(1.0 - t), w(2.0 - t)]
}

/// The taps of every output coordinate along one axis.
fn axis_taps(s: &Settings, a: &AxisSpec) -> Vec<Taps> {
    let last = a.input as isize - 1;
    (0..a.output)
        .map(|o| {
            let x = original(s.coord, o as f32, a);
            if s.coord == Coord::TfCropAndResize && (x < 0.0 || x > last as f32) {
                return Taps::Extrapolate;
            }
            match s.mode {
                Mode::Nearest => {
                    let f = x.floor();
                    let i = match s.nearest {
                        Nearest::RoundPreferFloor if x - f == 0.5 => f,
                        Nearest::RoundPreferCeil if x - f == 0.5 => f + 1.0,
                        Nearest::RoundPreferFloor | Nearest::RoundPreferCeil => x.round(),
                        Nearest::Floor => f,
                        Nearest::Ceil => x.ceil(),
                    };
                    Taps::Mix(vec![((i as isize).clamp(0, last) as usize, 1.0)])
                }
                Mode::Linear => {
                    let x = x.clamp(0.0, last as f32);
                    let x0 = x.floor() as isize;
                    let x1 = (x0 + 1).min(last);
                    let w1 = x - x0 as f32;
                    Taps::Mix(vec![(x0 as usize, 1.0 - w1), (x1 as usize, w1)])
                }
                Mode::Cubic => {
                    let x0 = x.floor();
                    let w = cubic_weights(x - x0, s.cubic_a);
                    let base = x0 as isize - 1;
                    let mut taps = Vec::with_capacity(4);
                    let mut total = 0.0;
                    for (k, &wk) in w.iter().enumerate() {
                        let i = base + k as isize;
                        let inside = (0..=last).contains(&i);
                        if s.exclude_outside && !inside {
                            continue;
                        }
                        total += wk;
                        taps.push((i.clamp(0, last) as usize, wk));
                    }
                    if s.exclude_outside && total != 0.0 {
                        taps.iter_mut().for_each(|t| t.1 /= total);
                    }
                    Taps::Mix(taps)
                }
            }
        })
        .collect()
}

/// Resamples `data` (shape `dims`) along `axis` with `taps`, returning the new data.
fn apply_axis(
    data: &[f32],
    dims: &[usize],
    axis: usize,
    taps: &[Taps],
    extrapolation: f32,
) -> Vec<f32> {
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    let (inp, out) = (dims[axis], taps.len());
    let mut result = vec![0.0f32; outer * out * inner];
    let work = result.len() * 2;
    if inner == 1 {
        // The last axis: one task per output row (a task per element costs more than
        // the element).
        par::chunks_mut(&mut result, out.max(1), work, |o, dst| {
            let src = &data[o * inp..][..inp];
            for (d, t) in dst.iter_mut().zip(taps) {
                *d = match t {
                    Taps::Extrapolate => extrapolation,
                    Taps::Mix(mix) => match mix.as_slice() {
                        &[(i, 1.0)] => src[i],
                        mix => mix.iter().fold(0.0, |acc, &(i, w)| acc + w * src[i]),
                    },
                };
            }
        });
        return result;
    }
    par::chunks_mut(&mut result, inner.max(1), work, |row, dst| {
        let (o, k) = (row / out, row % out);
        match &taps[k] {
            Taps::Extrapolate => dst.fill(extrapolation),
            Taps::Mix(mix) => {
                if let &[(i, w)] = mix.as_slice() {
                    if w == 1.0 {
                        // Nearest: a copy.
                        dst.copy_from_slice(&data[(o * inp + i) * inner..][..inner]);
                        return;
                    }
                }
                dst.fill(0.0);
                for &(i, w) in mix {
                    let src = &data[(o * inp + i) * inner..][..inner];
                    for (d, &s) in dst.iter_mut().zip(src) {
                        *d += w * s;
                    }
                }
            }
        }
    });
    result
}

fn parse_settings(ctx: &OpCtx<'_>) -> Result<Settings, ExecError> {
    let mode = match ctx.attr_str("mode", "nearest")? {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" | "trilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        other => return Err(ctx.err(format!("unknown mode `{other}`"))),
    };
    let coord = match ctx.attr_str("coordinate_transformation_mode", "half_pixel")? {
        "half_pixel" => Coord::HalfPixel,
        "half_pixel_symmetric" => Coord::HalfPixelSymmetric,
        "pytorch_half_pixel" => Coord::PytorchHalfPixel,
        "align_corners" => Coord::AlignCorners,
        "asymmetric" => Coord::Asymmetric,
        "tf_half_pixel_for_nearest" => Coord::TfHalfPixelForNearest,
        "tf_crop_and_resize" => Coord::TfCropAndResize,
        other => return Err(ctx.err(format!("unknown coordinate_transformation_mode `{other}`"))),
    };
    let nearest = match ctx.attr_str("nearest_mode", "round_prefer_floor")? {
        "round_prefer_floor" => Nearest::RoundPreferFloor,
        "round_prefer_ceil" => Nearest::RoundPreferCeil,
        "floor" => Nearest::Floor,
        "ceil" => Nearest::Ceil,
        other => return Err(ctx.err(format!("unknown nearest_mode `{other}`"))),
    };
    Ok(Settings {
        mode,
        coord,
        nearest,
        cubic_a: ctx.attr_float("cubic_coeff_a", -0.75)?,
        exclude_outside: ctx.attr_int("exclude_outside", 0)? != 0,
    })
}

/// Per-axis input/output extents, scales and roi.
fn axis_specs(ctx: &OpCtx<'_>, shape: &[usize], coord: Coord) -> Result<Vec<AxisSpec>, ExecError> {
    let rank = shape.len();
    let axes = match ctx.attr_ints("axes")? {
        Some(a) => ctx.axes(&a, rank)?,
        None => (0..rank).collect(),
    };
    let nonempty = |slot: usize| ctx.opt_input(slot).filter(|t| !t.is_empty());
    let mut specs: Vec<AxisSpec> = shape
        .iter()
        .map(|&d| AxisSpec {
            input: d,
            output: d,
            scale: 1.0,
            roi: (0.0, 1.0),
        })
        .collect();
    if let (Some(_), Coord::TfCropAndResize) = (nonempty(1), coord) {
        let roi = ctx.float_input(1)?;
        if roi.len() != 2 * axes.len() {
            return Err(ctx.err(format!(
                "roi has {} values, expected {}",
                roi.len(),
                2 * axes.len()
            )));
        }
        for (k, &a) in axes.iter().enumerate() {
            specs[a].roi = (roi[k], roi[k + axes.len()]);
        }
    }
    if nonempty(3).is_some() {
        if nonempty(2).is_some() {
            return Err(ctx.err("only one of scales and sizes may be given"));
        }
        let sizes = ctx.ints_input(3)?;
        if sizes.len() != axes.len() || sizes.iter().any(|&s| s < 0) {
            return Err(ctx.err(format!(
                "sizes {sizes:?} must hold {} non-negative values",
                axes.len()
            )));
        }
        let policy = ctx.attr_str("keep_aspect_ratio_policy", "stretch")?;
        let ratios: Vec<f32> = axes
            .iter()
            .zip(&sizes)
            .map(|(&a, &s)| s as f32 / shape[a] as f32)
            .collect();
        let common = match policy {
            "stretch" => None,
            "not_larger" => Some(ratios.iter().copied().fold(f32::INFINITY, f32::min)),
            "not_smaller" => Some(ratios.iter().copied().fold(f32::NEG_INFINITY, f32::max)),
            other => return Err(ctx.err(format!("unknown keep_aspect_ratio_policy `{other}`"))),
        };
        for (k, &a) in axes.iter().enumerate() {
            let (out, scale) = match common {
                None => (sizes[k] as usize, ratios[k]),
                Some(r) => (((shape[a] as f32) * r).round() as usize, r),
            };
            specs[a].output = out;
            specs[a].scale = scale;
        }
        return Ok(specs);
    }
    if nonempty(2).is_none() {
        return Err(ctx.err("either scales or sizes must be given"));
    }
    let scales = ctx.float_input(2)?;
    if scales.len() != axes.len() || scales.iter().any(|&s| s.is_nan() || s <= 0.0) {
        return Err(ctx.err(format!(
            "scales {:?} must hold {} positive values",
            &scales[..],
            axes.len()
        )));
    }
    for (k, &a) in axes.iter().enumerate() {
        let s = &mut specs[a];
        let span = if coord == Coord::TfCropAndResize {
            s.roi.1 - s.roi.0
        } else {
            1.0
        };
        s.output = (s.input as f32 * span * scales[k]).floor().max(0.0) as usize;
        s.scale = scales[k];
    }
    Ok(specs)
}

fn resize(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let settings = parse_settings(ctx)?;
    let specs = axis_specs(ctx, x.shape(), settings.coord)?;
    if ctx.attr_int("antialias", 0)? != 0 && specs.iter().any(|s| s.output < s.input) {
        return Err(ctx.err("antialiased downscaling is not supported"));
    }
    let extrapolation = ctx.attr_float("extrapolation_value", 0.0)?;
    let out_dims: Vec<usize> = specs.iter().map(|s| s.output).collect();
    ctx.numel(&out_dims)?;
    let mut dims = x.shape().to_vec();
    let mut data = ctx.float_input(0)?.into_owned();
    for (axis, spec) in specs.iter().enumerate() {
        if spec.input == 0 && spec.output > 0 {
            return Err(ctx.err(format!("cannot resize the empty axis {axis}")));
        }
        let taps = axis_taps(&settings, spec);
        let identity = spec.output == spec.input
            && taps.iter().enumerate().all(|(o, t)| {
                matches!(t, Taps::Mix(m) if m.iter().all(|&(i, w)| (i == o && w == 1.0) || w == 0.0))
            });
        if identity {
            continue;
        }
        data = apply_axis(&data, &dims, axis, &taps, extrapolation);
        dims[axis] = spec.output;
    }
    Ok(vec![tensor_from_f32(dtype, dims, data)])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(attrs: &[(&str, &str)]) -> Node {
        let attrs: Vec<(&str, Attr)> = attrs
            .iter()
            .map(|&(k, v)| (k, Attr::String(v.into())))
            .collect();
        rtq_test_support::node("Resize", &attrs, 1)
    }

    fn with_scales(attrs: &[(&str, &str)], x: &Tensor, scales: &[f32]) -> Vec<f32> {
        let s = Tensor::from_f32(vec![scales.len()], scales.to_vec());
        let y = eval_node(&node(attrs), &[Some(x), None, Some(&s)])
            .unwrap()
            .remove(0);
        y.as_f32().unwrap().to_vec()
    }

    fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
        }
    }

    fn row(v: &[f32]) -> Tensor {
        Tensor::from_f32(vec![1, 1, 1, v.len()], v.to_vec())
    }

    #[test]
    fn nearest_modes_upsample() {
        let x = row(&[1.0, 2.0]);
        // half_pixel x2: originals -0.25, 0.25, 0.75, 1.25 -> round -> 0,0,1,1
        close(
            &with_scales(&[], &x, &[1.0, 1.0, 1.0, 2.0]),
            &[1.0, 1.0, 2.0, 2.0],
        );
        // asymmetric x2: 0, 0.5, 1, 1.5 ; prefer_floor -> 0,0,1,1 ; prefer_ceil -> 0,1,1,1(clamped)
        let a = ("coordinate_transformation_mode", "asymmetric");
        close(
            &with_scales(&[a], &x, &[1.0, 1.0, 1.0, 2.0]),
            &[1.0, 1.0, 2.0, 2.0],
        );
        close(
            &with_scales(
                &[a, ("nearest_mode", "round_prefer_ceil")],
                &x,
                &[1.0, 1.0, 1.0, 2.0],
            ),
            &[1.0, 2.0, 2.0, 2.0],
        );
        close(
            &with_scales(&[a, ("nearest_mode", "ceil")], &x, &[1.0, 1.0, 1.0, 2.0]),
            &[1.0, 2.0, 2.0, 2.0],
        );
        // tf_half_pixel_for_nearest x2: originals 0.25, 0.75, 1.25, 1.75.
        let tf = (
            "coordinate_transformation_mode",
            "tf_half_pixel_for_nearest",
        );
        close(
            &with_scales(&[tf], &x, &[1.0, 1.0, 1.0, 2.0]),
            &[1.0, 2.0, 2.0, 2.0],
        );
        close(
            &with_scales(&[tf, ("nearest_mode", "floor")], &x, &[1.0, 1.0, 1.0, 2.0]),
            &[1.0, 1.0, 2.0, 2.0],
        );
        // x3 asymmetric floor: 0, 1/3, 2/3, 1, 4/3, 5/3
        close(
            &with_scales(&[a, ("nearest_mode", "floor")], &x, &[1.0, 1.0, 1.0, 3.0]),
            &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0],
        );
    }

    #[test]
    fn linear_coordinate_modes() {
        let x = row(&[1.0, 2.0]);
        let lin = ("mode", "linear");
        // half_pixel: originals clamp to [0,1]: 0, 0.25, 0.75, 1
        close(
            &with_scales(&[lin], &x, &[1.0, 1.0, 1.0, 2.0]),
            &[1.0, 1.25, 1.75, 2.0],
        );
        // align_corners to 4: 0, 1/3, 2/3, 1
        close(
            &with_scales(
                &[lin, ("coordinate_transformation_mode", "align_corners")],
                &x,
                &[1.0, 1.0, 1.0, 2.0],
            ),
            &[1.0, 4.0 / 3.0, 5.0 / 3.0, 2.0],
        );
        // asymmetric: 0, 0.5, 1, 1.5 -> clamp
        close(
            &with_scales(
                &[lin, ("coordinate_transformation_mode", "asymmetric")],
                &x,
                &[1.0, 1.0, 1.0, 2.0],
            ),
            &[1.0, 1.5, 2.0, 2.0],
        );
        // pytorch_half_pixel to a single output uses coordinate 0.
        close(
            &with_scales(
                &[
                    lin,
                    ("coordinate_transformation_mode", "pytorch_half_pixel"),
                ],
                &x,
                &[1.0, 1.0, 1.0, 0.5],
            ),
            &[1.0],
        );
    }

    #[test]
    fn bilinear_2d_with_sizes() {
        let x = Tensor::from_f32(vec![1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let sizes = Tensor::from_i64(vec![4], vec![1, 1, 3, 3]);
        let n = node(&[
            ("mode", "linear"),
            ("coordinate_transformation_mode", "align_corners"),
        ]);
        let y = eval_node(&n, &[Some(&x), None, None, Some(&sizes)])
            .unwrap()
            .remove(0);
        assert_eq!(y.shape(), &[1, 1, 3, 3]);
        close(
            y.as_f32().unwrap(),
            &[1.0, 1.5, 2.0, 2.0, 2.5, 3.0, 3.0, 3.5, 4.0],
        );
    }

    #[test]
    fn cubic_reproduces_linear_data_inside() {
        // Cubic convolution reproduces a linear ramp away from the borders.
        let x = row(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        let y = with_scales(
            &[
                ("mode", "cubic"),
                ("coordinate_transformation_mode", "asymmetric"),
            ],
            &x,
            &[1.0, 1.0, 1.0, 2.0],
        );
        for (o, v) in y.iter().enumerate().take(12).skip(2) {
            assert!((v - o as f32 / 2.0).abs() < 1e-5, "{y:?}");
        }
    }

    #[test]
    fn tf_crop_and_resize_extrapolates() {
        let x = row(&[1.0, 2.0, 3.0]);
        let roi = Tensor::from_f32(vec![8], vec![0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 1.0, 1.5]);
        let sizes = Tensor::from_i64(vec![4], vec![1, 1, 1, 3]);
        let mut n = node(&[
            ("mode", "linear"),
            ("coordinate_transformation_mode", "tf_crop_and_resize"),
        ]);
        n.attrs
            .insert("extrapolation_value".into(), Attr::Float(-1.0));
        let y = eval_node(&n, &[Some(&x), Some(&roi), None, Some(&sizes)])
            .unwrap()
            .remove(0);
        // originals: 1, 2, 3 (3 > 2 -> extrapolated)
        close(y.as_f32().unwrap(), &[2.0, 3.0, -1.0]);
    }

    #[test]
    fn invalid_arguments_are_errors() {
        let x = row(&[1.0, 2.0]);
        assert!(eval_node(&node(&[]), &[Some(&x)]).is_err());
        let s = Tensor::from_f32(vec![2], vec![1.0, 2.0]);
        assert!(eval_node(&node(&[]), &[Some(&x), None, Some(&s)]).is_err());
        let s = Tensor::from_f32(vec![4], vec![1.0, 1.0, 1.0, 2.0]);
        assert!(eval_node(&node(&[("mode", "area")]), &[Some(&x), None, Some(&s)]).is_err());
    }
}
