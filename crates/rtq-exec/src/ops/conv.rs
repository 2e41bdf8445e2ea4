//! Conv (1-D, 2-D and 3-D; groups, dilations, strides, pads, auto_pad, optional bias).
//!
//! Depthwise convolutions (one input channel per group) run a direct kernel over
//! output planes in parallel (on AVX-512, [`conv_depthwise`]'s). On AVX-512, group-1
//! 2-D convolutions with few output channels (stride 1) or few input channels (strides
//! up to 2: stems) run [`conv_direct`]'s register-blocked kernel; 3x3 stride-1 ones
//! with enough channels use Winograd F(2x2, 3x3)
//! (see [`winograd`]); the others use im2col (skipped for plain 1x1) followed by
//! SGEMM, tiling the output positions so the column buffer stays bounded.

use rayon::prelude::*;

use crate::ctx::OpCtx;
use crate::float::tensor_from_f32;
use crate::gemm::{self, sgemm_write, sgemm_write_raw, Finish, Mat};
use crate::memo::derived;
use crate::ops::columns::{with_columns, COL_BUDGET};
use crate::ops::window::{valid_taps, Window};
use crate::ops::winograd;
use crate::ops::{conv_channels, conv_depthwise, conv_direct};
use crate::par::{self, OutPtr};
use crate::registry::Kernel;
use crate::simd::multiversioned;
use crate::ExecError;
use rtq_ir::Tensor;
use std::mem::MaybeUninit;
use std::ops::Range;

/// Conv kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("Conv", conv)];

/// rtq's own fused convolution (domain [`INTEGER_DOMAIN`](super::integer::INTEGER_DOMAIN)),
/// made at load by [`crate::fuse_activations`]: `FusedConv` is a Conv (same inputs and
/// attributes), plus an optional residual at input 3 (a tensor of the output's shape,
/// added after the bias), then the activation named by attribute `activation` (`Relu`
/// or `Identity`). On the im2col/GEMM path these are applied to each block of the
/// product while it is in cache, on the direct path to each register block as it is
/// stored; the other paths apply them in a pass over the output.
pub(crate) const FUSED_KERNELS: &[(&str, Kernel)] = &[("FusedConv", fused_conv)];

/// Elements per parallel task of the residual-and-Relu pass of the non-GEMM paths.
const FINISH_CHUNK: usize = 1 << 14;
/// Smallest output tile when the buffer budget forces tiling.
const MIN_TILE: usize = 256;
/// SGEMM problems below this size (m*k + k*n) run single-threaded in the gemm crate, so
/// independent ones are spread over rayon instead.
const SMALL_GEMM: usize = 1 << 15;

/// The resolved problem of one convolution.
pub(crate) struct ConvProblem {
    /// Batch size.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Output channels.
    pub m: usize,
    /// Groups.
    pub group: usize,
    /// Spatial window.
    pub win: Window,
}

fn conv(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    conv_then(ctx, false)
}

fn fused_conv(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    match ctx.attr_str("activation", "")? {
        "Relu" => conv_then(ctx, true),
        "Identity" => conv_then(ctx, false),
        other => Err(ctx.err(format!("unsupported fused activation `{other}`"))),
    }
}

/// A Conv, plus the residual at input 3 when present, then Relu when `relu`.
fn conv_then(ctx: &OpCtx<'_>, relu: bool) -> Result<Vec<Tensor>, ExecError> {
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
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let (m, cg) = (w.shape()[0], w.shape()[1]);
    let group = ctx.attr_int("group", 1)?;
    if group < 1 {
        return Err(ctx.err(format!("group must be positive, got {group}")));
    }
    let group = group as usize;
    if c % group != 0 || c / group != cg || m % group != 0 {
        return Err(ctx.err(format!(
            "X has {c} channels and W shape {:?}: incompatible with group={group}",
            w.shape()
        )));
    }
    if let Some(ks) = ctx.attr_ints("kernel_shape")? {
        let declared: Vec<i64> = w.shape()[2..].iter().map(|&d| d as i64).collect();
        if !ks.is_empty() && ks != declared {
            return Err(ctx.err(format!(
                "kernel_shape {ks:?} does not match W's spatial shape {declared:?}"
            )));
        }
    }
    let win = Window::resolve(ctx, &x.shape()[2..], &w.shape()[2..], true, false)?;
    let xs = ctx.float_input(0)?;
    let ws = ctx.float_input(1)?;
    let bias = ctx.opt_float_input(2)?;
    if let Some(b) = &bias {
        if b.len() != m {
            return Err(ctx.err(format!("bias has {} elements, expected {m}", b.len())));
        }
    }
    let problem = ConvProblem {
        n,
        c,
        m,
        group,
        win,
    };
    let out_shape: Vec<usize> = [n, m]
        .into_iter()
        .chain(problem.win.output_dims())
        .collect();
    let residual = ctx.opt_float_input(3)?;
    if let (Some(r), Some(t)) = (&residual, ctx.opt_input(3)) {
        if t.shape() != out_shape.as_slice() || r.len() != t.len() {
            return Err(ctx.err(format!(
                "residual of shape {:?} does not match the output's {out_shape:?}",
                t.shape()
            )));
        }
    }
    let direct = conv_direct::applies(&problem);
    let wino = !direct && winograd::applies(&problem);
    let channels = !direct && !wino && conv_channels::applies(&problem);
    let gemm = !direct && !wino && !channels && problem.c / problem.group > 1;
    // Bias, residual and Relu applied to each block of the output as it is computed,
    // while it is in cache.
    let finish = Finish {
        bias: bias.as_deref(),
        residual: residual.as_deref(),
        relu,
    };
    let out = if gemm {
        conv_gemm(&xs, &ws, finish, &problem)
    } else if channels || direct {
        // Both kernels write every output element: the whole output as one piece.
        let len = n * m * problem.win.output_size();
        if channels {
            let packed = derived(ctx.memo(), || conv_channels::pack_weights(&ws, &problem));
            par::written(len, len.max(1), 0, |_, out| {
                conv_channels::conv(&xs, &packed, finish, &problem, out)
            })
        } else {
            let packed = derived(ctx.memo(), || conv_direct::pack_weights(&ws, &problem));
            par::written(len, len.max(1), 0, |_, out| {
                conv_direct::conv(&xs, &packed, finish, &problem, out)
            })
        }
    } else {
        let mut out = broadcast_bias(bias.as_deref(), n, m, problem.win.output_size());
        if wino {
            let u = derived(ctx.memo(), || winograd::transform_weights(&ws, &problem));
            winograd::conv(&xs, &u, &problem, &mut out);
        } else if out.is_empty() {
        } else if conv_depthwise::applies(&problem) {
            conv_depthwise::conv(&xs, &ws, &problem, &mut out);
        } else {
            depthwise(&xs, &ws, &problem, &mut out);
        }
        // The GEMM path's per-row finish (residual, then Relu), in one pass.
        if residual.is_some() || relu {
            let work = out.len();
            par::chunks_mut(&mut out, FINISH_CHUNK, work, |i, chunk| {
                let r = residual
                    .as_deref()
                    .map(|r| &r[i * FINISH_CHUNK..][..chunk.len()]);
                gemm::finish_row(chunk, None, r, relu);
            });
        }
        out
    };
    Ok(vec![tensor_from_f32(dtype, out_shape, out)])
}

