//! Integer kernels for Q/DQ patterns (domain [`INTEGER_DOMAIN`]), placed by
//! [`crate::lower_to_integer`]:
//!
//! * `IntegerConv(Xq, x_scale, Wq, w_scale, B?)`: a Conv of INT8 activations and INT8
//!   weights, INT32 accumulation, f32 output `acc * x_scale * w_scale[m] + B[m]`; group 1,
//!   or one input channel per group (depthwise, [`integer_depthwise`]).
//! * `IntegerConvTranspose(Xq, x_scale, Wq, w_scale, B?)`: a 2-D ConvTranspose whose
//!   strides equal its kernel (windows that do not overlap), same epilogue per output
//!   channel.
//! * `IntegerMatMul(Xq, x_scale, Wq, w_scale, B?)` (attribute `transB`): `Xq` (`[..., K]`)
//!   times constant `Wq` (`[K, N]`, or `[N, K]` with `transB`), same epilogue per column.
//!
//! Scales are per tensor (`x_scale`) and per tensor or per output channel (`w_scale`);
//! zero points are 0 (symmetric), which the lowering checks.

use crate::arena;
use crate::ctx::OpCtx;
use crate::igemm::{
    igemm, igemm_into, igemm_into_serial, Epilogue, Isa, PackedWeights, Strided, SERIAL_WORK,
};
use crate::memo::derived;
use crate::ops::chain::QuantizingTail;
use crate::ops::columns::with_columns;
use crate::ops::conv::{im2col, ConvProblem};
use crate::ops::conv_transpose::scatter_disjoint_to;
use crate::ops::window::Window;
use crate::ops::{integer_depthwise, integer_direct};
use crate::par;
use crate::registry::Kernel;
use crate::ExecError;
use rayon::prelude::*;
use rtq_ir::{Tensor, TensorData};
use std::mem::MaybeUninit;
use std::sync::OnceLock;

/// The domain of rtq's integer ops (never written to a model file).
pub const INTEGER_DOMAIN: &str = "ai.rtq";

/// Integer kernels by op type (domain [`INTEGER_DOMAIN`]).
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("IntegerConv", integer_conv),
    ("IntegerConvTranspose", integer_conv_transpose),
    ("IntegerMatMul", integer_matmul),
];

/// Product values per tile of a transposed convolution's input rows.
const TRANSPOSE_TILE: usize = 1 << 16;
/// Fewest tiles a transposed convolution's image is cut into (its tasks).
const TRANSPOSE_TASKS: usize = 8;

/// Attribute naming the instruction set a lowered node's weights are packed for.
pub(crate) const ISA_ATTR: &str = "rtq_isa";

/// The INT8 data of input `slot`.
fn i8_input<'a>(ctx: &OpCtx<'a>, slot: usize) -> Result<(&'a Tensor, &'a [i8]), ExecError> {
    let t = ctx.input(slot)?;
    match t.data() {
        TensorData::I8(v) => Ok((t, v)),
        other => Err(ctx.err(format!("input {slot} must be int8, got {}", other.dtype()))),
    }
}

/// The instruction set the node asks for (the best available by default).
fn isa(ctx: &OpCtx<'_>) -> Result<Isa, ExecError> {
    let name = ctx.attr_str(ISA_ATTR, "")?;
    if name.is_empty() {
        return Ok(Isa::detect());
    }
    Isa::available()
        .into_iter()
        .find(|i| i.name() == name)
        .ok_or_else(|| {
            ctx.err(format!(
                "instruction set `{name}` is not available on this CPU"
            ))
        })
}

/// The combined per-row scales `x_scale * w_scale[m]` (inputs 1 and 3) and the
/// optional bias (input 4), checked against `m` rows.
fn epilogue_terms(ctx: &OpCtx<'_>, m: usize) -> Result<(Vec<f32>, Option<Vec<f32>>), ExecError> {
    let sx = ctx.float_input(1)?;
    let sw = ctx.float_input(3)?;
    if sx.len() != 1 || (sw.len() != 1 && sw.len() != m) {
        return Err(ctx.err(format!(
            "x_scale must be a scalar and w_scale a scalar or {m} values, got {} and {}",
            sx.len(),
            sw.len()
        )));
    }
    let bias = ctx.opt_float_input(4)?.map(|b| b.into_owned());
    if bias.as_ref().is_some_and(|b| b.len() != m) {
        return Err(ctx.err(format!("bias must have {m} values")));
    }
    let scale = (0..m)
        .map(|r| sx[0] * sw[if sw.len() == 1 { 0 } else { r }])
        .collect();
    Ok((scale, bias))
}

