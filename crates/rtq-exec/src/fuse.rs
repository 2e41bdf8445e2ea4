//! Activation fusion at load: decomposed activations a graph spells out op by op
//! become one op of rtq's own domain that the executor runs in a single pass over
//! memory (as onnxruntime's graph optimizations fuse them at session creation),
//! computing the same f32 operations in the same order: the result is bit for bit the
//! graph's (see [`crate::ops::fused`]).
//!
//! * HardSwish: `Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)` (PaddlePaddle's and many
//!   exporters' form; the Mul's operands in either order, or the Div written as a Mul
//!   by a constant) on float32 → `DecomposedHardSwish(x)`. The intermediate values must
//!   have no other reader.
//!
//! * Conv then Relu, the Conv's output read by nothing else, on float32 →
//!   `FusedConv` (the Conv's inputs and attributes, `activation = "Relu"`).
//!
//! * Conv, then Add (or two-input Sum) of a computed tensor of the same shape (a
//!   residual branch), then optionally Relu, on float32 → `FusedConv` with the
//!   residual as input 3 (`activation = "Relu"` or `"Identity"`).
//!
//! * Elementwise chains ([`fuse_chains`]): a run of float32 Add/Sub/Mul/Div (and
//!   two-input Sum) by constant scalars or per-channel values or by computed values
//!   that may broadcast to the running value without changing its shape (a residual
//!   branch, a squeeze-and-excite gate; shapes the graph leaves symbolic are checked
//!   at run time), Relu, Clip, fused HardSwish ops and per-tensor 8-bit
//!   QuantizeLinear → DequantizeLinear pairs (the same scale and zero point), each
//!   the sole reader of the one before, optionally ending in a per-tensor 8-bit
//!   QuantizeLinear → `ElementwiseChain` (see [`crate::ops::chain`]).
//!
//! The rewritten graph is executed, never written.

use crate::hoist::per_tensor_8bit;
use crate::ops::chain::{per_channel, Code};
use crate::ops::integer::INTEGER_DOMAIN;
use crate::registry::is_default_domain;
use rtq_ir::{Attr, DType, Dim, Graph, Node, NodeId, ValueId};
use std::collections::HashSet;

/// Rewrites every decomposed activation of `graph` (not inside control-flow bodies);
/// returns how many were fused. The nodes they replace are left for dead-code
/// elimination.
pub fn fuse_activations(graph: &mut Graph) -> usize {
    let mut fused = 0;
    // Readers of each value, once: a rewrite only takes readers away from values of
    // the pattern it replaced, which no later pattern shares.
    let readers = graph.consumers();
    for id in graph.node_ids() {
        if let Some((x, scale, divide)) = hard_swish(graph, &readers, id) {
            let node = graph.node_mut(id);
            node.op_type = "DecomposedHardSwish".into();
            node.domain = INTEGER_DOMAIN.into();
            node.inputs = vec![Some(x)];
            node.attrs.clear();
            node.attrs.insert("scale".into(), Attr::Float(scale));
            node.attrs
                .insert("divide".into(), Attr::Int(i64::from(divide)));
            fused += 1;
        } else if let Some((conv, residual, relu)) = conv_plus_residual(graph, &readers, id) {
            let conv = graph.node(conv).clone();
            let node = graph.node_mut(id);
            node.op_type = "FusedConv".into();
            node.domain = INTEGER_DOMAIN.into();
            node.inputs = conv.inputs;
            node.inputs.resize(3, None);
            node.inputs.push(Some(residual));
            node.attrs = conv.attrs;
            let activation = if relu { "Relu" } else { "Identity" };
            node.attrs
                .insert("activation".into(), Attr::String(activation.into()));
            fused += 1;
        } else if let Some(conv) = conv_before_relu(graph, &readers, id) {
            let conv = graph.node(conv).clone();
            let node = graph.node_mut(id);
            node.op_type = "FusedConv".into();
            node.domain = INTEGER_DOMAIN.into();
            node.inputs = conv.inputs;
            node.attrs = conv.attrs;
            node.attrs
                .insert("activation".into(), Attr::String("Relu".into()));
            fused += 1;
        }
    }
    fused
}

/// `(conv, residual, relu)` when node `id` ends `Relu(Add(Conv(..), residual))` (or
/// `Add(Conv(..), residual)` that no sole Relu follows; Add or two-input Sum, the
/// Conv's output on either side): float32, `residual` a computed tensor of the Conv
/// output's fully known shape, each intermediate value read by the next op only.
fn conv_plus_residual(
    graph: &Graph,
    readers: &Readers,
    id: NodeId,
) -> Option<(NodeId, ValueId, bool)> {
    let node = graph.node(id);
    if !node.domain.is_empty() {
        return None;
    }
    let is_add = |n: &rtq_ir::Node| {
        n.domain.is_empty() && (n.op_type == "Add" || (n.op_type == "Sum" && n.inputs.len() == 2))
    };
    let sole_reader = |v: ValueId| readers[v.index()].len() == 1 && !graph.is_graph_output(v);
    let (add, relu) = if node.op_type == "Relu" {
        let x = node.input(0)?;
        let (add, _) = graph.value(x).producer?;
        (is_add(graph.node(add)) && sole_reader(x)).then_some((add, true))?
    } else if is_add(node) {
        // A Relu after it fuses the whole pattern when its turn comes.
        let out = *node.outputs.first()?;
        if sole_reader(out) && graph.node(readers[out.index()][0].0).op_type == "Relu" {
            return None;
        }
        (id, false)
    } else {
        return None;
    };
    let add = graph.node(add);
    let (a, b) = (add.input(0)?, add.input(1)?);
    if a == b || !same_float_shape(graph, a, b) {
        return None;
    }
    [(a, b), (b, a)].into_iter().find_map(|(c, residual)| {
        let conv = sole_producer(graph, readers, c, "Conv")?;
        graph
            .constant(residual)
            .is_none()
            .then_some((conv, residual, relu))
    })
}

/// Whether `a` and `b` are float32 values of one fully known shape of more than one
/// element (a residual branch and the value it is added to).
fn same_float_shape(graph: &Graph, a: ValueId, b: ValueId) -> bool {
    let (va, vb) = (graph.value(a), graph.value(b));
    let Some(shape) = va.shape.as_ref() else {
        return false;
    };
    va.dtype == Some(DType::F32)
        && vb.dtype == Some(DType::F32)
        && vb.shape.as_ref() == Some(shape)
        && shape.iter().all(|d| d.known().is_some())
        && shape.iter().filter_map(Dim::known).product::<usize>() > 1
}