/// The initial output of a convolution: every output plane filled with its channel's
/// bias, or zeros (written once, in parallel for big outputs, instead of zero-filled
/// and then overwritten).
fn broadcast_bias(bias: Option<&[f32]>, n: usize, m: usize, out_sp: usize) -> Vec<f32> {
    let Some(bias) = bias else {
        return vec![0.0; n * m * out_sp];
    };
    let len = n * m * out_sp;
    par::written(len, out_sp.max(1), len, |plane, dst| {
        let b = bias[plane % m];
        dst.iter_mut().for_each(|d| {
            d.write(b);
        });
    })
}

/// A convolution of at least two input channels per group in f32, by im2col (skipped
/// for plain 1x1) and SGEMM: `n * m * output_size` elements, `finish` applied to each
/// (its bias per output channel, its residual laid out as the output).
pub(crate) fn conv_gemm(x: &[f32], w: &[f32], finish: Finish<'_>, p: &ConvProblem) -> Vec<f32> {
    let cg = p.c / p.group;
    let mg = p.m / p.group;
    let win = &p.win;
    let (in_sp, out_sp) = (win.input_size(), win.output_size());
    let mut out = par::uninit_vec(p.n * p.m * out_sp);
    if out.is_empty() {
        return Vec::new();
    }
    let kg = cg * win.kernel_size();
    let pointwise = win.is_pointwise();
    let tile = if pointwise || kg * out_sp <= COL_BUDGET {
        out_sp
    } else {
        (COL_BUDGET / kg).max(MIN_TILE).min(out_sp)
    };
    let tasks = p.n * p.group;
    let col_len = if pointwise { 0 } else { kg * tile };
    // Output positions `range` in balanced tiles of at most `tile` positions: when
    // there are several, none is under half a tile, so every product rounds as any
    // other cut would (see `gemm::Split`).
    let tiles = |range: Range<usize>| {
        let count = range.len().div_ceil(tile).max(1);
        let at = move |i: usize| range.start + range.len() * i / count;
        (0..count).map(move |i| at(i)..at(i + 1))
    };
    let finish_of = |t: usize, p0: usize| Finish {
        bias: finish.bias.map(|b| &b[(t % p.group) * mg..][..mg]),
        residual: finish.residual.map(|r| &r[t * mg * out_sp + p0..]),
        relu: finish.relu,
    };
    let input_of = |t: usize| {
        let (ni, g) = (t / p.group, t % p.group);
        let xg = &x[(ni * p.c + g * cg) * in_sp..][..cg * in_sp];
        let wg = Mat::row_major(&w[g * mg * kg..][..mg * kg], mg, kg);
        (xg, wg)
    };
    let threads = rayon::current_num_threads();
    let pieces = (tasks == 1 && !pointwise)
        .then(|| gemm::column_pieces(mg, kg, out_sp, threads))
        .flatten();
    if let Some(count) = pieces {
        // One image and group, cut into one piece of output positions per thread,
        // each building the columns it multiplies (in its own cache).
        let (xg, wg) = input_of(0);
        let base = OutPtr(out.as_mut_ptr().cast::<f32>());
        let len = out.len();
        (0..count).into_par_iter().for_each(|piece| {
            with_columns(col_len, |col| {
                for r in tiles(gemm::column_piece(out_sp, count, piece)) {
                    let buf = &mut col[..kg * r.len()];
                    im2col(xg, win, r.start, r.len(), buf, false);
                    let cols = Mat::row_major(buf, kg, r.len());
                    // SAFETY: the piece writes columns `r` of the `mg x out_sp`
                    // output, which no other piece writes.
                    unsafe {
                        let c = base.offset(r.start).0;
                        let finish = finish_of(0, r.start);
                        sgemm_write_raw(wg, cols, c, len - r.start, out_sp, finish, true);
                    }
                }
            })
        });
        // SAFETY: the pieces cover every output position of every channel.
        return unsafe { par::assume_written(out) };
    }
    // One task: image `ni`, group `g`, writing its `mg x out_sp` block of `out`.
    let task = |t: usize, block: &mut [MaybeUninit<f32>], col: &mut [f32], nested: bool| {
        let (xg, wg) = input_of(t);
        if pointwise {
            let xm = Mat::row_major(xg, cg, out_sp);
            sgemm_write(wg, xm, block, out_sp, finish_of(t, 0));
            return;
        }
        for r in tiles(0..out_sp) {
            let buf = &mut col[..kg * r.len()];
            im2col(xg, win, r.start, r.len(), buf, nested);
            let cols = Mat::row_major(buf, kg, r.len());
            sgemm_write(
                wg,
                cols,
                &mut block[r.start..],
                out_sp,
                finish_of(t, r.start),
            );
        }
    };
    let block_len = mg * out_sp;
    if tasks > 1 && mg * kg + kg * tile < SMALL_GEMM {
        out.par_chunks_mut(block_len)
            .enumerate()
            .for_each(|(t, block)| with_columns(col_len, |col| task(t, block, col, false)));
    } else {
        with_columns(col_len, |col| {
            for (t, block) in out.chunks_mut(block_len).enumerate() {
                task(t, block, col, true);
            }
        });
    }
    // SAFETY: the tasks' blocks cover `out`, and each task's products (over all its
    // column tiles) wrote every element of its block.
    unsafe { par::assume_written(out) }
}

