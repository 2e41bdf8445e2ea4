//! `ElementwiseChain` (domain [`INTEGER_DOMAIN`](super::integer::INTEGER_DOMAIN),
//! rtq's own), made at load by [`crate::fuse_chains`]: a run of elementwise float32
//! ops, each reading the one before (Add, Sub, Mul, Div by a constant scalar or
//! per-channel operand, Relu, Clip, a fused HardSwish), optionally ending in a
//! per-tensor QuantizeLinear to 8 bits, computed plane by plane (one image and
//! channel at a time, in cache) instead of one pass over memory per op. Every step is
//! the f32 operation the op's own kernel computes, in the graph's order: the result
//! is bit for bit the graph's.
//!
//! Inputs: `x`, then the constant operands; attribute `steps` holds three integers per
//! step: its [`Code`], and the input slots of its operands (0 when unused); attribute
//! `params` two floats per step (Clip's bounds, HardSwish's constant and whether it
//! divides).

use crate::ctx::OpCtx;
use crate::ops::fused::hard_swish;
use crate::ops::quant::quantize_8bit_tensor;
use crate::par;
use crate::registry::Kernel;
use crate::simd::multiversioned;
use crate::ExecError;
use rtq_ir::{Tensor, TensorData};

/// Chain kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("ElementwiseChain", elementwise_chain)];

/// A step of a chain, as encoded in the `steps` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
pub enum Code {
    /// `x + c`.
    Add = 1,
    /// `x - c`.
    Sub = 2,
    /// `x * c`.
    Mul = 3,
    /// `x / c`.
    Div = 4,
    /// `max(x, 0)`, NaN kept.
    Relu = 5,
    /// `min(max(x, lo), hi)`, NaN kept.
    Clip = 6,
    /// `x * clip(x + 3, 0, 6) / s` (or `* s`).
    HardSwish = 7,
    /// QuantizeLinear to 8 bits with a scalar scale and zero point (last step only).
    Quantize = 8,
}

impl Code {
    /// The code of an encoded step.
    pub fn from_i64(v: i64) -> Option<Code> {
        Some(match v {
            1 => Code::Add,
            2 => Code::Sub,
            3 => Code::Mul,
            4 => Code::Div,
            5 => Code::Relu,
            6 => Code::Clip,
            7 => Code::HardSwish,
            8 => Code::Quantize,
            _ => return None,
        })
    }
}

/// A step with its operand resolved for this run.
#[derive(Debug, Clone)]
enum Step {
    /// A binary op with a scalar or per-channel constant.
    Binary(Code, Operand),
    Relu,
    Clip(f32, f32),
    HardSwish(f32, bool),
}

/// The constant operand of a binary step.
#[derive(Debug, Clone)]
enum Operand {
    Scalar(f32),
    /// One value per channel (axis 1 of `x`).
    PerChannel(Vec<f32>),
}

impl Operand {
    fn at(&self, channel: usize) -> f32 {
        match self {
            Operand::Scalar(v) => *v,
            Operand::PerChannel(v) => v[channel],
        }
    }
}

/// The final quantization: scale, zero point, and whether the output is unsigned.
struct Quantize {
    scale: f32,
    zero: f32,
    unsigned: bool,
}

fn elementwise_chain(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let TensorData::F32(v) = x.data() else {
        return Err(ctx.err(format!("takes float32, got {}", x.dtype())));
    };
    let shape = x.shape();
    let channels = if shape.len() >= 2 { shape[1] } else { 1 };
    let inner: usize = shape.iter().skip(2).product();
    let encoded = ctx.attr_ints("steps")?.unwrap_or_default();
    let params = ctx.attr_floats("params")?.unwrap_or_default();
    if encoded.len() % 3 != 0 || params.len() * 3 != encoded.len() * 2 {
        return Err(ctx.err("malformed steps"));
    }
    let mut steps = Vec::new();
    let mut quantize = None;
    for (i, s) in encoded.chunks_exact(3).enumerate() {
        let code = Code::from_i64(s[0]).ok_or_else(|| ctx.err(format!("step code {}", s[0])))?;
        if quantize.is_some() {
            return Err(ctx.err("QuantizeLinear must be the last step"));
        }
        let (p0, p1) = (params[2 * i], params[2 * i + 1]);
        match code {
            Code::Add | Code::Sub | Code::Mul | Code::Div => {
                steps.push(Step::Binary(code, operand(ctx, s[1] as usize, shape)?))
            }
            Code::Relu => steps.push(Step::Relu),
            Code::Clip => steps.push(Step::Clip(p0, p1)),
            Code::HardSwish => steps.push(Step::HardSwish(p0, p1 != 0.0)),
            Code::Quantize => quantize = Some(quantizer(ctx, s[1] as usize, s[2] as usize)?),
        }
    }
    let plane = if shape.len() >= 2 { inner } else { v.len() };
    let run = |p: usize, buf: &mut [f32]| apply_steps(buf, &steps, p % channels.max(1));
    let work = v.len() * (steps.len() + 1);
    let data = match quantize {
        None => {
            let mut out = v.clone();
            par::chunks_mut(&mut out, plane, work, run);
            TensorData::F32(out)
        }
        Some(q) => {
            let mut out = vec![0u8; v.len()];
            par::chunks_mut(&mut out, plane, work, |p, dst| {
                let mut buf = v[p * plane..][..dst.len()].to_vec();
                run(p, &mut buf);
                quantize_8bit_tensor(&buf, q.scale, q.zero, q.unsigned, dst);
            });
            if q.unsigned {
                TensorData::U8(out)
            } else {
                TensorData::I8(out.into_iter().map(|b| b as i8).collect())
            }
        }
    };
    Ok(vec![
        Tensor::new(shape.to_vec(), data).map_err(|e| ctx.err(e.to_string()))?
    ])
}

