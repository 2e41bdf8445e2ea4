//! `ElementwiseChain` (domain [`INTEGER_DOMAIN`](super::integer::INTEGER_DOMAIN),
//! rtq's own), made at load by [`crate::fuse_chains`]: a run of elementwise float32
//! ops, each reading the one before (Add, Sub, Mul, Div by a constant scalar or
//! per-channel operand, by a computed tensor of the same shape, such as a residual
//! branch, or by a computed value per image and channel, such as a squeeze-and-excite
//! gate; Relu, Clip, a fused HardSwish, a QuantizeLinear to 8 bits followed by its
//! DequantizeLinear), optionally ending in a per-tensor QuantizeLinear to 8 bits,
//! computed plane by plane (one image and channel at a time, in cache) instead of one
//! pass over memory per op. Every step is the f32 operation the op's own kernel
//! computes, in the graph's order: the result is bit for bit the graph's. Where a
//! computed operand turns out at run time to broadcast otherwise (the graph's shapes
//! were not all known at load), the steps run one by one on whole tensors, as the ops
//! would.
//!
//! Inputs: `x`, then the operands; attribute `steps` holds three integers per
//! step: its [`Code`], and the input slots of its operands (0 when unused); attribute
//! `params` two floats per step (Clip's bounds, HardSwish's constant and whether it
//! divides).

use crate::ctx::OpCtx;
use crate::ops::binary::{arith, Arith};
use crate::ops::fused::{hard_swish, hard_swish_6};
use crate::ops::quant::{level_8bit, quantize_8bit_mapped, quantize_8bit_tensor};
use crate::ops::unary::{clip_f32, relu_f32};
use crate::par;
use crate::registry::Kernel;
use crate::simd::multiversioned;
use crate::ExecError;
use rtq_ir::{DType, Tensor, TensorData};
use std::borrow::Cow;
use std::mem::MaybeUninit;

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
    /// QuantizeLinear to 8 bits then DequantizeLinear by the same scale and zero
    /// point: the value rounded to the quantization grid, as float32.
    FakeQuantize = 9,
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
            9 => Code::FakeQuantize,
            _ => return None,
        })
    }
}

/// A step with its operand resolved for this run.
#[derive(Debug, Clone)]
enum Step<'a> {
    /// A binary op with a scalar, per-channel or same-shape operand.
    Binary(Code, Operand<'a>),
    Relu,
    Clip(f32, f32),
    HardSwish(f32, bool),
    FakeQuantize(Quantize),
}

