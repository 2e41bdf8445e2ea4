//! ConvTranspose (1-D, 2-D and 3-D; groups, strides, dilations, pads, output_padding,
//! output_shape and auto_pad): SGEMM of the transposed weights with the input followed
//! by a col2im scatter-add, tiled over input rows to bound the column buffer.

use rayon::prelude::*;

use crate::ctx::OpCtx;
use crate::float::tensor_from_f32;
use crate::gemm::{sgemm, sgemm_serial, Mat};
use crate::ops::columns::{with_columns, COL_BUDGET};
use crate::ops::window::{
    axis_attr, dilated_extent, pads_attr, valid_taps, widen, Window, SPATIAL,
};
use crate::par::{self, OutPtr, PAR_MIN_ELEMS};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::Tensor;
use std::mem::MaybeUninit;

/// ConvTranspose kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("ConvTranspose", conv_transpose)];

/// Resolves the output extents and pads of a transposed convolution.
fn resolve(ctx: &OpCtx<'_>, input: &[usize], kernel: &[usize]) -> Result<Window, ExecError> {
    let rank = input.len();
    if rank == 0 || rank > SPATIAL {
        return Err(ctx.err(format!(
            "{rank} spatial dimensions are not supported (1 to {SPATIAL})"
        )));
    }
    let stride = axis_attr(ctx, "strides", rank)?;
    let dilation = axis_attr(ctx, "dilations", rank)?;
    let out_pad = match ctx.attr_ints("output_padding")? {
        None => vec![0; rank],
        Some(v) if v.len() == rank && v.iter().all(|&p| p >= 0) => {
            v.iter().map(|&p| p as usize).collect()
        }
        Some(v) => {
            return Err(ctx.err(format!(
                "output_padding must hold {rank} non-negative values, got {v:?}"
            )))
        }
    };
    let auto_pad = ctx.attr_str("auto_pad", "NOTSET")?;
    let output_shape = match ctx.attr_ints("output_shape")? {
        Some(v) if v.len() == rank => Some(v),
        Some(v) if v.len() == rank + 2 => Some(v[2..].to_vec()),
        Some(v) if v.is_empty() => None,
        Some(v) => {
            return Err(ctx.err(format!(
                "output_shape {v:?} does not fit {rank} spatial dimensions"
            )))
        }
        None => None,
    };
    let (mut begin, mut end) = pads_attr(ctx, rank)?;
    let mut output = vec![0; rank];
    for i in 0..rank {
        let keff = dilated_extent(ctx, kernel[i], dilation[i])?;
        let full = stride[i]
            .checked_mul(input[i].max(1) - 1)
            .and_then(|v| v.checked_add(out_pad[i]))
            .and_then(|v| v.checked_add(keff))
            .ok_or_else(|| ctx.err(format!("spatial axis {i}: output extent overflows")))?;
        let target = match (&output_shape, auto_pad) {
            (Some(os), _) => Some(os[i]),
            (None, "SAME_UPPER" | "SAME_LOWER") => Some((input[i] * stride[i]) as i64),
            (None, "NOTSET" | "" | "VALID") => None,
            (None, other) => return Err(ctx.err(format!("unknown auto_pad `{other}`"))),
        };
        match target {
            Some(t) => {
                // Up to stride-1 extra positions act as implicit output padding (at the
                // end, as onnxruntime does); more cannot come from this input.
                let t = usize::try_from(t)
                    .ok()
                    .filter(|&t| t < full + stride[i])
                    .ok_or_else(|| {
                        ctx.err(format!(
                            "output extent {t} on spatial axis {i} is inconsistent with the full extent {full} and stride {}",
                            stride[i]
                        ))
                    })?;
                let total = full.saturating_sub(t);
                let small = total / 2;
                (begin[i], end[i]) = if auto_pad == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                output[i] = t;
            }
            None => {
                if auto_pad == "VALID" {
                    begin[i] = 0;
                    end[i] = 0;
                }
                output[i] = full.checked_sub(begin[i] + end[i]).ok_or_else(|| {
                    ctx.err(format!(
                        "pads on spatial axis {i} exceed the full output extent {full}"
                    ))
                })?;
            }
        }
    }
    Ok(Window {
        rank,
        input: widen(input, 1),
        kernel: widen(kernel, 1),
        stride: widen(&stride, 1),
        dilation: widen(&dilation, 1),
        pad_begin: widen(&begin, 0),
        pad_end: widen(&end, 0),
        output: widen(&output, 1),
    })
}