/// A convolution's weights, packed on first use for the path its windows take (direct
/// on AVX-512 VNNI where [`integer_direct::applies`], im2col + integer GEMM otherwise,
/// depthwise for groups of one channel).
#[derive(Default)]
struct ConvWeights {
    gemm: OnceLock<PackedWeights>,
    direct: OnceLock<integer_direct::DirectWeights>,
    /// Depthwise weights.
    depthwise: OnceLock<integer_depthwise::Weights>,
}

fn integer_conv(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (x, xs) = i8_input(ctx, 0)?;
    let (w, ws) = i8_input(ctx, 2)?;
    let group = usize::try_from(ctx.attr_int("group", 1)?).unwrap_or(0);
    if x.rank() < 3
        || w.rank() != x.rank()
        || group == 0
        || w.shape()[1] * group != x.shape()[1]
        || w.shape()[0] % group != 0
    {
        return Err(ctx.err(format!(
            "X of shape {:?} and W of shape {:?} do not make a convolution of group {group}",
            x.shape(),
            w.shape()
        )));
    }
    let (n, c, m) = (x.shape()[0], x.shape()[1], w.shape()[0]);
    let win = Window::resolve(ctx, &x.shape()[2..], &w.shape()[2..], true, false)?;
    let mut shape = vec![n, m];
    shape.extend(win.output_dims());
    let tail = QuantizingTail::of_node(ctx, &shape)?;
    if group > 1 {
        let p = ConvProblem {
            n,
            c,
            m,
            group,
            win,
        };
        if !integer_depthwise::applies(&p) {
            return Err(ctx.err(format!(
                "group {group} needs one input channel per group and at most {} taps",
                integer_depthwise::MAX_TAPS
            )));
        }
        let (scale, bias) = epilogue_terms(ctx, m)?;
        let packed = derived(ctx.memo(), ConvWeights::default);
        let w = packed
            .depthwise
            .get_or_init(|| integer_depthwise::Weights::new(ws, m, &w.shape()[2..]));
        let path = integer_depthwise::Path::best(&p, isa(ctx)?);
        let out = integer_depthwise::conv(xs, w, &p, (&scale, bias.as_deref()), path);
        return conv_output(ctx, shape, out, tail.as_ref());
    }
    let k = c * win.kernel_size();
    let a = Strided {
        data: ws,
        row: k,
        col: 1,
    };
    let (scale, bias) = epilogue_terms(ctx, m)?;
    let isa = isa(ctx)?;
    let packed = derived(ctx.memo(), ConvWeights::default);
    let (in_sp, out_sp) = (win.input_size(), win.output_size());
    let ep = Epilogue {
        scale: &scale,
        bias: bias.as_deref(),
        row: out_sp,
        col: 1,
    };
    if isa == Isa::Avx512Vnni && integer_direct::applies(&win) {
        let weights = packed
            .direct
            .get_or_init(|| integer_direct::pack_weights(ws, m, c, win.kernel_size()));
        let mut out = par::uninit_vec(n * m * out_sp);
        integer_direct::conv(xs, n, weights, &win, &ep, &mut out);
        // SAFETY: the direct convolution wrote every element.
        let out = unsafe { par::assume_written(out) };
        return conv_output(ctx, shape, out, tail.as_ref());
    }
    let weights = packed.gemm.get_or_init(|| PackedWeights::new(isa, a, m, k));
    if let Some(tail) = &tail {
        let sizes = (n, c, in_sp, out_sp);
        let terms = (&scale[..], bias.as_deref());
        let data = if tail.unsigned() {
            TensorData::U8(gemm_conv_through_tail(
                weights,
                xs,
                sizes,
                &win,
                terms,
                tail,
                |v| v as u8,
            ))
        } else {
            TensorData::I8(gemm_conv_through_tail(
                weights,
                xs,
                sizes,
                &win,
                terms,
                tail,
                |v| v as i8,
            ))
        };
        return Ok(vec![ctx.tensor(shape, data)?]);
    }
    let pointwise = win.is_pointwise();
    // Every element is written by the products below.
    let mut out = par::uninit_vec(n * m * out_sp);
    let mut col = if pointwise {
        Vec::new()
    } else {
        arena::filled(k * out_sp, 0i8)
    };
    for ni in 0..n {
        let img = &xs[ni * c * in_sp..][..c * in_sp];
        let dst = &mut out[ni * m * out_sp..][..m * out_sp];
        let b = if pointwise {
            Strided {
                data: img,
                row: out_sp,
                col: 1,
            }
        } else {
            im2col(img, &win, 0, out_sp, &mut col, true);
            Strided {
                data: &col,
                row: out_sp,
                col: 1,
            }
        };
        igemm_into(weights, b, out_sp, &ep, dst);
    }
    arena::give(col);
    // SAFETY: each image's products wrote all of its `m * out_sp` elements.
    let out = unsafe { par::assume_written(out) };
    Ok(vec![Tensor::from_f32(shape, out)])
}

