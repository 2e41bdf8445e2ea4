//! Sliding-window geometry shared by Conv, ConvTranspose and the pools: kernel, strides,
//! dilations and pads (explicit or `auto_pad`) along up to three spatial axes. 1-D and
//! 2-D windows are stored as 3-D with leading unit axes so kernels have one code path.

use crate::ctx::OpCtx;
use crate::ExecError;

/// Number of spatial axes every window is widened to.
pub(crate) const SPATIAL: usize = 3;

/// A resolved window over the spatial axes (leading axes padded with extent 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window {
    /// The model's spatial rank (1 to 3).
    pub rank: usize,
    /// Input extents.
    pub input: [usize; SPATIAL],
    /// Kernel extents.
    pub kernel: [usize; SPATIAL],
    /// Strides.
    pub stride: [usize; SPATIAL],
    /// Dilations.
    pub dilation: [usize; SPATIAL],
    /// Padding before each axis.
    pub pad_begin: [usize; SPATIAL],
    /// Padding after each axis.
    pub pad_end: [usize; SPATIAL],
    /// Output extents.
    pub output: [usize; SPATIAL],
}

/// `values` (one per spatial axis of a rank-`rank` window) widened to 3 axes with `fill`.
pub(crate) fn widen(values: &[usize], fill: usize) -> [usize; SPATIAL] {
    let mut out = [fill; SPATIAL];
    out[SPATIAL - values.len()..].copy_from_slice(values);
    out
}

/// The extent `(kernel - 1) * dilation + 1` a dilated kernel covers, or an error when
/// it overflows.
pub(crate) fn dilated_extent(
    ctx: &OpCtx<'_>,
    kernel: usize,
    dilation: usize,
) -> Result<usize, ExecError> {
    kernel
        .checked_sub(1)
        .and_then(|k| k.checked_mul(dilation))
        .and_then(|k| k.checked_add(1))
        .ok_or_else(|| {
            ctx.err(format!(
                "kernel extent {kernel} with dilation {dilation} is invalid"
            ))
        })
}

/// Reads a per-axis positive integer attribute (`strides`, `dilations`), default 1.
pub(crate) fn axis_attr(ctx: &OpCtx<'_>, name: &str, rank: usize) -> Result<Vec<usize>, ExecError> {
    match ctx.attr_ints(name)? {
        None => Ok(vec![1; rank]),
        Some(v) if v.is_empty() => Ok(vec![1; rank]),
        Some(v) => {
            if v.len() != rank || v.iter().any(|&x| x < 1) {
                return Err(ctx.err(format!(
                    "`{name}` must hold {rank} positive values, got {v:?}"
                )));
            }
            Ok(v.iter().map(|&x| x as usize).collect())
        }
    }
}

/// Explicit `pads` attribute as (begin, end) per axis, all zero when absent.
pub(crate) fn pads_attr(
    ctx: &OpCtx<'_>,
    rank: usize,
) -> Result<(Vec<usize>, Vec<usize>), ExecError> {
    match ctx.attr_ints("pads")? {
        None => Ok((vec![0; rank], vec![0; rank])),
        Some(p) if p.is_empty() => Ok((vec![0; rank], vec![0; rank])),
        Some(p) => {
            if p.len() != 2 * rank || p.iter().any(|&x| x < 0) {
                return Err(ctx.err(format!(
                    "`pads` must hold {} non-negative values, got {p:?}",
                    2 * rank
                )));
            }
            let p: Vec<usize> = p.iter().map(|&x| x as usize).collect();
            Ok((p[..rank].to_vec(), p[rank..].to_vec()))
        }
    }
}

