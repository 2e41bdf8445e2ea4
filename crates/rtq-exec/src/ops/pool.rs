//! Pooling: MaxPool (with dilations and the optional Indices output), AveragePool
//! (count_include_pad, ceil_mode), LpPool, and the global variants.

use crate::ctx::OpCtx;
use crate::float::tensor_from_f32;
use crate::ops::window::Window;
use crate::par;
use crate::registry::Kernel;
use crate::simd::multiversioned;
use crate::ExecError;
use rtq_ir::{Tensor, TensorData};

/// Pooling kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("MaxPool", max_pool),
    ("AveragePool", average_pool),
    ("LpPool", lp_pool),
    ("GlobalAveragePool", global_average_pool),
    ("GlobalMaxPool", global_max_pool),
    ("GlobalLpPool", global_lp_pool),
];

/// Input planes (N*C), window and float data of a pool's input.
struct PoolInput<'a> {
    planes: usize,
    win: Window,
    data: std::borrow::Cow<'a, [f32]>,
    out_shape: Vec<usize>,
}

fn pool_input<'a>(ctx: &OpCtx<'a>, dilated: bool) -> Result<PoolInput<'a>, ExecError> {
    let x = ctx.input(0)?;
    if x.rank() < 3 {
        return Err(ctx.err(format!("X must be at least 3-D, got shape {:?}", x.shape())));
    }
    let kernel: Vec<usize> = match ctx.attr_ints("kernel_shape")? {
        Some(k) if k.len() == x.rank() - 2 && k.iter().all(|&v| v > 0) => {
            k.iter().map(|&v| v as usize).collect()
        }
        other => {
            return Err(ctx.err(format!(
                "kernel_shape must hold {} positive values, got {other:?}",
                x.rank() - 2
            )))
        }
    };
    let ceil_mode = ctx.attr_int("ceil_mode", 0)? != 0;
    let win = Window::resolve(ctx, &x.shape()[2..], &kernel, dilated, ceil_mode)?;
    let mut out_shape = x.shape()[..2].to_vec();
    out_shape.extend(win.output_dims());
    Ok(PoolInput {
        planes: x.shape()[0] * x.shape()[1],
        win,
        data: ctx.float_input(0)?,
        out_shape,
    })
}

/// Calls `f(dst_index, taps)` for every output position of one plane, where `taps`
/// lists the (in-range) input offsets of the window and `padded_count` the number of
/// window positions inside the padded extent.
fn for_each_window(win: &Window, mut f: impl FnMut(usize, &[usize], usize)) {
    let [ih, iw] = [win.input[1], win.input[2]];
    let [od, oh, ow] = win.output;
    let mut taps = Vec::with_capacity(win.kernel_size());
    let padded = |axis: usize, start: isize| -> usize {
        // Positions start + k*d for k < K that are < input + pad_end.
        let limit = (win.input[axis] + win.pad_end[axis]) as isize;
        let d = win.dilation[axis] as isize;
        if limit <= start {
            return 0;
        }
        (((limit - start + d - 1) / d) as usize).min(win.kernel[axis])
    };
    for z in 0..od {
        let (sz, z_lo, z_hi) = win.taps(0, z);
        let cz = padded(0, sz);
        for y in 0..oh {
            let (sy, y_lo, y_hi) = win.taps(1, y);
            let cy = padded(1, sy);
            for x in 0..ow {
                let (sx, x_lo, x_hi) = win.taps(2, x);
                let cx = padded(2, sx);
                taps.clear();
                for kz in z_lo..z_hi {
                    let iz = (sz + (kz * win.dilation[0]) as isize) as usize;
                    for ky in y_lo..y_hi {
                        let iy = (sy + (ky * win.dilation[1]) as isize) as usize;
                        let base = (iz * ih + iy) * iw;
                        for kx in x_lo..x_hi {
                            taps.push(base + (sx + (kx * win.dilation[2]) as isize) as usize);
                        }
                    }
                }
                f((z * oh + y) * ow + x, &taps, cz * cy * cx);
            }
        }
    }
}