/// Fills `col` (`kg x tp`, row-major) with the input patches of output positions
/// `p0..p0 + tp`: row `(ci, kz, ky, kx)` holds, for each position, the input element
/// under that kernel tap (0 in the padding).
pub(crate) fn im2col<T: Copy + Default + Send + Sync>(
    xg: &[T],
    win: &Window,
    p0: usize,
    tp: usize,
    col: &mut [T],
    parallel: bool,
) {
    let [_, kh, kw] = win.kernel;
    let [id, ih, iw] = win.input;
    let [_, oh, ow] = win.output;
    let ksz = win.kernel_size();
    let in_sp = id * ih * iw;
    let work = if parallel { col.len() } else { 0 };
    par::chunks_mut(col, tp, work, |r, dst| {
        let (ci, kidx) = (r / ksz, r % ksz);
        let (kz, ky, kx) = (kidx / (kh * kw), (kidx / kw) % kh, kidx % kw);
        let xc = &xg[ci * in_sp..][..in_sp];
        let off_x = (kx * win.dilation[2]) as isize - win.pad_begin[2] as isize;
        let (ox_lo, ox_hi) = valid_taps(off_x, win.stride[2], ow, iw as isize);
        let sw = win.stride[2];
        // Output coordinates of position `p0`, then advanced run by run (no division
        // per output row).
        let (mut od, rem) = (p0 / (oh * ow), p0 % (oh * ow));
        let (mut oy, mut ox) = (rem / ow, rem % ow);
        let mut i = 0;
        while i < tp {
            let run = (ow - ox).min(tp - i);
            let out = &mut dst[i..i + run];
            let iz =
                (od * win.stride[0] + kz * win.dilation[0]) as isize - win.pad_begin[0] as isize;
            let iy =
                (oy * win.stride[1] + ky * win.dilation[1]) as isize - win.pad_begin[1] as isize;
            if iz < 0 || iz >= id as isize || iy < 0 || iy >= ih as isize {
                out.fill(T::default());
            } else {
                let src = &xc[(iz as usize * ih + iy as usize) * iw..][..iw];
                let lo = ox_lo.clamp(ox, ox + run) - ox;
                let hi = ox_hi.clamp(ox, ox + run) - ox;
                // Padding edges are a few elements: no `memset` call for them.
                out[..lo].iter_mut().for_each(|o| *o = T::default());
                out[hi..].iter_mut().for_each(|o| *o = T::default());
                if lo < hi {
                    let first = ((ox + lo) * sw) as isize + off_x;
                    let first = first as usize;
                    if sw == 1 {
                        out[lo..hi].copy_from_slice(&src[first..first + (hi - lo)]);
                    } else {
                        gather_strided(&mut out[lo..hi], &src[first..], sw);
                    }
                }
            }
            i += run;
            ox += run;
            if ox == ow {
                ox = 0;
                oy += 1;
                if oy == oh {
                    oy = 0;
                    od += 1;
                }
            }
        }
    });
}

/// `dst[j] = src[j * step]` for every `j` of `dst`. Stride 2 (the common
/// down-sampling case) reads `src` in pairs, which vectorises.
fn gather_strided<T: Copy>(dst: &mut [T], src: &[T], step: usize) {
    if step == 2 {
        if let Some((last, head)) = dst.split_last_mut() {
            for (d, pair) in head.iter_mut().zip(src.chunks_exact(2)) {
                *d = pair[0];
            }
            *last = src[2 * head.len()];
        }
    } else {
        for (d, &v) in dst.iter_mut().zip(src.iter().step_by(step)) {
            *d = v;
        }
    }
}

/// Direct convolution when every group has one input channel (depthwise and
/// channel-multiplier convolutions): each output plane reads one input plane.
/// `out` holds the bias planes (or zeros) on entry.
pub(crate) fn depthwise(x: &[f32], w: &[f32], p: &ConvProblem, out: &mut [f32]) {
    let (out_sp, ksz) = (p.win.output_size(), p.win.kernel_size());
    let work = out.len() * ksz;
    par::chunks_mut(out, out_sp, work, |plane, dst| {
        depthwise_plane(x, w, p, plane, dst)
    });
}

