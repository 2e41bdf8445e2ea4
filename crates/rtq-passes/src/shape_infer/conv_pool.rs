//! Rules for sliding-window ops: Conv, ConvTranspose, the pools (with pads, strides,
//! dilations, `ceil_mode` and `auto_pad`), global pools and their quantized forms.

use super::ctx::{Fact, NodeCtx};
use super::dims::{unify, unknown};
use crate::PassError;
use rtq_ir::{DType, Dim, Shape};

/// The sliding-window attributes of a node, checked against the spatial rank.
struct Window {
    kernel: Vec<Option<usize>>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    /// Begin pads then end pads.
    pads: Vec<i64>,
    auto_pad: String,
}

impl Window {
    fn read(
        ctx: &NodeCtx<'_>,
        spatial: usize,
        weight_kernel: Option<&[Dim]>,
    ) -> Result<Window, PassError> {
        let list = |name: &str, len: usize, default: i64| -> Result<Vec<i64>, PassError> {
            match ctx.attr_ints(name) {
                None => Ok(vec![default; len]),
                Some(v) if v.len() == len => Ok(v),
                Some(v) => Err(ctx.invalid(format!(
                    "attribute `{name}` has {} entries, expected {len} for {spatial} spatial axes",
                    v.len()
                ))),
            }
        };
        let positive = |name: &str, v: Vec<i64>| -> Result<Vec<usize>, PassError> {
            v.iter()
                .map(|&x| {
                    usize::try_from(x)
                        .ok()
                        .filter(|&x| x > 0)
                        .ok_or_else(|| ctx.invalid(format!("attribute `{name}` holds {x}")))
                })
                .collect()
        };
        let kernel = match ctx.attr_ints("kernel_shape") {
            Some(_) => positive("kernel_shape", list("kernel_shape", spatial, 1)?)?
                .into_iter()
                .map(Some)
                .collect(),
            None => match weight_kernel {
                Some(dims) if dims.len() == spatial => dims.iter().map(Dim::known).collect(),
                _ => vec![None; spatial],
            },
        };
        Ok(Window {
            kernel,
            strides: positive("strides", list("strides", spatial, 1)?)?,
            dilations: positive("dilations", list("dilations", spatial, 1)?)?,
            pads: list("pads", 2 * spatial, 0)?,
            auto_pad: ctx.node.attr_str("auto_pad", "NOTSET").to_string(),
        })
    }

    /// Output extent of spatial axis `i` for input extent `input`.
    fn output(
        &self,
        ctx: &NodeCtx<'_>,
        i: usize,
        input: &Dim,
        ceil_mode: bool,
    ) -> Result<Dim, PassError> {
        let spatial = self.kernel.len();
        let (s, d) = (self.strides[i], self.dilations[i]);
        if matches!(self.auto_pad.as_str(), "SAME_UPPER" | "SAME_LOWER") {
            return Ok(match input {
                Dim::Known(n) => Dim::Known(n.div_ceil(s)),
                _ if s == 1 => input.clone(),
                _ => unknown(),
            });
        }
        // Wide integers: attributes are user input and must not overflow.
        let (pb, pe) = if self.auto_pad == "VALID" {
            (0, 0)
        } else {
            (i128::from(self.pads[i]), i128::from(self.pads[i + spatial]))
        };
        let Some(k) = self.kernel[i] else {
            return Ok(unknown());
        };
        let ek = (k as i128 - 1) * d as i128 + 1;
        let Dim::Known(n) = input else {
            // Same-size windows (stride 1, padding that exactly offsets the kernel).
            return Ok(if s == 1 && ek - 1 == pb + pe {
                input.clone()
            } else {
                unknown()
            });
        };
        let n = *n as i128;
        let total = n + pb + pe;
        if total < ek && self.auto_pad == "VALID" {
            return Ok(unknown());
        }
        let s = s as i128;
        // Floor division: a kernel one stride longer than the padded input gives 0.
        let out = if ceil_mode {
            (total - ek + s - 1).div_euclid(s) + 1
        } else {
            (total - ek).div_euclid(s) + 1
        };
        if out < 0 {
            return Err(ctx.invalid(format!(
                "spatial axis {i}: padded input extent {total} is smaller than the dilated kernel {ek}"
            )));
        }
        if ceil_mode && (out - 1) * s >= n + pb {
            // The last window would start in the end padding: the ONNX spec, onnxruntime
            // and PyTorch drop it, onnx's own shape inference does not. Claim nothing.
            return Ok(unknown());
        }
        Ok(usize::try_from(out).map_or_else(|_| unknown(), Dim::Known))
    }
}

