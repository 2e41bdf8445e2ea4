//! Control flow: If, Loop and Scan run their bodies (subgraph attributes) with a
//! [`Plan`] of their own. A body's trailing captured inputs (the outer values it reads)
//! are the node's trailing inputs, fed to it unchanged on every run.

use crate::ctx::OpCtx;
use crate::memo::{derived, Derived};
use crate::registry::Kernel;
use crate::{eval_node, ExecError, Plan};
use rtq_ir::{Attr, Node, Subgraph, Tensor, TensorData};
use std::collections::BTreeMap;

/// Control-flow kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("If", if_op), ("Loop", loop_op), ("Scan", scan)];

fn body<'a>(ctx: &OpCtx<'a>, attr: &str) -> Result<&'a Subgraph, ExecError> {
    ctx.attr(attr)
        .and_then(Attr::as_graph)
        .ok_or_else(|| ctx.err(format!("has no `{attr}` body")))
}

/// The plans of a node's bodies by attribute name (`Err`: why one could not be
/// planned). They depend on the bodies alone, so a plan builds them once per node and
/// keeps them in the node's memo.
struct BodyPlans(BTreeMap<String, Result<Plan, String>>);

fn body_plans<'a>(ctx: &OpCtx<'a>) -> Derived<'a, BodyPlans> {
    derived(ctx.memo(), || {
        BodyPlans(
            ctx.node
                .subgraphs()
                .map(|(attr, g)| (attr.to_string(), Plan::new(g).map_err(|e| e.to_string())))
                .collect(),
        )
    })
}

/// A body ready to run: its graph (whose input names it is fed by) and its plan.
struct Body<'a, 'p> {
    graph: &'a Subgraph,
    plan: &'p Plan,
    /// The attribute holding it.
    attr: &'p str,
}

impl<'a, 'p> Body<'a, 'p> {
    fn new(
        ctx: &OpCtx<'a>,
        plans: &'p BodyPlans,
        attr: &'p str,
    ) -> Result<Body<'a, 'p>, ExecError> {
        let graph = body(ctx, attr)?;
        let plan = match plans.0.get(attr) {
            Some(Ok(plan)) => plan,
            Some(Err(e)) => return Err(ctx.err(format!("`{attr}` body: {e}"))),
            None => return Err(ctx.err(format!("has no `{attr}` body"))),
        };
        Ok(Body { graph, plan, attr })
    }

    /// Inputs the op defines (before the captures).
    fn declared_inputs(&self) -> usize {
        self.graph.declared_inputs().len()
    }

    /// Runs the body on `declared` inputs followed by `captured` ones.
    fn run(
        &self,
        ctx: &OpCtx<'_>,
        declared: Vec<Tensor>,
        captured: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>, ExecError> {
        if declared.len() != self.declared_inputs() {
            return Err(ctx.err(format!(
                "body `{}` takes {} inputs, the op passes {}",
                self.graph.name,
                self.declared_inputs(),
                declared.len()
            )));
        }
        let mut feeds: Vec<(String, Tensor)> = Vec::with_capacity(self.graph.inputs.len());
        let values = declared
            .into_iter()
            .map(Some)
            .chain(captured.iter().map(|t| t.cloned()));
        for (&id, tensor) in self.graph.inputs.iter().zip(values) {
            let name = self.graph.value(id).name.clone();
            let tensor = tensor.ok_or_else(|| ctx.err(format!("captured `{name}` is missing")))?;
            feeds.push((name, tensor));
        }
        let ran = match ctx.nested() {
            Some(nested) => self
                .plan
                .run_nested(&feeds, &nested.enter(&ctx.node.name, self.attr)),
            None => self.plan.run(&feeds),
        };
        ran.map_err(|e| ctx.err(format!("body `{}`: {e}", self.graph.name)))
    }
}

/// The node inputs the op itself defines, and the captured ones after them.
fn split_inputs<'a>(ctx: &OpCtx<'a>) -> (Vec<Option<&'a Tensor>>, Vec<Option<&'a Tensor>>) {
    let all: Vec<Option<&Tensor>> = (0..ctx.node.inputs.len())
        .map(|i| ctx.opt_input(i))
        .collect();
    let first = ctx.node.declared_inputs().len();
    (all[..first].to_vec(), all[first..].to_vec())
}

