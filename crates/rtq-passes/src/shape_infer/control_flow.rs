//! Rules for control flow: If, Loop and Scan. The body is inferred on a copy whose
//! inputs take the facts the node feeds them; its outputs give the node's. Symbolic
//! dims from the body become unknown in the outer graph (a body's symbols are its own).

use super::ctx::{Fact, NodeCtx};
use super::dims::{same, unknown};
use crate::PassError;
use rtq_ir::{DType, Dim, Graph, Shape};

/// The facts of `body`'s outputs once its inputs get `inputs` (`None` leaves one as
/// declared); unknown when the body cannot be inferred.
fn body_outputs(ctx: &NodeCtx<'_>, attr: &str, inputs: Vec<Option<Fact>>) -> Vec<Fact> {
    let Some(body) = ctx.node.attr(attr).and_then(|a| a.as_graph()) else {
        return Vec::new();
    };
    let mut g: Graph = (*body.0).clone();
    for (&id, fact) in g.inputs.clone().iter().zip(inputs) {
        if let Some(fact) = fact {
            let v = g.value_mut(id);
            v.dtype = fact.dtype.or(v.dtype);
            v.shape = fact.shape.or(v.shape.take());
        }
    }
    if crate::infer_shapes(&mut g).is_err() {
        return vec![Fact::new(None, None); g.outputs.len()];
    }
    g.outputs
        .iter()
        .map(|&o| {
            let v = g.value(o);
            Fact::new(v.dtype, v.shape.as_ref().map(|s| outer_dims(s)))
        })
        .collect()
}

/// `shape` with the body's symbols replaced by unknown dims.
fn outer_dims(shape: &[Dim]) -> Shape {
    shape
        .iter()
        .map(|d| match d {
            Dim::Known(n) => Dim::Known(*n),
            Dim::Sym(_) => unknown(),
        })
        .collect()
}

/// What two facts (two branches, or a loop's first and later iterations) share.
fn merge(a: Option<&Fact>, b: Option<&Fact>) -> Fact {
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (Some(f), None) | (None, Some(f)) => return f.clone(),
        (None, None) => return Fact::new(None, None),
    };
    let shape = match (&a.shape, &b.shape) {
        (Some(x), Some(y)) if x.len() == y.len() => Some(
            x.iter()
                .zip(y)
                .map(|(p, q)| if same(p, q) { p.clone() } else { unknown() })
                .collect(),
        ),
        _ => None,
    };
    Fact::new(a.dtype.or(b.dtype), shape)
}

/// The fact of node input `slot`.
fn input_fact(ctx: &NodeCtx<'_>, slot: usize) -> Option<Fact> {
    Some(Fact::new(
        ctx.dtype(slot),
        ctx.shape(slot).map(<[Dim]>::to_vec),
    ))
}

/// Facts for the node's captured inputs (its trailing ones).
fn captured(ctx: &NodeCtx<'_>) -> Vec<Option<Fact>> {
    let n = ctx.num_inputs();
    (ctx.node.declared_inputs().len()..n)
        .map(|slot| input_fact(ctx, slot))
        .collect()
}

/// `If`: each output is what both branches' outputs share.
pub(crate) fn if_(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let then = body_outputs(ctx, "then_branch", captured(ctx));
    let other = body_outputs(ctx, "else_branch", captured(ctx));
    Ok((0..ctx.node.outputs.len())
        .map(|i| merge(then.get(i), other.get(i)))
        .collect())
}

/// `Loop`: the final loop-carried values (the type of their initial values, the dims
/// every iteration keeps), then each scan output stacked along a new first axis.
pub(crate) fn loop_(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let own = ctx.node.declared_inputs().len();
    let carried = own.saturating_sub(2);
    let mut feed = vec![
        Some(Fact::shaped(Some(DType::I64), vec![])),
        Some(Fact::shaped(Some(DType::Bool), vec![])),
    ];
    feed.extend((2..own).map(|slot| input_fact(ctx, slot)));
    feed.extend(captured(ctx));
    let outs = body_outputs(ctx, "body", feed);
    let mut facts: Vec<Fact> = (0..carried)
        .map(|i| merge(input_fact(ctx, 2 + i).as_ref(), outs.get(1 + i)))
        .collect();
    for out in outs.iter().skip(1 + carried) {
        let shape = out.shape.as_ref().map(|s| {
            let mut s = s.clone();
            s.insert(0, unknown());
            s
        });
        facts.push(Fact::new(out.dtype, shape));
    }
    Ok(facts)
}