/// The pooled output: `fill(plane_input, plane_output)` for every plane, in parallel.
fn map_planes(p: &PoolInput<'_>, fill: impl Fn(&[f32], &mut [f32]) + Sync + Send) -> Vec<f32> {
    let (in_sp, out_sp) = (p.win.input_size(), p.win.output_size());
    let mut out = vec![0.0f32; p.planes * out_sp];
    let work = out.len() * p.win.kernel_size();
    par::chunks_mut(&mut out, out_sp.max(1), work, |plane, dst| {
        fill(&p.data[plane * in_sp..][..in_sp], dst)
    });
    out
}

/// Runs `reduce(plane_input, taps, padded_count)` for every window of every plane.
fn pool_planes(
    p: &PoolInput<'_>,
    reduce: impl Fn(&[f32], &[usize], usize) -> f32 + Sync + Send,
) -> Vec<f32> {
    map_planes(p, |src, dst| {
        for_each_window(&p.win, |o, taps, padded| dst[o] = reduce(src, taps, padded))
    })
}

/// MaxPool over 1-D/2-D planes without dilation (the common case): for each output
/// row, the maximum over the window's input rows first, then over each window's
/// columns of that row, both in blocks of [`LANES`] outputs held in registers (loops
/// that vectorize, storing each result once); the columns by windows lying inside the
/// row, the edges one by one. NaN wins, as in the generic path (which of two zeros of
/// opposite sign is kept may differ from the generic path's order).
fn max_pool_2d(p: &PoolInput<'_>) -> Vec<f32> {
    let win = &p.win;
    let (ow, iw, kw, sw) = (win.output[2], win.input[2], win.kernel[2], win.stride[2]);
    // Each output column's input columns (inside the input).
    let columns: Vec<(usize, usize)> = (0..ow)
        .map(|ox| {
            let (sx, x_lo, x_hi) = win.taps(2, ox);
            let x0 = (sx + x_lo as isize) as usize;
            (x0, ((sx + x_hi as isize) as usize).max(x0))
        })
        .collect();
    // The output columns whose whole window lies inside the row.
    let full = |ox: &usize| columns[*ox].1 - columns[*ox].0 == kw;
    let lo = (0..ow).find(full).unwrap_or(ow);
    let hi = (lo..ow).find(|ox| !full(ox)).unwrap_or(ow);
    map_planes(p, |src, dst| {
        let mut rows_max = vec![f32::NEG_INFINITY; iw];
        for (oy, dst_row) in dst.chunks_mut(ow).enumerate() {
            let (sy, y_lo, y_hi) = win.taps(1, oy);
            let first = (sy + y_lo as isize) as usize;
            max_of_rows(&mut rows_max, &src[first * iw..(first + y_hi - y_lo) * iw]);
            if hi > lo {
                max_of_windows(&mut dst_row[lo..hi], &rows_max[columns[lo].0..], kw, sw);
            }
            for ox in (0..lo).chain(hi..ow) {
                let (x0, x1) = columns[ox];
                dst_row[ox] = max_of(&rows_max[x0..x1]);
            }
        }
    })
}

/// Outputs per register block of the MaxPool loops.
const LANES: usize = 16;

/// `best` or `v`, whichever is larger; NaN wins.
#[inline(always)]
fn nan_max(best: f32, v: f32) -> f32 {
    if v > best || v.is_nan() {
        v
    } else {
        best
    }
}

/// The maximum of `values` (NaN wins; -inf when empty).
#[inline(always)]
fn max_of(values: &[f32]) -> f32 {
    values
        .iter()
        .fold(f32::NEG_INFINITY, |best, &v| nan_max(best, v))
}

multiversioned! {
    /// `dst[i]` = the maximum (NaN wins) of `src`'s rows (each `dst.len()` long) at `i`.
    fn max_of_rows(dst: &mut [f32], src: &[f32]) => max_of_rows_body
}