/// The operand of a binary step.
#[derive(Debug, Clone)]
enum Operand<'a> {
    Scalar(f32),
    /// One value per channel (axis 1 of `x`).
    PerChannel(Vec<f32>),
    /// One value per element of `x` (the same shape).
    Tensor(Cow<'a, [f32]>),
    /// One value per plane of `x` (image and channel: shape `[N, C, 1, ...]`).
    PerPlane(Cow<'a, [f32]>),
}

/// A quantization: scale, zero point, and whether the codes are unsigned.
#[derive(Debug, Clone, Copy)]
struct Quantize {
    scale: f32,
    zero: f32,
    unsigned: bool,
}

impl Quantize {
    /// The code type's bounds minus the zero point (as [`level_8bit`] takes them).
    fn bounds(&self) -> (f32, f32) {
        let (lo, hi) = if self.unsigned {
            (0.0, 255.0)
        } else {
            (-128.0, 127.0)
        };
        (lo - self.zero, hi - self.zero)
    }

    /// DequantizeLinear of QuantizeLinear of `v`: `(q - zero) * scale` of its code `q`.
    #[inline(always)]
    fn round_trip(&self, v: f32) -> f32 {
        (level_8bit(v, self.scale, self.zero, self.bounds()) - self.zero) * self.scale
    }
}

/// A quantizing chain computed in one pass, in registers: an optional activation,
/// then an optional multiplication and addition by scalars, then the quantization.
/// The values are those of the steps one by one: a missing factor is 1 (exact); a
/// missing term is 0, which only turns -0 into +0, and both quantize to the same
/// integer. These are most chains of quantized CNNs (Relu, or PP-LCNet's HardSwish
/// and learned affine, before the next layer's QuantizeLinear).
#[derive(Debug, Clone, Copy)]
struct SinglePass {
    activation: Activation,
    factor: f32,
    term: f32,
}

/// The activation of a [`SinglePass`].
#[derive(Debug, Clone, Copy, PartialEq)]
enum Activation {
    None,
    Relu,
    /// HardSwish with the divisor 6.
    HardSwish,
}

impl SinglePass {
    /// The single pass computing `steps` before a quantization, if they have its form.
    fn of(steps: &[Step<'_>]) -> Option<SinglePass> {
        let (activation, rest) = match steps {
            [Step::Relu, rest @ ..] => (Activation::Relu, rest),
            [Step::HardSwish(scale, true), rest @ ..] if *scale == 6.0 => {
                (Activation::HardSwish, rest)
            }
            rest => (Activation::None, rest),
        };
        let scalar = |step: Option<&Step<'_>>, code: Code| match step {
            Some(Step::Binary(c, Operand::Scalar(v))) if *c == code => Some(*v),
            _ => None,
        };
        let (factor, rest) = match scalar(rest.first(), Code::Mul) {
            Some(v) => (v, &rest[1..]),
            None => (1.0, rest),
        };
        let first = rest.first();
        let (term, rest) = match (scalar(first, Code::Add), scalar(first, Code::Sub)) {
            (Some(v), _) => (v, &rest[1..]),
            // x - c is x + (-c), exactly.
            (_, Some(v)) => (-v, &rest[1..]),
            _ => (0.0, rest),
        };
        rest.is_empty().then_some(SinglePass {
            activation,
            factor,
            term,
        })
    }

    /// The chain's 8-bit values of `src` into `dst`, quantized by `q`.
    fn run<T: Copy>(
        self,
        src: &[f32],
        q: &Quantize,
        dst: &mut [MaybeUninit<T>],
        cast: impl Fn(i32) -> T,
    ) {
        let (a, b) = (self.factor, self.term);
        let terms = (q.scale, q.zero, q.unsigned);
        match self.activation {
            Activation::None => quantize_8bit_mapped(src, |v| v * a + b, terms, dst, cast),
            Activation::Relu => {
                quantize_8bit_mapped(src, |v| relu_f32(v) * a + b, terms, dst, cast)
            }
            Activation::HardSwish => {
                quantize_8bit_mapped(src, |v| hard_swish_6(v) * a + b, terms, dst, cast)
            }
        }
    }
}

/// Attribute of an op that ends in a chain it computes itself ([`QuantizingTail`]):
/// the chain's steps, encoded as `ElementwiseChain`'s `steps` (operand slots are the
/// op's own input slots).
pub(crate) const TAIL_STEPS: &str = "tail_steps";
/// The tail's step parameters, as `ElementwiseChain`'s `params`.
pub(crate) const TAIL_PARAMS: &str = "tail_params";

/// A chain that a producing kernel applies to its own float32 results before storing
/// them, in place of a separate `ElementwiseChain` reading them back from memory: a
/// [`SinglePass`] ending in a per-tensor 8-bit QuantizeLinear (an optional Relu or
/// HardSwish, multiplication and addition by scalars). The values are the chain's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuantizingTail {
    pass: SinglePass,
    quantize: Quantize,
}

impl QuantizingTail {
    /// The tail in attributes [`TAIL_STEPS`] and [`TAIL_PARAMS`] of the node `ctx` runs,
    /// for an output of `shape`; `None` without them.
    pub(crate) fn of_node(
        ctx: &OpCtx<'_>,
        shape: &[usize],
    ) -> Result<Option<QuantizingTail>, ExecError> {
        let Some(encoded) = ctx.attr_ints(TAIL_STEPS)? else {
            return Ok(None);
        };
        let params = ctx.attr_floats(TAIL_PARAMS)?.unwrap_or_default();
        // A single pass takes scalar operands only, so operands of other forms (or
        // none that fits) reject the tail below.
        let decoded = decode(ctx, &encoded, &params, shape)?;
        match decoded.and_then(|(steps, q)| Some((SinglePass::of(&steps)?, q?))) {
            Some((pass, quantize)) => Ok(Some(QuantizingTail { pass, quantize })),
            None => Err(ctx.err("the tail is not one quantizing pass")),
        }
    }

    /// Whether the codes are uint8 (else int8).
    pub(crate) fn unsigned(&self) -> bool {
        self.quantize.unsigned
    }