/// The output of `IntegerConv` from its float32 results `values` (of `shape`): those,
/// or their codes through `tail` (the node's, if it has one).
fn conv_output(
    ctx: &OpCtx<'_>,
    shape: Vec<usize>,
    values: Vec<f32>,
    tail: Option<&QuantizingTail>,
) -> Result<Vec<Tensor>, ExecError> {
    let Some(tail) = tail else {
        return Ok(vec![Tensor::from_f32(shape, values)]);
    };
    let data = tail.codes(&values);
    arena::give(values);
    Ok(vec![ctx.tensor(shape, data)?])
}

thread_local! {
    /// A thread's float32 results of one block of a convolution with a tail.
    static TAIL_BLOCK: std::cell::Cell<Vec<MaybeUninit<f32>>> =
        const { std::cell::Cell::new(Vec::new()) };
}

/// Bytes of float32 results per block of [`through_tail`]: they stay in L2
/// between the product and the tail.
const TAIL_BLOCK_BYTES: usize = 64 << 10;

/// A convolution on the integer GEMM path (1x1, or im2col) of `n` images of `c`
/// channels of `in_sp` positions into `out_sp` positions, whose output goes through
/// `tail`: each image's product a block of positions at a time ([`through_tail`]).
fn gemm_conv_through_tail<T: Copy + Send + Sync>(
    weights: &PackedWeights,
    xs: &[i8],
    (n, c, in_sp, out_sp): (usize, usize, usize, usize),
    win: &Window,
    terms: (&[f32], Option<&[f32]>),
    tail: &QuantizingTail,
    cast: impl Fn(i32) -> T + Sync,
) -> Vec<T> {
    let (m, k) = (weights.rows(), weights.depth());
    let pointwise = win.is_pointwise();
    let mut out = par::uninit_vec::<T>(n * m * out_sp);
    let mut col = if pointwise {
        Vec::new()
    } else {
        arena::filled(k * out_sp, 0i8)
    };
    for (ni, dst) in out.chunks_mut(m * out_sp).enumerate() {
        let img = &xs[ni * c * in_sp..][..c * in_sp];
        let b = if pointwise {
            img
        } else {
            im2col(img, win, 0, out_sp, &mut col, true);
            &col[..]
        };
        through_tail(weights, b, out_sp, terms, tail, &cast, dst);
    }
    arena::give(col);
    // SAFETY: `through_tail` wrote every image's rows and columns.
    unsafe { par::assume_written(out) }
}