/// `Conv` (and `ConvInteger`, `QLinearConv`): `[N, M, out...]` from `X[N, C, in...]` and
/// `W[M, C/group, k...]`.
pub(crate) fn conv(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let (x_slot, w_slot, dtype) = match ctx.node.op_type.as_str() {
        "QLinearConv" => (0, 3, ctx.dtype(7).or(ctx.dtype(0))),
        "ConvInteger" => (0, 1, Some(DType::I32)),
        _ => (0, 1, ctx.dtype(0)),
    };
    let (Some(x), w) = (ctx.shape(x_slot), ctx.shape(w_slot)) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    if x.len() < 3 {
        return Err(ctx.invalid(format!(
            "input rank {} is below 3 ({})",
            x.len(),
            ctx.describe(x_slot)
        )));
    }
    let spatial = x.len() - 2;
    let group = usize::try_from(ctx.attr_int("group", 1)).unwrap_or(0);
    if group == 0 {
        return Err(ctx.invalid("attribute `group` must be positive"));
    }
    if let Some(w) = w {
        if w.len() != x.len() {
            return Err(ctx.conflict(
                "input and weight ranks differ",
                ctx.describe(x_slot),
                ctx.describe(w_slot),
            ));
        }
        if let (Dim::Known(c), Dim::Known(cw)) = (&x[1], &w[1]) {
            if *c != cw * group {
                return Err(ctx.conflict(
                    format!("input channels do not match weight channels x group {group}"),
                    ctx.describe(x_slot),
                    ctx.describe(w_slot),
                ));
            }
        }
    }
    let window = Window::read(ctx, spatial, w.map(|w| &w[2..]))?;
    let mut out = vec![x[0].clone(), w.map_or_else(unknown, |w| w[0].clone())];
    for i in 0..spatial {
        out.push(window.output(ctx, i, &x[2 + i], false)?);
    }
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `ConvTranspose`: `[N, group * W[1], out...]` with
/// `out = stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - pads`,
/// `in * stride` under `SAME_*` (less when the padding this needs would be negative), or
/// the `output_shape` attribute.
pub(crate) fn conv_transpose(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let (Some(x), w) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    if x.len() < 3 {
        return Err(ctx.invalid(format!(
            "input rank {} is below 3 ({})",
            x.len(),
            ctx.describe(0)
        )));
    }
    let spatial = x.len() - 2;
    let group = usize::try_from(ctx.attr_int("group", 1)).unwrap_or(0);
    if group == 0 {
        return Err(ctx.invalid("attribute `group` must be positive"));
    }
    if let Some(w) = w {
        if w.len() != x.len() {
            return Err(ctx.conflict(
                "input and weight ranks differ",
                ctx.describe(0),
                ctx.describe(1),
            ));
        }
        if unify(&x[1], &w[0]).is_none() {
            return Err(ctx.conflict(
                "input channels do not match the weight's first axis",
                ctx.describe(0),
                ctx.describe(1),
            ));
        }
    }
    let channels = match w.map(|w| &w[1]) {
        Some(Dim::Known(m)) => m.checked_mul(group).map_or_else(unknown, Dim::Known),
        Some(d) if group == 1 => d.clone(),
        _ => unknown(),
    };
    let window = Window::read(ctx, spatial, w.map(|w| &w[2..]))?;
    let mut out = vec![x[0].clone(), channels];
    if let Some(shape) = ctx.attr_ints("output_shape") {
        let tail = shape.len().checked_sub(spatial).map(|skip| &shape[skip..]);
        let Some(tail) = tail else {
            return Err(ctx.invalid(format!(
                "attribute `output_shape` {shape:?} has too few entries"
            )));
        };
        for &d in tail {
            let d =
                usize::try_from(d).map_err(|_| ctx.invalid(format!("output_shape holds {d}")))?;
            out.push(Dim::Known(d));
        }
        return Ok(vec![Fact::shaped(dtype, out)]);
    }
    let output_padding = ctx
        .attr_ints("output_padding")
        .unwrap_or_else(|| vec![0; spatial]);
    if output_padding.len() != spatial {
        return Err(ctx.invalid("attribute `output_padding` does not match the spatial rank"));
    }
    let same = matches!(window.auto_pad.as_str(), "SAME_UPPER" | "SAME_LOWER");
    for i in 0..spatial {
        // Wide integers: attributes are user input and must not overflow.
        let s = window.strides[i] as i128;
        let op = i128::from(output_padding[i]);
        let ek = window.kernel[i].map(|k| (k as i128 - 1) * window.dilations[i] as i128 + 1);
        let dim = match (&x[2 + i], ek) {
            // SAME: `in * stride`, unless the kernel does not cover the stride: then the
            // total padding would be negative and is clamped to 0 (onnx and onnxruntime).
            (Dim::Known(n), Some(ek)) if same => {
                let n = *n as i128;
                let v = (n * s).min(s * (n - 1) + op + ek).max(0);
                usize::try_from(v).map_or_else(|_| unknown(), Dim::Known)
            }
            (d, Some(_)) if same && s == 1 => d.clone(),
            (Dim::Known(n), Some(ek)) if !same => {
                let (pb, pe) = if window.auto_pad == "VALID" {
                    (0, 0)
                } else {
                    (
                        i128::from(window.pads[i]),
                        i128::from(window.pads[i + spatial]),
                    )
                };
                let v = s * (*n as i128 - 1) + op + ek - pb - pe;
                if v < 0 {
                    return Err(
                        ctx.invalid(format!("spatial axis {i}: output extent {v} is negative"))
                    );
                }
                usize::try_from(v).map_or_else(|_| unknown(), Dim::Known)
            }
            _ => unknown(),
        };
        out.push(dim);
    }
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `MaxPool`, `AveragePool`, `LpPool`: `[N, C, out...]`; MaxPool's indices are int64.
pub(crate) fn pool(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![
            Fact::new(dtype, None),
            Fact::new(Some(DType::I64), None),
        ]);
    };
    if x.len() < 3 {
        return Err(ctx.invalid(format!(
            "input rank {} is below 3 ({})",
            x.len(),
            ctx.describe(0)
        )));
    }
    if ctx.attr_ints("kernel_shape").is_none() {
        return Err(ctx.invalid("attribute `kernel_shape` is required"));
    }
    let spatial = x.len() - 2;
    let window = Window::read(ctx, spatial, None)?;
    let ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
    // Dilated pooling under auto_pad: onnxruntime ignores the dilation where the spec
    // and onnx do not. Claim nothing.
    let ambiguous = window.auto_pad != "NOTSET" && window.dilations.iter().any(|&d| d > 1);
    let mut out = vec![x[0].clone(), x[1].clone()];
    for i in 0..spatial {
        out.push(if ambiguous {
            unknown()
        } else {
            window.output(ctx, i, &x[2 + i], ceil_mode)?
        });
    }
    Ok(vec![
        Fact::shaped(dtype, out.clone()),
        Fact::shaped(Some(DType::I64), out),
    ])
}