fn conv_transpose(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let w = ctx.input(1)?;
    let dtype = ctx.float_dtype(0)?;
    if x.rank() < 3 || w.rank() != x.rank() {
        return Err(ctx.err(format!(
            "X of shape {:?} and W of shape {:?} must have the same rank, at least 3",
            x.shape(),
            w.shape()
        )));
    }
    let group = ctx.attr_int("group", 1)?;
    if group < 1 {
        return Err(ctx.err(format!("group must be positive, got {group}")));
    }
    let group = group as usize;
    let (n, c) = (x.shape()[0], x.shape()[1]);
    if w.shape()[0] != c || c % group != 0 {
        return Err(ctx.err(format!(
            "W of shape {:?} does not match {c} input channels with group={group}",
            w.shape()
        )));
    }
    let kernel = &w.shape()[2..];
    if kernel.contains(&0) {
        return Err(ctx.err(format!("empty kernel {kernel:?}")));
    }
    let mg = w.shape()[1];
    let m = mg * group;
    let win = resolve(ctx, &x.shape()[2..], kernel)?;
    let xs = ctx.float_input(0)?;
    let ws = ctx.float_input(1)?;
    let bias = ctx.opt_float_input(2)?;
    if let Some(b) = &bias {
        if b.len() != m {
            return Err(ctx.err(format!("bias has {} elements, expected {m}", b.len())));
        }
    }
    let cg = c / group;
    let (in_sp, out_sp, rows_k) = (win.input_size(), win.output_size(), mg * win.kernel_size());
    let mut out = vec![0.0f32; n * m * out_sp];
    let mut shape = vec![n, m];
    shape.extend(win.output_dims());
    if out.is_empty() {
        return Ok(vec![tensor_from_f32(dtype, shape, out)]);
    }
    let disjoint = disjoint_taps(&win);
    for ni in 0..n {
        for g in 0..group {
            let xg = &xs[(ni * c + g * cg) * in_sp..][..cg * in_sp];
            let wg = &ws[g * cg * rows_k..][..cg * rows_k];
            let out_g = &mut out[(ni * m + g * mg) * out_sp..][..mg * out_sp];
            if disjoint {
                group_disjoint(xg, wg, &win, cg, out_g);
            } else {
                group_col2im(xg, wg, &win, cg, out_g);
            }
        }
    }
    if let Some(b) = &bias {
        for (plane, chunk) in out.chunks_mut(out_sp).enumerate() {
            let v = b[plane % m];
            chunk.iter_mut().for_each(|o| *o += v);
        }
    }
    Ok(vec![tensor_from_f32(dtype, shape, out)])
}

/// The input rows (all but the last spatial axis) of `xg` (one group's `cg` input
/// channels): `(rows, row length)`.
fn input_rows(win: &Window) -> (usize, usize) {
    let iw = win.input[2];
    (win.input_size() / iw.max(1), iw)
}

/// Input channels `cg` by input positions `r0 * iw..(r0 + tr) * iw` of `xg`.
fn row_tile(xg: &[f32], cg: usize, in_sp: usize, r0: usize, tr: usize, iw: usize) -> Mat<'_> {
    Mat {
        data: &xg[r0 * iw..],
        rows: cg,
        cols: tr * iw,
        row_stride: in_sp,
        col_stride: 1,
    }
}