fn truth(ctx: &OpCtx<'_>, t: &Tensor, what: &str) -> Result<bool, ExecError> {
    match t.data() {
        TensorData::Bool(v) if v.len() == 1 => Ok(v[0]),
        _ if t.len() == 1 => Ok(t.data().get_f64(0) != 0.0),
        _ => Err(ctx.err(format!(
            "{what} must hold one value, got shape {:?}",
            t.shape()
        ))),
    }
}

fn if_op(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let branch = if truth(ctx, ctx.input(0)?, "the condition")? {
        "then_branch"
    } else {
        "else_branch"
    };
    let plans = body_plans(ctx);
    let body = Body::new(ctx, &plans, branch)?;
    let (_, captured) = split_inputs(ctx);
    body.run(ctx, Vec::new(), &captured)
}

/// Slice `index` of `t` along `axis`, without that axis.
fn take(ctx: &OpCtx<'_>, t: &Tensor, axis: usize, index: usize) -> Result<Tensor, ExecError> {
    let shape = t.shape();
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let n = shape[axis];
    let mut flat = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        let base = (o * n + index) * inner;
        flat.extend(base..base + inner);
    }
    let mut out = shape.to_vec();
    out.remove(axis);
    Tensor::new(out, t.data().gather(&flat)).map_err(|e| ctx.err(e.to_string()))
}

/// `parts` stacked along a new axis `axis` (`empty_shape`, with the new axis of 0, when
/// there are none).
fn stack(
    ctx: &OpCtx<'_>,
    parts: Vec<Tensor>,
    axis: usize,
    empty: Option<&Tensor>,
) -> Result<Tensor, ExecError> {
    if parts.is_empty() {
        let mut shape = empty.map_or_else(Vec::new, |t| t.shape().to_vec());
        shape.insert(axis.min(shape.len()), 0);
        let dtype = empty.map_or(rtq_ir::DType::F32, Tensor::dtype);
        return Ok(Tensor::zeros(dtype, shape));
    }
    let mut expanded = Vec::with_capacity(parts.len());
    for p in parts {
        let mut shape = p.shape().to_vec();
        if axis > shape.len() {
            return Err(ctx.err(format!(
                "axis {axis} is out of range for a {}-D output",
                shape.len()
            )));
        }
        shape.insert(axis, 1);
        expanded.push(p.reshaped(shape).map_err(|e| ctx.err(e.to_string()))?);
    }
    let concat = Node {
        name: format!("{}_stack", ctx.node.name),
        op_type: "Concat".into(),
        domain: String::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        attrs: BTreeMap::from([("axis".to_string(), Attr::Int(axis as i64))]),
    };
    let refs: Vec<Option<&Tensor>> = expanded.iter().map(Some).collect();
    Ok(eval_node(&concat, &refs)?.remove(0))
}

fn loop_op(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let plans = body_plans(ctx);
    let body = Body::new(ctx, &plans, "body")?;
    let (own, captured) = split_inputs(ctx);
    let max_trips = match own.first().copied().flatten() {
        Some(m) if m.len() == 1 => Some(m.data().get_i64(0).max(0)),
        Some(m) => return Err(ctx.err(format!("M must hold one value, got shape {:?}", m.shape()))),
        None => None,
    };
    let mut cond = match own.get(1).copied().flatten() {
        Some(c) => truth(ctx, c, "the condition")?,
        None => true,
    };
    let mut carried: Vec<Tensor> = own
        .iter()
        .skip(2)
        .map(|t| {
            t.cloned()
                .ok_or_else(|| ctx.err("a loop-carried input is missing"))
        })
        .collect::<Result<_, _>>()?;
    let n = carried.len();
    let scans = body.graph.outputs.len().checked_sub(1 + n).ok_or_else(|| {
        ctx.err(format!(
            "the body has {} outputs for {n} loop-carried values",
            body.graph.outputs.len()
        ))
    })?;
    let mut scanned: Vec<Vec<Tensor>> = vec![Vec::new(); scans];
    let mut i: i64 = 0;
    while cond && max_trips.is_none_or(|m| i < m) {
        if max_trips.is_none() && i >= 1 << 31 {
            return Err(ctx.err("ran 2^31 iterations without its condition turning false"));
        }
        let mut declared = vec![
            Tensor::from_i64(vec![], vec![i]),
            Tensor::new(vec![], TensorData::Bool(vec![cond])).expect("scalar"),
        ];
        declared.append(&mut carried);
        let mut outs = body.run(ctx, declared, &captured)?.into_iter();
        cond = truth(
            ctx,
            &outs.next().expect("checked count"),
            "the body's condition",
        )?;
        carried = outs.by_ref().take(n).collect();
        for (k, t) in outs.enumerate() {
            scanned[k].push(t);
        }
        i += 1;
    }
    let mut outputs = carried;
    for parts in scanned {
        outputs.push(stack(ctx, parts, 0, None)?);
    }
    Ok(outputs)
}