#[inline(always)]
fn max_of_rows_body(dst: &mut [f32], src: &[f32]) {
    let w = dst.len();
    let rows = src.len().checked_div(w).unwrap_or(0);
    let mut chunks = dst.chunks_exact_mut(LANES);
    for (c, d) in chunks.by_ref().enumerate() {
        let mut acc = [f32::NEG_INFINITY; LANES];
        for r in 0..rows {
            let row = &src[r * w + c * LANES..][..LANES];
            for (a, &v) in acc.iter_mut().zip(row) {
                *a = nan_max(*a, v);
            }
        }
        d.copy_from_slice(&acc);
    }
    let start = w - chunks.into_remainder().len();
    for x in start..w {
        dst[x] = (0..rows).fold(f32::NEG_INFINITY, |best, r| nan_max(best, src[r * w + x]));
    }
}

multiversioned! {
    /// `dst[i]` = the maximum (NaN wins) of `src[i * stride..][..kw]` (`src` long enough).
    fn max_of_windows(dst: &mut [f32], src: &[f32], kw: usize, stride: usize) => max_of_windows_body
}

#[inline(always)]
fn max_of_windows_body(dst: &mut [f32], src: &[f32], kw: usize, stride: usize) {
    match stride {
        1 => windows_strided::<1>(dst, src, kw),
        2 => windows_strided::<2>(dst, src, kw),
        _ => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = max_of(&src[i * stride..][..kw]);
            }
        }
    }
}

/// [`max_of_windows_body`] for a stride known at compile time.
#[inline(always)]
fn windows_strided<const S: usize>(dst: &mut [f32], src: &[f32], kw: usize) {
    let n = dst.len();
    assert!(
        n == 0 || src.len() >= (n - 1) * S + kw,
        "windows past the row"
    );
    let mut chunks = dst.chunks_exact_mut(LANES);
    for (c, d) in chunks.by_ref().enumerate() {
        let mut acc = [f32::NEG_INFINITY; LANES];
        for k in 0..kw {
            let taps = &src[c * LANES * S + k..][..(LANES - 1) * S + 1];
            for (j, a) in acc.iter_mut().enumerate() {
                *a = nan_max(*a, taps[j * S]);
            }
        }
        d.copy_from_slice(&acc);
    }
    let start = n - chunks.into_remainder().len();
    for i in start..n {
        dst[i] = max_of(&src[i * S..][..kw]);
    }
}

fn max_pool(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let dtype = ctx.float_dtype(0)?;
    let p = pool_input(ctx, true)?;
    let max_of = |src: &[f32], taps: &[usize]| -> (f32, Option<usize>) {
        let mut best = f32::NEG_INFINITY;
        let mut at = None;
        for &t in taps {
            let v = src[t];
            if v > best || at.is_none() || v.is_nan() {
                best = v;
                at = Some(t);
                if v.is_nan() {
                    break;
                }
            }
        }
        (best, at)
    };
    let out = if p.win.is_plain_2d() {
        max_pool_2d(&p)
    } else {
        pool_planes(&p, |src, taps, _| max_of(src, taps).0)
    };
    let mut outputs = vec![tensor_from_f32(dtype, p.out_shape.clone(), out)];
    if ctx.num_outputs() > 1 {
        let storage_order = ctx.attr_int("storage_order", 0)?;
        let (in_sp, out_sp) = (p.win.input_size(), p.win.output_size());
        let [id, ih, iw] = p.win.input;
        let mut idx = vec![0i64; p.planes * out_sp];
        par::chunks_mut(
            &mut idx,
            out_sp.max(1),
            p.planes * out_sp * p.win.kernel_size(),
            |plane, dst| {
                let src = &p.data[plane * in_sp..][..in_sp];
                for_each_window(&p.win, |o, taps, _| {
                    let t = max_of(src, taps).1.unwrap_or(0);
                    let local = if storage_order == 1 {
                        let (z, rem) = (t / (ih * iw), t % (ih * iw));
                        let (y, x) = (rem / iw, rem % iw);
                        (x * ih + y) * id + z
                    } else {
                        t
                    };
                    dst[o] = (plane * in_sp + local) as i64;
                });
            },
        );
        outputs.push(ctx.tensor(p.out_shape.clone(), TensorData::I64(idx))?);
    }
    Ok(outputs)
}

