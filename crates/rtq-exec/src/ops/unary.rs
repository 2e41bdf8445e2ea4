//! Elementwise unary ops: activations, math functions, Clip, Identity, Dropout, IsNaN
//! and IsInf. Float ops accept every float type; Relu, Abs, Neg, Sign and Clip also
//! work on integers.

use crate::ctx::OpCtx;
use crate::elem::{with_numeric, Elem};
use crate::float::tensor_from_f32;
use crate::math::{erf, exp_m1_nonpositive, exp_nonpositive};
use crate::par;
use crate::registry::Kernel;
use crate::simd::multiversioned;
use crate::ExecError;
use rtq_ir::{Tensor, TensorData};

/// Unary kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("Relu", relu),
    ("LeakyRelu", leaky_relu),
    ("Elu", elu),
    ("Selu", selu),
    ("Celu", celu),
    ("ThresholdedRelu", thresholded_relu),
    ("Sigmoid", sigmoid),
    ("HardSigmoid", hard_sigmoid),
    ("HardSwish", hard_swish),
    ("Tanh", tanh),
    ("Exp", exp),
    ("Log", log),
    ("Sqrt", sqrt),
    ("Abs", abs),
    ("Neg", neg),
    ("Reciprocal", reciprocal),
    ("Floor", floor),
    ("Ceil", ceil),
    ("Round", round),
    ("Sign", sign),
    ("Erf", erf_op),
    ("Softplus", softplus),
    ("Softsign", softsign),
    ("Gelu", gelu),
    ("Mish", mish),
    ("Sin", sin),
    ("Cos", cos),
    ("Tan", tan),
    ("Asin", asin),
    ("Acos", acos),
    ("Atan", atan),
    ("Sinh", sinh),
    ("Cosh", cosh),
    ("Asinh", asinh),
    ("Acosh", acosh),
    ("Atanh", atanh),
    ("Shrink", shrink),
    ("Clip", clip),
    ("Identity", identity),
    ("Dropout", dropout),
    ("IsNaN", is_nan),
    ("IsInf", is_inf),
];

/// Applies `f` to every element of float input 0; the output keeps its float type.
fn float_map(
    ctx: &OpCtx<'_>,
    f: impl Fn(f32) -> f32 + Sync + Send,
) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let v = ctx.float_input(0)?;
    let out = par::map(&v, |&a| f(a));
    Ok(vec![tensor_from_f32(dtype, x.shape().to_vec(), out)])
}

/// Elements per task of [`float_slices`].
const SLICE: usize = 1 << 13;

/// Applies `f(src, dst)` to consecutive slices of float input 0 and of the output (in
/// parallel for big inputs); the output keeps the input's float type.
fn float_slices(
    ctx: &OpCtx<'_>,
    f: impl Fn(&[f32], &mut [f32]) + Sync + Send,
) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let v = ctx.float_input(0)?;
    let mut out = vec![0.0f32; v.len()];
    par::chunks_mut(&mut out, SLICE, v.len(), |i, dst| {
        f(&v[i * SLICE..][..dst.len()], dst)
    });
    Ok(vec![tensor_from_f32(dtype, x.shape().to_vec(), out)])
}

/// The integer flavours of the ops that also accept integer tensors.
#[derive(Clone, Copy)]
enum IntOp {
    Relu,
    Abs,
    Neg,
    Sign,
}

fn int_map<T: Elem>(v: &[T], op: IntOp) -> Vec<T> {
    let zero = T::zero();
    match op {
        IntOp::Relu => par::map(v, |&a| if a > zero { a } else { zero }),
        IntOp::Abs => par::map(v, |&a| a.abs()),
        IntOp::Neg => par::map(v, |&a| a.neg()),
        IntOp::Sign => par::map(v, |&a| {
            if a > zero {
                T::one()
            } else if a < zero {
                T::one().neg()
            } else {
                zero
            }
        }),
    }
}