/// Whether float32 value `c` may broadcast to float32 `x`'s shape without changing it,
/// as far as their shapes are known: no more axes than `x`, and each axis (aligned from
/// the last) 1, unknown, or `x`'s. A symbolic extent is taken to fit.
fn may_keep_shape(graph: &Graph, x: ValueId, c: ValueId) -> bool {
    let (vx, vc) = (graph.value(x), graph.value(c));
    let (Some(xs), Some(cs)) = (vx.shape.as_ref(), vc.shape.as_ref()) else {
        return false;
    };
    let fits = |(dc, dx): (&Dim, &Dim)| match (dc.known(), dx.known()) {
        (Some(1), _) => true,
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    vx.dtype == Some(DType::F32)
        && vc.dtype == Some(DType::F32)
        && cs.len() <= xs.len()
        && cs.iter().rev().zip(xs.iter().rev()).all(fits)
}

/// The float32 Conv whose output only Relu node `id` reads.
fn conv_before_relu(graph: &Graph, readers: &Readers, id: NodeId) -> Option<NodeId> {
    let node = graph.node(id);
    if node.op_type != "Relu" || !node.domain.is_empty() {
        return None;
    }
    let x = node.input(0)?;
    let conv = sole_producer(graph, readers, x, "Conv")?;
    (graph.value(x).dtype == Some(DType::F32)).then_some(conv)
}

/// Rewrites every chain of at least two elementwise steps of `graph` (not inside
/// control-flow bodies; run dead-code elimination after [`fuse_activations`] first)
/// into one `ElementwiseChain` node; returns how many were made. The nodes they
/// replace are left for dead-code elimination.
pub fn fuse_chains(graph: &mut Graph) -> usize {
    let readers = graph.consumers();
    let mut fused = 0;
    // Nodes already in a chain (left for dead-code elimination).
    let mut taken = HashSet::new();
    for id in graph.node_ids() {
        if taken.contains(&id) {
            continue;
        }
        let Some((x, first)) = step(graph, id, None) else {
            continue;
        };
        // A chain starts where the value it reads is not the sole output of a step.
        if let Some((producer, _)) = graph.value(x).producer {
            let out = graph.node(producer).outputs.first().copied();
            if out.is_some_and(|o| readers[o.index()].len() == 1)
                && step(graph, producer, None).is_some()
            {
                continue;
            }
        }
        let mut steps = vec![first];
        let mut nodes = vec![id];
        let mut last = id;
        while let Some(out) = graph.node(last).outputs.first().copied() {
            if readers[out.index()].len() != 1 || graph.is_graph_output(out) {
                break;
            }
            let (next, _) = readers[out.index()][0];
            if steps.last().is_some_and(|s| s.code == Code::Quantize) {
                // A quantization the chain goes on from: its DequantizeLinear.
                if !dequantizes(graph, next, graph.node(last)) {
                    break;
                }
                if let Some(s) = steps.last_mut() {
                    s.code = Code::FakeQuantize;
                }
                nodes.push(next);
                last = next;
                continue;
            }
            match step(graph, next, Some(out)) {
                Some((_, s)) => {
                    steps.push(s);
                    nodes.push(next);
                    last = next;
                }
                None => break,
            }
        }
        if steps.len() < 2 {
            continue;
        }
        taken.extend(nodes);
        let mut inputs = vec![Some(x)];
        let mut encoded = Vec::new();
        let mut params = Vec::new();
        for s in &steps {
            let mut slot = |v: Option<ValueId>| match v {
                Some(v) => {
                    inputs.push(Some(v));
                    (inputs.len() - 1) as i64
                }
                None => 0,
            };
            let (a, b) = (slot(s.operands[0]), slot(s.operands[1]));
            encoded.extend([s.code as i64, a, b]);
            params.extend(s.params);
        }
        let node = graph.node_mut(last);
        node.op_type = "ElementwiseChain".into();
        node.domain = INTEGER_DOMAIN.into();
        node.inputs = inputs;
        node.attrs.clear();
        node.attrs.insert("steps".into(), Attr::Ints(encoded));
        node.attrs.insert("params".into(), Attr::Floats(params));
        fused += 1;
    }
    fused
}

/// Whether node `id` is a DequantizeLinear to float32 undoing QuantizeLinear `q` (the
/// same scalar scale and zero point) and reads nothing else.
fn dequantizes(graph: &Graph, id: NodeId, q: &Node) -> bool {
    let node = graph.node(id);
    let same = |a: Option<ValueId>, b: Option<ValueId>| match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) if a == b => true,
        (Some(a), Some(b)) => match (graph.constant(a), graph.constant(b)) {
            (Some(ta), Some(tb)) => ta.len() == 1 && ta == tb,
            _ => false,
        },
        _ => false,
    };
    let out = node.outputs.first().map(|&o| graph.value(o).dtype);
    is_default_domain(&node.domain)
        && node.op_type == "DequantizeLinear"
        && node.input(0).is_some_and(|v| q.outputs.first() == Some(&v))
        && node.inputs.len() <= 3
        && node.attrs.keys().all(|k| k == "axis")
        && node.outputs.len() == 1
        && out == Some(Some(DType::F32))
        && same(node.input(1), q.input(1))
        && same(node.input(2), q.input(2))
}

/// One step of a chain: its code, constant operands and parameters.
struct ChainStep {
    code: Code,
    operands: [Option<ValueId>; 2],
    params: [f32; 2],
}

