//! Rules for the recurrent ops: RNN, GRU and LSTM.

use super::ctx::{Fact, NodeCtx};
use super::dims::unknown;
use crate::PassError;
use rtq_ir::Dim;

/// `RNN` / `GRU` / `LSTM` with input `X` of `[seq, batch, input]` (`layout` 0) or
/// `[batch, seq, input]` (`layout` 1): `Y` is `[seq, dirs, batch, hidden]` (or
/// `[batch, seq, dirs, hidden]`), `Y_h` and LSTM's `Y_c` are `[dirs, batch, hidden]`
/// (or `[batch, dirs, hidden]`).
pub(crate) fn recurrent(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let outputs = ctx.node.outputs.len();
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Fact::new(dtype, None); outputs]);
    };
    if x.len() != 3 {
        return Err(ctx.invalid(format!("expected a 3-D input, got {}", ctx.describe(0))));
    }
    let hidden = match usize::try_from(ctx.attr_int("hidden_size", -1)) {
        Ok(h) => Dim::Known(h),
        // Without the attribute, R's last axis gives it.
        Err(_) => ctx
            .shape(2)
            .and_then(|r| r.get(2))
            .cloned()
            .unwrap_or_else(unknown),
    };
    let dirs = Dim::Known(match ctx.node.attr_str("direction", "forward") {
        "bidirectional" => 2,
        _ => 1,
    });
    let batch_first = ctx.attr_int("layout", 0) != 0;
    let (seq, batch) = if batch_first {
        (x[1].clone(), x[0].clone())
    } else {
        (x[0].clone(), x[1].clone())
    };
    let y = if batch_first {
        vec![batch.clone(), seq, dirs.clone(), hidden.clone()]
    } else {
        vec![seq, dirs.clone(), batch.clone(), hidden.clone()]
    };
    let state = if batch_first {
        vec![batch, dirs, hidden]
    } else {
        vec![dirs, batch, hidden]
    };
    let mut facts = vec![Fact::shaped(dtype, y), Fact::shaped(dtype, state.clone())];
    if ctx.node.op_type == "LSTM" {
        facts.push(Fact::shaped(dtype, state));
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{s, sym, Case};
    use rtq_ir::{Attr, DType};

    #[test]
    fn lstm_shapes_for_both_layouts() {
        let f = Case::new("LSTM")
            .input(DType::F32, vec![sym("T"), s(2), s(8)])
            .input(DType::F32, vec![s(2), s(64), s(8)])
            .input(DType::F32, vec![s(2), s(64), s(16)])
            .attr("hidden_size", Attr::Int(16))
            .attr("direction", Attr::String("bidirectional".into()))
            .outputs(3)
            .infer()
            .unwrap();
        assert_eq!(f[0].shape, Some(vec![sym("T"), s(2), s(2), s(16)]));
        assert_eq!(f[1].shape, Some(vec![s(2), s(2), s(16)]));
        assert_eq!(f[2].shape, Some(vec![s(2), s(2), s(16)]));
        let f = Case::new("GRU")
            .input(DType::F32, vec![s(4), sym("T"), s(8)])
            .input(DType::F32, vec![s(1), s(48), s(8)])
            .input(DType::F32, vec![s(1), s(48), s(16)])
            .attr("layout", Attr::Int(1))
            .outputs(2)
            .infer()
            .unwrap();
        assert_eq!(f[0].shape, Some(vec![s(4), sym("T"), s(1), s(16)]));
        assert_eq!(f[1].shape, Some(vec![s(4), s(1), s(16)]));
    }
}
