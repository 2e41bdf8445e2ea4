//! Integer depthwise convolution: an `IntegerConv` with one input channel per group
//! (depthwise, or a channel multiplier), INT8 activations and weights, f32 output
//! `acc * scale[m] + bias[m]` like the integer GEMM's epilogue.
//!
//! The product of two INT8 values is at most 2^14 in magnitude, so a sum of at most
//! [`MAX_TAPS`] of them is an integer below 2^24: exact in f32, whatever the order of
//! the additions. The float depthwise kernels therefore compute the INT32 sums exactly:
//! each input plane is converted to f32 once, in a per-thread buffer, right before the
//! output planes that read it are computed (in cache, instead of a dequantized copy of the
//! whole tensor in memory), with the weights converted once per node. The result is the
//! same on every path (AVX-512 or the generic kernel) and equals INT32 arithmetic.
//! Where the CPU has AVX-512 VNNI and VBMI, the sums are INT32 arithmetic itself
//! ([`integer_depthwise_vnni`]), scaled the same way.

use crate::igemm::Isa;
use crate::ops::conv::{depthwise_plane, ConvProblem};
use crate::ops::conv_depthwise;
use crate::ops::integer_depthwise_vnni::{self, Packed};
use crate::par;
use crate::simd::multiversioned;
use std::cell::RefCell;

/// Most taps per output (kernel elements): sums of INT8 products stay exact in f32.
pub(crate) const MAX_TAPS: usize = 1 << 10;

/// Which float kernel computes the sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// The INT32 kernel on AVX-512 VNNI (where [`integer_depthwise_vnni::applies`]).
    Vnni,
    /// The AVX-512 float depthwise kernel (where [`conv_depthwise::applies`]).
    Avx512,
    /// The generic depthwise kernel (any window, any CPU).
    Generic,
}

impl Path {
    /// The fastest path for `p` on this CPU when the integer products may use `isa`
    /// (VNNI only with [`Isa::Avx512Vnni`]).
    pub(crate) fn best(p: &ConvProblem, isa: Isa) -> Path {
        if isa == Isa::Avx512Vnni && integer_depthwise_vnni::applies(p) {
            Path::Vnni
        } else if conv_depthwise::applies(&one_plane(p)) {
            Path::Avx512
        } else {
            Path::Generic
        }
    }
}

/// A depthwise convolution's weights, as each path reads them.
pub(crate) struct Weights {
    /// INT8 values as f32 (the float kernels').
    values: Vec<f32>,
    /// The VNNI kernel's packing, where the CPU has it and the kernel is narrow enough.
    vnni: Option<Packed>,
}

impl Weights {
    /// The weights `w` (`m x 1 x kh x kw`) of a 2-D or other convolution.
    pub(crate) fn new(w: &[i8], m: usize, kernel: &[usize]) -> Weights {
        let vnni = match *kernel {
            [kh, kw]
                if integer_depthwise_vnni::available() && kw <= integer_depthwise_vnni::MAX_KW =>
            {
                Some(Packed::new(w, m, [kh, kw]))
            }
            _ => None,
        };
        Weights {
            values: w.iter().map(|&v| f32::from(v)).collect(),
            vnni,
        }
    }
}

/// Whether [`conv`] computes `p`: one input channel per group, at most [`MAX_TAPS`] taps.
pub(crate) fn applies(p: &ConvProblem) -> bool {
    p.group > 0 && p.c == p.group && p.m.is_multiple_of(p.group) && p.win.kernel_size() <= MAX_TAPS
}

/// The problem of one output plane from one input plane.
fn one_plane(p: &ConvProblem) -> ConvProblem {
    ConvProblem {
        n: 1,
        c: 1,
        m: 1,
        group: 1,
        win: p.win.clone(),
    }
}

/// Floats kept before and after a converted input plane. The AVX-512 kernel's masked
/// loads address up to a few vectors past either end of a row (their lanes there are
/// masked off, never read). Where those addresses fell outside the buffer's allocation,
/// the loads took a slow path on this CPU (AMD Zen 5; measured: the det model's 10x10
/// layers ran 6x slower); with margins every address stays inside the buffer.
const MARGIN: usize = 64;