    /// The tail's codes of `src` into `dst`, cast by `cast` from the clamped integer.
    pub(crate) fn run<T: Copy>(
        &self,
        src: &[f32],
        dst: &mut [MaybeUninit<T>],
        cast: impl Fn(i32) -> T,
    ) {
        self.pass.run(src, &self.quantize, dst, cast);
    }

    /// The tail's codes of all of `values`, in pieces over threads.
    pub(crate) fn codes(&self, values: &[f32]) -> TensorData {
        // No steps run before the tail's loop, and no operand depends on the
        // channel, so any piece of the tensor is a plane.
        let chain = Chain {
            x: values,
            steps: &[],
            plane: TASK.min(values.len()),
            channels: 1,
        };
        if self.unsigned() {
            TensorData::U8(chain.run(|block, dst| self.run(block, dst, |v| v as u8)))
        } else {
            TensorData::I8(chain.run(|block, dst| self.run(block, dst, |v| v as i8)))
        }
    }
}

/// Whether `ElementwiseChain` node `chain` of `graph` is a [`QuantizingTail`] with
/// constant operands, so that its producer may compute it (checked at load; the
/// kernel decodes it again).
pub(crate) fn is_quantizing_tail(graph: &rtq_ir::Graph, chain: &rtq_ir::Node) -> bool {
    let (Some(rtq_ir::Attr::Ints(encoded)), Some(rtq_ir::Attr::Floats(params))) =
        (chain.attr("steps"), chain.attr("params"))
    else {
        return false;
    };
    if encoded.len() % 3 != 0 || params.len() * 3 != encoded.len() * 2 {
        return false;
    }
    let constant = |slot: i64| {
        let v = chain.input(usize::try_from(slot).ok()?)?;
        graph.constant(v)
    };
    let scalar = |slot: i64| {
        let c = constant(slot)?;
        (c.dtype() == DType::F32 && c.len() == 1).then(|| c.to_f32_vec()[0])
    };
    let mut steps = Vec::new();
    let mut quantizes = false;
    for (i, s) in encoded.chunks_exact(3).enumerate() {
        let Some(code) = Code::from_i64(s[0]) else {
            return false;
        };
        if quantizes {
            return false;
        }
        match code {
            Code::Add | Code::Sub | Code::Mul | Code::Div => match scalar(s[1]) {
                Some(v) => steps.push(Step::Binary(code, Operand::Scalar(v))),
                None => return false,
            },
            Code::Relu => steps.push(Step::Relu),
            Code::HardSwish => steps.push(Step::HardSwish(params[2 * i], params[2 * i + 1] != 0.0)),
            Code::Quantize => {
                quantizes = scalar(s[1]).is_some()
                    && (s[2] == 0 || constant(s[2]).is_some_and(|z| z.len() == 1));
                if !quantizes {
                    return false;
                }
            }
            Code::Clip | Code::FakeQuantize => return false,
        }
    }
    quantizes && SinglePass::of(&steps).is_some()
}

fn elementwise_chain(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let TensorData::F32(v) = x.data() else {
        return Err(ctx.err(format!("takes float32, got {}", x.dtype())));
    };
    let shape = x.shape();
    let encoded = ctx.attr_ints("steps")?.unwrap_or_default();
    let params = ctx.attr_floats("params")?.unwrap_or_default();
    let Some((steps, quantize)) = decode(ctx, &encoded, &params, shape)? else {
        let (value, quantize) = stepwise(ctx, x, &encoded, &params)?;
        let v = value.as_f32().map_err(|e| ctx.err(e.to_string()))?;
        return chain_output(ctx, v, value.shape(), &[], quantize);
    };
    if let Some(tail) = quantize.and_then(|quantize| {
        Some(QuantizingTail {
            pass: SinglePass::of(&steps)?,
            quantize,
        })
    }) {
        // The whole chain in the quantization's loop.
        let data = tail.codes(v);
        return Ok(vec![
            Tensor::new(shape.to_vec(), data).map_err(|e| ctx.err(e.to_string()))?
        ]);
    }
    chain_output(ctx, v, shape, &steps, quantize)
}

/// A chain's steps before its final quantization, and that quantization.
type Decoded<'a> = (Vec<Step<'a>>, Option<Quantize>);