/// `(x, step)` when node `id` is a chain step reading float32 `x` of known rank (the
/// value `from` when given) with constant operands of a shape that keeps `x`'s.
fn step(graph: &Graph, id: NodeId, from: Option<ValueId>) -> Option<(ValueId, ChainStep)> {
    let node = graph.node(id);
    let default_domain = is_default_domain(&node.domain);
    let first = node.input(0)?;
    let plain = |code, params| ChainStep {
        code,
        operands: [None, None],
        params,
    };
    let (x, step) = match (default_domain, node.op_type.as_str()) {
        (true, op @ ("Add" | "Sub" | "Mul" | "Div" | "Sum")) => {
            if op == "Sum" && node.inputs.len() != 2 {
                return None;
            }
            let code = match op {
                "Add" | "Sum" => Code::Add,
                "Sub" => Code::Sub,
                "Mul" => Code::Mul,
                _ => Code::Div,
            };
            let second = node.input(1)?;
            let commutes = matches!(code, Code::Add | Code::Mul);
            // The chain's value first; the other operand first only where the op
            // commutes. A chain may start at a sum of two computed tensors.
            let (x, c) = match from {
                Some(v) if v == first && v != second => (first, second),
                Some(v) if v == second && v != first && commutes => (second, first),
                Some(_) => return None,
                None if graph.constant(second).is_some() => (first, second),
                None if commutes && graph.constant(first).is_some() => (second, first),
                // Of two computed operands, x is the one the other may broadcast to.
                None if first != second => {
                    if commutes && !may_keep_shape(graph, first, second) {
                        (second, first)
                    } else {
                        (first, second)
                    }
                }
                None => return None,
            };
            let shape = graph.value(x).shape.as_ref()?;
            let known: Vec<Option<usize>> = shape.iter().map(Dim::known).collect();
            match graph.constant(c) {
                Some(t) => {
                    let fits =
                        (t.len() == 1 && t.rank() <= shape.len()) || per_channel(t.shape(), &known);
                    if t.dtype() != DType::F32 || !fits {
                        return None;
                    }
                }
                // A computed operand must be able to keep x's shape; whether it is a
                // tensor of that shape, one value per plane or per channel is known
                // at run time (and a chain whose operand is none of these runs step
                // by step, as the ops would).
                None => {
                    if !may_keep_shape(graph, x, c) {
                        return None;
                    }
                }
            }
            (
                x,
                ChainStep {
                    code,
                    operands: [Some(c), None],
                    params: [0.0, 0.0],
                },
            )
        }
        (true, "Relu") => (first, plain(Code::Relu, [0.0, 0.0])),
        (true, "Clip") => {
            let bound = |slot: usize, default: f32| match node.input(slot) {
                None => Some(default),
                Some(v) => {
                    let t = graph.constant(v)?;
                    (t.len() == 1 && t.dtype() == DType::F32).then(|| t.data().get_f64(0) as f32)
                }
            };
            if node.attrs.contains_key("min") || node.attrs.contains_key("max") {
                return None;
            }
            let (lo, hi) = (bound(1, f32::NEG_INFINITY)?, bound(2, f32::INFINITY)?);
            (first, plain(Code::Clip, [lo, hi]))
        }
        (false, "DecomposedHardSwish") if node.domain == INTEGER_DOMAIN => {
            let scale = node.attrs.get("scale")?.as_float()?;
            let divide = node.attr_int("divide", 1) != 0;
            (
                first,
                plain(Code::HardSwish, [scale, f32::from(u8::from(divide))]),
            )
        }
        (true, "QuantizeLinear") => {
            from?;
            per_tensor_8bit(graph, id)?;
            (
                first,
                ChainStep {
                    code: Code::Quantize,
                    operands: [node.input(1), node.input(2)],
                    params: [0.0, 0.0],
                },
            )
        }
        _ => return None,
    };
    if from.is_some_and(|v| v != x) {
        return None;
    }
    let value = graph.value(x);
    (value.dtype == Some(DType::F32) && value.shape.is_some()).then_some((x, step))
}

/// The (node, input slot) pairs reading each value, by value index.
pub(crate) type Readers = Vec<Vec<(NodeId, usize)>>;

/// The scalar value of constant `v`, if it is one.
fn scalar(graph: &Graph, v: Option<ValueId>) -> Option<f32> {
    let t = graph.constant(v?)?;
    (t.len() == 1).then(|| t.data().get_f64(0) as f32)
}

/// The node producing `v`, with op `op`, whose output nothing else reads.
fn sole_producer(graph: &Graph, readers: &Readers, v: ValueId, op: &str) -> Option<NodeId> {
    let (id, _) = graph.value(v).producer?;
    let node = graph.node(id);
    let only_reader = readers[v.index()].len() == 1;
    (node.op_type == op && node.domain.is_empty() && only_reader && !graph.is_graph_output(v))
        .then_some(id)
}