multiversioned! {
    /// One output plane of a depthwise convolution (`dst` holds its bias or zeros).
    pub(crate) fn depthwise_plane(x: &[f32], w: &[f32], p: &ConvProblem, plane: usize, dst: &mut [f32])
        => depthwise_plane_body
}

/// Most kernel rows (depth x height taps) the blocked path handles.
const DW_MAX_ROWS: usize = 32;

/// Output planes narrower than this are computed from a zero-padded copy of the input
/// plane: on a 20- or 10-wide map most columns touch the padding, and the per-tap edge
/// handling cost more than the arithmetic (PP-OCRv4 det's 5x5 depthwise layers on
/// 20x20 maps: 0.60 ms each before, 0.21 after). On wider planes the copy costs more
/// than the edges (a 160-wide stride-2 layer took 2.5x as long).
const DW_PAD_BELOW: usize = 64;

#[inline(always)]
fn depthwise_plane_body(x: &[f32], w: &[f32], p: &ConvProblem, plane: usize, dst: &mut [f32]) {
    let win = &p.win;
    if win.kernel[0] == 1
        && win.output[0] == 1
        && (win.output[2] < DW_PAD_BELOW || win.stride[2] > 1)
    {
        depthwise_plane_padded(x, w, p, plane, dst);
        return;
    }
    let (in_sp, ksz) = (win.input_size(), win.kernel_size());
    let mult = p.m / p.group;
    let [_, kh, kw] = win.kernel;
    let [_, ih, iw] = win.input;
    let [od_n, oh_n, ow_n] = win.output;
    let (ni, mo) = (plane / p.m, plane % p.m);
    let ci = mo / mult;
    let xp = &x[(ni * p.c + ci) * in_sp..][..in_sp];
    let wk = &w[mo * ksz..][..ksz];
    let (sw, dw) = (win.stride[2], win.dilation[2]);
    let pad = win.pad_begin[2] as isize;
    // Output columns every horizontal tap reads inside the input.
    let (mut inner_lo, mut inner_hi) = (0, ow_n);
    for kx in 0..kw {
        let (lo, hi) = valid_taps((kx * dw) as isize - pad, sw, ow_n, iw as isize);
        inner_lo = inner_lo.max(lo);
        inner_hi = inner_hi.min(hi);
    }
    // (input row offset, first weight index) of each valid (kz, ky) of one output row.
    let mut rows = [(0usize, 0usize); DW_MAX_ROWS];
    for od in 0..od_n {
        let (sz, z_lo, z_hi) = win.taps(0, od);
        for oy in 0..oh_n {
            let (sy, y_lo, y_hi) = win.taps(1, oy);
            let row = &mut dst[(od * oh_n + oy) * ow_n..][..ow_n];
            let mut n_rows = 0;
            for kz in z_lo..z_hi {
                let iz = (sz + (kz * win.dilation[0]) as isize) as usize;
                for ky in y_lo..y_hi {
                    let iy = (sy + (ky * win.dilation[1]) as isize) as usize;
                    if n_rows < DW_MAX_ROWS {
                        rows[n_rows] = ((iz * ih + iy) * iw, (kz * kh + ky) * kw);
                    }
                    n_rows += 1;
                }
            }
            // Interior columns in blocks: every tap accumulated in registers, one store
            // (the same additions in the same order as the tap-by-tap loop below).
            // Interior columns in blocks (wider for stride 1, where the per-tap work is
            // one contiguous load; measured on PP-OCRv4 det's shapes).
            // Narrow planes (a 20- or 10-wide feature map) take narrower blocks.
            let interior = inner_hi.saturating_sub(inner_lo);
            let taps = &rows[..n_rows.min(DW_MAX_ROWS)];
            let args = (inner_lo, inner_hi);
            let geometry = (sw, dw, pad);
            let done = match (n_rows <= DW_MAX_ROWS, sw, interior) {
                (false, _, _) => inner_lo,
                (true, 1, 32..) => dw_blocks::<32>(row, xp, wk, taps, args, kw, geometry),
                (true, _, 16..) => dw_blocks::<16>(row, xp, wk, taps, args, kw, geometry),
                (true, _, 8..) => dw_blocks::<8>(row, xp, wk, taps, args, kw, geometry),
                (true, _, _) => inner_lo,
            };
            // Everything else tap by tap: columns before the blocks and after them.
            for (seg_lo, seg_hi) in [(0, inner_lo), (done, ow_n)] {
                for kz in z_lo..z_hi {
                    let iz = (sz + (kz * win.dilation[0]) as isize) as usize;
                    for ky in y_lo..y_hi {
                        let iy = (sy + (ky * win.dilation[1]) as isize) as usize;
                        let src = &xp[(iz * ih + iy) * iw..][..iw];
                        for kx in 0..kw {
                            let wv = wk[(kz * kh + ky) * kw + kx];
                            let off = (kx * dw) as isize - pad;
                            let (lo, hi) = valid_taps(off, sw, ow_n, iw as isize);
                            let (lo, hi) = (lo.max(seg_lo), hi.min(seg_hi));
                            if lo >= hi {
                                continue;
                            }
                            if sw == 1 {
                                let first = (lo as isize + off) as usize;
                                let s = &src[first..first + (hi - lo)];
                                for (o, &v) in row[lo..hi].iter_mut().zip(s) {
                                    *o += wv * v;
                                }
                            } else {
                                for (ox, o) in row.iter_mut().enumerate().take(hi).skip(lo) {
                                    let ix = ((ox * sw) as isize + off) as usize;
                                    *o += wv * src[ix];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One 2-D depthwise output plane from a zero-padded copy of its input plane, split
/// by column phase for strided convolutions (phase `q` holds padded columns `q`,
/// `q + sw`, ...), so that every tap of an output block is one contiguous load:
/// output column `ox`, tap `kx` reads phase `(kx * dw) % sw` at `ox + (kx * dw) / sw`.
/// Every output column is then an interior one, computed in register blocks (the last
/// block overlapping the one before), taps in the same order as the unpadded paths
/// (the padding adds products with zero).
#[inline(always)]
fn depthwise_plane_padded(x: &[f32], w: &[f32], p: &ConvProblem, plane: usize, dst: &mut [f32]) {
    let win = &p.win;
    let (in_sp, ksz) = (win.input_size(), win.kernel_size());
    let mult = p.m / p.group;
    let [_, kh, kw] = win.kernel;
    let [_, ih, iw] = win.input;
    let [_, oh_n, ow_n] = win.output;
    let (ni, mo) = (plane / p.m, plane % p.m);
    let ci = mo / mult;
    let xp = &x[(ni * p.c + ci) * in_sp..][..in_sp];
    let wk = &w[mo * ksz..][..ksz];
    let (top, left) = (win.pad_begin[1], win.pad_begin[2]);
    let (sh, sw) = (win.stride[1], win.stride[2]);
    let (dh, dw) = (win.dilation[1], win.dilation[2]);
    // Each phase row holds the columns one output row's taps read at that phase.
    let pw = ow_n + ((kw - 1) * dw) / sw + 1;
    let ph = ((oh_n - 1) * sh + (kh - 1) * dh + 1).max(top + ih);
    let mut phases = vec![0.0f32; sw * ph * pw];
    for q in 0..sw {
        // Padded columns q, q + sw, ...: input column `j * sw + q - left`.
        let first_j = left.saturating_sub(q).div_ceil(sw);
        for iy in 0..ih {
            let src = &xp[iy * iw..][..iw];
            let dst = &mut phases[(q * ph + top + iy) * pw..][..pw];
            for (j, d) in dst.iter_mut().enumerate().skip(first_j) {
                match src.get(j * sw + q - left) {
                    Some(&v) => *d = v,
                    None => break,
                }
            }
        }
    }
    // (phase, column offset) of each horizontal tap.
    let taps: Vec<(usize, usize)> = (0..kw).map(|kx| ((kx * dw) % sw, (kx * dw) / sw)).collect();
    // Where tap (ky, kx) of output column 0 reads, for the current output row.
    let mut bases = vec![0usize; kh * kw];
    for oy in 0..oh_n {
        for ky in 0..kh {
            for (kx, &(q, off)) in taps.iter().enumerate() {
                bases[ky * kw + kx] = (q * ph + oy * sh + ky * dh) * pw + off;
            }
        }
        let row = &mut dst[oy * ow_n..][..ow_n];
        let done = match ow_n {
            32.. => dw_phase_blocks::<32>(row, &phases, wk, &bases),
            16.. => dw_phase_blocks::<16>(row, &phases, wk, &bases),
            8.. => dw_phase_blocks::<8>(row, &phases, wk, &bases),
            _ => 0,
        };
        for (ox, o) in row.iter_mut().enumerate().skip(done) {
            for (&wv, &base) in wk.iter().zip(&bases) {
                *o += wv * phases[base + ox];
            }
        }
    }
}

/// Every column of `row` (at least `B`) in blocks of `B` held in registers: tap `t`
/// of output column `ox` reads `phases[bases[t] + ox]` (see [`depthwise_plane_padded`]);
/// the last block overlaps the one before and starts from the values its columns held
/// on entry. Returns the row's width.
#[inline(always)]
fn dw_phase_blocks<const B: usize>(
    row: &mut [f32],
    phases: &[f32],
    wk: &[f32],
    bases: &[usize],
) -> usize {
    let n = row.len();
    let last = n - B;
    let last_init: [f32; B] = row[last..].try_into().expect("a block");
    let mut done = 0;
    while done < n {
        let start = done.min(last);
        let mut acc: [f32; B] = if start == last {
            last_init
        } else {
            row[start..start + B].try_into().expect("a block")
        };
        for (&wv, &base) in wk.iter().zip(bases) {
            let s: &[f32; B] = phases[base + start..][..B].try_into().expect("a block");
            for (a, &v) in acc.iter_mut().zip(s) {
                *a += wv * v;
            }
        }
        row[start..start + B].copy_from_slice(&acc);
        done = start + B;
    }
    n
}

/// Computes depthwise output columns `lo..` of `row` in blocks of `B` held in
/// registers: every tap of `rows` (input row offset, first weight) and of the `kw`
/// horizontal taps added in the same order as the tap-by-tap loop, then one store.
/// Returns where the blocks ended (`lo` when the interior `lo..hi` is narrower than a
/// block). The last block may overlap the one before: it starts from the values its
/// columns held on entry and recomputes the overlap identically.
#[inline(always)]
fn dw_blocks<const B: usize>(
    row: &mut [f32],
    xp: &[f32],
    wk: &[f32],
    rows: &[(usize, usize)],
    (lo, hi): (usize, usize),
    kw: usize,
    (sw, dw, pad): (usize, usize, isize),
) -> usize {
    if lo + B > hi {
        return lo;
    }
    let last = hi - B;
    let last_init: [f32; B] = row[last..hi].try_into().expect("a block");
    let mut done = lo;
    while done < hi {
        let start = done.min(last);
        let mut acc: [f32; B] = if start == last {
            last_init
        } else {
            row[start..start + B].try_into().expect("a block")
        };
        for &(src, wbase) in rows {
            for kx in 0..kw {
                let wv = wk[wbase + kx];
                let first = ((start * sw + kx * dw) as isize - pad) as usize;
                let s = &xp[src + first..];
                if sw == 1 {
                    let s: &[f32; B] = s[..B].try_into().expect("a block");
                    for (a, &v) in acc.iter_mut().zip(s) {
                        *a += wv * v;
                    }
                } else {
                    let s = &s[..(B - 1) * sw + 1];
                    for (j, a) in acc.iter_mut().enumerate() {
                        *a += wv * s[j * sw];
                    }
                }
            }
        }
        row[start..start + B].copy_from_slice(&acc);
        done = start + B;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::{conv_gemm, ConvProblem};
    use crate::eval_node;
    use crate::gemm::{self, Finish};
    use crate::ops::window::Window;
    use half::f16;
    use rtq_ir::{Attr, DType, Node, Tensor, TensorData};

    fn node(attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node("Conv", attrs, 1)
    }

    fn run(attrs: &[(&str, Attr)], x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Tensor {
        eval_node(&node(attrs), &[Some(x), Some(w), b])
            .unwrap()
            .remove(0)
    }

    /// Straightforward 2-D convolution used as an oracle.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        x: &[f32],
        xs: [usize; 4],
        w: &[f32],
        ws: [usize; 4],
        group: usize,
        stride: [usize; 2],
        dil: [usize; 2],
        pads: [usize; 4],
    ) -> (Vec<usize>, Vec<f32>) {
        let [n, c, h, wd] = xs;
        let [m, cg, kh, kw] = ws;
        let oh = (h + pads[0] + pads[2] - ((kh - 1) * dil[0] + 1)) / stride[0] + 1;
        let ow = (wd + pads[1] + pads[3] - ((kw - 1) * dil[1] + 1)) / stride[1] + 1;
        let mg = m / group;
        let mut out = vec![0.0; n * m * oh * ow];
        for ni in 0..n {
            for mo in 0..m {
                let g = mo / mg;
                for y in 0..oh {
                    for xx in 0..ow {
                        let mut acc = 0.0;
                        for ci in 0..cg {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy =
                                        (y * stride[0] + ky * dil[0]) as isize - pads[0] as isize;
                                    let ix =
                                        (xx * stride[1] + kx * dil[1]) as isize - pads[1] as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                        continue;
                                    }
                                    let xv = x[((ni * c + g * cg + ci) * h + iy as usize) * wd
                                        + ix as usize];
                                    let wv = w[((mo * cg + ci) * kh + ky) * kw + kx];
                                    acc += xv * wv;
                                }
                            }
                        }
                        out[((ni * m + mo) * oh + y) * ow + xx] = acc;
                    }
                }
            }
        }
        (vec![n, m, oh, ow], out)
    }

    fn seq(n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7 % 11) as f32 - 5.0) * scale)
            .collect()
    }

    #[test]
    fn hand_computed_3x3_with_padding_and_bias() {
        // 1x1x3x3 input 1..9, all-ones 3x3 kernel, pad 1, bias 1.
        let x = Tensor::from_f32(vec![1, 1, 3, 3], (1..=9).map(|v| v as f32).collect());
        let w = Tensor::from_f32(vec![1, 1, 3, 3], vec![1.0; 9]);
        let b = Tensor::from_f32(vec![1], vec![1.0]);
        let y = run(&[("pads", Attr::Ints(vec![1, 1, 1, 1]))], &x, &w, Some(&b));
        assert_eq!(y.shape(), &[1, 1, 3, 3]);
        assert_eq!(
            y.as_f32().unwrap(),
            &[13.0, 22.0, 17.0, 28.0, 46.0, 34.0, 25.0, 40.0, 29.0]
        );
        // Stride 2 picks the corners.
        let y = run(
            &[
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
                ("strides", Attr::Ints(vec![2, 2])),
            ],
            &x,
            &w,
            None,
        );
        assert_eq!(y.as_f32().unwrap(), &[12.0, 16.0, 24.0, 28.0]);
    }

    #[test]
    fn matches_oracle_for_groups_dilations_strides_and_pads() {
        type Case = (
            [usize; 4],
            [usize; 4],
            usize,
            [usize; 2],
            [usize; 2],
            [usize; 4],
        );
        let cases: &[Case] = &[
            ([2, 4, 7, 6], [6, 2, 3, 3], 2, [1, 1], [1, 1], [1, 1, 1, 1]),
            ([1, 3, 9, 8], [4, 3, 3, 2], 1, [2, 3], [2, 1], [2, 0, 1, 1]),
            ([1, 4, 6, 6], [8, 1, 3, 3], 4, [2, 2], [1, 1], [1, 1, 0, 0]), // depthwise x2
            ([2, 6, 5, 5], [6, 1, 3, 3], 6, [1, 1], [2, 2], [2, 2, 2, 2]), // dilated depthwise
            ([1, 8, 4, 4], [4, 8, 1, 1], 1, [1, 1], [1, 1], [0, 0, 0, 0]), // pointwise
            ([1, 8, 5, 5], [4, 8, 1, 1], 1, [2, 2], [1, 1], [0, 0, 0, 0]), // strided 1x1
            // Depthwise rows wide enough for the register-blocked interior (and edges,
            // a tail, strides, dilations, asymmetric pads around it).
            ([1, 3, 6, 53], [3, 1, 5, 5], 3, [1, 1], [1, 1], [2, 2, 2, 2]),
            ([1, 2, 7, 70], [2, 1, 3, 3], 2, [2, 2], [1, 1], [1, 0, 1, 1]),
            ([1, 2, 6, 45], [4, 1, 3, 5], 2, [1, 2], [1, 2], [1, 3, 0, 4]),
            // The zero-padded, phase-split path: narrow planes (outputs of 20, 10, 9 and
            // 5 columns: blocks of 16 and 8 with an overlapping last one, and none),
            // strides 2 and 3 at any width, dilations, asymmetric pads, multiplier 2.
            (
                [1, 3, 20, 20],
                [3, 1, 5, 5],
                3,
                [1, 1],
                [1, 1],
                [2, 2, 2, 2],
            ),
            (
                [2, 4, 10, 10],
                [4, 1, 5, 5],
                4,
                [1, 1],
                [1, 1],
                [2, 2, 2, 2],
            ),
            ([1, 2, 9, 9], [4, 1, 3, 3], 2, [1, 1], [1, 2], [2, 1, 1, 2]),
            ([1, 2, 5, 5], [2, 1, 3, 3], 2, [1, 1], [1, 1], [1, 1, 1, 1]),
            (
                [1, 3, 12, 161],
                [3, 1, 3, 3],
                3,
                [2, 2],
                [1, 1],
                [1, 1, 1, 1],
            ),
            (
                [1, 2, 11, 50],
                [2, 1, 5, 4],
                2,
                [3, 3],
                [1, 2],
                [2, 0, 1, 3],
            ),
        ];
        for &(xs, ws, group, stride, dil, pads) in cases {
            let x = seq(xs.iter().product(), 0.1);
            let w = seq(ws.iter().product(), 0.05);
            let (shape, want) = naive(&x, xs, &w, ws, group, stride, dil, pads);
            let y = run(
                &[
                    ("group", Attr::Int(group as i64)),
                    (
                        "strides",
                        Attr::Ints(stride.iter().map(|&v| v as i64).collect()),
                    ),
                    (
                        "dilations",
                        Attr::Ints(dil.iter().map(|&v| v as i64).collect()),
                    ),
                    ("pads", Attr::Ints(pads.iter().map(|&v| v as i64).collect())),
                ],
                &Tensor::from_f32(xs.to_vec(), x),
                &Tensor::from_f32(ws.to_vec(), w),
                None,
            );
            assert_eq!(y.shape(), &shape[..], "{xs:?} {ws:?}");
            for (a, b) in y.as_f32().unwrap().iter().zip(&want) {
                assert!((a - b).abs() < 1e-4, "{xs:?} {ws:?}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn one_d_and_three_d() {
        // 1-D: x = [1,2,3,4], w = [1,-1], stride 1 -> differences.
        let x = Tensor::from_f32(vec![1, 1, 4], vec![1.0, 2.0, 4.0, 8.0]);
        let w = Tensor::from_f32(vec![1, 1, 2], vec![1.0, -1.0]);
        assert_eq!(
            run(&[], &x, &w, None).as_f32().unwrap(),
            &[-1.0, -2.0, -4.0]
        );
        // 3-D: 2x2x2 ones kernel over 2x2x3 input sums windows.
        let x = Tensor::from_f32(vec![1, 1, 2, 2, 3], (0..12).map(|v| v as f32).collect());
        let w = Tensor::from_f32(vec![1, 1, 2, 2, 2], vec![1.0; 8]);
        let y = run(&[], &x, &w, None);
        assert_eq!(y.shape(), &[1, 1, 1, 1, 2]);
        // window at x=0: 0+1+3+4+6+7+9+10 = 40 ; x=1: 48
        assert_eq!(y.as_f32().unwrap(), &[40.0, 48.0]);
    }

    #[test]
    fn auto_pad_same_keeps_extent() {
        let x = Tensor::from_f32(vec![1, 1, 5, 5], vec![1.0; 25]);
        let w = Tensor::from_f32(vec![1, 1, 3, 3], vec![1.0; 9]);
        let y = run(
            &[("auto_pad", Attr::String("SAME_UPPER".into()))],
            &x,
            &w,
            None,
        );
        assert_eq!(y.shape(), &[1, 1, 5, 5]);
        assert_eq!(y.as_f32().unwrap()[0], 4.0);
        assert_eq!(y.as_f32().unwrap()[12], 9.0);
    }

    #[test]
    fn tiled_im2col_matches_untiled() {
        // Large enough that the column buffer is tiled: kg = 64*9 = 576, out 96*96.
        let xs = [1, 64, 96, 96];
        let ws = [2, 64, 3, 3];
        let x = seq(xs.iter().product(), 0.01);
        let w = seq(ws.iter().product(), 0.01);
        let (_, want) = naive(&x, xs, &w, ws, 1, [1, 1], [1, 1], [1, 1, 1, 1]);
        let y = run(
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
            &Tensor::from_f32(xs.to_vec(), x),
            &Tensor::from_f32(ws.to_vec(), w),
            None,
        );
        for (a, b) in y.as_f32().unwrap().iter().zip(&want) {
            assert!((a - b).abs() < 1e-3, "{a} vs {b}");
        }
    }

    #[test]
    fn im2col_pieces_round_alike_on_any_thread_count() {
        // 3x3 stride-2 convolutions with a bias, a residual and Relu: one cut into
        // pieces of output positions on several threads, and one whose column
        // buffer is also tiled (kg = 576 by 9216 positions).
        for (xs, m) in [([1, 16, 64, 64], 32), ([1, 64, 192, 192], 8)] {
            let [_, c, h, wd] = xs;
            let ws = [m, c, 3, 3];
            let x = seq(xs.iter().product(), 0.01);
            let w = seq(ws.iter().product(), 0.013);
            let (shape, want) = naive(&x, xs, &w, ws, 1, [2, 2], [1, 1], [1, 1, 1, 1]);
            let bias: Vec<f32> = (0..m).map(|i| i as f32 * 0.1 - 1.0).collect();
            let residual = seq(want.len(), 0.02);
            let win = Window {
                rank: 2,
                input: [1, h, wd],
                kernel: [1, 3, 3],
                stride: [1, 2, 2],
                dilation: [1; 3],
                pad_begin: [0, 1, 1],
                pad_end: [0, 1, 1],
                output: [1, shape[2], shape[3]],
            };
            let p = ConvProblem {
                n: 1,
                c,
                m,
                group: 1,
                win,
            };
            let on = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let finish = Finish {
                    bias: Some(&bias),
                    residual: Some(&residual),
                    relu: true,
                };
                pool.install(|| conv_gemm(&x, &w, finish, &p))
            };
            let one = on(1);
            assert!(gemm::column_pieces(m, c * 9, shape[2] * shape[3], 3).is_some());
            for threads in [2, 3, 5] {
                assert!(one == on(threads), "{xs:?} on {threads} threads");
            }
            for (i, (&got, &conv)) in one.iter().zip(&want).enumerate() {
                let expected = (conv + bias[i / (shape[2] * shape[3])] + residual[i]).max(0.0);
                assert!((got - expected).abs() < 1e-3, "[{i}] {got} vs {expected}");
            }
        }
    }

    #[test]
    fn strided_gather_picks_every_step() {
        let src: Vec<f32> = (0..20).map(|v| v as f32).collect();
        for step in 1..5 {
            for len in 0..5 {
                let mut dst = vec![-1.0; len];
                super::gather_strided(&mut dst, &src[3..3 + (len.max(1) - 1) * step + 1], step);
                let want: Vec<f32> = (0..len).map(|j| (3 + j * step) as f32).collect();
                assert_eq!(dst, want, "step {step} len {len}");
            }
        }
    }

    #[test]
    fn f16_conv_outputs_f16() {
        let h = |v: Vec<f32>, s: Vec<usize>| {
            Tensor::new(
                s,
                TensorData::F16(v.into_iter().map(f16::from_f32).collect()),
            )
            .unwrap()
        };
        let x = h(vec![0.1, 0.2, 0.3, 0.4], vec![1, 1, 2, 2]);
        let w = h(vec![1.0, 1.0, 1.0, 1.0], vec![1, 1, 2, 2]);
        let y = run(&[], &x, &w, None);
        assert_eq!(y.dtype(), DType::F16);
        let exact: f32 = [0.1f32, 0.2, 0.3, 0.4]
            .iter()
            .map(|&v| f16::from_f32(v).to_f32())
            .sum();
        assert_eq!(y.to_f32_vec()[0], f16::from_f32(exact).to_f32());
    }

    #[test]
    fn bad_shapes_are_reported() {
        let x = Tensor::from_f32(vec![1, 3, 4, 4], vec![0.0; 48]);
        let w = Tensor::from_f32(vec![2, 2, 3, 3], vec![0.0; 36]);
        let err = eval_node(&node(&[]), &[Some(&x), Some(&w)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("Conv_0") && err.contains("group"), "{err}");
        let b = Tensor::from_f32(vec![3], vec![0.0; 3]);
        let w = Tensor::from_f32(vec![2, 3, 3, 3], vec![0.0; 54]);
        assert!(eval_node(&node(&[]), &[Some(&x), Some(&w), Some(&b)]).is_err());
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec conv::speed -- --ignored --nocapture"]
    fn depthwise_shapes() {
        for (c, hw, k, s) in [
            (96, 80, 5, 1),
            (96, 40, 5, 1),
            (192, 20, 3, 1),
            (192, 20, 5, 1),
            (384, 10, 5, 1),
            (48, 160, 3, 2),
            (32, 160, 3, 2),
            (192, 20, 5, 2),
        ] {
            let win = Window {
                rank: 2,
                input: [1, hw, hw],
                kernel: [1, k, k],
                stride: [1, s, s],
                dilation: [1, 1, 1],
                pad_begin: [0, k / 2, k / 2],
                pad_end: [0, k / 2, k / 2],
                output: [1, hw / s, hw / s],
            };
            let p = ConvProblem {
                n: 1,
                c,
                m: c,
                group: c,
                win,
            };
            let x: Vec<f32> = (0..c * hw * hw).map(|i| (i % 13) as f32 * 0.1).collect();
            let w: Vec<f32> = (0..c * k * k).map(|i| (i % 7) as f32 * 0.1).collect();
            let out = vec![0f32; c * (hw / s) * (hw / s)];
            // The fastest of 50 runs (the machine may be shared).
            let best = |f: &dyn Fn(&mut [f32])| {
                (0..50)
                    .map(|_| {
                        let t = std::time::Instant::now();
                        f(&mut out.clone());
                        t.elapsed().as_secs_f64() * 1e3
                    })
                    .fold(f64::INFINITY, f64::min)
            };
            let generic = best(&|o| depthwise(&x, &w, &p, o));
            let avx512 = if conv_depthwise::applies(&p) {
                format!("{:.3} ms", best(&|o| conv_depthwise::conv(&x, &w, &p, o)))
            } else {
                "-".into()
            };
            println!("c{c} {hw}x{hw} k{k} s{s}: generic {generic:.3} ms, avx-512 {avx512}");
        }
    }
}