fn average_pool(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let dtype = ctx.float_dtype(0)?;
    let include_pad = ctx.attr_int("count_include_pad", 0)? != 0;
    let p = pool_input(ctx, true)?;
    let win = &p.win;
    if win.kernel == win.input
        && win.pad_begin == [0; 3]
        && win.pad_end == [0; 3]
        && win.dilation == [1; 3]
        && win.input_size() > 0
    {
        // One window over each whole plane (ResNet's 7x7 head): a global average.
        let out = reduce_planes(&p.data, p.planes, win.input_size(), plane_mean);
        return Ok(vec![tensor_from_f32(dtype, p.out_shape, out)]);
    }
    let out = pool_planes(&p, |src, taps, padded| {
        let sum: f32 = taps.iter().map(|&t| src[t]).sum();
        let count = if include_pad { padded } else { taps.len() };
        if count == 0 {
            0.0
        } else {
            sum / count as f32
        }
    });
    Ok(vec![tensor_from_f32(dtype, p.out_shape, out)])
}

fn lp_norm(values: impl Iterator<Item = f32>, p: f32) -> f32 {
    if p == 1.0 {
        values.map(f32::abs).sum()
    } else if p == 2.0 {
        values.map(|v| v * v).sum::<f32>().sqrt()
    } else {
        values.map(|v| v.abs().powf(p)).sum::<f32>().powf(1.0 / p)
    }
}

fn lp_exponent(ctx: &OpCtx<'_>) -> Result<f32, ExecError> {
    let p = ctx.attr_int("p", 2)?;
    if p < 1 {
        return Err(ctx.err(format!("p must be positive, got {p}")));
    }
    Ok(p as f32)
}

fn lp_pool(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let dtype = ctx.float_dtype(0)?;
    let pw = lp_exponent(ctx)?;
    let p = pool_input(ctx, true)?;
    let out = pool_planes(&p, |src, taps, _| lp_norm(taps.iter().map(|&t| src[t]), pw));
    Ok(vec![tensor_from_f32(dtype, p.out_shape, out)])
}

/// Reduces every (N, C) plane to one value with `f`.
fn global(
    ctx: &OpCtx<'_>,
    f: impl Fn(&[f32]) -> f32 + Sync + Send,
) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    if x.rank() < 3 {
        return Err(ctx.err(format!("X must be at least 3-D, got shape {:?}", x.shape())));
    }
    let planes = x.shape()[0] * x.shape()[1];
    let sp: usize = x.shape()[2..].iter().product();
    let data = ctx.float_input(0)?;
    let out = reduce_planes(&data, planes, sp, f);
    let mut shape = x.shape()[..2].to_vec();
    shape.extend(std::iter::repeat_n(1, x.rank() - 2));
    Ok(vec![tensor_from_f32(dtype, shape, out)])
}

/// `f` of each of the `planes` planes of `sp` elements of `data`, in parallel.
fn reduce_planes(
    data: &[f32],
    planes: usize,
    sp: usize,
    f: impl Fn(&[f32]) -> f32 + Sync + Send,
) -> Vec<f32> {
    let mut out = vec![0.0f32; planes];
    par::chunks_mut(&mut out, 1, planes * sp, |i, o| {
        o[0] = f(&data[i * sp..][..sp])
    });
    out
}

/// The mean of a plane (summed in f64; NaN when empty).
fn plane_mean(v: &[f32]) -> f32 {
    if v.is_empty() {
        return f32::NAN;
    }
    (plane_sum(v) / v.len() as f64) as f32
}

fn global_average_pool(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    global(ctx, plane_mean)
}

/// Interleaved partial sums of [`plane_sum`]: independent additions for the vector
/// units.
const SUM_LANES: usize = 16;