/// The steps encoded in `encoded` and `params` (three integers and two floats per
/// step), with their operands resolved for an `x` of `shape`: those before the final
/// quantization, and that quantization. `None` when a computed operand fits none of
/// [`operand`]'s forms (the caller runs the steps one by one instead).
fn decode<'a>(
    ctx: &OpCtx<'a>,
    encoded: &[i64],
    params: &[f32],
    shape: &[usize],
) -> Result<Option<Decoded<'a>>, ExecError> {
    if !encoded.len().is_multiple_of(3) || params.len() * 3 != encoded.len() * 2 {
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
        let (a, b) = (s[1] as usize, s[2] as usize);
        match code {
            Code::Add | Code::Sub | Code::Mul | Code::Div => match operand(ctx, a, shape)? {
                Some(c) => steps.push(Step::Binary(code, c)),
                None => return Ok(None),
            },
            Code::Quantize => quantize = Some(quantizer(ctx, a, b)?),
            _ => steps.push(other_step(ctx, code, (a, b), (p0, p1))?),
        }
    }
    Ok(Some((steps, quantize)))
}

/// The output of `steps` on float32 `v` (of `shape`), then `quantize` if given.
fn chain_output(
    ctx: &OpCtx<'_>,
    v: &[f32],
    shape: &[usize],
    steps: &[Step<'_>],
    quantize: Option<Quantize>,
) -> Result<Vec<Tensor>, ExecError> {
    let channels = if shape.len() >= 2 { shape[1] } else { 1 };
    let inner: usize = shape.iter().skip(2).product();
    // Without per-channel operands any piece of the tensor is a plane: pieces of a
    // task's size let the tasks spread over threads.
    let per_channel = steps.iter().any(|s| {
        matches!(
            s,
            Step::Binary(_, Operand::PerChannel(_) | Operand::PerPlane(_))
        )
    });
    let plane = if shape.len() >= 2 && per_channel {
        inner
    } else {
        TASK.min(v.len())
    };
    let chain = Chain {
        x: v,
        steps,
        plane,
        channels: channels.max(1),
    };
    let data = match quantize {
        None => TensorData::F32(chain.run(|block, dst| {
            for (d, &v) in dst.iter_mut().zip(block) {
                d.write(v);
            }
        })),
        Some(q) if q.unsigned => TensorData::U8(chain.run(|block, dst| {
            quantize_8bit_tensor(block, q.scale, q.zero, true, dst, |v| v as u8)
        })),
        Some(q) => TensorData::I8(chain.run(|block, dst| {
            quantize_8bit_tensor(block, q.scale, q.zero, false, dst, |v| v as i8)
        })),
    };
    Ok(vec![
        Tensor::new(shape.to_vec(), data).map_err(|e| ctx.err(e.to_string()))?
    ])
}

/// Elements per block: a chain runs every step on one block (in L1) before the next.
const BLOCK: usize = 1024;
/// Elements per parallel task (whole planes, at least one).
const TASK: usize = 1 << 14;

/// A chain's steps over one tensor, plane by plane.
struct Chain<'s, 'a> {
    x: &'s [f32],
    steps: &'s [Step<'a>],
    /// Elements per plane (one image and channel).
    plane: usize,
    channels: usize,
}

impl Chain<'_, '_> {
    /// The output: for each block of each plane, the steps' result, which `store`
    /// writes to its part of the output (every element of it).
    fn run<T: Copy + Send>(&self, store: impl Fn(&[f32], &mut [MaybeUninit<T>]) + Sync) -> Vec<T> {
        let work = self.x.len() * (self.steps.len() + 1);
        let plane = self.plane.max(1);
        let planes_per_task = (TASK / plane).max(1);
        par::written(self.x.len(), plane * planes_per_task, work, |t, dst| {
            let (mut result, mut scratch) = ([0f32; BLOCK], [0f32; BLOCK]);
            for (j, dst) in dst.chunks_mut(plane).enumerate() {
                let p = t * planes_per_task + j;
                for (i, dst) in dst.chunks_mut(BLOCK).enumerate() {
                    let (offset, n) = (p * plane + i * BLOCK, dst.len());
                    let src = &self.x[offset..][..n];
                    if self.steps.is_empty() {
                        store(src, dst);
                        continue;
                    }
                    let (result, scratch) = (&mut result[..n], &mut scratch[..n]);
                    let at = Position {
                        plane: p,
                        channel: p % self.channels,
                        offset,
                    };
                    apply_steps(src, result, scratch, self.steps, at);
                    store(result, dst);
                }
            }
        })
    }
}

