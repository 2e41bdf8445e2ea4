//! Rules for normalisation ops with extra outputs or parameter checks:
//! BatchNormalization and LayerNormalization.

use super::ctx::{Fact, NodeCtx};
use super::dims::unify;
use crate::PassError;
use rtq_ir::{DType, Dim, Shape};

/// `BatchNormalization`: `Y` like `X`; the per-channel parameters must have `C` entries;
/// training-mode running statistics are `[C]`.
pub(crate) fn batch_norm(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let x = ctx.shape(0);
    let channels = x.and_then(|x| x.get(1)).cloned();
    if let Some(c) = &channels {
        for slot in 1..5 {
            if let Some(p) = ctx.shape(slot) {
                let fits = p.len() == 1 && unify(&p[0], c).is_some();
                if !fits {
                    return Err(ctx.conflict(
                        "per-channel parameter does not match the channel count",
                        ctx.describe(0),
                        ctx.describe(slot),
                    ));
                }
            }
        }
    }
    let stats = channels.map(|c| vec![c]);
    let mut facts = vec![Fact::new(dtype, x.map(<[_]>::to_vec))];
    for slot in [3, 4] {
        facts.push(Fact::new(ctx.dtype(slot), stats.clone()));
    }
    Ok(facts)
}

/// `LayerNormalization(axis)`: `Y` like `X`; `Mean` and `InvStdDev` keep the leading
/// axes and have extent 1 from `axis` on, typed by `stash_type` (float32 by default).
pub(crate) fn layer_norm(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    let axis = ctx.axis(ctx.attr_int("axis", -1), x.len())?;
    let stats: Shape = x
        .iter()
        .enumerate()
        .map(|(i, d)| if i < axis { d.clone() } else { Dim::Known(1) })
        .collect();
    let stash = i32::try_from(ctx.attr_int("stash_type", 1))
        .ok()
        .and_then(DType::from_onnx_code);
    Ok(vec![
        Fact::shaped(dtype, x.to_vec()),
        Fact::shaped(stash, stats.clone()),
        Fact::shaped(stash, stats),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{s, sym, Case};
    use rtq_ir::{Attr, DType};

    #[test]
    fn batch_norm_checks_parameter_sizes() {
        let ok = Case::new("BatchNormalization")
            .input(DType::F32, vec![sym("N"), s(3), s(4), s(4)])
            .input(DType::F32, vec![s(3)])
            .input(DType::F32, vec![s(3)])
            .input(DType::F32, vec![s(3)])
            .input(DType::F32, vec![s(3)])
            .shape();
        assert_eq!(ok, Some(vec![sym("N"), s(3), s(4), s(4)]));
        let err = Case::new("BatchNormalization")
            .input(DType::F32, vec![s(1), s(3), s(4), s(4)])
            .input(DType::F32, vec![s(4)])
            .input(DType::F32, vec![s(3)])
            .input(DType::F32, vec![s(3)])
            .input(DType::F32, vec![s(3)])
            .infer()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("[1,3,4,4]") && err.contains("float[4]"),
            "{err}"
        );
    }

    #[test]
    fn layer_norm_statistics_shape() {
        let f = Case::new("LayerNormalization")
            .input(DType::F32, vec![sym("N"), s(7), s(16)])
            .input(DType::F32, vec![s(16)])
            .attr("axis", Attr::Int(-1))
            .outputs(3)
            .infer()
            .unwrap();
        assert_eq!(f[0].shape, Some(vec![sym("N"), s(7), s(16)]));
        assert_eq!(f[1].shape, Some(vec![sym("N"), s(7), s(1)]));
        assert_eq!(f[2].dtype, Some(DType::F32));
    }
}