/// `dst` (`m x sp` codes) <- `tail` of the product of `weights` by `b` (`k x sp`), a
/// block of columns at a time: each block's float32 results (`acc * scale[m] +
/// bias[m]`, as [`igemm_into`] computes them) turned into 8-bit codes while in
/// cache, instead of a float32 tensor written to memory and read back by a separate
/// chain.
fn through_tail<T: Copy + Send + Sync>(
    weights: &PackedWeights,
    b: &[i8],
    sp: usize,
    (scale, bias): (&[f32], Option<&[f32]>),
    tail: &QuantizingTail,
    cast: &(impl Fn(i32) -> T + Sync),
    dst: &mut [MaybeUninit<T>],
) {
    let (m, k) = (weights.rows(), weights.depth());
    // A multiple of every instruction set's panel width (32 columns at most).
    let cols = (TAIL_BLOCK_BYTES / 4 / m.max(1)).max(32) / 32 * 32;
    let blocks = sp.div_ceil(cols);
    let out = par::OutPtr(dst.as_mut_ptr());
    let block = |t: usize| {
        let c0 = t * cols;
        let width = cols.min(sp - c0);
        let b = Strided {
            data: &b[c0..],
            row: sp,
            col: 1,
        };
        let ep = Epilogue {
            scale,
            bias,
            row: width,
            col: 1,
        };
        let mut results = TAIL_BLOCK.take();
        results.resize(m * width, MaybeUninit::uninit());
        igemm_into_serial(weights, b, width, &ep, &mut results[..m * width]);
        for (r, row) in results[..m * width].chunks_exact(width).enumerate() {
            // SAFETY: the product wrote every element of the block's rows.
            let row = unsafe { &*(row as *const [MaybeUninit<f32>] as *const [f32]) };
            // SAFETY: row `r`, columns c0..c0 + width lie in `dst` (`m x sp`), and no
            // other block writes them.
            let codes = unsafe { std::slice::from_raw_parts_mut(out.offset(r * sp + c0).0, width) };
            tail.run(row, codes, cast);
        }
        TAIL_BLOCK.set(results);
    };
    if blocks > 1 && m * k * sp >= SERIAL_WORK {
        (0..blocks).into_par_iter().for_each(block);
    } else {
        (0..blocks).for_each(block);
    }
}

/// A 2-D ConvTranspose whose strides equal its kernel (no padding, dilation or
/// output padding, group 1): one integer GEMM of the weights (`[C, M * kh * kw]`,
/// transposed) by each image (`[C, H * W]`), then each product row spread over its
/// output positions (every output is one product sum).
fn integer_conv_transpose(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (x, xs) = i8_input(ctx, 0)?;
    let (w, ws) = i8_input(ctx, 2)?;
    if x.rank() != 4 || w.rank() != 4 || w.shape()[0] != x.shape()[1] {
        return Err(ctx.err(format!(
            "X of shape {:?} and W of shape {:?} do not make a 2-D transposed convolution",
            x.shape(),
            w.shape()
        )));
    }
    let (n, c, h, wd) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let (m, kh, kw) = (w.shape()[1], w.shape()[2], w.shape()[3]);
    let strides = ctx.attr_ints("strides")?.unwrap_or_default();
    if strides != [kh as i64, kw as i64] || ctx.attr_int("group", 1)? != 1 {
        return Err(ctx.err(format!(
            "strides {strides:?} must equal the kernel [{kh}, {kw}] (group 1)"
        )));
    }
    let (taps, hw) = (kh * kw, h * wd);
    let rows = m * taps;
    let (scale, bias) = epilogue_terms(ctx, m)?;
    let row_scale: Vec<f32> = (0..rows).map(|r| scale[r / taps]).collect();
    let row_bias: Option<Vec<f32>> = bias.map(|b| (0..rows).map(|r| b[r / taps]).collect());
    let isa = isa(ctx)?;
    // A(r, ci) = W[ci, r]: W is `[C, M * taps]` row-major.
    let a = Strided {
        data: ws,
        row: 1,
        col: rows,
    };
    let weights = derived(ctx.memo(), || PackedWeights::new(isa, a, rows, c));
    let (oh, ow) = (h * kh, wd * kw);
    // Every element is written once by the scatter of its input row's tile.
    let mut out = par::uninit_vec(n * m * oh * ow);
    if out.is_empty() {
        return Ok(vec![Tensor::from_f32(vec![n, m, oh, ow], Vec::new())]);
    }
    let win = Window {
        rank: 2,
        input: [1, h, wd],
        kernel: [1, kh, kw],
        stride: [1, kh, kw],
        dilation: [1, 1, 1],
        pad_begin: [0; 3],
        pad_end: [0; 3],
        output: [1, oh, ow],
    };
    // Tiles of input rows, in parallel: each a single-threaded product into this
    // thread's column buffer (in cache until it is spread), then spread into its own
    // output rows of every plane. At least [`TRANSPOSE_TASKS`] tiles per image: a
    // single-threaded product per tile followed by a parallel scatter left the product
    // on one thread.
    let tile_rows = (TRANSPOSE_TILE / (rows * wd).max(1))
        .clamp(1, h)
        .min(h.div_ceil(TRANSPOSE_TASKS));
    let tiles = h.div_ceil(tile_rows);
    let ptr = par::OutPtr(out.as_mut_ptr());
    let run = |t: usize| {
        let (ni, r0) = (t / tiles, t % tiles * tile_rows);
        let tr = tile_rows.min(h - r0);
        let cols = tr * wd;
        let b = Strided {
            data: &xs[ni * c * hw + r0 * wd..],
            row: hw,
            col: 1,
        };
        let ep = Epilogue {
            scale: &row_scale,
            bias: row_bias.as_deref(),
            row: cols,
            col: 1,
        };
        with_columns(rows * cols, |tile| {
            // SAFETY: f32 values are valid `MaybeUninit<f32>`s; only f32s are written.
            let uninit = unsafe { &mut *(&mut *tile as *mut [f32] as *mut [MaybeUninit<f32>]) };
            igemm_into_serial(&weights, b, cols, &ep, uninit);
            // SAFETY: image `ni`'s `m` planes lie inside `out`, and this task alone
            // writes the output rows of its input rows `r0..r0 + tr`.
            unsafe { scatter_disjoint_to(tile, &win, r0, tr, ptr.offset(ni * m * oh * ow), m) };
        });
    };
    if rows * c * hw * n < SERIAL_WORK {
        (0..n * tiles).for_each(run);
    } else {
        (0..n * tiles).into_par_iter().for_each(run);
    }
    // SAFETY: the tiles cover every input row of every image, and each writes all the
    // output rows and columns its input rows' windows cover.
    let out = unsafe { par::assume_written(out) };
    Ok(vec![Tensor::from_f32(vec![n, m, oh, ow], out)])
}

