//! Fused activations (domain [`INTEGER_DOMAIN`](super::integer::INTEGER_DOMAIN), rtq's
//! own), made at load by [`crate::fuse_activations`]: one pass over memory computing
//! exactly the f32 operations of the decomposed graph, in the same order, so the result
//! is bit for bit what the graph as written computes (a Q/DQ model stays faithful: a
//! one-ulp change before a QuantizeLinear can move a value by a whole step).
//!
//! * `DecomposedHardSwish(x)`, attributes `scale` (f32) and `divide` (0/1):
//!   `(x * clip(x + 3, 0, 6)) / scale` (or `* scale` when `divide` is 0).

use crate::ctx::OpCtx;
use crate::float::tensor_from_f32;
use crate::par;
use crate::registry::Kernel;
use crate::simd::multiversioned;
use crate::ExecError;
use rtq_ir::{DType, Tensor};

multiversioned! {
    /// [`hard_swish`] compiled for the widest vectors the CPU has.
    fn hard_swish_wide(v: &mut [f32], scale: f32, divide: bool) => hard_swish
}

/// `(x * clip(x + 3, 0, 6)) / scale` (or `* scale` when not `divide`) of every element
/// of `v`, in place. Clip as the executor's Clip computes it (NaN passes through:
/// `clamp` too). The common divisor 6 as a literal: the loop then vectorizes (3x
/// faster, measured).
#[inline(always)]
pub(crate) fn hard_swish(v: &mut [f32], scale: f32, divide: bool) {
    match (divide, scale == 6.0) {
        (true, true) => v.iter_mut().for_each(|a| *a = hard_swish_6(*a)),
        (true, false) => v
            .iter_mut()
            .for_each(|a| *a = (*a * (*a + 3.0).clamp(0.0, 6.0)) / scale),
        (false, _) => v
            .iter_mut()
            .for_each(|a| *a = (*a * (*a + 3.0).clamp(0.0, 6.0)) * scale),
    }
}

/// HardSwish of one value with the common divisor 6 (as [`hard_swish`] computes it).
#[inline(always)]
pub(crate) fn hard_swish_6(a: f32) -> f32 {
    (a * (a + 3.0).clamp(0.0, 6.0)) / 6.0
}

/// Fused kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("DecomposedHardSwish", decomposed_hard_swish)];

fn decomposed_hard_swish(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    if x.dtype() != DType::F32 {
        return Err(ctx.err(format!("takes float32, got {}", x.dtype())));
    }
    let scale = ctx.attr_float("scale", 6.0)?;
    let divide = ctx.attr_int("divide", 1)? != 0;
    let src = ctx.float_input(0)?;
    let out = par::written(src.len(), par::PIECE, src.len(), |i, dst| {
        let src = &src[i * par::PIECE..][..dst.len()];
        for (d, &v) in dst.iter_mut().zip(src) {
            d.write(v);
        }
        // SAFETY: every element was just written.
        let v = unsafe { &mut *(dst as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) };
        hard_swish_wide(v, scale, divide)
    });
    Ok(vec![tensor_from_f32(DType::F32, x.shape().to_vec(), out)])
}