/// The operand in input `slot`: a scalar, or one value per channel of `x` (shape
/// `[C, 1, ...]` aligned on axis 1 of `x`).
fn operand(ctx: &OpCtx<'_>, slot: usize, x: &[usize]) -> Result<Operand, ExecError> {
    let c = ctx.input(slot)?;
    let values = ctx.float_input(slot)?;
    if c.len() == 1 && c.rank() <= x.len() {
        return Ok(Operand::Scalar(values[0]));
    }
    let known: Vec<Option<usize>> = x.iter().map(|&d| Some(d)).collect();
    if per_channel(c.shape(), &known) {
        return Ok(Operand::PerChannel(values.into_owned()));
    }
    Err(ctx.err(format!(
        "operand of shape {:?} is neither a scalar nor per channel for input {x:?}",
        c.shape()
    )))
}

/// Whether a constant of shape `c` broadcast against `x` (extents `None` where
/// unknown) is one value per channel (axis 1) and leaves `x`'s shape unchanged.
pub(crate) fn per_channel(c: &[usize], x: &[Option<usize>]) -> bool {
    let (rc, rx) = (c.len(), x.len());
    rx >= 2
        && rc <= rx
        && rc + 1 >= rx
        && c.iter().enumerate().all(|(i, &d)| {
            if rx - rc + i == 1 {
                x[1] == Some(d)
            } else {
                d == 1
            }
        })
}

/// The final quantization's terms from inputs `scale` and `zero` (0: absent, uint8).
fn quantizer(ctx: &OpCtx<'_>, scale: usize, zero: usize) -> Result<Quantize, ExecError> {
    let s = ctx.float_input(scale)?;
    if s.len() != 1 {
        return Err(ctx.err("the quantization scale must be a scalar"));
    }
    let (z, unsigned) = if zero == 0 {
        (0.0, true)
    } else {
        match ctx.input(zero)?.data() {
            TensorData::I8(z) if z.len() == 1 => (f32::from(z[0]), false),
            TensorData::U8(z) if z.len() == 1 => (f32::from(z[0]), true),
            other => {
                return Err(ctx.err(format!(
                    "the zero point must be one int8 or uint8, got {}",
                    other.dtype()
                )))
            }
        }
    };
    Ok(Quantize {
        scale: s[0],
        zero: z,
        unsigned,
    })
}

multiversioned! {
    /// Applies `steps` to `buf`, the elements of one plane of channel `channel`.
    fn apply_steps(buf: &mut [f32], steps: &[Step], channel: usize) => apply_steps_body
}

#[inline(always)]
fn apply_steps_body(buf: &mut [f32], steps: &[Step], channel: usize) {
    for step in steps {
        match step {
            Step::Binary(code, c) => {
                let c = c.at(channel);
                match code {
                    Code::Add => buf.iter_mut().for_each(|a| *a += c),
                    Code::Sub => buf.iter_mut().for_each(|a| *a -= c),
                    Code::Mul => buf.iter_mut().for_each(|a| *a *= c),
                    Code::Div => buf.iter_mut().for_each(|a| *a /= c),
                    _ => unreachable!("not a binary step"),
                }
            }
            Step::Relu => buf
                .iter_mut()
                .for_each(|a| *a = if *a > 0.0 || a.is_nan() { *a } else { 0.0 }),
            &Step::Clip(lo, hi) => buf.iter_mut().for_each(|a| {
                let y = if *a < lo { lo } else { *a };
                *a = if y > hi { hi } else { y };
            }),
            &Step::HardSwish(scale, divide) => hard_swish(buf, scale, divide),
        }
    }
}