/// One group's transposed convolution (`wg` its `cg x (mg * ksz)` weights, `out_g` its
/// `mg` zeroed output planes): a GEMM of the transposed weights with a tile of input
/// rows, then the col2im scatter-add of the tile, tiled to bound the column buffer.
fn group_col2im(xg: &[f32], wg: &[f32], win: &Window, cg: usize, out_g: &mut [f32]) {
    let rows_k = wg.len() / cg;
    let (in_rows, iw) = input_rows(win);
    let tile_rows = (COL_BUDGET / (rows_k * iw).max(1)).clamp(1, in_rows.max(1));
    // The transposed weights map input channels to (output channel, tap) rows.
    let wt = Mat::row_major(wg, cg, rows_k).t();
    with_columns(rows_k * tile_rows * iw, |col| {
        let mut r0 = 0;
        while r0 < in_rows {
            let tr = tile_rows.min(in_rows - r0);
            let buf = &mut col[..rows_k * tr * iw];
            let xt = row_tile(xg, cg, win.input_size(), r0, tr, iw);
            sgemm(1.0, wt, xt, 0.0, buf, tr * iw);
            col2im(buf, win, r0, tr, out_g);
            r0 += tr;
        }
    });
}

/// One group's transposed convolution when the taps are disjoint ([`disjoint_taps`]):
/// blocks of output channels in parallel, each a single-threaded GEMM per tile of
/// input rows (the block's rows of the transposed weights) followed by the tile's
/// scatter into the block's planes. Each output element is one dot product over the
/// group's input channels, the same on any number of threads.
fn group_disjoint(xg: &[f32], wg: &[f32], win: &Window, cg: usize, out_g: &mut [f32]) {
    let (in_sp, out_sp, ksz) = (win.input_size(), win.output_size(), win.kernel_size());
    let rows_k = wg.len() / cg;
    let mg = rows_k / ksz;
    let (in_rows, iw) = input_rows(win);
    let block = mg.div_ceil(CHANNEL_BLOCKS);
    par::chunks_mut(out_g, block * out_sp, out_g.len(), |b, planes| {
        let rows = planes.len() / out_sp * ksz;
        let tile_rows = (DISJOINT_TILE / (rows * iw).max(1)).clamp(1, in_rows.max(1));
        // Rows (mo, tap) of the transposed weights for this block's channels.
        let wt = Mat {
            data: &wg[b * block * ksz..],
            rows,
            cols: cg,
            row_stride: 1,
            col_stride: rows_k,
        };
        with_columns(rows * tile_rows * iw, |col| {
            let mut r0 = 0;
            while r0 < in_rows {
                let tr = tile_rows.min(in_rows - r0);
                let buf = &mut col[..rows * tr * iw];
                let xt = row_tile(xg, cg, in_sp, r0, tr, iw);
                sgemm_serial(1.0, wt, xt, 0.0, buf, tr * iw);
                // SAFETY: f32 values are valid `MaybeUninit<f32>`s; only f32s are
                // written.
                let planes =
                    unsafe { &mut *(&mut *planes as *mut [f32] as *mut [MaybeUninit<f32>]) };
                scatter_disjoint(buf, win, r0, tr, planes);
                r0 += tr;
            }
        });
    });
}

/// Most blocks of output channels [`group_disjoint`] runs in parallel.
const CHANNEL_BLOCKS: usize = 8;

/// Column elements per tile when the taps are disjoint: small enough for the tile to
/// stay in cache between the GEMM that writes it and the scatter that reads it.
const DISJOINT_TILE: usize = 1 << 18;

/// Whether every output position takes exactly one tap of one input position, so that
/// the column tile is copied into the output instead of accumulated: strides equal
/// to the kernel, no dilation, no begin padding, and an output of exactly input x
/// kernel on every axis (any end padding cancels the output padding).
fn disjoint_taps(win: &Window) -> bool {
    (0..SPATIAL).all(|a| {
        win.stride[a] == win.kernel[a]
            && win.dilation[a] == 1
            && win.pad_begin[a] == 0
            && win.output[a] == win.input[a] * win.kernel[a]
    })
}