/// A float op that also accepts integers: floats go through `f`, integers through `op`.
fn float_or_int(
    ctx: &OpCtx<'_>,
    op: IntOp,
    f: impl Fn(f32) -> f32 + Sync + Send,
) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    if x.dtype().is_float() {
        return float_map(ctx, f);
    }
    let data = with_numeric!(x.data(), T, v => T::wrap(int_map::<T>(v, op)),
        _ => return Err(ctx.err(format!("unsupported element type {}", x.dtype()))));
    Ok(vec![ctx.tensor(x.shape().to_vec(), data)?])
}

/// Relu of one float: `max(x, 0)`, NaN kept (shared by the fused kernels, so that they
/// compute what this op does).
#[inline(always)]
pub(crate) fn relu_f32(x: f32) -> f32 {
    if x > 0.0 || x.is_nan() {
        x
    } else {
        0.0
    }
}

/// Clip of one float to `[lo, hi]`, NaN kept (shared as [`relu_f32`] is).
#[inline(always)]
pub(crate) fn clip_f32(x: f32, lo: f32, hi: f32) -> f32 {
    let y = if x < lo { lo } else { x };
    if y > hi {
        hi
    } else {
        y
    }
}

fn relu(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_or_int(ctx, IntOp::Relu, relu_f32)
}

fn abs(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_or_int(ctx, IntOp::Abs, f32::abs)
}

fn neg(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_or_int(ctx, IntOp::Neg, |x| -x)
}

fn sign(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_or_int(ctx, IntOp::Sign, |x| {
        if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            x * 0.0
        }
    })
}

fn leaky_relu(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let alpha = ctx.attr_float("alpha", 0.01)?;
    float_map(ctx, |x| if x >= 0.0 { x } else { alpha * x })
}

fn elu(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    float_map(ctx, |x| if x >= 0.0 { x } else { alpha * x.exp_m1() })
}

fn selu(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let alpha = ctx.attr_float("alpha", 1.673_263_2)?;
    let gamma = ctx.attr_float("gamma", 1.050_701)?;
    float_map(ctx, |x| {
        if x > 0.0 {
            gamma * x
        } else {
            gamma * alpha * x.exp_m1()
        }
    })
}

fn celu(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    if alpha == 0.0 {
        return Err(ctx.err("alpha must not be 0"));
    }
    float_map(ctx, |x| {
        x.max(0.0) + (alpha * (x / alpha).exp_m1()).min(0.0)
    })
}

fn thresholded_relu(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    float_map(ctx, |x| if x > alpha { x } else { 0.0 })
}

/// The logistic function within an ulp, without overflow for large |x|:
/// `1 / (1 + t)` for x >= 0 and `t / (1 + t)` below, with `t = e^-|x|`, in f64
/// rounded once to f32.
#[inline(always)]
fn sigmoid_f32(x: f32) -> f32 {
    let t = exp_nonpositive(-x.abs());
    // NaN takes `t` (NaN) and stays NaN.
    let numerator = if x >= 0.0 { 1.0 } else { t };
    (numerator / (1.0 + t)) as f32
}

/// The hyperbolic tangent within 2 ulps: `(1 - t) / (1 + t)` with `t = e^-2|x|`
/// (`1 - t` from e^x - 1 without cancellation), in f64 rounded once to f32, with the
/// sign of x.
#[inline(always)]
fn tanh_f32(x: f32) -> f32 {
    let m = exp_m1_nonpositive(-2.0 * x.abs());
    ((-m / (2.0 + m)) as f32).copysign(x)
}

/// `dst[i] = f(src[i])`, for the vectorized loops below.
#[inline(always)]
fn map_into(src: &[f32], dst: &mut [f32], f: impl Fn(f32) -> f32) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = f(x);
    }
}

multiversioned! {
    /// [`sigmoid_f32`] of every element of `src` into `dst`.
    fn sigmoid_slice(src: &[f32], dst: &mut [f32]) => sigmoid_slice_body
}