fn scan(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let plans = body_plans(ctx);
    let body = Body::new(ctx, &plans, "body")?;
    let (own, captured) = split_inputs(ctx);
    let m = usize::try_from(ctx.attr_int("num_scan_inputs", 0)?)
        .map_err(|_| ctx.err("num_scan_inputs must be positive"))?;
    let n = own
        .len()
        .checked_sub(m)
        .ok_or_else(|| ctx.err("fewer inputs than num_scan_inputs"))?;
    let inputs: Vec<&Tensor> = own
        .iter()
        .map(|t| t.ok_or_else(|| ctx.err("a Scan input is missing")))
        .collect::<Result<_, _>>()?;
    let list = |name: &str, count: usize| -> Result<Vec<i64>, ExecError> {
        let v = ctx.attr_ints(name)?.unwrap_or_else(|| vec![0; count]);
        if v.len() == count {
            Ok(v)
        } else {
            Err(ctx.err(format!("`{name}` has {} entries for {count}", v.len())))
        }
    };
    let in_axes = list("scan_input_axes", m)?;
    let in_dirs = list("scan_input_directions", m)?;
    let k = body
        .graph
        .outputs
        .len()
        .checked_sub(n)
        .ok_or_else(|| ctx.err("the body has too few outputs"))?;
    let out_axes = list("scan_output_axes", k)?;
    let out_dirs = list("scan_output_directions", k)?;
    let scan_inputs = &inputs[n..];
    let axes: Vec<usize> = scan_inputs
        .iter()
        .zip(&in_axes)
        .map(|(t, &a)| ctx.axis(a, t.rank()))
        .collect::<Result<_, _>>()?;
    let len = match scan_inputs.first() {
        Some(t) => t.shape()[axes[0]],
        None => return Err(ctx.err("needs at least one scan input")),
    };
    for (t, &a) in scan_inputs.iter().zip(&axes) {
        if t.shape()[a] != len {
            return Err(ctx.err(format!("scan inputs of lengths {len} and {}", t.shape()[a])));
        }
    }
    let mut state: Vec<Tensor> = inputs[..n].iter().map(|&t| t.clone()).collect();
    let mut scanned: Vec<Vec<Tensor>> = vec![Vec::new(); k];
    for step in 0..len {
        let mut declared = std::mem::take(&mut state);
        for ((t, &a), &dir) in scan_inputs.iter().zip(&axes).zip(&in_dirs) {
            let index = if dir == 0 { step } else { len - 1 - step };
            declared.push(take(ctx, t, a, index)?);
        }
        let mut outs = body.run(ctx, declared, &captured)?.into_iter();
        state = outs.by_ref().take(n).collect();
        for (j, t) in outs.enumerate() {
            scanned[j].push(t);
        }
    }
    let mut outputs = state;
    for ((mut parts, &axis), &dir) in scanned.into_iter().zip(&out_axes).zip(&out_dirs) {
        if dir != 0 {
            parts.reverse();
        }
        let rank = parts.first().map_or(0, Tensor::rank) + 1;
        let axis = ctx.axis(axis, rank)?;
        outputs.push(stack(ctx, parts, axis, None)?);
    }
    Ok(outputs)
}