multiversioned! {
    /// The sum of `v` in f64. Element `i` goes to partial sum `i % SUM_LANES` (the
    /// tail past the last whole group to its own sum), and the partial sums are added
    /// at the end: a different order than one running sum, the same value up to f64
    /// rounding.
    fn plane_sum(v: &[f32]) -> f64 => plane_sum_body
}

#[inline(always)]
fn plane_sum_body(v: &[f32]) -> f64 {
    let mut acc = [0.0f64; SUM_LANES];
    let groups = v.chunks_exact(SUM_LANES);
    let tail: f64 = groups.remainder().iter().map(|&x| f64::from(x)).sum();
    for group in groups {
        for (a, &x) in acc.iter_mut().zip(group) {
            *a += f64::from(x);
        }
    }
    acc.iter().sum::<f64>() + tail
}

fn global_max_pool(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    global(ctx, |v| {
        v.iter().fold(
            f32::NEG_INFINITY,
            |m, &x| if x > m || x.is_nan() { x } else { m },
        )
    })
}

fn global_lp_pool(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let p = lp_exponent(ctx)?;
    global(ctx, |v| lp_norm(v.iter().copied(), p))
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Tensor};
    use rtq_test_support::node;

    fn run(op: &str, attrs: &[(&str, Attr)], x: &Tensor) -> Tensor {
        eval_node(&node(op, attrs, 1), &[Some(x)])
            .unwrap()
            .remove(0)
    }

    /// 1x1x4x4 input holding 1..16.
    fn x44() -> Tensor {
        Tensor::from_f32(vec![1, 1, 4, 4], (1..=16).map(|v| v as f32).collect())
    }

    #[test]
    fn plain_2d_max_pool_picks_the_values_the_generic_indices_point_at() {
        // Values come from the direct 2-D loops, indices from the generic tap lists;
        // rows narrower and wider than the loops' register blocks.
        for (h, w) in [(7, 9), (5, 53)] {
            max_pool_matches_indices(h, w);
        }
    }

    fn max_pool_matches_indices(h: usize, w: usize) {
        let mut data: Vec<f32> = (0..2 * h * w)
            .map(|i| ((i * 37 % 61) as f32 - 30.0) * 0.25)
            .collect();
        data[h * w + 10] = f32::NAN;
        let x = Tensor::from_f32(vec![1, 2, h, w], data.clone());
        for (kernel, stride, pads, ceil) in [
            ([3, 3], [2, 2], [1, 1, 1, 1], 0),
            ([2, 3], [1, 2], [0, 1, 1, 0], 1),
            ([3, 2], [3, 1], [0, 0, 0, 0], 1),
            ([2, 2], [1, 3], [1, 0, 0, 1], 0),
            ([1, 4], [1, 2], [0, 2, 0, 2], 1),
        ] {
            let attrs = [
                ("kernel_shape", Attr::Ints(kernel.to_vec())),
                ("strides", Attr::Ints(stride.to_vec())),
                ("pads", Attr::Ints(pads.to_vec())),
                ("ceil_mode", Attr::Int(ceil)),
            ];
            let out = eval_node(&node("MaxPool", &attrs, 2), &[Some(&x)]).unwrap();
            let (values, indices) = (out[0].as_f32().unwrap(), out[1].as_i64().unwrap());
            for (v, &i) in values.iter().zip(indices) {
                let expected = data[i as usize];
                assert!(
                    v.to_bits() == expected.to_bits(),
                    "{kernel:?}/{stride:?}: {v} vs {expected}"
                );
            }
            assert!(
                values.iter().any(|v| v.is_nan()),
                "the NaN wins its windows"
            );
        }
    }

    #[test]
    fn max_pool_strides_pads_and_indices() {
        let k = ("kernel_shape", Attr::Ints(vec![2, 2]));
        let s = ("strides", Attr::Ints(vec![2, 2]));
        assert_eq!(
            run("MaxPool", &[k.clone(), s.clone()], &x44())
                .as_f32()
                .unwrap(),
            &[6.0, 8.0, 14.0, 16.0]
        );
        let y = run(
            "MaxPool",
            &[
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
                s.clone(),
            ],
            &x44(),
        );
        assert_eq!(y.as_f32().unwrap(), &[6.0, 8.0, 14.0, 16.0]);
        let out = eval_node(&node("MaxPool", &[k, s], 2), &[Some(&x44())]).unwrap();
        assert_eq!(out[1].as_i64().unwrap(), &[5, 7, 13, 15]);
        // Dilation 2 on a 4x4 with a 2x2 kernel: window taps (0,0),(0,2),(2,0),(2,2).
        let y = run(
            "MaxPool",
            &[
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("dilations", Attr::Ints(vec![2, 2])),
            ],
            &x44(),
        );
        assert_eq!(y.as_f32().unwrap(), &[11.0, 12.0, 15.0, 16.0]);
    }

    #[test]
    fn average_pool_pad_counting_and_ceil_mode() {
        let attrs = |include: i64| {
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
                ("strides", Attr::Ints(vec![2, 2])),
                ("count_include_pad", Attr::Int(include)),
            ]
        };
        // Top-left window covers 1,2,5,6 (4 valid of 9 padded positions).
        let y = run("AveragePool", &attrs(0), &x44());
        assert_eq!(y.as_f32().unwrap()[0], 3.5);
        let y = run("AveragePool", &attrs(1), &x44());
        assert_eq!(y.as_f32().unwrap()[0], 14.0 / 9.0);
        // ceil_mode: 4 wide, k 3, s 2 -> 2 windows; the second is clipped to 2 columns.
        let ceil = [
            ("kernel_shape", Attr::Ints(vec![1, 3])),
            ("strides", Attr::Ints(vec![1, 2])),
            ("ceil_mode", Attr::Int(1)),
        ];
        let x = Tensor::from_f32(vec![1, 1, 1, 4], vec![1.0, 2.0, 3.0, 4.0]);
        let y = run("AveragePool", &ceil, &x);
        assert_eq!(y.as_f32().unwrap(), &[2.0, 3.5]);
        // With count_include_pad the clipped window still counts only positions within the
        // padded extent (no end padding here): 2 positions.
        let mut c2 = ceil.to_vec();
        c2.push(("count_include_pad", Attr::Int(1)));
        assert_eq!(run("AveragePool", &c2, &x).as_f32().unwrap(), &[2.0, 3.5]);
    }

    #[test]
    fn average_pool_over_whole_planes_is_the_global_average() {
        // 2 planes of 7x7 (ResNet's head), values with no exact f32 sum.
        let data: Vec<f32> = (0..98).map(|i| (i as f32 * 0.37).sin() * 1e3).collect();
        let x = Tensor::from_f32(vec![1, 2, 7, 7], data.clone());
        let y = run(
            "AveragePool",
            &[("kernel_shape", Attr::Ints(vec![7, 7]))],
            &x,
        );
        assert_eq!(y.shape(), &[1, 2, 1, 1]);
        let want: Vec<f32> = data
            .chunks(49)
            .map(|p| (p.iter().map(|&v| f64::from(v)).sum::<f64>() / 49.0) as f32)
            .collect();
        assert_eq!(y.as_f32().unwrap(), want.as_slice());
        assert_eq!(
            run("GlobalAveragePool", &[], &x).as_f32().unwrap(),
            want.as_slice()
        );
    }

    #[test]
    fn global_and_lp_pools() {
        assert_eq!(
            run("GlobalAveragePool", &[], &x44()).as_f32().unwrap(),
            &[8.5]
        );
        assert_eq!(run("GlobalMaxPool", &[], &x44()).shape(), &[1, 1, 1, 1]);
        let x = Tensor::from_f32(vec![1, 1, 2], vec![3.0, 4.0]);
        assert_eq!(run("GlobalLpPool", &[], &x).as_f32().unwrap(), &[5.0]);
        let y = run(
            "LpPool",
            &[("kernel_shape", Attr::Ints(vec![2])), ("p", Attr::Int(1))],
            &x,
        );
        assert_eq!(y.as_f32().unwrap(), &[7.0]);
    }

    #[test]
    fn global_average_pool_matches_the_exact_mean() {
        // Plane sizes around the partial-sum count, batch 2, 3 channels.
        for spatial in [
            vec![1],
            vec![7],
            vec![16],
            vec![17],
            vec![5, 7],
            vec![81, 79],
        ] {
            let sp: usize = spatial.iter().product();
            let mut shape = vec![2, 3];
            shape.extend(&spatial);
            let data: Vec<f32> = (0..6 * sp)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.37 + (i / sp) as f32 * 100.0)
                .collect();
            let y = run(
                "GlobalAveragePool",
                &[],
                &Tensor::from_f32(shape, data.clone()),
            );
            assert_eq!(y.shape().len(), spatial.len() + 2);
            for (plane, &got) in y.as_f32().unwrap().iter().enumerate() {
                let values = &data[plane * sp..][..sp];
                let want = values.iter().map(|&v| f64::from(v)).sum::<f64>() / sp as f64;
                let tolerance = 1e-6 * want.abs().max(1.0);
                assert!(
                    (f64::from(got) - want).abs() <= tolerance,
                    "{spatial:?} plane {plane}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn global_average_pool_propagates_nan_and_inf() {
        let mut data = vec![1.0f32; 4 * 35];
        data[3] = f32::NAN;
        data[35 + 34] = f32::INFINITY;
        data[70 + 17] = f32::INFINITY;
        data[70 + 18] = f32::NEG_INFINITY;
        let x = Tensor::from_f32(vec![1, 4, 5, 7], data);
        let y = run("GlobalAveragePool", &[], &x);
        let y = y.as_f32().unwrap();
        assert!(y[0].is_nan());
        assert_eq!(y[1], f32::INFINITY);
        assert!(y[2].is_nan());
        assert_eq!(y[3], 1.0);
        let empty = Tensor::from_f32(vec![1, 1, 0], vec![]);
        assert!(run("GlobalAveragePool", &[], &empty).as_f32().unwrap()[0].is_nan());
    }

    #[test]
    fn missing_kernel_shape_is_an_error() {
        let err = eval_node(&node("MaxPool", &[], 1), &[Some(&x44())]).unwrap_err();
        assert!(err.to_string().contains("kernel_shape"), "{err}");
    }
}

#[cfg(test)]
mod speed {
    use crate::eval_node;
    use crate::probe::best_ms;
    use rtq_ir::Tensor;

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec pool::speed -- --ignored --nocapture"]
    fn det_global_average_pools() {
        let n = rtq_test_support::node("GlobalAveragePool", &[], 1);
        let mut total = 0.0;
        for (c, hw) in [
            (192, 10),
            (384, 10),
            (96, 10),
            (96, 20),
            (96, 40),
            (96, 80),
            (24, 10),
            (24, 20),
            (24, 40),
            (24, 80),
        ] {
            let x = Tensor::from_f32(vec![1, c, hw, hw], vec![0.5; c * hw * hw]);
            let ms = best_ms(20, || {
                eval_node(&n, &[Some(&x)]).unwrap();
            });
            total += ms;
            println!("[1,{c},{hw},{hw}]: {ms:.4} ms");
        }
        println!("total {total:.4} ms");
    }

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec pool::speed -- --ignored --nocapture"]
    fn resnet_max_pool() {
        use rtq_ir::Attr;
        let attrs = [
            ("kernel_shape", Attr::Ints(vec![3, 3])),
            ("strides", Attr::Ints(vec![2, 2])),
            ("pads", Attr::Ints(vec![1; 4])),
        ];
        let n = rtq_test_support::node("MaxPool", &attrs, 1);
        let x: Vec<f32> = (0..64 * 112 * 112).map(|i| (i % 97) as f32).collect();
        let x = Tensor::from_f32(vec![1, 64, 112, 112], x);
        let ms = best_ms(20, || {
            eval_node(&n, &[Some(&x)]).unwrap();
        });
        println!("MaxPool 3x3/2 on [1,64,112,112]: {ms:.4} ms");
    }
}