#[inline(always)]
fn sigmoid_slice_body(src: &[f32], dst: &mut [f32]) {
    map_into(src, dst, sigmoid_f32)
}

multiversioned! {
    /// [`tanh_f32`] of every element of `src` into `dst`.
    fn tanh_slice(src: &[f32], dst: &mut [f32]) => tanh_slice_body
}

#[inline(always)]
fn tanh_slice_body(src: &[f32], dst: &mut [f32]) {
    map_into(src, dst, tanh_f32)
}

fn sigmoid(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_slices(ctx, sigmoid_slice)
}

fn hard_sigmoid(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let alpha = ctx.attr_float("alpha", 0.2)?;
    let beta = ctx.attr_float("beta", 0.5)?;
    float_map(ctx, |x| (alpha * x + beta).clamp(0.0, 1.0))
}

fn hard_swish(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, |x| x * (x / 6.0 + 0.5).clamp(0.0, 1.0))
}

fn tanh(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_slices(ctx, tanh_slice)
}

fn exp(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::exp)
}

fn log(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::ln)
}

fn sqrt(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::sqrt)
}

fn reciprocal(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, |x| 1.0 / x)
}

fn floor(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::floor)
}

fn ceil(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::ceil)
}

fn round(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::round_ties_even)
}

fn erf_op(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, |x| erf(x as f64) as f32)
}

/// ln(1 + e^x), without overflow for large x.
fn softplus_f32(x: f32) -> f32 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

fn softplus(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, softplus_f32)
}

fn softsign(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, |x| x / (1.0 + x.abs()))
}

fn gelu(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    match ctx.attr_str("approximate", "none")? {
        "none" => float_map(ctx, |x| {
            let xf = x as f64;
            (0.5 * xf * (1.0 + erf(xf / std::f64::consts::SQRT_2))) as f32
        }),
        "tanh" => float_map(ctx, |x| {
            let xf = x as f64;
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (xf + 0.044715 * xf * xf * xf);
            (0.5 * xf * (1.0 + inner.tanh())) as f32
        }),
        other => Err(ctx.err(format!("unknown approximate mode `{other}`"))),
    }
}

fn mish(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, |x| x * softplus_f32(x).tanh())
}

fn sin(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::sin)
}

fn cos(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::cos)
}

fn tan(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::tan)
}

fn asin(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::asin)
}

fn acos(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::acos)
}

fn atan(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::atan)
}

fn sinh(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::sinh)
}

fn cosh(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::cosh)
}

fn asinh(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::asinh)
}

fn acosh(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::acosh)
}

fn atanh(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_map(ctx, f32::atanh)
}

fn shrink(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let bias = ctx.attr_float("bias", 0.0)?;
    let lambd = ctx.attr_float("lambd", 0.5)?;
    float_map(ctx, |x| {
        if x < -lambd {
            x + bias
        } else if x > lambd {
            x - bias
        } else {
            0.0
        }
    })
}

fn clamp<T: Elem>(v: &[T], lo: Option<f64>, hi: Option<f64>) -> Vec<T> {
    let lo = lo.map_or(T::lowest(), T::from_f64);
    let hi = hi.map_or(T::highest(), T::from_f64);
    par::map(v, |&x| {
        let y = if x < lo { lo } else { x };
        if y > hi {
            hi
        } else {
            y
        }
    })
}

/// Clip with `min`/`max` as optional inputs 1 and 2 (opset 11+; the attributes of older
/// opsets are honoured when the inputs are absent). NaN passes through.
fn clip(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let lo = match ctx.scalar_input(1)? {
        Some(v) => Some(v),
        None => ctx.attr("min").and_then(|a| a.as_float()).map(f64::from),
    };
    let hi = match ctx.scalar_input(2)? {
        Some(v) => Some(v),
        None => ctx.attr("max").and_then(|a| a.as_float()).map(f64::from),
    };
    if x.dtype().is_float() {
        let (lo, hi) = (
            lo.map_or(f32::NEG_INFINITY, |v| v as f32),
            hi.map_or(f32::INFINITY, |v| v as f32),
        );
        return float_map(ctx, |a| clip_f32(a, lo, hi));
    }
    let data = with_numeric!(x.data(), T, v => T::wrap(clamp::<T>(v, lo, hi)),
        _ => return Err(ctx.err(format!("unsupported element type {}", x.dtype()))));
    Ok(vec![ctx.tensor(x.shape().to_vec(), data)?])
}