thread_local! {
    /// A thread's input plane, converted to f32, between [`MARGIN`]s.
    static PLANE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The convolution of `x` (`n x c x ...`, INT8) by `w` (`m x 1 x kernel`) on `path`:
/// `n * m * output_size` values, each its exact sum times `scale[m]`, plus `bias[m]`
/// (0 when absent). `applies(p)` must hold, and `path` must be [`Path::Generic`] or
/// [`Path::best`] (for any instruction set).
pub(crate) fn conv(
    x: &[i8],
    w: &Weights,
    p: &ConvProblem,
    (scale, bias): (&[f32], Option<&[f32]>),
    path: Path,
) -> Vec<f32> {
    assert!(
        applies(p),
        "integer depthwise convolution on an unsupported problem"
    );
    let win = &p.win;
    let (in_sp, out_sp, taps) = (win.input_size(), win.output_size(), win.kernel_size());
    assert_eq!(x.len(), p.n * p.c * in_sp, "input size");
    assert_eq!(w.values.len(), p.m * taps, "weights size");
    assert_eq!(scale.len(), p.m, "scales");
    let vnni = match path {
        Path::Vnni => Some(
            w.vnni
                .as_ref()
                .expect("VNNI weights where the path is VNNI"),
        ),
        _ => None,
    };
    let w = &w.values;
    let single = one_plane(p);
    let masks = (path == Path::Avx512).then(|| conv_depthwise::vector_masks(&single));
    let mult = p.m / p.group;
    let len = p.n * p.m * out_sp;
    // One task per input plane: its `mult` output planes (consecutive channels) read
    // the plane converted once.
    par::written(len, mult * out_sp.max(1), len * taps, |index, planes| {
        let (ni, ci) = (index / p.c, index % p.c);
        let xp = &x[(ni * p.c + ci) * in_sp..][..in_sp];
        if let Some(packed) = vnni {
            integer_depthwise_vnni::with_plane(xp, p, |plane| {
                for (j, dst) in planes.chunks_mut(out_sp.max(1)).enumerate() {
                    let mo = ci * mult + j;
                    let terms = (scale[mo], bias.map_or(0.0, |b| b[mo]));
                    integer_depthwise_vnni::plane(plane, packed, mo, p, terms, dst);
                }
            });
            return;
        }
        PLANE.with_borrow_mut(|buf| {
            buf.resize(in_sp + 2 * MARGIN, 0.0);
            let plane = &mut buf[MARGIN..][..in_sp];
            widen(xp, plane);
            let plane = &*plane;
            for (j, dst) in planes.chunks_mut(out_sp.max(1)).enumerate() {
                let mo = ci * mult + j;
                let wk = &w[mo * taps..][..taps];
                let terms = (scale[mo], bias.map_or(0.0, |b| b[mo]));
                if let Some(masks) = &masks {
                    // Sums from zero, scaled as they are stored.
                    conv_depthwise::plane_scaled(plane, wk, &single, masks, terms, dst);
                    continue;
                }
                dst.iter_mut().for_each(|d| {
                    d.write(0.0);
                });
                // SAFETY: every element was just written.
                let dst = unsafe { &mut *(dst as *mut [_] as *mut [f32]) };
                depthwise_plane(plane, wk, &single, 0, dst);
                scale_plane(dst, terms.0, terms.1);
            }
        });
    })
}

multiversioned! {
    /// `dst[i] = src[i] as f32`.
    fn widen(src: &[i8], dst: &mut [f32]) => widen_body
}

#[inline(always)]
fn widen_body(src: &[i8], dst: &mut [f32]) {
    dst.iter_mut()
        .zip(src)
        .for_each(|(d, &v)| *d = f32::from(v));
}

multiversioned! {
    /// `v[i] = v[i] * scale + bias`: the integer GEMM's epilogue.
    fn scale_plane(v: &mut [f32], scale: f32, bias: f32) => scale_plane_body
}

#[inline(always)]
fn scale_plane_body(v: &mut [f32], scale: f32, bias: f32) {
    v.iter_mut().for_each(|d| *d = *d * scale + bias);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::igemm::tests::bytes;
    use crate::ops::window::{widen, Window};

    /// The INT32 definition: `sum(x * w) as f32 * scale + bias`, zero padding.
    fn reference(x: &[i8], w: &[i8], p: &ConvProblem, scale: &[f32], bias: &[f32]) -> Vec<f32> {
        let win = &p.win;
        let [_, kh, kw] = win.kernel;
        let [_, ih, iw] = win.input;
        let [_, oh, ow] = win.output;
        let mult = p.m / p.group;
        let mut out = Vec::new();
        for ni in 0..p.n {
            for mo in 0..p.m {
                let xp = &x[(ni * p.c + mo / mult) * ih * iw..][..ih * iw];
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = 0i32;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * win.stride[1] + ky * win.dilation[1]) as isize
                                    - win.pad_begin[1] as isize;
                                let ix = (ox * win.stride[2] + kx * win.dilation[2]) as isize
                                    - win.pad_begin[2] as isize;
                                if (0..ih as isize).contains(&iy) && (0..iw as isize).contains(&ix)
                                {
                                    acc += i32::from(xp[iy as usize * iw + ix as usize])
                                        * i32::from(w[(mo * kh + ky) * kw + kx]);
                                }
                            }
                        }
                        out.push(acc as f32 * scale[mo] + bias[mo]);
                    }
                }
            }
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn problem(
        n: usize,
        c: usize,
        mult: usize,
        hw: [usize; 2],
        k: [usize; 2],
        stride: usize,
        pad: usize,
        dilation: usize,
    ) -> ConvProblem {
        let output = [0, 1].map(|a| (hw[a] + 2 * pad - dilation * (k[a] - 1) - 1) / stride + 1);
        let win = Window {
            rank: 2,
            input: widen(&hw, 1),
            kernel: widen(&k, 1),
            stride: [1, stride, stride],
            dilation: [1, dilation, dilation],
            pad_begin: widen(&[pad, pad], 0),
            pad_end: widen(&[pad, pad], 0),
            output: widen(&output, 1),
        };
        ConvProblem {
            n,
            c,
            m: c * mult,
            group: c,
            win,
        }
    }

    #[test]
    fn every_path_equals_int32_arithmetic() {
        let cases = [
            // 3x3 and 5x5 at stride 1 and 2 (PP-OCR's), odd sizes, a 7x7, a channel
            // multiplier, batch 2, dilation (generic only), a wide 40-tap row.
            problem(1, 5, 1, [19, 23], [3, 3], 1, 1, 1),
            problem(1, 4, 1, [20, 20], [5, 5], 1, 2, 1),
            problem(2, 3, 1, [17, 33], [3, 3], 2, 1, 1),
            problem(1, 3, 2, [16, 40], [5, 5], 2, 2, 1),
            problem(1, 2, 1, [12, 12], [7, 7], 1, 3, 1),
            problem(1, 2, 1, [15, 15], [3, 3], 1, 2, 2),
            problem(1, 1, 1, [9, 50], [1, 40], 1, 0, 1),
            // Rows of several 16-column vectors and row blocks with a tail, no padding,
            // kernels 4 and 8 wide (one and two groups of four taps).
            problem(1, 2, 1, [23, 70], [3, 3], 1, 0, 1),
            problem(1, 2, 1, [18, 81], [3, 4], 2, 1, 1),
            problem(1, 2, 1, [14, 99], [2, 8], 1, 3, 1),
            problem(2, 2, 3, [13, 37], [6, 8], 2, 3, 1),
        ];
        let mut vnni_cases = 0;
        for (i, p) in cases.iter().enumerate() {
            let x = bytes(p.n * p.c * p.win.input_size(), i as u64);
            let wq = bytes(p.m * p.win.kernel_size(), 100 + i as u64);
            let w = Weights::new(&wq, p.m, &p.win.kernel[1..]);
            let scale: Vec<f32> = (0..p.m).map(|m| 0.01 + m as f32 * 1e-3).collect();
            let bias: Vec<f32> = (0..p.m).map(|m| m as f32 * 0.25 - 0.5).collect();
            let want = reference(&x, &wq, p, &scale, &bias);
            let mut paths = vec![Path::Generic];
            for isa in Isa::available() {
                let best = Path::best(p, isa);
                if !paths.contains(&best) {
                    paths.push(best);
                }
            }
            vnni_cases += usize::from(paths.contains(&Path::Vnni));
            for path in paths {
                let got = conv(&x, &w, p, (&scale, Some(&bias)), path);
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same && got.len() == want.len(), "case {i} on {path:?}");
            }
        }
        if integer_depthwise_vnni::available() {
            assert_eq!(vnni_cases, 9, "the cases the VNNI kernel takes");
        }
    }

    #[test]
    fn extreme_sums_stay_exact() {
        // Every tap -128 * -128: the largest sum, 1024 * 2^14 = 2^24, still exact.
        let p = problem(1, 1, 1, [32, 32], [32, 32], 1, 0, 1);
        let x = vec![-128i8; 32 * 32];
        let w = Weights::new(&[-128; 32 * 32], 1, &[32, 32]);
        let got = conv(&x, &w, &p, (&[1.0], None), Path::Generic);
        assert_eq!(got, vec![16_777_216.0]);
    }
}