/// Writes the column tile (as [`col2im`] takes it) into `planes` (the output planes
/// of the tile's channels) when the taps are disjoint ([`disjoint_taps`]): output row
/// (iz kd + kz, iy kh + ky) of channel mo interleaves the `kw` column rows of taps
/// (mo, kz, ky, 0..kw) over input row (iz, iy). Nothing is read from `planes`: the
/// tiles of all input rows write every element once.
pub(crate) fn scatter_disjoint(
    col: &[f32],
    win: &Window,
    r0: usize,
    tr: usize,
    planes: &mut [MaybeUninit<f32>],
) {
    let out_sp = win.output_size();
    assert!(
        planes.len().is_multiple_of(out_sp.max(1)),
        "whole output planes"
    );
    // SAFETY: `planes` holds `planes.len() / out_sp` whole planes, borrowed mutably.
    unsafe {
        scatter_disjoint_to(
            col,
            win,
            r0,
            tr,
            OutPtr(planes.as_mut_ptr()),
            planes.len() / out_sp.max(1),
        )
    }
}

/// [`scatter_disjoint`] into the `count` output planes at `planes`, writing only the
/// output rows of input rows `r0..r0 + tr`: tasks with other input rows may write the
/// other rows of the same planes at the same time.
///
/// # Safety
/// `planes` must be valid for writes of `count` whole output planes, and no other
/// thread may access the rows written here meanwhile.
pub(crate) unsafe fn scatter_disjoint_to(
    col: &[f32],
    win: &Window,
    r0: usize,
    tr: usize,
    planes: OutPtr<MaybeUninit<f32>>,
    count: usize,
) {
    let [kd, kh, kw] = win.kernel;
    let [_, ih, iw] = win.input;
    let [_, oh, ow] = win.output;
    let (ksz, tp, out_sp) = (win.kernel_size(), tr * iw, win.output_size());
    for mo in 0..count {
        for r in 0..tr {
            let (iz, iy) = ((r0 + r) / ih, (r0 + r) % ih);
            for kz in 0..kd {
                for ky in 0..kh {
                    let first = (mo * ksz + (kz * kh + ky) * kw) * tp + r * iw;
                    let oy = (iz * kd + kz) * oh + iy * kh + ky;
                    let row =
                        std::slice::from_raw_parts_mut(planes.0.add(mo * out_sp + oy * ow), ow);
                    interleave(&col[first..], tp, kw, row);
                }
            }
        }
    }
}

/// `dst[ix k + kx] = src[kx stride + ix]`: `dst` interleaves `k` source rows of
/// `dst.len() / k` elements each, `stride` apart in `src`.
fn interleave(src: &[f32], stride: usize, k: usize, dst: &mut [MaybeUninit<f32>]) {
    let len = dst.len() / k;
    if k == 2 {
        // The common 2x2 upsampling, as a loop the compiler vectorizes.
        let (a, b) = (&src[..len], &src[stride..][..len]);
        for ((d, &x), &y) in dst.chunks_exact_mut(2).zip(a).zip(b) {
            d[0].write(x);
            d[1].write(y);
        }
        return;
    }
    for kx in 0..k {
        let row = &src[kx * stride..][..len];
        for (d, &v) in dst[kx..].iter_mut().step_by(k).zip(row) {
            d.write(v);
        }
    }
}