fn identity(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    Ok(vec![ctx.input(0)?.clone()])
}

/// Inference-mode Dropout: the identity, plus an all-true mask when asked for.
fn dropout(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    if let Some(t) = ctx.opt_input(2) {
        if t.len() == 1 && t.data().get_f64(0) != 0.0 {
            return Err(ctx.err("training_mode=true is not supported by the inference executor"));
        }
    }
    let mut out = vec![x.clone()];
    if ctx.num_outputs() > 1 {
        out.push(ctx.tensor(x.shape().to_vec(), TensorData::Bool(vec![true; x.len()]))?);
    }
    Ok(out)
}

fn float_predicate(
    ctx: &OpCtx<'_>,
    f: impl Fn(f32) -> bool + Sync + Send,
) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let v = ctx.float_input(0)?;
    let out = par::map(&v, |&a| f(a));
    Ok(vec![ctx.tensor(x.shape().to_vec(), TensorData::Bool(out))?])
}

fn is_nan(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    float_predicate(ctx, f32::is_nan)
}

fn is_inf(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let neg = ctx.attr_int("detect_negative", 1)? != 0;
    let pos = ctx.attr_int("detect_positive", 1)? != 0;
    float_predicate(ctx, |a| {
        (a == f32::INFINITY && pos) || (a == f32::NEG_INFINITY && neg)
    })
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use half::f16;
    use rtq_ir::{Attr, DType, Tensor, TensorData};
    use rtq_test_support::node;

    fn run1(op: &str, attrs: &[(&str, Attr)], x: &Tensor) -> Tensor {
        eval_node(&node(op, attrs, 1), &[Some(x)])
            .unwrap()
            .remove(0)
    }

    fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-6 * (1.0 + y.abs()), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn activations_match_hand_values() {
        let x = Tensor::from_f32(vec![4], vec![-2.0, -0.5, 0.0, 3.0]);
        close(
            run1("Relu", &[], &x).as_f32().unwrap(),
            &[0.0, 0.0, 0.0, 3.0],
        );
        close(
            run1("LeakyRelu", &[("alpha", Attr::Float(0.1))], &x)
                .as_f32()
                .unwrap(),
            &[-0.2, -0.05, 0.0, 3.0],
        );
        close(
            run1("HardSigmoid", &[], &x).as_f32().unwrap(),
            &[0.1, 0.4, 0.5, 1.0],
        );
        close(
            run1("HardSwish", &[], &x).as_f32().unwrap(),
            &[-2.0 * (1.0 / 6.0), -0.5 * (5.0 / 12.0), 0.0, 3.0],
        );
        close(
            run1("Sigmoid", &[], &x).as_f32().unwrap(),
            &[0.119_202_92, 0.377_540_67, 0.5, 0.952_574_1],
        );
        close(
            run1("Gelu", &[], &x).as_f32().unwrap(),
            &[-0.045_500_26, -0.154_268_5, 0.0, 2.995_950_5],
        );
        close(
            run1("Softplus", &[], &x).as_f32().unwrap(),
            &[
                0.126_928_01,
                0.474_076_88,
                std::f32::consts::LN_2,
                3.048_587_4,
            ],
        );
        let big = Tensor::from_f32(vec![2], vec![-100.0, 100.0]);
        close(run1("Sigmoid", &[], &big).as_f32().unwrap(), &[0.0, 1.0]);
        close(run1("Softplus", &[], &big).as_f32().unwrap(), &[0.0, 100.0]);
    }

    /// The distance in ulps between `got` and the exact `want` (subnormal ulps count
    /// as normal ones).
    fn ulps(got: f32, want: f64) -> f64 {
        let w = (want as f32).abs();
        let ulp = f64::from(f32::from_bits(w.to_bits() + 1) - w);
        (f64::from(got) - want).abs() / ulp
    }

    /// The worst ulp error of `op` over a dense sweep of [-110, 110], every 101st
    /// float in [-1, 1] and a few extremes, against `exact`, as (ulps, x).
    fn worst_ulps(op: &str, exact: impl Fn(f64) -> f64) -> (f64, f32) {
        let mut x: Vec<f32> = (-1_100_000..=1_100_000).map(|i| i as f32 * 1e-4).collect();
        x.extend((0..(1.0f32).to_bits()).step_by(101).map(f32::from_bits));
        x.extend(
            (0..(1.0f32).to_bits())
                .step_by(101)
                .map(|b| -f32::from_bits(b)),
        );
        x.extend([
            1e-30, -1e-30, 87.0, -87.5, -88.0, -95.0, -103.0, -104.5, 200.0,
        ]);
        x.extend([
            -200.0,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
        ]);
        let t = Tensor::from_f32(vec![x.len()], x.clone());
        let y = run1(op, &[], &t);
        let mut worst = (0.0, 0.0f32);
        for (&xi, &yi) in x.iter().zip(y.as_f32().unwrap()) {
            let e = ulps(yi, exact(f64::from(xi)));
            if e > worst.0 {
                worst = (e, xi);
            }
        }
        worst
    }

    /// `op` of NaN, inf, -inf, 0 and -0.
    fn specials(op: &str) -> Vec<f32> {
        let x = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];
        let y = run1(op, &[], &Tensor::from_f32(vec![5], x.to_vec()));
        y.as_f32().unwrap().to_vec()
    }

    #[test]
    fn sigmoid_is_within_an_ulp_everywhere() {
        let worst = worst_ulps("Sigmoid", |x| 1.0 / (1.0 + (-x).exp()));
        assert!(worst.0 <= 1.0, "{} ulps at x = {}", worst.0, worst.1);
        let y = specials("Sigmoid");
        assert!(y[0].is_nan());
        assert_eq!(&y[1..], &[1.0, 0.0, 0.5, 0.5]);
    }

    #[test]
    fn tanh_is_within_two_ulps_everywhere() {
        let worst = worst_ulps("Tanh", f64::tanh);
        assert!(worst.0 <= 2.0, "{} ulps at x = {}", worst.0, worst.1);
        let y = specials("Tanh");
        assert!(y[0].is_nan());
        assert_eq!(&y[1..], &[1.0, -1.0, 0.0, -0.0]);
        assert!(y[4].is_sign_negative(), "tanh(-0) = -0");
    }

    #[test]
    fn round_is_half_to_even() {
        let x = Tensor::from_f32(vec![5], vec![0.5, 1.5, 2.5, -2.5, 2.6]);
        assert_eq!(
            run1("Round", &[], &x).as_f32().unwrap(),
            &[0.0, 2.0, 2.0, -2.0, 3.0]
        );
    }

    #[test]
    fn integer_flavours() {
        let x = Tensor::from_i64(vec![3], vec![-3, 0, 5]);
        assert_eq!(run1("Abs", &[], &x).as_i64().unwrap(), &[3, 0, 5]);
        assert_eq!(run1("Neg", &[], &x).as_i64().unwrap(), &[3, 0, -5]);
        assert_eq!(run1("Sign", &[], &x).as_i64().unwrap(), &[-1, 0, 1]);
        assert_eq!(run1("Relu", &[], &x).as_i64().unwrap(), &[0, 0, 5]);
        assert!(eval_node(&node("Exp", &[], 1), &[Some(&x)]).is_err());
    }

    #[test]
    fn clip_with_optional_bounds() {
        let x = Tensor::from_f32(vec![4], vec![-2.0, 0.5, 7.0, f32::NAN]);
        let lo = Tensor::scalar_f32(0.0);
        let hi = Tensor::scalar_f32(6.0);
        let n = node("Clip", &[], 1);
        let y = eval_node(&n, &[Some(&x), Some(&lo), Some(&hi)])
            .unwrap()
            .remove(0);
        let v = y.as_f32().unwrap();
        assert_eq!(&v[..3], &[0.0, 0.5, 6.0]);
        assert!(v[3].is_nan());
        let y = eval_node(&n, &[Some(&x), None, Some(&hi)])
            .unwrap()
            .remove(0);
        assert_eq!(&y.as_f32().unwrap()[..3], &[-2.0, 0.5, 6.0]);
        let xi = Tensor::from_i64(vec![3], vec![-5, 3, 100]);
        let hi = Tensor::from_i64(vec![], vec![10]);
        let y = eval_node(&n, &[Some(&xi), None, Some(&hi)])
            .unwrap()
            .remove(0);
        assert_eq!(y.as_i64().unwrap(), &[-5, 3, 10]);
    }

    #[test]
    fn f16_inputs_give_f16_outputs_rounded() {
        let x = Tensor::new(
            vec![2],
            TensorData::F16(vec![f16::from_f32(1.0), f16::from_f32(2.0)]),
        )
        .unwrap();
        let y = run1("Exp", &[], &x);
        assert_eq!(y.dtype(), DType::F16);
        let v = y.to_f32_vec();
        assert_eq!(v[0], f16::from_f32(std::f32::consts::E).to_f32());
        assert_eq!(v[1], f16::from_f32(2.0f32.exp()).to_f32());
    }

    #[test]
    fn dropout_and_predicates() {
        let x = Tensor::from_f32(vec![3], vec![1.0, f32::INFINITY, f32::NEG_INFINITY]);
        let out = eval_node(&node("Dropout", &[], 2), &[Some(&x)]).unwrap();
        assert_eq!(out[0], x);
        assert_eq!(out[1].data(), &TensorData::Bool(vec![true; 3]));
        let y = run1("IsInf", &[("detect_negative", Attr::Int(0))], &x);
        assert_eq!(y.data(), &TensorData::Bool(vec![false, true, false]));
        let training = Tensor::new(vec![], TensorData::Bool(vec![true])).unwrap();
        let err = eval_node(&node("Dropout", &[], 1), &[Some(&x), None, Some(&training)]);
        assert!(err.is_err());
    }
}