/// (`x`, the final constant, whether it divides) when node `id` ends a decomposed
/// HardSwish of float32 `x`.
fn hard_swish(graph: &Graph, readers: &Readers, id: NodeId) -> Option<(ValueId, f32, bool)> {
    let node = graph.node(id);
    if !node.domain.is_empty() {
        return None;
    }
    let (product, scale, divide) = match node.op_type.as_str() {
        "Div" if scalar(graph, node.input(1)) == Some(6.0) => (node.input(0)?, 6.0, true),
        "Mul" => {
            let c = scalar(graph, node.input(1))?;
            ((c - 1.0 / 6.0).abs() < 1e-7).then_some(())?;
            (node.input(0)?, c, false)
        }
        _ => return None,
    };
    let mul = graph.node(sole_producer(graph, readers, product, "Mul")?);
    let (a, b) = (mul.input(0)?, mul.input(1)?);
    for (x, gate) in [(a, b), (b, a)] {
        let Some(clip) = sole_producer(graph, readers, gate, "Clip") else {
            continue;
        };
        let clip = graph.node(clip);
        if scalar(graph, clip.input(1)) != Some(0.0) || scalar(graph, clip.input(2)) != Some(6.0) {
            continue;
        }
        let Some(add) = clip
            .input(0)
            .and_then(|v| sole_producer(graph, readers, v, "Add"))
        else {
            continue;
        };
        let add = graph.node(add);
        let shifted = |p: usize, q: usize| {
            add.input(p) == Some(x) && scalar(graph, add.input(q)) == Some(3.0)
        };
        if (shifted(0, 1) || shifted(1, 0)) && graph.value(x).dtype == Some(DType::F32) {
            return Some((x, scale, divide));
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Plan;
    use rtq_ir::{DType, Dim, Tensor};
    use std::collections::BTreeMap;

    /// `x * clip(x + 3, 0, 6) / 6`, the product's operands in `order`.
    fn decomposed(swap: bool) -> Graph {
        let mut g = Graph::new("g", 12);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(9)]);
        let c =
            |g: &mut Graph, n: &str, v: f32| g.add_constant(n, Tensor::from_f32(vec![], vec![v]));
        let (three, zero, six, six2) = (
            c(&mut g, "three", 3.0),
            c(&mut g, "zero", 0.0),
            c(&mut g, "six", 6.0),
            c(&mut g, "six2", 6.0),
        );
        let add = g.add_value("add", Some(DType::F32), None);
        let clip = g.add_value("clip", Some(DType::F32), None);
        let mul = g.add_value("mul", Some(DType::F32), None);
        let y = g.add_value("y", Some(DType::F32), None);
        g.add_node(
            "add",
            "Add",
            vec![Some(x), Some(three)],
            vec![add],
            BTreeMap::new(),
        );
        g.add_node(
            "clip",
            "Clip",
            vec![Some(add), Some(zero), Some(six)],
            vec![clip],
            BTreeMap::new(),
        );
        let ins = if swap {
            vec![Some(clip), Some(x)]
        } else {
            vec![Some(x), Some(clip)]
        };
        g.add_node("mul", "Mul", ins, vec![mul], BTreeMap::new());
        g.add_node(
            "div",
            "Div",
            vec![Some(mul), Some(six2)],
            vec![y],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        g
    }

    fn run(g: &Graph) -> Vec<f32> {
        let x = Tensor::from_f32(
            vec![9],
            vec![-5.0, -3.0, -1.5, -0.1, 0.0, 0.7, 2.9, 3.0, 8.0],
        );
        Plan::new(g).unwrap().run(&[("x".into(), x)]).unwrap()[0].to_f32_vec()
    }

    #[test]
    fn a_decomposed_hard_swish_becomes_one_op() {
        for swap in [false, true] {
            let mut g = decomposed(swap);
            let before = run(&g);
            assert_eq!(fuse_activations(&mut g), 1);
            let ops: Vec<&str> = g.nodes().map(|(_, n)| n.op_type.as_str()).collect();
            assert!(ops.contains(&"DecomposedHardSwish"), "{ops:?}");
            // Bit for bit what the four ops compute.
            let after = run(&g);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&before), bits(&after));
        }
    }

    /// `Relu(Conv(x, W, B))` with 2 -> 3 channels, 3x3, pads 1, on `x` of [1, 2, 5, 5];
    /// the Conv's output also a graph output when `shared`.
    fn conv_relu(shared: bool) -> Graph {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, [1, 2, 5, 5].map(Dim::Known).to_vec());
        let w: Vec<f32> = (0..54)
            .map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.25)
            .collect();
        let w = g.add_constant("w", Tensor::from_f32(vec![3, 2, 3, 3], w));
        let b = g.add_constant("b", Tensor::from_f32(vec![3], vec![0.5, -1.0, 0.0]));
        let c = g.add_value("c", Some(DType::F32), None);
        let y = g.add_value("y", Some(DType::F32), None);
        let attrs = BTreeMap::from([("pads".to_string(), Attr::Ints(vec![1; 4]))]);
        g.add_node(
            "conv",
            "Conv",
            vec![Some(x), Some(w), Some(b)],
            vec![c],
            attrs,
        );
        g.add_node("relu", "Relu", vec![Some(c)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        if shared {
            g.outputs.push(c);
        }
        g
    }

    /// A test input `x` of `shape`: a wave with a NaN at element 7 and -0 at 9.
    fn wavy_input(shape: Vec<usize>) -> Tensor {
        let len = shape.iter().product::<usize>();
        let x = (0..len)
            .map(|i| match i {
                7 => f32::NAN,
                9 => -0.0,
                _ => (i as f32 * 0.61).sin() * 3.0,
            })
            .collect();
        Tensor::from_f32(shape, x)
    }

    /// The bits of `g`'s first output on input `x`.
    fn output_bits(g: &Graph, x: &Tensor) -> Vec<u32> {
        let out = Plan::new(g)
            .unwrap()
            .run(&[("x".into(), x.clone())])
            .unwrap();
        out[0].to_f32_vec().iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn conv_then_relu_becomes_one_op() {
        let x = wavy_input(vec![1, 2, 5, 5]);
        let bits = |g: &Graph| output_bits(g, &x);
        let mut g = conv_relu(false);
        let before = bits(&g);
        assert!(before.iter().any(|&b| f32::from_bits(b).is_nan()));
        assert_eq!(fuse_activations(&mut g), 1);
        let ops: Vec<&str> = g.nodes().map(|(_, n)| n.op_type.as_str()).collect();
        assert!(ops.contains(&"FusedConv"), "{ops:?}");
        assert_eq!(before, bits(&g));
        // The Conv's output is read elsewhere too: left alone.
        let mut g = conv_relu(true);
        assert_eq!(fuse_activations(&mut g), 0);
    }

    /// How a test Conv joins its residual branch.
    #[derive(Clone, Copy)]
    pub(crate) enum Join {
        /// `Add(conv, residual)`.
        AddAfter,
        /// `Add(residual, conv)`.
        AddBefore,
        /// `Sum(conv, residual)`.
        Sum,
    }

    /// `[Relu](join(Conv(x, W, B), residual))` on `x` of [2, 4, 5, 6]: the Conv has
    /// `kernel` taps a side (pads keep the extent) and `group` groups, 4 -> 8
    /// channels; the residual is another Conv's output (of `residual_channels`
    /// channels: 8 is the Conv's shape, 1 broadcasts). `shared` makes the Conv's
    /// output a graph output too.
    pub(crate) fn conv_residual(
        kernel: usize,
        group: usize,
        join: Join,
        relu: bool,
        residual_channels: usize,
        shared: bool,
    ) -> Graph {
        let mut g = Graph::new("g", 13);
        let known = |d: &[usize]| Some(d.iter().map(|&d| Dim::Known(d)).collect::<Vec<_>>());
        let x = g.add_input("x", DType::F32, known(&[2, 4, 5, 6]).unwrap());
        let weights = |g: &mut Graph, name: &str, shape: Vec<usize>| {
            let len = shape.iter().product::<usize>();
            let w = (0..len)
                .map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.125)
                .collect();
            g.add_constant(name, Tensor::from_f32(shape, w))
        };
        let w = weights(&mut g, "w", vec![8, 4 / group, kernel, kernel]);
        let b = weights(&mut g, "b", vec![8]);
        let wr = weights(&mut g, "wr", vec![residual_channels, 4, 1, 1]);
        let c = g.add_value("c", Some(DType::F32), known(&[2, 8, 5, 6]));
        let r = g.add_value("r", Some(DType::F32), known(&[2, residual_channels, 5, 6]));
        let sum = g.add_value("sum", Some(DType::F32), known(&[2, 8, 5, 6]));
        let attrs = BTreeMap::from([
            ("pads".to_string(), Attr::Ints(vec![(kernel / 2) as i64; 4])),
            ("group".to_string(), Attr::Int(group as i64)),
        ]);
        g.add_node(
            "conv",
            "Conv",
            vec![Some(x), Some(w), Some(b)],
            vec![c],
            attrs,
        );
        g.add_node(
            "res",
            "Conv",
            vec![Some(x), Some(wr)],
            vec![r],
            BTreeMap::new(),
        );
        let (op, inputs) = match join {
            Join::AddAfter => ("Add", vec![Some(c), Some(r)]),
            Join::AddBefore => ("Add", vec![Some(r), Some(c)]),
            Join::Sum => ("Sum", vec![Some(c), Some(r)]),
        };
        g.add_node("join", op, inputs, vec![sum], BTreeMap::new());
        if relu {
            let y = g.add_value("y", Some(DType::F32), known(&[2, 8, 5, 6]));
            g.add_node("relu", "Relu", vec![Some(sum)], vec![y], BTreeMap::new());
            g.outputs.push(y);
        } else {
            g.outputs.push(sum);
        }
        if shared {
            g.outputs.push(c);
        }
        g
    }

    #[test]
    fn conv_plus_residual_becomes_one_op() {
        let x = wavy_input(vec![2, 4, 5, 6]);
        let bits = |g: &Graph| output_bits(g, &x);
        // 1x1 (the GEMM path, with groups and a batch of 2) and 3x3 (a direct or
        // im2col path) convolutions; every join, with and without Relu.
        for (kernel, group) in [(1, 1), (1, 2), (3, 1)] {
            for join in [Join::AddAfter, Join::AddBefore, Join::Sum] {
                for relu in [false, true] {
                    let mut g = conv_residual(kernel, group, join, relu, 8, false);
                    let before = bits(&g);
                    assert_eq!(fuse_activations(&mut g), 1);
                    let ops: Vec<&str> = g.nodes().map(|(_, n)| n.op_type.as_str()).collect();
                    assert!(ops.contains(&"FusedConv"), "{ops:?}");
                    assert_eq!(
                        before,
                        bits(&g),
                        "kernel {kernel}, group {group}, relu {relu}"
                    );
                }
            }
        }
        // A residual that broadcasts: left alone.
        let mut g = conv_residual(1, 1, Join::AddAfter, true, 1, false);
        assert_eq!(fuse_activations(&mut g), 0);
        // The Conv's output is read elsewhere too: the other branch's Conv takes the
        // Add instead, with the first Conv's output as its residual.
        let mut g = conv_residual(1, 1, Join::AddAfter, true, 8, true);
        let before = bits(&g);
        assert_eq!(fuse_activations(&mut g), 1);
        let fused = g.nodes().find(|(_, n)| n.op_type == "FusedConv").unwrap().1;
        assert_eq!(fused.inputs[3], g.value_by_name("c"));
        assert_eq!(before, bits(&g));
    }

    #[test]
    fn a_shared_intermediate_or_other_constants_are_left_alone() {
        // The Clip's output is also a graph output: nothing is fused.
        let mut g = decomposed(false);
        let clip = g.value_by_name("clip").unwrap();
        g.outputs.push(clip);
        assert_eq!(fuse_activations(&mut g), 0);
        // Clip to [0, 5]: not a HardSwish.
        let mut g = decomposed(false);
        let six = g.value_by_name("six").unwrap();
        g.set_constant(six, Tensor::from_f32(vec![], vec![5.0]));
        assert_eq!(fuse_activations(&mut g), 0);
    }
}