/// The operand in input `slot`: a scalar, one value per channel of `x` (shape
/// `[C, 1, ...]` aligned on axis 1 of `x`), one value per plane (shape `[N, C, 1, ...]`)
/// or a tensor of `x`'s shape; `None` for a float32 operand that broadcasts otherwise.
fn operand<'a>(
    ctx: &OpCtx<'a>,
    slot: usize,
    x: &[usize],
) -> Result<Option<Operand<'a>>, ExecError> {
    let c = ctx.input(slot)?;
    if c.dtype() != DType::F32 {
        return Err(ctx.err(format!("operand {slot} is {}, not float32", c.dtype())));
    }
    let values = ctx.float_input(slot)?;
    let known: Vec<Option<usize>> = x.iter().map(|&d| Some(d)).collect();
    Ok(Some(if c.shape() == x && c.len() > 1 {
        Operand::Tensor(values)
    } else if c.len() == 1 && c.rank() <= x.len() {
        Operand::Scalar(values[0])
    } else if per_channel(c.shape(), &known) {
        Operand::PerChannel(values.into_owned())
    } else if per_plane(c.shape(), x) {
        Operand::PerPlane(values)
    } else {
        return Ok(None);
    }))
}

/// Whether shape `c` is one value per plane of `x`: `[N, C, 1, ...]` of `x`'s rank.
fn per_plane(c: &[usize], x: &[usize]) -> bool {
    x.len() >= 2 && c.len() == x.len() && c[..2] == x[..2] && c[2..].iter().all(|&d| d == 1)
}

/// The chain of `x` op by op on whole tensors, each step broadcasting as its op does,
/// up to its final quantization (returned): for computed operands whose run-time
/// shapes fit none of [`operand`]'s forms.
fn stepwise(
    ctx: &OpCtx<'_>,
    x: &Tensor,
    encoded: &[i64],
    params: &[f32],
) -> Result<(Tensor, Option<Quantize>), ExecError> {
    let mut value = x.clone();
    for (i, s) in encoded.chunks_exact(3).enumerate() {
        let code = Code::from_i64(s[0]).ok_or_else(|| ctx.err(format!("step code {}", s[0])))?;
        let (a, b) = (s[1] as usize, s[2] as usize);
        let op = match code {
            Code::Add => Arith::Add,
            Code::Sub => Arith::Sub,
            Code::Mul => Arith::Mul,
            Code::Div => Arith::Div,
            Code::Quantize => return Ok((value, Some(quantizer(ctx, a, b)?))),
            _ => {
                let step = other_step(ctx, code, (a, b), (params[2 * i], params[2 * i + 1]))?;
                let v = value.as_f32().map_err(|e| ctx.err(e.to_string()))?;
                let mut out = vec![0f32; v.len()];
                step_into(&step, v, &mut out, Position::default());
                value = ctx.tensor(value.shape().to_vec(), TensorData::F32(out))?;
                continue;
            }
        };
        value = arith(ctx, op, &value, ctx.input(a)?)?;
    }
    Ok((value, None))
}

/// The step of `code`, neither a binary op nor the final quantization, with operands
/// in slots `a` and `b` and parameters `p0` and `p1`.
fn other_step<'a>(
    ctx: &OpCtx<'a>,
    code: Code,
    (a, b): (usize, usize),
    (p0, p1): (f32, f32),
) -> Result<Step<'a>, ExecError> {
    Ok(match code {
        Code::Relu => Step::Relu,
        Code::Clip => Step::Clip(p0, p1),
        Code::HardSwish => Step::HardSwish(p0, p1 != 0.0),
        Code::FakeQuantize => Step::FakeQuantize(quantizer(ctx, a, b)?),
        other => return Err(ctx.err(format!("{other:?} is not an elementwise step"))),
    })
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

/// Where a block of a chain's input lies: its plane, that plane's channel, and the
/// tensor's element index of its first element.
#[derive(Debug, Clone, Copy, Default)]
struct Position {
    plane: usize,
    channel: usize,
    offset: usize,
}

