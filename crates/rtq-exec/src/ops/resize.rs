//! Resize: nearest (round_prefer_floor, round_prefer_ceil, floor, ceil), N-D linear and
//! N-D cubic interpolation, with every coordinate_transformation_mode, scales or sizes,
//! `axes`, keep_aspect_ratio_policy and tf_crop_and_resize extrapolation.
//!
//! 8-bit integer tensors (a quantized value moved ahead of the resize, see
//! [`crate::hoist_quantize`]) resize in nearest mode, which copies values.
//!
//! Interpolation is separable: each resized axis is resampled in turn with a per-output
//! list of (input index, weight) taps, which equals the tensor-product formula.

use crate::ctx::OpCtx;
use crate::float::tensor_from_f32;
use crate::par;
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{Tensor, TensorData};
use std::mem::MaybeUninit;

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

/// Whether input coordinate `x` of an axis whose last index is `last` lies outside the
/// input under tf_crop_and_resize (and takes the extrapolation value).
fn extrapolated(coord: Coord, x: f32, last: isize) -> bool {
    coord == Coord::TfCropAndResize && (x < 0.0 || x > last as f32)
}

/// The input index nearest-mode `rounding` picks for input coordinate `x`, clamped to
/// `0..=last`.
fn nearest_index(rounding: Nearest, x: f32, last: isize) -> usize {
    let f = x.floor();
    let i = match rounding {
        Nearest::RoundPreferFloor if x - f == 0.5 => f,
        Nearest::RoundPreferCeil if x - f == 0.5 => f + 1.0,
        Nearest::RoundPreferFloor | Nearest::RoundPreferCeil => x.round(),
        Nearest::Floor => f,
        Nearest::Ceil => x.ceil(),
    };
    (i as isize).clamp(0, last) as usize
}

