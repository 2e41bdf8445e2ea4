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
    let mut shape = vec![n, m];
    shape.extend(win.output_dims());
    if n * m * out_sp == 0 {
        return Ok(vec![tensor_from_f32(dtype, shape, Vec::new())]);
    }
    // Image and group of the output planes' chunk `t`: its group index, its inputs and
    // its weights.
    let operands = |t: usize| {
        let (ni, g) = (t / group, t % group);
        let xg = &xs[(ni * c + g * cg) * in_sp..][..cg * in_sp];
        (g, xg, &ws[g * cg * rows_k..][..cg * rows_k])
    };
    if disjoint_taps(&win) {
        // Every output element is written once, its bias included.
        let mut out = par::uninit_vec(n * m * out_sp);
        for (t, out_g) in out.chunks_mut(mg * out_sp).enumerate() {
            let (g, xg, wg) = operands(t);
            let bg = bias.as_deref().map(|b| &b[g * mg..][..mg]);
            group_disjoint(xg, wg, bg, &win, cg, out_g);
        }
        // SAFETY: `group_disjoint` wrote every element of every group's planes.
        let out = unsafe { par::assume_written(out) };
        return Ok(vec![tensor_from_f32(dtype, shape, out)]);
    }
    let mut out = vec![0.0f32; n * m * out_sp];
    for (t, out_g) in out.chunks_mut(mg * out_sp).enumerate() {
        let (_, xg, wg) = operands(t);
        group_col2im(xg, wg, &win, cg, out_g);
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
/// tiles of input rows in parallel, each a single-threaded GEMM of all the group's
/// transposed weights (`mg * ksz` rows) with the tile, its bias added per row while
/// the product is in cache, then spread into the tile's own output rows of every
/// plane (`out_g`, every element written). Each output element is one dot product
/// over the group's input channels plus its bias, the same on any number of threads.
fn group_disjoint(
    xg: &[f32],
    wg: &[f32],
    bias: Option<&[f32]>,
    win: &Window,
    cg: usize,
    out_g: &mut [MaybeUninit<f32>],
) {
    let (in_sp, ksz) = (win.input_size(), win.kernel_size());
    let rows = wg.len() / cg;
    let mg = rows / ksz;
    let (in_rows, iw) = input_rows(win);
    let tile_rows = (DISJOINT_TILE / (rows * iw).max(1))
        .clamp(1, in_rows.max(1))
        .min(in_rows.div_ceil(DISJOINT_TASKS).max(1));
    let tiles = in_rows.div_ceil(tile_rows);
    // Row (mo, tap) of the transposed weights.
    let wt = Mat {
        data: wg,
        rows,
        cols: cg,
        row_stride: 1,
        col_stride: rows,
    };
    assert_eq!(out_g.len(), mg * win.output_size(), "output planes");
    let ptr = OutPtr(out_g.as_mut_ptr());
    let run = |t: usize| {
        let r0 = t * tile_rows;
        let tr = tile_rows.min(in_rows - r0);
        let cols = tr * iw;
        with_columns(rows * cols, |buf| {
            sgemm_serial(1.0, wt, row_tile(xg, cg, in_sp, r0, tr, iw), 0.0, buf, cols);
            if let Some(bias) = bias {
                for (r, row) in buf.chunks_exact_mut(cols).enumerate() {
                    let b = bias[r / ksz];
                    row.iter_mut().for_each(|v| *v += b);
                }
            }
            // SAFETY: `out_g` holds the group's `mg` whole planes, and this task alone
            // writes the output rows of its input rows `r0..r0 + tr`.
            unsafe { scatter_disjoint_to(buf, win, r0, tr, ptr, mg) };
        });
    };
    if rows * cg * in_sp < PAR_MIN_ELEMS {
        (0..tiles).for_each(run);
    } else {
        (0..tiles).into_par_iter().for_each(run);
    }
}

/// Fewest tiles of input rows [`group_disjoint`] cuts a group into (its tasks).
const DISJOINT_TASKS: usize = 8;

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

/// Writes the column tile (as [`col2im`] takes it) into the `count` output planes at
/// `planes` (those of the tile's channels) when the taps are disjoint
/// ([`disjoint_taps`]): output row (iz kd + kz, iy kh + ky) of channel mo interleaves
/// the `kw` column rows of taps (mo, kz, ky, 0..kw) over input row (iz, iy). Nothing
/// is read from `planes`, and only the output rows of input rows `r0..r0 + tr` are
/// written: the tiles of all input rows write every element once, and tasks with
/// other input rows may write the other rows of the same planes at the same time.
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

    /// Direct definition of a 2-D transposed convolution without padding.
    fn reference_2d(x: &Tensor, w: &Tensor, b: &Tensor, group: usize, stride: usize) -> Vec<f32> {
        let (xs, ws, bs) = (
            x.as_f32().unwrap(),
            w.as_f32().unwrap(),
            b.as_f32().unwrap(),
        );
        let [n, c, h, wd] = x.shape()[..] else {
            panic!()
        };
        let [_, mg, kh, kw] = w.shape()[..] else {
            panic!()
        };
        let (cg, m) = (c / group, mg * group);
        let (oh, ow) = ((h - 1) * stride + kh, (wd - 1) * stride + kw);
        let mut out = vec![0.0f32; n * m * oh * ow];
        for ni in 0..n {
            for mo in 0..m {
                let (g, mi) = (mo / mg, mo % mg);
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = bs[mo];
                        for ci in 0..cg {
                            let ch = g * cg + ci;
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let (ty, tx) =
                                        (oy as isize - ky as isize, ox as isize - kx as isize);
                                    if ty < 0
                                        || tx < 0
                                        || !(ty as usize).is_multiple_of(stride)
                                        || !(tx as usize).is_multiple_of(stride)
                                    {
                                        continue;
                                    }
                                    let (iy, ix) = (ty as usize / stride, tx as usize / stride);
                                    if iy >= h || ix >= wd {
                                        continue;
                                    }
                                    acc += xs[((ni * c + ch) * h + iy) * wd + ix]
                                        * ws[((ch * mg + mi) * kh + ky) * kw + kx];
                                }
                            }
                        }
                        out[((ni * m + mo) * oh + oy) * ow + ox] = acc;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn disjoint_tiles_match_the_definition() {
        // Kernel == stride (every output element one dot product, tiles of input rows
        // written in parallel) and kernel > stride (overlapping taps, col2im), with
        // groups, bias and sizes that leave partial tiles.
        let mut rng = rtq_test_support::Rng::new(7);
        for (n, c, m, h, wd, k, stride, group) in [
            (2, 48, 24, 23, 17, 2, 2, 1),
            (1, 32, 16, 41, 9, 3, 3, 2),
            (1, 16, 8, 13, 11, 3, 2, 1),
        ] {
            let x = rng.tensor(&[n, c, h, wd]);
            let w = rng.tensor(&[c, m / group, k, k]);
            let b = rng.tensor(&[m]);
            let s = stride as i64;
            let y = run(
                &[
                    ("group", Attr::Int(group as i64)),
                    ("strides", Attr::Ints(vec![s, s])),
                ],
                &x,
                &w,
                Some(&b),
            );
            let want = reference_2d(&x, &w, &b, group, stride);
            let got = y.as_f32().unwrap();
            assert_eq!(got.len(), want.len());
            for (i, (g, r)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - r).abs() <= 1e-4 * (1.0 + r.abs()),
                    "element {i}: {g} vs {r}"
                );
            }
        }
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
    use crate::par::OutPtr;
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
            let planes = OutPtr(out.as_mut_ptr());
            // SAFETY: `out` holds the `m` whole planes, written by nothing else.
            let scatter = best_ms(20, || unsafe {
                super::scatter_disjoint_to(&col, &win, 0, hw, planes, m)
            });
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