multiversioned! {
    /// `out` <- `steps` applied to `src`, the elements of the tensor from `at` on, all
    /// of one plane; `scratch` (as long) holds intermediate results.
    fn apply_steps(
        src: &[f32],
        out: &mut [f32],
        scratch: &mut [f32],
        steps: &[Step<'_>],
        at: Position,
    ) => apply_steps_body
}

/// Every step reads one buffer and writes the other (ping-pong, ending in `out`): a
/// step in place would turn Relu's and Clip's selects into conditional stores, which the
/// next step's loads cannot forward from.
#[inline(always)]
fn apply_steps_body(
    src: &[f32],
    out: &mut [f32],
    scratch: &mut [f32],
    steps: &[Step<'_>],
    at: Position,
) {
    let Some((first, rest)) = steps.split_first() else {
        out.copy_from_slice(src);
        return;
    };
    // The step writing `out` is the last one.
    let mut bufs = if steps.len() % 2 == 1 {
        [out, scratch]
    } else {
        [scratch, out]
    };
    step_into(first, src, bufs[0], at);
    for (i, step) in rest.iter().enumerate() {
        let [a, b] = &mut bufs;
        if i % 2 == 0 {
            step_into(step, a, b, at);
        } else {
            step_into(step, b, a, at);
        }
    }
}

/// `out` <- one step applied to `input` (the tensor's elements from `at` on, in one
/// plane).
#[inline(always)]
fn step_into(step: &Step<'_>, input: &[f32], out: &mut [f32], at: Position) {
    let pairs = out.iter_mut().zip(input);
    match step {
        Step::Binary(code, Operand::Tensor(t)) => {
            let t = &t[at.offset..][..input.len()];
            let triples = pairs.zip(t);
            match code {
                Code::Add => triples.for_each(|((o, &a), &c)| *o = a + c),
                Code::Sub => triples.for_each(|((o, &a), &c)| *o = a - c),
                Code::Mul => triples.for_each(|((o, &a), &c)| *o = a * c),
                Code::Div => triples.for_each(|((o, &a), &c)| *o = a / c),
                _ => unreachable!("not a binary step"),
            }
        }
        Step::Binary(code, operand) => {
            let c = match operand {
                Operand::Scalar(v) => *v,
                Operand::PerChannel(v) => v[at.channel],
                Operand::PerPlane(v) => v[at.plane],
                Operand::Tensor(_) => unreachable!("matched above"),
            };
            match code {
                Code::Add => pairs.for_each(|(o, &a)| *o = a + c),
                Code::Sub => pairs.for_each(|(o, &a)| *o = a - c),
                Code::Mul => pairs.for_each(|(o, &a)| *o = a * c),
                Code::Div => pairs.for_each(|(o, &a)| *o = a / c),
                _ => unreachable!("not a binary step"),
            }
        }
        Step::Relu => pairs.for_each(|(o, &a)| *o = relu_f32(a)),
        &Step::Clip(lo, hi) => pairs.for_each(|(o, &a)| *o = clip_f32(a, lo, hi)),
        &Step::HardSwish(scale, divide) => {
            out.copy_from_slice(input);
            hard_swish(out, scale, divide);
        }
        Step::FakeQuantize(q) => pairs.for_each(|(o, &a)| *o = q.round_trip(a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_passes_take_only_their_form() {
        let scalar = |code, v| Step::Binary(code, Operand::Scalar(v));
        let of =
            |steps: &[Step<'_>]| SinglePass::of(steps).map(|p| (p.activation, p.factor, p.term));
        assert_eq!(of(&[]), Some((Activation::None, 1.0, 0.0)));
        assert_eq!(
            of(&[
                Step::HardSwish(6.0, true),
                scalar(Code::Mul, 2.0),
                scalar(Code::Sub, 0.5)
            ]),
            Some((Activation::HardSwish, 2.0, -0.5))
        );
        assert_eq!(
            of(&[Step::Relu, scalar(Code::Add, 1.0)]),
            Some((Activation::Relu, 1.0, 1.0))
        );
        // Out of order, another divisor, a division, a clip, a per-channel operand.
        assert_eq!(of(&[scalar(Code::Add, 1.0), Step::Relu]), None);
        assert_eq!(of(&[scalar(Code::Add, 1.0), scalar(Code::Mul, 2.0)]), None);
        assert_eq!(of(&[Step::HardSwish(6.0, false)]), None);
        assert_eq!(of(&[Step::HardSwish(5.0, true)]), None);
        assert_eq!(of(&[scalar(Code::Div, 2.0)]), None);
        assert_eq!(of(&[Step::Clip(0.0, 6.0)]), None);
        assert_eq!(
            of(&[Step::Binary(Code::Mul, Operand::PerChannel(vec![1.0, 2.0]))]),
            None
        );
    }
}