/// Scatter-adds the column tile (`mg*ksz` rows over input rows `r0..r0+tr`) into the
/// group's output planes, one output channel per parallel task.
fn col2im(col: &[f32], win: &Window, r0: usize, tr: usize, out_g: &mut [f32]) {
    let [_, kh, kw] = win.kernel;
    let [_, ih, iw] = win.input;
    let [od, oh, ow] = win.output;
    let out_sp = od * oh * ow;
    let ksz = win.kernel_size();
    let tp = tr * iw;
    let channel = |mo: usize, dst: &mut [f32]| {
        for kidx in 0..ksz {
            let (kz, ky, kx) = (kidx / (kh * kw), (kidx / kw) % kh, kidx % kw);
            let src_row = &col[(mo * ksz + kidx) * tp..][..tp];
            let off_x = (kx * win.dilation[2]) as isize - win.pad_begin[2] as isize;
            let (lo, hi) = valid_taps(off_x, win.stride[2], iw, ow as isize);
            for r in 0..tr {
                let row = r0 + r;
                let (iz, iy) = (row / ih, row % ih);
                let oz = (iz * win.stride[0] + kz * win.dilation[0]) as isize
                    - win.pad_begin[0] as isize;
                let oy = (iy * win.stride[1] + ky * win.dilation[1]) as isize
                    - win.pad_begin[1] as isize;
                if oz < 0 || oz >= od as isize || oy < 0 || oy >= oh as isize {
                    continue;
                }
                let dst_row = &mut dst[(oz as usize * oh + oy as usize) * ow..][..ow];
                let src = &src_row[r * iw..][..iw];
                for (ix, &v) in src.iter().enumerate().take(hi).skip(lo) {
                    let ox = ((ix * win.stride[2]) as isize + off_x) as usize;
                    dst_row[ox] += v;
                }
            }
        }
    };
    if out_g.len() * ksz >= PAR_MIN_ELEMS {
        out_g
            .par_chunks_mut(out_sp)
            .enumerate()
            .for_each(|(mo, dst)| channel(mo, dst));
    } else {
        out_g
            .chunks_mut(out_sp)
            .enumerate()
            .for_each(|(mo, dst)| channel(mo, dst));
    }
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Node, Tensor};

    fn node(attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node("ConvTranspose", attrs, 1)
    }

    fn run(attrs: &[(&str, Attr)], x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Tensor {
        eval_node(&node(attrs), &[Some(x), Some(w), b])
            .unwrap()
            .remove(0)
    }

    fn x3() -> Tensor {
        Tensor::from_f32(vec![1, 1, 3], vec![1.0, 2.0, 3.0])
    }

    fn ones4() -> Tensor {
        Tensor::from_f32(vec![1, 1, 4], vec![1.0; 4])
    }

    #[test]
    fn one_d_full_and_padded_outputs() {
        // Full transposed convolution of [1,2,3] with four ones: [1,3,6,6,5,3].
        assert_eq!(
            run(&[], &x3(), &ones4(), None).as_f32().unwrap(),
            &[1.0, 3.0, 6.0, 6.0, 5.0, 3.0]
        );
        let up = run(
            &[("auto_pad", Attr::String("SAME_UPPER".into()))],
            &x3(),
            &ones4(),
            None,
        );
        assert_eq!(up.as_f32().unwrap(), &[3.0, 6.0, 6.0]);
        let low = run(
            &[("auto_pad", Attr::String("SAME_LOWER".into()))],
            &x3(),
            &ones4(),
            None,
        );
        assert_eq!(low.as_f32().unwrap(), &[6.0, 6.0, 5.0]);
        let os = run(
            &[("output_shape", Attr::Ints(vec![3]))],
            &x3(),
            &ones4(),
            None,
        );
        assert_eq!(os.as_f32().unwrap(), &[6.0, 6.0, 5.0]);
        let strided = run(
            &[
                ("strides", Attr::Ints(vec![2])),
                ("output_padding", Attr::Ints(vec![1])),
            ],
            &x3(),
            &ones4(),
            None,
        );
        assert_eq!(
            strided.as_f32().unwrap(),
            &[1.0, 1.0, 3.0, 3.0, 5.0, 5.0, 3.0, 3.0, 0.0]
        );
        let padded = run(
            &[
                ("strides", Attr::Ints(vec![2])),
                ("pads", Attr::Ints(vec![1, 2])),
            ],
            &x3(),
            &ones4(),
            None,
        );
        assert_eq!(padded.as_f32().unwrap(), &[1.0, 3.0, 3.0, 5.0, 5.0]);
        let err = eval_node(
            &node(&[("output_shape", Attr::Ints(vec![8]))]),
            &[Some(&x3()), Some(&ones4())],
        );
        assert!(err.is_err());
        // A larger output_shape (by less than the stride) pads zeros at the end.
        let ones2 = Tensor::from_f32(vec![1, 1, 2], vec![1.0; 2]);
        let s3 = ("strides", Attr::Ints(vec![3]));
        let y = run(
            &[s3.clone(), ("output_shape", Attr::Ints(vec![10]))],
            &x3(),
            &ones2,
            None,
        );
        assert_eq!(
            y.as_f32().unwrap(),
            &[1.0, 1.0, 0.0, 2.0, 2.0, 0.0, 3.0, 3.0, 0.0, 0.0]
        );
        let y = run(
            &[s3, ("output_shape", Attr::Ints(vec![7]))],
            &x3(),
            &ones2,
            None,
        );
        assert_eq!(y.as_f32().unwrap(), &[1.0, 0.0, 2.0, 2.0, 0.0, 3.0, 3.0]);
    }

    #[test]
    fn two_d_groups_and_bias() {
        // 2 input channels, group 2, one output channel per group, 2x2 kernels, stride 2.
        let x = Tensor::from_f32(vec![1, 2, 1, 2], vec![1.0, 2.0, 10.0, 20.0]);
        let w = Tensor::from_f32(
            vec![2, 1, 2, 2],
            vec![1.0, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0],
        );
        let b = Tensor::from_f32(vec![2], vec![0.5, -0.5]);
        let y = run(
            &[("group", Attr::Int(2)), ("strides", Attr::Ints(vec![2, 2]))],
            &x,
            &w,
            Some(&b),
        );
        assert_eq!(y.shape(), &[1, 2, 2, 4]);
        assert_eq!(
            y.as_f32().unwrap(),
            &[
                1.5, 2.5, 2.5, 4.5, 3.5, 4.5, 6.5, 8.5, //
                9.5, 9.5, 19.5, 19.5, 9.5, 9.5, 19.5, 19.5,
            ]
        );
    }

    #[test]
    fn dilation_spreads_taps() {
        let x = Tensor::from_f32(vec![1, 1, 1], vec![2.0]);
        let w = Tensor::from_f32(vec![1, 1, 2], vec![1.0, 3.0]);
        let y = run(&[("dilations", Attr::Ints(vec![3]))], &x, &w, None);
        assert_eq!(y.as_f32().unwrap(), &[2.0, 0.0, 0.0, 6.0]);
    }
}