#[cfg(test)]
mod chain_tests {
    use super::*;
    use crate::Plan;
    use rtq_ir::{DType, Dim, Tensor, TensorData};
    use std::collections::BTreeMap;

    /// An op of a test chain: type, constant operand, whether the constant comes first.
    type Op<'a> = (&'a str, Option<Tensor>, bool);

    /// The shape of the test chains' input.
    const SMALL: [usize; 4] = [2, 3, 2, 5];

    /// `x` ([`SMALL`]) through `ops` (op, constant operand and whether it comes
    /// first), then QuantizeLinear to `zero`'s type when given.
    fn chain(ops: &[Op<'_>], zero: Option<Tensor>) -> Graph {
        chain_shaped(&SMALL, ops, zero)
    }

    /// [`chain`] on an input of shape `x_shape`.
    fn chain_shaped(x_shape: &[usize], ops: &[Op<'_>], zero: Option<Tensor>) -> Graph {
        let mut g = Graph::new("g", 13);
        let shape: Vec<Dim> = x_shape.iter().map(|&d| Dim::Known(d)).collect();
        let mut v = g.add_input("x", DType::F32, shape.clone());
        for (i, (op, c, first)) in ops.iter().enumerate() {
            let mut inputs = vec![Some(v)];
            if let Some(c) = c {
                let c = g.add_constant(&format!("c{i}"), c.clone());
                if *first {
                    inputs.insert(0, Some(c));
                } else {
                    inputs.push(Some(c));
                }
            }
            let out = g.add_value(&format!("v{i}"), Some(DType::F32), Some(shape.clone()));
            g.add_node(&format!("n{i}"), op, inputs, vec![out], BTreeMap::new());
            v = out;
        }
        if let Some(zero) = zero {
            let s = g.add_constant("s", Tensor::from_f32(vec![], vec![0.037]));
            let dtype = zero.dtype();
            let z = g.add_constant("z", zero);
            let q = g.add_value("q", Some(dtype), Some(shape));
            g.add_node(
                "q",
                "QuantizeLinear",
                vec![Some(v), Some(s), Some(z)],
                vec![q],
                BTreeMap::new(),
            );
            v = q;
        }
        g.outputs.push(v);
        g
    }

    /// Every output of `g` as bits, on inputs with NaN, infinities, ties and both zeros.
    fn run(g: &Graph) -> Vec<Vec<u64>> {
        run_shaped(g, &SMALL)
    }

    /// [`run`] with an input of shape `shape`.
    fn run_shaped(g: &Graph, shape: &[usize]) -> Vec<Vec<u64>> {
        let special = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            3.0,
            -3.0,
        ];
        let x: Vec<f32> = (0..shape.iter().product())
            .map(|i| match i % 10 {
                0..=6 => special[i % 10],
                _ => (i as f32 * 0.731).sin() * 9.0 + 0.0185,
            })
            .collect();
        let x = Tensor::from_f32(shape.to_vec(), x);
        let outs = Plan::new(g).unwrap().run(&[("x".into(), x)]).unwrap();
        outs.iter()
            .map(|t| match t.data() {
                TensorData::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
                TensorData::I8(v) => v.iter().map(|&x| x as u8 as u64).collect(),
                TensorData::U8(v) => v.iter().map(|&x| u64::from(x)).collect(),
                other => panic!("{}", other.dtype()),
            })
            .collect()
    }

    #[test]
    fn chains_compute_the_graphs_bits() {
        let per_channel = Tensor::from_f32(vec![1, 3, 1, 1], vec![0.5, -1.25, 3.0]);
        let per_channel3 = Tensor::from_f32(vec![3, 1, 1], vec![2.0, 0.1, -7.0]);
        let scalar = Tensor::from_f32(vec![], vec![1.5]);
        let lo = Tensor::from_f32(vec![], vec![-2.0]);
        let cases: Vec<(Vec<Op<'_>>, Option<Tensor>)> = vec![
            (
                vec![
                    ("Mul", Some(per_channel.clone()), true),
                    ("Add", Some(per_channel3.clone()), false),
                    ("Relu", None, false),
                ],
                Some(Tensor::new(vec![], TensorData::I8(vec![-3])).unwrap()),
            ),
            (
                vec![
                    ("Sub", Some(scalar.clone()), false),
                    ("Div", Some(per_channel.clone()), false),
                ],
                Some(Tensor::new(vec![], TensorData::U8(vec![128])).unwrap()),
            ),
            (
                vec![
                    ("Add", Some(scalar.clone()), true),
                    ("Relu", None, false),
                    ("Mul", Some(per_channel3), false),
                ],
                None,
            ),
            (
                vec![("Relu", None, false)],
                Some(Tensor::new(vec![], TensorData::I8(vec![0])).unwrap()),
            ),
        ];
        for (ops, zero) in cases {
            let mut g = chain(&ops, zero);
            let before = run(&g);
            assert_eq!(fuse_chains(&mut g), 1, "{ops:?}");
            let ops_after: Vec<&str> = g.nodes().map(|(_, n)| n.op_type.as_str()).collect();
            assert!(ops_after.contains(&"ElementwiseChain"), "{ops_after:?}");
            assert_eq!(before, run(&g), "{ops:?}");
        }
        // A Clip with constant bounds, after a Clip with only a lower one.
        let mut g = chain(&[("Relu", None, false), ("Relu", None, false)], None);
        let clip = g.node_ids()[1];
        let lo = g.add_constant("lo", lo);
        g.node_mut(clip).op_type = "Clip".into();
        g.node_mut(clip).inputs.push(Some(lo));
        let before = run(&g);
        assert_eq!(fuse_chains(&mut g), 1);
        assert_eq!(before, run(&g));
    }

    /// Chains over tensors of several parallel pieces, not a whole number of them,
    /// compute the graph's bits: residual operands are read at each piece's offset and
    /// per-channel constants by each plane's channel.
    #[test]
    fn chains_over_many_pieces_compute_the_graphs_bits() {
        // 50 142 elements: three pieces of `chain::TASK` and part of a fourth.
        let big = [2, 3, 61, 137];
        let scalar = Tensor::from_f32(vec![], vec![1.5]);
        let per_channel = Tensor::from_f32(vec![1, 3, 1, 1], vec![0.5, -1.25, 3.0]);
        let i8_zero = || Some(Tensor::new(vec![], TensorData::I8(vec![-3])).unwrap());
        let cases: Vec<(Vec<Op<'_>>, Option<Tensor>)> = vec![
            // The single pass, and steps then a quantization.
            (
                vec![("Relu", None, false), ("Mul", Some(scalar.clone()), false)],
                i8_zero(),
            ),
            (vec![("Div", Some(scalar.clone()), false)], i8_zero()),
            // Float output, by whole-tensor pieces and by planes.
            (
                vec![("Add", Some(scalar), true), ("Relu", None, false)],
                None,
            ),
            (
                vec![("Mul", Some(per_channel), false), ("Relu", None, false)],
                i8_zero(),
            ),
        ];
        for (ops, zero) in cases {
            let mut g = chain_shaped(&big, &ops, zero);
            let before = run_shaped(&g, &big);
            assert_eq!(fuse_chains(&mut g), 1, "{ops:?}");
            assert_eq!(before, run_shaped(&g, &big), "{ops:?}");
        }
        let ops = [("Add", Some(false)), ("Relu", None), ("Sub", Some(true))];
        let mut g = residual_chain_shaped(&big, &ops, &big);
        let before = run_residual_shaped(&g, &big, &big);
        assert_eq!(fuse_chains(&mut g), 1);
        assert_eq!(before, run_residual_shaped(&g, &big, &big));
    }

    /// `x` and a second input `y` of `y_shape` through `ops`: each reads the previous
    /// value (first: `x`) and, where marked, `y` (before or after it).
    fn residual_chain(ops: &[(&str, Option<bool>)], y_shape: &[usize]) -> Graph {
        residual_chain_shaped(&SMALL, ops, y_shape)
    }

    /// [`residual_chain`] with `x` of shape `x_shape`.
    fn residual_chain_shaped(
        x_shape: &[usize],
        ops: &[(&str, Option<bool>)],
        y_shape: &[usize],
    ) -> Graph {
        let mut g = Graph::new("g", 13);
        let dims = |s: &[usize]| s.iter().map(|&d| Dim::Known(d)).collect::<Vec<_>>();
        let shape = dims(x_shape);
        let mut v = g.add_input("x", DType::F32, shape.clone());
        let y = g.add_input("y", DType::F32, dims(y_shape));
        for (i, &(op, y_first)) in ops.iter().enumerate() {
            let inputs = match y_first {
                None => vec![Some(v)],
                Some(true) => vec![Some(y), Some(v)],
                Some(false) => vec![Some(v), Some(y)],
            };
            let out = g.add_value(&format!("v{i}"), Some(DType::F32), Some(shape.clone()));
            g.add_node(&format!("n{i}"), op, inputs, vec![out], BTreeMap::new());
            v = out;
        }
        g.outputs.push(v);
        g
    }

    /// The output bits of `g` on `x` ([`SMALL`]) and `y` (values with specials).
    fn run_residual(g: &Graph, y_shape: &[usize]) -> Vec<u32> {
        run_residual_shaped(g, &SMALL, y_shape)
    }

    /// [`run_residual`] with `x` of shape `x_shape`.
    fn run_residual_shaped(g: &Graph, x_shape: &[usize], y_shape: &[usize]) -> Vec<u32> {
        let values = |n: usize, phase: f32| -> Vec<f32> {
            (0..n)
                .map(|i| match i % 9 {
                    0 => f32::NAN,
                    1 => -0.0,
                    2 => f32::INFINITY,
                    _ => (i as f32 * 0.37 + phase).sin() * 4.0,
                })
                .collect()
        };
        let x = Tensor::from_f32(x_shape.to_vec(), values(x_shape.iter().product(), 0.0));
        let y_len = y_shape.iter().product();
        let y = Tensor::from_f32(y_shape.to_vec(), values(y_len, 1.3));
        let outs = Plan::new(g)
            .unwrap()
            .run(&[("x".into(), x), ("y".into(), y)])
            .unwrap();
        outs[0]
            .as_f32()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    }

    #[test]
    #[ignore = "timing probe: cargo test --release -p rtq-exec chain_speed -- --ignored --nocapture"]
    fn chain_speed_resnet_residual() {
        for shape in [[1, 256, 56, 56], [1, 2048, 7, 7]] {
            let mut g = Graph::new("g", 13);
            let dims: Vec<Dim> = shape.iter().map(|&d| Dim::Known(d)).collect();
            let x = g.add_input("x", DType::F32, dims.clone());
            let y = g.add_input("y", DType::F32, dims.clone());
            let s = g.add_value("s", Some(DType::F32), Some(dims.clone()));
            let r = g.add_value("r", Some(DType::F32), Some(dims));
            g.add_node(
                "sum",
                "Sum",
                vec![Some(x), Some(y)],
                vec![s],
                BTreeMap::new(),
            );
            g.add_node("relu", "Relu", vec![Some(s)], vec![r], BTreeMap::new());
            g.outputs.push(r);
            let len = shape.iter().product();
            let feeds = [
                (
                    "x".to_string(),
                    Tensor::from_f32(shape.to_vec(), vec![0.5; len]),
                ),
                (
                    "y".to_string(),
                    Tensor::from_f32(shape.to_vec(), vec![-0.25; len]),
                ),
            ];
            let plan = Plan::new(&g).unwrap();
            let unfused = crate::probe::best_ms(20, || {
                plan.run(&feeds).unwrap();
            });
            assert_eq!(fuse_chains(&mut g), 1);
            let plan = Plan::new(&g).unwrap();
            let fused = crate::probe::best_ms(20, || {
                plan.run(&feeds).unwrap();
            });
            println!("{shape:?}: Sum + Relu {unfused:.4} ms, chain {fused:.4} ms");
        }
    }

    #[test]
    fn single_pass_chains_compute_the_graphs_bits() {
        // The quantizing chains computed in one pass (an activation, a scalar factor,
        // a scalar term), on NaN, infinities, both zeros, HardSwish's bends and
        // saturating values.
        let s = |v: f32| Some(Tensor::from_f32(vec![], vec![v]));
        let int8 = || Some(Tensor::new(vec![], TensorData::I8(vec![-3])).unwrap());
        let uint8 = || Some(Tensor::new(vec![], TensorData::U8(vec![128])).unwrap());
        let cases: Vec<(Vec<Op<'_>>, Option<Tensor>, bool)> = vec![
            (
                vec![("Mul", s(1.07), false), ("Add", s(0.2), false)],
                int8(),
                false,
            ),
            (
                vec![("Mul", s(0.9), true), ("Sub", s(-0.4), false)],
                uint8(),
                false,
            ),
            (
                vec![
                    ("Relu", None, false),
                    ("Mul", s(2.5), false),
                    ("Add", s(-1.0), true),
                ],
                int8(),
                false,
            ),
            // PP-LCNet's HardSwish and learned affine.
            (
                vec![
                    ("HardSwish", None, false),
                    ("Mul", s(4.77), false),
                    ("Add", s(1.36), false),
                ],
                int8(),
                true,
            ),
            (
                vec![("HardSwish", None, false), ("Add", s(0.5), false)],
                uint8(),
                true,
            ),
        ];
        for (ops, zero, hard_swish) in cases {
            let mut g = chain(&ops, zero);
            if hard_swish {
                let first = g.node_ids()[0];
                let node = g.node_mut(first);
                node.op_type = "DecomposedHardSwish".into();
                node.domain = INTEGER_DOMAIN.into();
                node.attrs.insert("scale".into(), Attr::Float(6.0));
            }
            let before = run(&g);
            assert_eq!(fuse_chains(&mut g), 1, "{ops:?}");
            assert_eq!(before, run(&g), "{ops:?}");
        }
    }

    #[test]
    fn residual_branches_join_chains() {
        let full = [2, 3, 2, 5];
        for ops in [
            // ResNet's residual: Sum of two branches, then Relu.
            vec![("Sum", Some(false)), ("Relu", None)],
            // Not commutative: the chain starts with x - y.
            vec![("Sub", Some(false)), ("Relu", None)],
            // The residual joins mid-chain, on either side.
            vec![("Relu", None), ("Add", Some(true)), ("Relu", None)],
            vec![("Relu", None), ("Div", Some(false)), ("Mul", Some(true))],
        ] {
            let mut g = residual_chain(&ops, &full);
            let before = run_residual(&g, &full);
            assert_eq!(fuse_chains(&mut g), 1, "{ops:?}");
            assert_eq!(before, run_residual(&g, &full), "{ops:?}");
        }
        // `y - x` mid-chain does not commute.
        let mut g = residual_chain(&[("Relu", None), ("Sub", Some(true))], &full);
        assert_eq!(fuse_chains(&mut g), 0);
        // Computed operands that broadcast: per channel, per plane (a squeeze-and-excite
        // gate), per image; the gate may come first.
        for (ops, y) in [
            (vec![("Add", Some(false)), ("Relu", None)], vec![1, 3, 1, 1]),
            (vec![("Mul", Some(true)), ("Relu", None)], vec![2, 3, 1, 1]),
            (vec![("Relu", None), ("Mul", Some(false))], vec![2, 3, 1, 1]),
            (vec![("Relu", None), ("Div", Some(false))], vec![2, 1, 1, 1]),
            (vec![("Relu", None), ("Sub", Some(false))], vec![2, 5]),
        ] {
            let mut g = residual_chain(&ops, &y);
            let before = run_residual(&g, &y);
            assert_eq!(fuse_chains(&mut g), 1, "{ops:?} {y:?}");
            assert_eq!(before, run_residual(&g, &y), "{ops:?} {y:?}");
        }
        // An operand broadcasting beyond x is left alone.
        let mut g = residual_chain_shaped(&[2, 3, 1, 1], &[("Add", Some(false))], &full);
        assert_eq!(fuse_chains(&mut g), 0);
    }

    /// `x` (of `x_shape`, its first two axes symbolic when `symbolic`) times a gate
    /// `y` (`Mul(x, y)` or `Mul(y, x)`), through QuantizeLinear and DequantizeLinear
    /// (scale 0.05, zero point `zero`), plus `x`, plus `r` (of `r_shape`), then
    /// QuantizeLinear: the squeeze-and-excite joins of PP-OCRv4's detection neck.
    fn gated_residual(
        x_shape: &[usize],
        y_shape: &[usize],
        r_shape: &[usize],
        zero: Tensor,
        symbolic: bool,
        gate_first: bool,
    ) -> Graph {
        let mut g = Graph::new("g", 13);
        let dims = |s: &[usize]| -> Vec<Dim> {
            s.iter()
                .enumerate()
                .map(|(i, &d)| {
                    if symbolic && i < 2 {
                        Dim::Sym(format!("d{i}"))
                    } else {
                        Dim::Known(d)
                    }
                })
                .collect()
        };
        let x = g.add_input("x", DType::F32, dims(x_shape));
        let y = g.add_input("y", DType::F32, dims(y_shape));
        let r = g.add_input("r", DType::F32, dims(r_shape));
        let value =
            |g: &mut Graph, name: &str, dtype| g.add_value(name, Some(dtype), Some(dims(x_shape)));
        let s = g.add_constant("s", Tensor::from_f32(vec![], vec![0.05]));
        let z = g.add_constant("z", zero.clone());
        let s2 = g.add_constant("s2", Tensor::from_f32(vec![], vec![0.05]));
        let z2 = g.add_constant("z2", zero.clone());
        let m = value(&mut g, "m", DType::F32);
        let gate = if gate_first { [y, x] } else { [x, y] };
        g.add_node(
            "mul",
            "Mul",
            gate.map(Some).to_vec(),
            vec![m],
            BTreeMap::new(),
        );
        let mq = value(&mut g, "mq", zero.dtype());
        let node = |ins: &[ValueId]| ins.iter().map(|&v| Some(v)).collect::<Vec<_>>();
        g.add_node(
            "q1",
            "QuantizeLinear",
            node(&[m, s, z]),
            vec![mq],
            BTreeMap::new(),
        );
        let md = value(&mut g, "md", DType::F32);
        g.add_node(
            "dq1",
            "DequantizeLinear",
            node(&[mq, s2, z2]),
            vec![md],
            BTreeMap::new(),
        );
        let a = value(&mut g, "a", DType::F32);
        g.add_node("add1", "Add", node(&[x, md]), vec![a], BTreeMap::new());
        let b = value(&mut g, "b", DType::F32);
        g.add_node("add2", "Add", node(&[a, r]), vec![b], BTreeMap::new());
        let out = value(&mut g, "out", zero.dtype());
        g.add_node(
            "q2",
            "QuantizeLinear",
            node(&[b, s, z]),
            vec![out],
            BTreeMap::new(),
        );
        g.outputs.push(out);
        g
    }

    #[test]
    fn gated_residuals_with_a_quantize_dequantize_become_one_chain() {
        let values = |n: usize, phase: f32| -> Vec<f32> {
            (0..n)
                .map(|i| match i % 11 {
                    0 => f32::NAN,
                    1 => -0.0,
                    2 => f32::INFINITY,
                    3 => 0.025, // a tie on the grid of scale 0.05
                    _ => (i as f32 * 0.37 + phase).sin() * 9.0,
                })
                .collect()
        };
        let bits = |g: &Graph, x: &[usize], y: &[usize], r: &[usize]| -> Vec<u8> {
            let input = |name: &str, s: &[usize], phase| {
                let v = values(s.iter().product(), phase);
                (name.to_string(), Tensor::from_f32(s.to_vec(), v))
            };
            let inputs = [input("x", x, 0.0), input("y", y, 1.3), input("r", r, 2.1)];
            let outs = Plan::new(g).unwrap().run(&inputs).unwrap();
            match outs[0].data() {
                TensorData::I8(v) => v.iter().map(|&x| x as u8).collect(),
                TensorData::U8(v) => v.clone(),
                other => panic!("{}", other.dtype()),
            }
        };
        let x = [2, 3, 4, 5];
        for zero in [
            Tensor::new(vec![], TensorData::U8(vec![128])).unwrap(),
            Tensor::new(vec![], TensorData::I8(vec![-3])).unwrap(),
        ] {
            for symbolic in [false, true] {
                for gate_first in [false, true] {
                    // The gate per plane and the residual per element; at run time
                    // also shapes the chain cannot take in one pass (step by step).
                    for (y, r) in [
                        (vec![2, 3, 1, 1], vec![2, 3, 4, 5]),
                        (vec![1, 3, 1, 1], vec![2, 3, 4, 5]),
                        (vec![2, 3, 1, 1], vec![2, 1, 4, 5]),
                        (vec![2, 3, 4, 5], vec![5]),
                    ] {
                        let what = format!("{zero:?} {symbolic} {gate_first} {y:?} {r:?}");
                        let mut g = gated_residual(&x, &y, &r, zero.clone(), symbolic, gate_first);
                        let before = bits(&g, &x, &y, &r);
                        assert_eq!(fuse_chains(&mut g), 1, "{what}");
                        assert_eq!(live_nodes(&g), 1, "{what}");
                        assert_eq!(before, bits(&g, &x, &y, &r), "{what}");
                    }
                }
            }
        }
        // A DequantizeLinear by another scale, or read by two nodes, ends the chain.
        let zero = Tensor::new(vec![], TensorData::U8(vec![128])).unwrap();
        let shapes = ([2, 3, 4, 5], [2, 3, 1, 1], [2, 3, 4, 5]);
        let mut g = gated_residual(&shapes.0, &shapes.1, &shapes.2, zero.clone(), false, false);
        let s2 = g.value_by_name("s2").unwrap();
        g.set_constant(s2, Tensor::from_f32(vec![], vec![0.06]));
        assert_eq!(fuse_chains(&mut g), 2);
        assert_eq!(live_nodes(&g), 3);
    }

    /// How many nodes the outputs of `g` depend on.
    fn live_nodes(g: &Graph) -> usize {
        let mut seen = HashSet::new();
        let mut todo: Vec<ValueId> = g.outputs.clone();
        while let Some(v) = todo.pop() {
            if let Some((id, _)) = g.value(v).producer {
                if seen.insert(id) {
                    todo.extend(g.node(id).inputs.iter().flatten().copied());
                }
            }
        }
        seen.len()
    }

    #[test]
    fn shapes_that_broadcast_beyond_x_and_reversed_operands_stay_apart() {
        // A [5] operand lines up with the last axis (not per channel): left alone.
        let last_axis = Tensor::from_f32(vec![5], vec![1.0, 2.0, 3.0, 4.0, 5.0]);
        let mut g = chain(
            &[("Add", Some(last_axis), false), ("Relu", None, false)],
            None,
        );
        assert_eq!(fuse_chains(&mut g), 0);
        // `c - x` does not commute.
        let scalar = Tensor::from_f32(vec![], vec![1.5]);
        let mut g = chain(&[("Sub", Some(scalar), true), ("Relu", None, false)], None);
        assert_eq!(fuse_chains(&mut g), 0);
    }
}