fn integer_matmul(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let (x, xs) = i8_input(ctx, 0)?;
    let (w, ws) = i8_input(ctx, 2)?;
    let trans_b = ctx.attr_int("transB", 0)? != 0;
    if x.rank() < 1 || w.rank() != 2 {
        return Err(ctx.err(format!(
            "X of shape {:?} and W of shape {:?}: W must be a matrix",
            x.shape(),
            w.shape()
        )));
    }
    let (k, nn) = if trans_b {
        (w.shape()[1], w.shape()[0])
    } else {
        (w.shape()[0], w.shape()[1])
    };
    let kx = *x.shape().last().expect("rank >= 1");
    if kx != k {
        return Err(ctx.err(format!(
            "X of shape {:?} cannot multiply W of shape {:?}{}",
            x.shape(),
            w.shape(),
            if trans_b { " (transposed)" } else { "" }
        )));
    }
    let rows = x.shape()[..x.rank() - 1].iter().product::<usize>();
    // A(j, kk) = W(kk, j), or W(j, kk) transposed.
    let a = if trans_b {
        Strided {
            data: ws,
            row: k,
            col: 1,
        }
    } else {
        Strided {
            data: ws,
            row: 1,
            col: nn,
        }
    };
    let (scale, bias) = epilogue_terms(ctx, nn)?;
    let isa = isa(ctx)?;
    let weights = derived(ctx.memo(), || PackedWeights::new(isa, a, nn, k));
    let mut out = arena::filled(rows * nn, 0f32);
    let ep = Epilogue {
        scale: &scale,
        bias: bias.as_deref(),
        row: 1,
        col: nn,
    };
    let b = Strided {
        data: xs,
        row: 1,
        col: k,
    };
    igemm(&weights, b, rows, &ep, &mut out);
    let mut shape = x.shape()[..x.rank() - 1].to_vec();
    shape.push(nn);
    Ok(vec![Tensor::from_f32(shape, out)])
}