/// The taps of every output coordinate along one axis.
fn axis_taps(s: &Settings, a: &AxisSpec) -> Vec<Taps> {
    let last = a.input as isize - 1;
    (0..a.output)
        .map(|o| {
            let x = original(s.coord, o as f32, a);
            if extrapolated(s.coord, x, last) {
                return Taps::Extrapolate;
            }
            match s.mode {
                Mode::Nearest => Taps::Mix(vec![(nearest_index(s.nearest, x, last), 1.0)]),
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
    let eight_bit = matches!(x.data(), TensorData::U8(_) | TensorData::I8(_));
    let dtype = if eight_bit {
        x.dtype()
    } else {
        ctx.float_dtype(0)?
    };
    let settings = parse_settings(ctx)?;
    let specs = axis_specs(ctx, x.shape(), settings.coord)?;
    if ctx.attr_int("antialias", 0)? != 0 && specs.iter().any(|s| s.output < s.input) {
        return Err(ctx.err("antialiased downscaling is not supported"));
    }
    let extrapolation = ctx.attr_float("extrapolation_value", 0.0)?;
    let out_dims: Vec<usize> = specs.iter().map(|s| s.output).collect();
    ctx.numel(&out_dims)?;
    if let Some(axis) = specs.iter().position(|s| s.input == 0 && s.output > 0) {
        return Err(ctx.err(format!("cannot resize the empty axis {axis}")));
    }
    if eight_bit {
        if settings.mode != Mode::Nearest {
            return Err(ctx.err(format!("resizes {dtype} in nearest mode only")));
        }
        let data = match x.data() {
            TensorData::U8(v) => TensorData::U8(nearest_8bit(v, &settings, &specs, extrapolation)),
            TensorData::I8(v) => TensorData::I8(nearest_8bit(v, &settings, &specs, extrapolation)),
            _ => unreachable!("8-bit data"),
        };
        return Ok(vec![ctx.tensor(out_dims, data)?]);
    }
    let input = ctx.float_input(0)?;
    if let Some(out) = nearest_last_two(&input, &settings, &specs) {
        return Ok(vec![tensor_from_f32(dtype, out_dims, out)]);
    }
    let taps: Vec<Vec<Taps>> = specs.iter().map(|s| axis_taps(&settings, s)).collect();
    let out = separable(input.into_owned(), &specs, &taps, extrapolation);
    Ok(vec![tensor_from_f32(dtype, out_dims, out)])
}

/// Nearest-mode resize of 8-bit `data`: the values copied, as [`nearest_last_two`] does
/// where it applies, else through the generic path in f32 (exact for 8-bit values; an
/// extrapolated value saturates to the type).
fn nearest_8bit<T>(data: &[T], s: &Settings, specs: &[AxisSpec], extrapolation: f32) -> Vec<T>
where
    T: Copy + Send + Sync + Into<f32> + EightBit,
{
    if let Some(out) = nearest_last_two(data, s, specs) {
        return out;
    }
    let taps: Vec<Vec<Taps>> = specs.iter().map(|a| axis_taps(s, a)).collect();
    let wide = data.iter().map(|&v| v.into()).collect();
    let out = separable(wide, specs, &taps, extrapolation);
    out.into_iter().map(T::saturate).collect()
}

/// An 8-bit integer type, from f32 by saturation.
trait EightBit {
    fn saturate(v: f32) -> Self;
}

impl EightBit for u8 {
    fn saturate(v: f32) -> u8 {
        v as u8
    }
}

impl EightBit for i8 {
    fn saturate(v: f32) -> i8 {
        v as i8
    }
}

/// The generic path: `data` (extents `specs[..].input`) resampled one axis after the
/// other with each axis' taps.
fn separable(
    mut data: Vec<f32>,
    specs: &[AxisSpec],
    taps: &[Vec<Taps>],
    extrapolation: f32,
) -> Vec<f32> {
    let mut dims: Vec<usize> = specs.iter().map(|s| s.input).collect();
    for (axis, (spec, taps)) in specs.iter().zip(taps).enumerate() {
        if is_identity(spec, taps) {
            continue;
        }
        data = apply_axis(&data, &dims, axis, taps, extrapolation);
        dims[axis] = spec.output;
    }
    data
}

/// Whether `taps` leave the axis of `spec` unchanged.
fn is_identity(spec: &AxisSpec, taps: &[Taps]) -> bool {
    spec.output == spec.input
        && taps.iter().enumerate().all(|(o, t)| {
            matches!(t, Taps::Mix(m) if m.iter().all(|&(i, w)| (i == o && w == 1.0) || w == 0.0))
        })
}

/// The input index of every output coordinate of axis `a` in nearest mode (the taps
/// [`axis_taps`] gives), or `None` when a coordinate is extrapolated.
fn nearest_indices(s: &Settings, a: &AxisSpec) -> Option<Vec<usize>> {
    let last = a.input as isize - 1;
    (0..a.output)
        .map(|o| {
            let x = original(s.coord, o as f32, a);
            (!extrapolated(s.coord, x, last)).then(|| nearest_index(s.nearest, x, last))
        })
        .collect()
}

/// Nearest-mode resize that changes only the last two axes: every output plane is
/// built row by row from the two axes' index tables, in one pass instead of one per
/// axis. `None` (use the generic path) when a leading axis changes, the rank is below
/// 2 or a coordinate is extrapolated. The values are copied, so the result is the
/// generic path's bit for bit.
fn nearest_last_two<T: Copy + Send + Sync>(
    data: &[T],
    s: &Settings,
    specs: &[AxisSpec],
) -> Option<Vec<T>> {
    let rank = specs.len();
    if s.mode != Mode::Nearest || rank < 2 {
        return None;
    }
    let indices = specs
        .iter()
        .map(|a| nearest_indices(s, a))
        .collect::<Option<Vec<_>>>()?;
    let (lead, plane) = specs.split_at(rank - 2);
    let unchanged = |(a, ix): (&AxisSpec, &Vec<usize>)| {
        a.output == a.input && ix.iter().enumerate().all(|(o, &i)| i == o)
    };
    if !lead.iter().zip(&indices).all(unchanged) {
        return None;
    }
    let planes: usize = lead.iter().map(|a| a.input).product();
    Some(gather_planes(
        data,
        planes,
        (plane[0].input, plane[1].input),
        &indices[rank - 2],
        &indices[rank - 1],
    ))
}

/// `planes` output planes of `rows.len() x cols.len()`: element (y, x) of plane p is
/// element (`rows[y]`, `cols[x]`) of input plane p (`ih x iw`). An output row that
/// reads the same source row as the previous one is a copy of it; planes run in
/// parallel.
fn gather_planes<T: Copy + Send + Sync>(
    data: &[T],
    planes: usize,
    (ih, iw): (usize, usize),
    rows: &[usize],
    cols: &[usize],
) -> Vec<T> {
    let (oh, ow) = (rows.len(), cols.len());
    let repeat = repeat_factor(cols, iw);
    let len = planes * oh * ow;
    // Every element of each plane is written: the output needs no zero fill.
    par::written(len, oh * ow, len, |p, dst| {
        let src = &data[p * ih * iw..][..ih * iw];
        for (y, &r) in rows.iter().enumerate() {
            let (done, rest) = dst.split_at_mut(y * ow);
            let row = &mut rest[..ow];
            if y > 0 && rows[y - 1] == r {
                row.copy_from_slice(&done[(y - 1) * ow..]);
            } else {
                gather_row(&src[r * iw..][..iw], cols, repeat, row);
            }
        }
    })
}

/// `f` when `cols` repeats every one of the `iw` source columns `f` times in order
/// (integer upsampling: `cols[x] == x / f`).
fn repeat_factor(cols: &[usize], iw: usize) -> Option<usize> {
    if iw == 0 || !cols.len().is_multiple_of(iw) {
        return None;
    }
    let f = cols.len() / iw;
    cols.iter()
        .enumerate()
        .all(|(x, &c)| c == x / f)
        .then_some(f)
}

/// One output row, `dst[x] = src[cols[x]]`; when the columns repeat every source
/// element by `repeat` (1, 2, 4 or 8), as loops the compiler vectorizes.
fn gather_row<T: Copy>(
    src: &[T],
    cols: &[usize],
    repeat: Option<usize>,
    dst: &mut [MaybeUninit<T>],
) {
    match repeat {
        Some(1) => dst.iter_mut().zip(src).for_each(|(d, &v)| {
            d.write(v);
        }),
        Some(2) => repeat_each::<2, T>(src, dst),
        Some(4) => repeat_each::<4, T>(src, dst),
        Some(8) => repeat_each::<8, T>(src, dst),
        _ => dst.iter_mut().zip(cols).for_each(|(d, &c)| {
            d.write(src[c]);
        }),
    }
}

/// `dst` holds every element of `src` `F` times in a row.
fn repeat_each<const F: usize, T: Copy>(src: &[T], dst: &mut [MaybeUninit<T>]) {
    for (d, &v) in dst.chunks_exact_mut(F).zip(src) {
        d.copy_from_slice(&[MaybeUninit::new(v); F]);
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval_node;
    use rtq_ir::{Attr, DType, Node, Tensor, TensorData};

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

    /// The settings of a nearest-mode resize.
    fn nearest_settings(coord: Coord, nearest: Nearest) -> Settings {
        Settings {
            mode: Mode::Nearest,
            coord,
            nearest,
            cubic_a: -0.75,
            exclude_outside: false,
        }
    }

    /// Axis specs of `shape` with the last two axes scaled by `scales` (`roi` on them).
    fn plane_specs(shape: &[usize], scales: [f32; 2], roi: (f32, f32)) -> Vec<AxisSpec> {
        let lead = shape.len() - 2;
        shape
            .iter()
            .enumerate()
            .map(|(a, &d)| {
                let (scale, roi) = if a < lead {
                    (1.0, (0.0, 1.0))
                } else {
                    (scales[a - lead], roi)
                };
                AxisSpec {
                    input: d,
                    output: (d as f32 * (roi.1 - roi.0) * scale).floor() as usize,
                    scale,
                    roi,
                }
            })
            .collect()
    }

    #[test]
    fn nearest_fast_path_matches_the_separable_path() {
        let coords = [
            Coord::HalfPixel,
            Coord::HalfPixelSymmetric,
            Coord::PytorchHalfPixel,
            Coord::AlignCorners,
            Coord::Asymmetric,
            Coord::TfHalfPixelForNearest,
            Coord::TfCropAndResize,
        ];
        let roundings = [
            Nearest::RoundPreferFloor,
            Nearest::RoundPreferCeil,
            Nearest::Floor,
            Nearest::Ceil,
        ];
        let shapes: [&[usize]; 3] = [&[2, 3, 5, 7], &[3, 4, 6], &[1, 2, 1, 1, 9]];
        let scales = [
            [2.0, 2.0],
            [4.0, 8.0],
            [3.0, 1.5],
            [0.5, 0.75],
            [1.0, 2.0],
            [2.0, 1.0],
            [1.7, 2.3],
        ];
        let mut checked = 0;
        for shape in shapes {
            let n: usize = shape.iter().product();
            let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
            for coord in coords {
                for nearest in roundings {
                    for sc in scales {
                        let settings = nearest_settings(coord, nearest);
                        let specs = plane_specs(shape, sc, (0.0, 1.0));
                        let taps: Vec<Vec<Taps>> =
                            specs.iter().map(|s| axis_taps(&settings, s)).collect();
                        let case = format!("{shape:?} {coord:?} {nearest:?} {sc:?}");
                        let want = separable(data.clone(), &specs, &taps, -9.0);
                        match nearest_last_two(&data, &settings, &specs) {
                            Some(got) => {
                                assert_eq!(got, want, "{case}");
                                checked += 1;
                            }
                            // tf_half_pixel_for_nearest with round_prefer_ceil shifts
                            // even the unscaled axes.
                            None => assert!(
                                specs
                                    .iter()
                                    .zip(&taps)
                                    .any(|(s, t)| s.scale == 1.0 && !is_identity(s, t)),
                                "declined {case}"
                            ),
                        }
                    }
                }
            }
        }
        assert!(checked > 3 * 6 * 4 * 7, "{checked} cases");
    }

    #[test]
    fn nearest_fast_path_declines_other_cases() {
        let settings = nearest_settings(Coord::Asymmetric, Nearest::Floor);
        let shape = [2, 3, 4, 4];
        let data = vec![1.0; 96];
        // A leading axis that changes.
        let mut specs = plane_specs(&shape, [2.0, 2.0], (0.0, 1.0));
        specs[1].output = 6;
        specs[1].scale = 2.0;
        assert!(nearest_last_two(&data, &settings, &specs).is_none());
        // Rank 1.
        let specs = plane_specs(&[1, 4], [1.0, 2.0], (0.0, 1.0));
        assert!(nearest_last_two(&data[..4], &settings, &specs[1..]).is_none());
        // Extrapolated coordinates of tf_crop_and_resize.
        let settings = nearest_settings(Coord::TfCropAndResize, Nearest::Floor);
        let specs = plane_specs(&shape, [1.0, 1.0], (-0.5, 1.5));
        assert!(axis_taps(&settings, &specs[3]).contains(&Taps::Extrapolate));
        assert!(nearest_last_two(&data, &settings, &specs).is_none());
        // Other modes.
        let mut settings = nearest_settings(Coord::Asymmetric, Nearest::Floor);
        settings.mode = Mode::Linear;
        let specs = plane_specs(&shape, [2.0, 2.0], (0.0, 1.0));
        assert!(nearest_last_two(&data, &settings, &specs).is_none());
    }

    #[test]
    fn nearest_f16_keeps_its_type() {
        let values: Vec<f32> = (0..2 * 3 * 3).map(|i| i as f32 - 4.5).collect();
        let x32 = Tensor::from_f32(vec![2, 1, 3, 3], values.clone());
        let x16 = Tensor::new(
            vec![2, 1, 3, 3],
            TensorData::F16(values.iter().map(|&v| half::f16::from_f32(v)).collect()),
        )
        .unwrap();
        let s = Tensor::from_f32(vec![4], vec![1.0, 1.0, 2.0, 3.0]);
        let n = node(&[("coordinate_transformation_mode", "asymmetric")]);
        let y16 = eval_node(&n, &[Some(&x16), None, Some(&s)])
            .unwrap()
            .remove(0);
        let y32 = eval_node(&n, &[Some(&x32), None, Some(&s)])
            .unwrap()
            .remove(0);
        assert_eq!(y16.dtype(), DType::F16);
        assert_eq!(y16.shape(), &[2, 1, 6, 9]);
        assert_eq!(y16.to_f32_vec(), y32.as_f32().unwrap());
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

#[cfg(test)]
mod speed {
    use crate::eval_node;
    use crate::probe::best_ms;
    use rtq_ir::{Attr, Tensor};

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec resize::speed -- --ignored --nocapture"]
    fn det_shapes() {
        let attrs = [
            ("mode", Attr::String("nearest".into())),
            (
                "coordinate_transformation_mode",
                Attr::String("asymmetric".into()),
            ),
            ("nearest_mode", Attr::String("floor".into())),
        ];
        let n = rtq_test_support::node("Resize", &attrs, 1);
        let mut total = 0.0;
        for (c, hw, f) in [
            (96, 10, 2),
            (96, 20, 2),
            (96, 40, 2),
            (24, 10, 8),
            (24, 20, 4),
            (24, 40, 2),
        ] {
            let x = Tensor::from_f32(vec![1, c, hw, hw], vec![0.5; c * hw * hw]);
            let s = Tensor::from_f32(vec![4], vec![1.0, 1.0, f as f32, f as f32]);
            let ms = best_ms(20, || {
                eval_node(&n, &[Some(&x), None, Some(&s)]).unwrap();
            });
            total += ms;
            println!("[1,{c},{hw},{hw}] x{f}: {ms:.4} ms");
        }
        println!("total {total:.4} ms");
        let len = 614_400;
        let ms = best_ms(20, || {
            let mut v = vec![0.0f32; len];
            v.iter_mut().for_each(|x| *x = 1.0);
            std::hint::black_box(&v);
        });
        println!("zeroed+filled {len}: {ms:.4} ms");
        let ms = best_ms(20, || {
            let mut v = Vec::with_capacity(len);
            v.extend(std::iter::repeat_n(1.0f32, len));
            std::hint::black_box(&v);
        });
        println!("extended {len}: {ms:.4} ms");
    }
}