/// `Scan`: the final states, then each scan output stacked along its axis (as long as
/// the scan inputs).
pub(crate) fn scan(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let own = ctx.node.declared_inputs().len();
    let m = usize::try_from(ctx.attr_int("num_scan_inputs", 0))
        .unwrap_or(0)
        .min(own);
    let n = own - m;
    let in_axes = ctx
        .attr_ints("scan_input_axes")
        .unwrap_or_else(|| vec![0; m]);
    let mut feed: Vec<Option<Fact>> = (0..n).map(|slot| input_fact(ctx, slot)).collect();
    let mut length = unknown();
    for j in 0..m {
        let slot = n + j;
        let fact = match ctx.shape(slot) {
            Some(s) if !s.is_empty() => {
                let axis = ctx.axis(in_axes.get(j).copied().unwrap_or(0), s.len())?;
                if j == 0 {
                    length = s[axis].clone();
                }
                let mut s = s.to_vec();
                s.remove(axis);
                Fact::shaped(ctx.dtype(slot), s)
            }
            _ => Fact::new(ctx.dtype(slot), None),
        };
        feed.push(Some(fact));
    }
    feed.extend(captured(ctx));
    let outs = body_outputs(ctx, "body", feed);
    let mut facts: Vec<Fact> = (0..n)
        .map(|i| merge(input_fact(ctx, i).as_ref(), outs.get(i)))
        .collect();
    let out_axes = ctx.attr_ints("scan_output_axes").unwrap_or_default();
    for (k, out) in outs.iter().skip(n).enumerate() {
        let shape = match &out.shape {
            Some(s) => {
                let axis = ctx.axis(out_axes.get(k).copied().unwrap_or(0), s.len() + 1)?;
                let mut s = s.clone();
                s.insert(axis, length.clone());
                Some(s)
            }
            None => None,
        };
        facts.push(Fact::new(out.dtype, shape));
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::{Attr, Subgraph};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// A branch reshaping the captured `x` ([2, 3]) to `shape`.
    fn branch(shape: &[i64]) -> Subgraph {
        let mut b = Graph::new("b", 13);
        let x = b.add_input("x", DType::F32, vec![Dim::Known(2), Dim::Known(3)]);
        let k = b.add_constant(
            "k",
            rtq_ir::Tensor::from_i64(vec![shape.len()], shape.to_vec()),
        );
        let y = b.add_value("y", None, None);
        b.add_node(
            "r",
            "Reshape",
            vec![Some(x), Some(k)],
            vec![y],
            BTreeMap::new(),
        );
        b.outputs.push(y);
        b.captures = 1;
        Subgraph(Arc::new(b))
    }

    fn if_output(then: &[i64], other: &[i64]) -> (Option<DType>, Option<Shape>) {
        let mut g = Graph::new("g", 13);
        let c = g.add_input("c", DType::Bool, vec![]);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(2), Dim::Known(3)]);
        let out = g.add_value("out", None, None);
        let attrs = BTreeMap::from([
            ("then_branch".to_string(), Attr::Graph(branch(then))),
            ("else_branch".to_string(), Attr::Graph(branch(other))),
        ]);
        g.add_node("if", "If", vec![Some(c), Some(x)], vec![out], attrs);
        g.outputs.push(out);
        crate::infer_shapes(&mut g).unwrap();
        (g.value(out).dtype, g.value(out).shape.clone())
    }

    #[test]
    fn if_outputs_keep_what_both_branches_agree_on() {
        let (dtype, shape) = if_output(&[3, 2], &[3, 2]);
        assert_eq!(dtype, Some(DType::F32));
        assert_eq!(shape, Some(vec![Dim::Known(3), Dim::Known(2)]));
        let (_, shape) = if_output(&[3, 2], &[6, 1]);
        let shape = shape.unwrap();
        assert_eq!(shape.len(), 2);
        assert!(shape.iter().all(|d| d.known().is_none()), "{shape:?}");
        let (_, shape) = if_output(&[6], &[3, 2]);
        assert_eq!(shape, None, "different ranks: unknown");
    }
}