#[cfg(test)]
mod speed {
    use crate::eval_node;
    use crate::probe::best_ms;
    use rtq_ir::Tensor;

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec unary::speed -- --ignored --nocapture"]
    fn det_sigmoid_and_tanh() {
        let n = rtq_test_support::node("Sigmoid", &[], 1);
        let len = 320 * 320;
        let x = Tensor::from_f32(
            vec![1, 1, 320, 320],
            (0..len).map(|i| (i % 2001) as f32 * 0.01 - 10.0).collect(),
        );
        let ms = best_ms(20, || {
            eval_node(&n, &[Some(&x)]).unwrap();
        });
        println!("Sigmoid [1,1,320,320]: {ms:.4} ms");
        let src = x.as_f32().unwrap();
        let mut dst = vec![0.0f32; len];
        let ms = best_ms(20, || super::sigmoid_slice(src, &mut dst));
        println!("sigmoid_slice alone: {ms:.4} ms");
        let ms = best_ms(20, || super::tanh_slice(src, &mut dst));
        println!("tanh_slice alone: {ms:.4} ms");
        let ms = best_ms(20, || {
            dst.iter_mut().zip(src).for_each(|(d, &x)| *d = x.tanh());
        });
        println!("f32::tanh loop: {ms:.4} ms");
    }
}