impl Window {
    /// Resolves the window of a Conv or pool over spatial extents `input` with kernel
    /// extents `kernel`, reading `strides`, `dilations` (when `dilated`), `pads` and
    /// `auto_pad` from the node. `ceil_mode` rounds the output extent up (pools).
    pub fn resolve(
        ctx: &OpCtx<'_>,
        input: &[usize],
        kernel: &[usize],
        dilated: bool,
        ceil_mode: bool,
    ) -> Result<Window, ExecError> {
        let rank = input.len();
        if rank == 0 || rank > SPATIAL {
            return Err(ctx.err(format!(
                "{rank} spatial dimensions are not supported (1 to {SPATIAL})"
            )));
        }
        if kernel.len() != rank || kernel.contains(&0) {
            return Err(ctx.err(format!(
                "kernel shape {kernel:?} does not fit {rank} spatial dimensions"
            )));
        }
        let stride = axis_attr(ctx, "strides", rank)?;
        let dilation = if dilated {
            axis_attr(ctx, "dilations", rank)?
        } else {
            vec![1; rank]
        };
        let auto_pad = ctx.attr_str("auto_pad", "NOTSET")?;
        let (mut begin, mut end) = if matches!(auto_pad, "NOTSET" | "") {
            pads_attr(ctx, rank)?
        } else {
            (vec![0; rank], vec![0; rank])
        };
        let mut output = vec![0; rank];
        for i in 0..rank {
            let keff = dilated_extent(ctx, kernel[i], dilation[i])?;
            let s = stride[i];
            match auto_pad {
                "NOTSET" | "" | "VALID" => {}
                "SAME_UPPER" | "SAME_LOWER" => {
                    let out = input[i].div_ceil(s);
                    let total = ((out.max(1) - 1) * s)
                        .saturating_add(keff)
                        .saturating_sub(input[i]);
                    let small = total / 2;
                    let (b, e) = if auto_pad == "SAME_UPPER" {
                        (small, total - small)
                    } else {
                        (total - small, small)
                    };
                    begin[i] = b;
                    end[i] = e;
                    output[i] = out;
                    continue;
                }
                other => return Err(ctx.err(format!("unknown auto_pad `{other}`"))),
            }
            let padded = input[i]
                .checked_add(begin[i])
                .and_then(|v| v.checked_add(end[i]))
                .ok_or_else(|| ctx.err(format!("pads {:?} overflow", (&begin, &end))))?;
            if padded < keff {
                return Err(ctx.err(format!(
                    "spatial axis {i}: padded extent {padded} is smaller than the (dilated) kernel {keff}"
                )));
            }
            let span = padded - keff;
            let mut out = if ceil_mode {
                span.div_ceil(s)
            } else {
                span / s
            } + 1;
            // A window may not start inside the end padding only (ONNX/PyTorch rule).
            if ceil_mode && (out - 1) * s >= input[i] + begin[i] {
                out -= 1;
            }
            output[i] = out;
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

    /// Output spatial extents at the model's rank.
    pub fn output_dims(&self) -> Vec<usize> {
        self.output[SPATIAL - self.rank..].to_vec()
    }

    /// Number of input positions per plane.
    pub fn input_size(&self) -> usize {
        self.input.iter().product()
    }

    /// Number of output positions per plane.
    pub fn output_size(&self) -> usize {
        self.output.iter().product()
    }

    /// Number of kernel taps.
    pub fn kernel_size(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Whether the window is a plain 1x1 (no stride, no padding): the input is its own
    /// im2col matrix.
    pub fn is_pointwise(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1)
            && self.stride.iter().all(|&s| s == 1)
            && self.pad_begin.iter().all(|&p| p == 0)
            && self.pad_end.iter().all(|&p| p == 0)
    }

    /// Whether the window spans at most two spatial axes (no depth) and has no
    /// dilation: each window is a rectangle of whole input row segments.
    pub fn is_plain_2d(&self) -> bool {
        self.input[0] == 1
            && self.kernel[0] == 1
            && self.output[0] == 1
            && self.pad_begin[0] == 0
            && self.stride[0] == 1
            && self.dilation.iter().all(|&d| d == 1)
    }

    /// For output coordinate `o` along `axis`, the range of kernel taps `k` whose input
    /// position `o*stride - pad + k*dilation` lies inside the input, and the start
    /// position itself.
    pub fn taps(&self, axis: usize, o: usize) -> (isize, usize, usize) {
        let start = (o * self.stride[axis]) as isize - self.pad_begin[axis] as isize;
        let (lo, hi) = valid_taps(
            start,
            self.dilation[axis],
            self.kernel[axis],
            self.input[axis] as isize,
        );
        (start, lo, hi)
    }
}

/// The taps `k` in `0..kernel` for which `start + k*step` lies in `0..limit`
/// (an empty range when none does).
pub(crate) fn valid_taps(start: isize, step: usize, kernel: usize, limit: isize) -> (usize, usize) {
    let step = step as isize;
    let lo = if start >= 0 {
        0
    } else {
        ((-start) + step - 1) / step
    };
    let hi = if limit - start <= 0 {
        0
    } else {
        (limit - start + step - 1) / step
    };
    let lo = (lo as usize).min(kernel);
    let hi = (hi as usize).min(kernel);
    (lo, hi.max(lo))
}

#[cfg(test)]
impl Window {
    /// A 2-D window without dilation on an `input` of rows x columns: `kernel` and
    /// `stride` as (rows, columns), `pads` as (top, left, bottom, right), with the
    /// output extent they give.
    pub(crate) fn plain_2d(
        input: (usize, usize),
        kernel: (usize, usize),
        stride: (usize, usize),
        pads: (usize, usize, usize, usize),
    ) -> Window {
        let extent = |i: usize, k: usize, s: usize, pad: usize| (i + pad - k) / s + 1;
        Window {
            rank: 2,
            input: [1, input.0, input.1],
            kernel: [1, kernel.0, kernel.1],
            stride: [1, stride.0, stride.1],
            dilation: [1, 1, 1],
            pad_begin: [0, pads.0, pads.1],
            pad_end: [0, pads.2, pads.3],
            output: [
                1,
                extent(input.0, kernel.0, stride.0, pads.0 + pads.2),
                extent(input.1, kernel.1, stride.1, pads.1 + pads.3),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{Attr, Node};

    fn node(attrs: &[(&str, Attr)]) -> Node {
        rtq_test_support::node("Conv", attrs, 0)
    }

    fn resolve(attrs: &[(&str, Attr)], input: &[usize], kernel: &[usize], ceil: bool) -> Window {
        let n = node(attrs);
        Window::resolve(&OpCtx::new(&n, &[]), input, kernel, true, ceil).unwrap()
    }

    #[test]
    fn explicit_pads_strides_dilations() {
        let w = resolve(
            &[
                ("pads", Attr::Ints(vec![1, 2, 1, 2])),
                ("strides", Attr::Ints(vec![2, 1])),
                ("dilations", Attr::Ints(vec![1, 2])),
            ],
            &[7, 5],
            &[3, 3],
            false,
        );
        // (7+2-3)/2+1 = 4 ; (5+4-5)/1+1 = 5
        assert_eq!(w.output_dims(), vec![4, 5]);
        assert_eq!(w.pad_begin, [0, 1, 2]);
        assert_eq!(w.rank, 2);
    }

    #[test]
    fn same_padding_splits_odd_totals() {
        let up = resolve(
            &[
                ("auto_pad", Attr::String("SAME_UPPER".into())),
                ("strides", Attr::Ints(vec![2])),
            ],
            &[6],
            &[4],
            false,
        );
        // out = 3, total = (3-1)*2+4-6 = 2
        assert_eq!(
            (up.output_dims(), up.pad_begin[2], up.pad_end[2]),
            (vec![3], 1, 1)
        );
        let up = resolve(
            &[("auto_pad", Attr::String("SAME_UPPER".into()))],
            &[5],
            &[4],
            false,
        );
        assert_eq!((up.pad_begin[2], up.pad_end[2]), (1, 2));
        let low = resolve(
            &[("auto_pad", Attr::String("SAME_LOWER".into()))],
            &[5],
            &[4],
            false,
        );
        assert_eq!((low.pad_begin[2], low.pad_end[2]), (2, 1));
        let valid = resolve(
            &[
                ("auto_pad", Attr::String("VALID".into())),
                ("strides", Attr::Ints(vec![2])),
            ],
            &[6],
            &[3],
            false,
        );
        assert_eq!(valid.output_dims(), vec![2]);
    }

    #[test]
    fn ceil_mode_drops_windows_starting_in_end_padding() {
        // in 6, k 3, s 2: floor -> 2, ceil -> 3 (last window starts at 4 < 6)
        assert_eq!(
            resolve(&[("strides", Attr::Ints(vec![2]))], &[6], &[3], true).output_dims(),
            vec![3]
        );
        assert_eq!(
            resolve(&[("strides", Attr::Ints(vec![2]))], &[6], &[3], false).output_dims(),
            vec![2]
        );
        // in 5, k 2, s 2, pads 0/1: ceil -> (5+1-2)/2+1 = 3 and window 3 starts at 4 < 5: kept.
        let w = resolve(
            &[
                ("strides", Attr::Ints(vec![2])),
                ("pads", Attr::Ints(vec![0, 1])),
            ],
            &[5],
            &[2],
            true,
        );
        assert_eq!(w.output_dims(), vec![3]);
        // in 4, k 1, s 2, pads 0/1: ceil(4/2)+1 = 3; window 2 starts at 4 >= 4: dropped.
        let w = resolve(
            &[
                ("strides", Attr::Ints(vec![2])),
                ("pads", Attr::Ints(vec![0, 1])),
            ],
            &[4],
            &[1],
            true,
        );
        assert_eq!(w.output_dims(), vec![2]);
    }

    #[test]
    fn bad_windows_are_errors() {
        let n = node(&[("pads", Attr::Ints(vec![1]))]);
        assert!(Window::resolve(&OpCtx::new(&n, &[]), &[5, 5], &[3, 3], true, false).is_err());
        let n = node(&[]);
        let err = Window::resolve(&OpCtx::new(&n, &[]), &[2], &[3], true, false).unwrap_err();
        assert!(err.to_string().contains("smaller than"), "{err}");
        let n = node(&[("strides", Attr::Ints(vec![0]))]);
        assert!(Window::resolve(&OpCtx::new(&n, &[]), &[5], &[3], true, false).is_err());
    }

    #[test]
    fn valid_taps_clip_to_input() {
        assert_eq!(valid_taps(-2, 1, 5, 10), (2, 5));
        assert_eq!(valid_taps(-3, 2, 5, 10), (2, 5));
        assert_eq!(valid_taps(8, 1, 5, 10), (0, 2));
        assert_eq!(valid_taps(12, 1, 3, 10), (0, 0));
        assert_eq!(valid_taps(-10, 1, 3, 10), (3, 3));
    }
}