#[cfg(test)]
mod speed {
    use crate::eval_node;
    use crate::gemm::{sgemm, Mat};
    use crate::probe::best_ms;
    use rtq_ir::{Attr, Tensor};

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec conv_transpose::speed -- --ignored --nocapture"]
    fn det_shapes() {
        let attrs = [
            ("kernel_shape", Attr::Ints(vec![2, 2])),
            ("strides", Attr::Ints(vec![2, 2])),
        ];
        let n = rtq_test_support::node("ConvTranspose", &attrs, 1);
        for (c, m, hw) in [(24, 24, 80), (24, 1, 160)] {
            let x = Tensor::from_f32(
                vec![1, c, hw, hw],
                (0..c * hw * hw).map(|i| (i % 13) as f32 * 0.1).collect(),
            );
            let w = Tensor::from_f32(
                vec![c, m, 2, 2],
                (0..c * m * 4).map(|i| (i % 7) as f32 * 0.1).collect(),
            );
            let ms = best_ms(20, || {
                eval_node(&n, &[Some(&x), Some(&w)]).unwrap();
            });
            let (xs, ws) = (x.as_f32().unwrap(), w.as_f32().unwrap());
            let mut col = vec![0.0f32; m * 4 * hw * hw];
            let gemm = best_ms(20, || {
                let wt = Mat::row_major(ws, c, m * 4).t();
                let xm = Mat::row_major(xs, c, hw * hw);
                sgemm(1.0, wt, xm, 0.0, &mut col, hw * hw);
            });
            let win = crate::ops::window::Window {
                rank: 2,
                input: [1, hw, hw],
                kernel: [1, 2, 2],
                stride: [1, 2, 2],
                dilation: [1, 1, 1],
                pad_begin: [0; 3],
                pad_end: [0; 3],
                output: [1, 2 * hw, 2 * hw],
            };
            let mut out = crate::par::uninit_vec(m * 4 * hw * hw);
            let scatter = best_ms(20, || super::scatter_disjoint(&col, &win, 0, hw, &mut out));
            let zeroed = best_ms(20, || {
                std::hint::black_box(vec![0.0f32; m * 4 * hw * hw]);
            });
            println!(
                "[1,{c},{hw},{hw}] -> {m} channels: {ms:.4} ms (its GEMM {gemm:.4} ms, \
                 whole scatter {scatter:.4} ms, zeroed output {zeroed:.4} ms)"
            );
        }
    }
}