/// Global pools: `[N, C, 1, ...]`.
pub(crate) fn global_pool(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let shape = ctx.shape(0).map(|x| {
        x.iter()
            .enumerate()
            .map(|(i, d)| if i < 2 { d.clone() } else { Dim::Known(1) })
            .collect::<Shape>()
    });
    Ok(vec![Fact::new(dtype, shape)])
}

/// `RoiAlign` / `MaxRoiPool`: `[num_rois, C, output_height, output_width]`.
pub(crate) fn roi_pool(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let (Some(x), Some(rois)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let (h, w) = if ctx.node.op_type == "MaxRoiPool" {
        match ctx.attr_ints("pooled_shape").as_deref() {
            Some(&[h, w]) => (h, w),
            _ => return Ok(vec![Fact::new(dtype, None)]),
        }
    } else {
        (
            ctx.attr_int("output_height", 1),
            ctx.attr_int("output_width", 1),
        )
    };
    let (Ok(h), Ok(w), Some(n), Some(c)) = (
        usize::try_from(h),
        usize::try_from(w),
        rois.first(),
        x.get(1),
    ) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    Ok(vec![Fact::shaped(
        dtype,
        vec![n.clone(), c.clone(), Dim::Known(h), Dim::Known(w)],
    )])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{s, sym, Case};
    use rtq_ir::{Attr, DType, Tensor};

    fn ints(v: &[i64]) -> Attr {
        Attr::Ints(v.to_vec())
    }

    #[test]
    fn conv_with_pads_strides_dilations() {
        let shape = Case::new("Conv")
            .input(DType::F32, vec![sym("N"), s(3), s(224), s(224)])
            .constant(Tensor::zeros(DType::F32, vec![64, 3, 7, 7]))
            .attr("strides", ints(&[2, 2]))
            .attr("pads", ints(&[3, 3, 3, 3]))
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(64), s(112), s(112)]));
        let shape = Case::new("Conv")
            .input(DType::F32, vec![s(1), s(4), s(10), s(9)])
            .constant(Tensor::zeros(DType::F32, vec![8, 2, 3, 3]))
            .attr("group", Attr::Int(2))
            .attr("dilations", ints(&[2, 1]))
            .attr("pads", ints(&[0, 1, 0, 0]))
            .shape();
        // H: 10 - 5 + 1 = 6; W: 9 + 1 - 3 + 1 = 8.
        assert_eq!(shape, Some(vec![s(1), s(8), s(6), s(8)]));
    }

    #[test]
    fn conv_auto_pad_and_symbolic_spatial_dims() {
        let shape = Case::new("Conv")
            .input(DType::F32, vec![s(1), s(3), s(7), sym("W")])
            .constant(Tensor::zeros(DType::F32, vec![4, 3, 3, 3]))
            .attr("auto_pad", Attr::String("SAME_UPPER".into()))
            .attr("strides", ints(&[2, 1]))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(4), s(4), sym("W")]));
        // 3x3, stride 1, pads 1: a symbolic extent is preserved; stride 2 loses it.
        let shape = Case::new("Conv")
            .input(DType::F32, vec![s(1), s(3), sym("H"), sym("W")])
            .constant(Tensor::zeros(DType::F32, vec![4, 3, 3, 3]))
            .attr("pads", ints(&[1, 1, 1, 1]))
            .attr("strides", ints(&[1, 2]))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(4), sym("H"), sym("?")]));
        let shape = Case::new("Conv")
            .input(DType::F32, vec![s(1), s(3), s(7), s(8)])
            .constant(Tensor::zeros(DType::F32, vec![4, 3, 3, 3]))
            .attr("auto_pad", Attr::String("VALID".into()))
            .attr("strides", ints(&[2, 2]))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(4), s(3), s(3)]));
    }

    #[test]
    fn conv_channel_mismatch_is_a_conflict() {
        let err = Case::new("Conv")
            .input(DType::F32, vec![s(1), s(3), s(8), s(8)])
            .constant(Tensor::zeros(DType::F32, vec![4, 2, 3, 3]))
            .infer()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("channels") && err.contains("[1,3,8,8]") && err.contains("[4,2,3,3]"),
            "{err}"
        );
    }

    #[test]
    fn conv_transpose_shapes() {
        // 2 * (5 - 1) + 1 + 3 - 2 = 10
        let shape = Case::new("ConvTranspose")
            .input(DType::F32, vec![s(1), s(4), s(5), s(5)])
            .constant(Tensor::zeros(DType::F32, vec![4, 3, 3, 3]))
            .attr("strides", ints(&[2, 2]))
            .attr("pads", ints(&[1, 1, 1, 1]))
            .attr("output_padding", ints(&[1, 0]))
            .attr("group", Attr::Int(2))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(6), s(10), s(9)]));
        let shape = Case::new("ConvTranspose")
            .input(DType::F32, vec![s(1), s(4), s(5), s(6)])
            .constant(Tensor::zeros(DType::F32, vec![4, 3, 3, 3]))
            .attr("strides", ints(&[2, 2]))
            .attr("auto_pad", Attr::String("SAME_UPPER".into()))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(3), s(10), s(12)]));
        let shape = Case::new("ConvTranspose")
            .input(DType::F32, vec![s(1), s(4), s(5), s(6)])
            .constant(Tensor::zeros(DType::F32, vec![4, 3, 3, 3]))
            .attr("output_shape", ints(&[11, 13]))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(3), s(11), s(13)]));
    }

    #[test]
    fn pools_floor_ceil_and_global() {
        let case = |n: usize, k: i64, st: i64, pads: [i64; 2], ceil: i64| {
            Case::new("MaxPool")
                .input(DType::F32, vec![s(1), s(1), s(n)])
                .attr("kernel_shape", ints(&[k]))
                .attr("strides", ints(&[st]))
                .attr("pads", ints(&pads))
                .attr("ceil_mode", Attr::Int(ceil))
                .outputs(2)
                .infer()
                .unwrap()
        };
        // Expected values checked against onnxruntime.
        assert_eq!(
            case(112, 3, 2, [0, 0], 0)[0].shape,
            Some(vec![s(1), s(1), s(55)])
        );
        assert_eq!(
            case(112, 3, 2, [0, 0], 1)[0].shape,
            Some(vec![s(1), s(1), s(56)])
        );
        assert_eq!(
            case(6, 3, 2, [1, 1], 1)[0].shape,
            Some(vec![s(1), s(1), s(4)])
        );
        let f = case(5, 2, 2, [0, 0], 1);
        assert_eq!(f[0].shape, Some(vec![s(1), s(1), s(3)]));
        assert_eq!(f[1].dtype, Some(DType::I64));
        // A last window starting in the end padding: onnx and onnxruntime disagree.
        assert_eq!(
            case(5, 2, 2, [1, 1], 1)[0].shape,
            Some(vec![s(1), s(1), sym("?")])
        );
        let shape = Case::new("GlobalAveragePool")
            .input(DType::F32, vec![sym("N"), s(512), s(7), s(7)])
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(512), s(1), s(1)]));
    }

    #[test]
    fn kernel_larger_than_input_is_invalid() {
        // One step too long still gives an empty output (as onnxruntime computes).
        let shape = Case::new("MaxPool")
            .input(DType::F32, vec![s(1), s(1), s(4)])
            .attr("kernel_shape", ints(&[4]))
            .attr("dilations", ints(&[2]))
            .attr("pads", ints(&[0, 2]))
            .shape();
        assert_eq!(shape, Some(vec![s(1), s(1), s(0)]));
        let err = Case::new("AveragePool")
            .input(DType::F32, vec![s(1), s(1), s(2), s(2)])
            .attr("kernel_shape", ints(&[4, 4]))
            .infer()
            .unwrap_err()
            .to_string();
        assert!(err.contains("node `n`") && err.contains("kernel"), "{err}");
    }
}
