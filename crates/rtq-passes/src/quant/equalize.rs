//! Activation channel equalization ahead of INT8 (cross-layer equalization and
//! SmoothQuant's scale migration, in one transform).
//!
//! TensorRT quantizes activations per tensor: one scale for every channel. Where the
//! channels of a quantized activation `x` span very different ranges (depthwise
//! outputs, layers after a learnable affine, LayerNorm outputs), the small channels get
//! a few int8 levels or none. Equalization divides channel `c` of `x` by `s[c]` at its
//! producer and multiplies the consumers' weights of input channel `c` by `s[c]`: the
//! FP32 function is unchanged, the activation's channels get similar ranges, and the
//! per-output-channel weight quantization absorbs the rest.
//!
//! An activation qualifies (a [`EqualizeSite`]) when
//! * every reader multiplies it by constant weights along a channel axis — a Conv with
//!   `group = 1` or a depthwise Conv (`group = C`) on input 0, a MatMul with a constant
//!   `[C, N]` right operand, a Gemm with a constant `B` — so the readers absorb `s`
//!   (`Shape` and `Size`, which read only the shape, may read it too);
//! * its producer can absorb `1/s`: a Conv, ConvTranspose, Gemm or BatchNormalization
//!   (output channels rescaled), or a Mul by a channel-wise constant, optionally
//!   followed by an Add of one (a learnable affine block, LayerNorm's gamma and beta),
//!   possibly through Relu, LeakyRelu, PRelu, MaxPool or average pooling, which commute
//!   with a positive per-channel scale.
//!
//! The scales come from each channel's largest magnitude on calibration data. With only
//! depthwise readers the weight side is free (one weight scale per channel already), so
//! every channel is brought to the largest channel's range; otherwise
//! `s[c] = sqrt(r_x[c] / r_w[c])` (SmoothQuant's alpha = 0.5) balances the activation's
//! range against the readers' weight range of that channel. Gains are bounded
//! ([`EqualizeOptions::max_gain`]) and normalised so that the activation's largest range
//! is unchanged (FP16 builds keep their headroom).

use super::QuantError;
use crate::affine::{fold_into, output_channels, ChannelAffine};
use crate::util::{float_tensor, float_values, only_read_by};
use rtq_ir::{DType, Graph, NodeId, Tensor, TensorData, ValueId};
use serde::Serialize;
use std::collections::HashMap;

/// Options of the equalization transform.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EqualizeOptions {
    /// Migration strength where the readers' weights pay for it: `s = r_x^alpha /
    /// r_w^(1 - alpha)` (SmoothQuant's alpha).
    pub alpha: f64,
    /// Largest factor by which a channel is amplified or attenuated.
    pub max_gain: f64,
}

impl Default for EqualizeOptions {
    fn default() -> Self {
        EqualizeOptions {
            alpha: 0.5,
            max_gain: 256.0,
        }
    }
}

/// An activation whose channels can be rescaled, with where the scale goes.
#[derive(Debug, Clone, PartialEq)]
pub struct EqualizeSite {
    /// The activation.
    pub tensor: ValueId,
    /// Its channel axis.
    pub axis: usize,
    /// Its number of channels.
    pub channels: usize,
    producer: Producer,
    readers: Vec<(NodeId, Reader)>,
}

/// What absorbs `1/s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Producer {
    /// Conv / ConvTranspose / Gemm / BatchNormalization: output channels rescaled.
    Linear(NodeId),
    /// `Mul(u, a)`, optionally followed by `Add(., b)`: `a` and `b` rescaled.
    Affine { mul: NodeId, add: Option<NodeId> },
    /// LayerNormalization over the last axis: its scale and bias rescaled.
    LayerNorm(NodeId),
}

/// What absorbs `s`: the reader's constant weight, scaled along input channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    /// Conv with `group = 1`: weight `[O, C, k...]`, axis 1.
    Conv,
    /// Depthwise Conv (`group = C`): weight `[C*m, 1, k...]`, output `o` reads `o / m`.
    Depthwise,
    /// MatMul with a constant `[C, N]` weight, or Gemm with `B` `[C, N]`: rows.
    Rows,
    /// Gemm with `transB = 1`: `B` is `[N, C]`, columns.
    Columns,
}

impl Reader {
    /// Whether the reader's weight quantization pays for the scale (a depthwise
    /// reader's per-channel weight scales absorb it exactly).
    fn pays(self) -> bool {
        self != Reader::Depthwise
    }
}

/// What [`apply_equalization`] did to one activation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EqualizedTensor {
    /// The activation.
    pub tensor: String,
    /// Its channels.
    pub channels: usize,
    /// The op that absorbed `1/s`.
    pub producer: String,
    /// How many nodes read it (and absorbed `s`).
    pub readers: usize,
    /// Largest channel range over smallest (of channels that carry signal), before.
    pub spread_before: f64,
    /// The same, after.
    pub spread_after: f64,
}

/// What [`apply_equalization`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EqualizeSummary {
    /// The rescaled activations, in graph order.
    pub tensors: Vec<EqualizedTensor>,
}

/// Ops between the producer and the activation that commute with a positive
/// per-channel scale (pooling only along the channel axis 1).
fn commutes(op: &str, axis: usize) -> bool {
    match op {
        "Relu" | "LeakyRelu" | "PRelu" => true,
        "MaxPool" | "AveragePool" | "GlobalAveragePool" => axis == 1,
        _ => false,
    }
}

/// The activations among `candidates` that can be equalized, in the order given.
pub fn plan_equalization(graph: &Graph, candidates: &[ValueId]) -> Vec<EqualizeSite> {
    let consumers = graph.consumers();
    candidates
        .iter()
        .filter_map(|&v| site(graph, &consumers, v))
        .collect()
}

fn site(
    graph: &Graph,
    consumers: &[Vec<(NodeId, usize)>],
    tensor: ValueId,
) -> Option<EqualizeSite> {
    let value = graph.value(tensor);
    if value.dtype != Some(DType::F32) || graph.is_graph_output(tensor) {
        return None;
    }
    let uses = consumers.get(tensor.index())?;
    if uses.is_empty() {
        return None;
    }
    let rank = value.shape.as_ref().map(Vec::len);
    let mut axis_channels: Option<(usize, usize)> = None;
    let mut readers = Vec::new();
    for &(node, slot) in uses {
        if matches!(graph.node(node).op_type.as_str(), "Shape" | "Size") {
            continue; // reads the shape only
        }
        let (axis, channels, reader) = reader(graph, node, slot, rank?)?;
        if *axis_channels.get_or_insert((axis, channels)) != (axis, channels) {
            return None;
        }
        readers.push((node, reader));
    }
    let (axis, channels) = axis_channels?;
    let extent = value.shape.as_ref().and_then(|s| s.get(axis)?.known());
    if extent.is_some_and(|n| n != channels) {
        return None;
    }
    let producer = producer(graph, consumers, tensor, axis, channels, rank?)?;
    Some(EqualizeSite {
        tensor,
        axis,
        channels,
        producer,
        readers,
    })
}

/// The channel axis of the activation read at `slot` of `node`, its channel count and
/// how the node absorbs a scale; `None` when it cannot.
fn reader(graph: &Graph, node: NodeId, slot: usize, rank: usize) -> Option<(usize, usize, Reader)> {
    let n = graph.node(node);
    if slot != 0 {
        return None;
    }
    let w = graph.constant(n.input(1)?)?;
    if w.dtype() != DType::F32 {
        return None;
    }
    let shape = w.shape();
    match n.op_type.as_str() {
        "Conv" if shape.len() >= 3 => {
            let group = usize::try_from(n.attr_int("group", 1)).ok()?;
            if group == 1 {
                Some((1, shape[1], Reader::Conv))
            } else if shape[1] == 1 && group > 1 && shape[0] % group == 0 {
                Some((1, group, Reader::Depthwise))
            } else {
                None
            }
        }
        "MatMul" if shape.len() == 2 && rank >= 2 => Some((rank - 1, shape[0], Reader::Rows)),
        "Gemm" if shape.len() == 2 && rank == 2 && n.attr_int("transA", 0) == 0 => {
            if n.attr_int("transB", 0) != 0 {
                Some((1, shape[1], Reader::Columns))
            } else {
                Some((1, shape[0], Reader::Rows))
            }
        }
        _ => None,
    }
}

/// Walks back from `tensor` through ops that commute with the scale to one that
/// absorbs `1/s`; every value on the way is read only by the next op.
fn producer(
    graph: &Graph,
    consumers: &[Vec<(NodeId, usize)>],
    tensor: ValueId,
    axis: usize,
    channels: usize,
    rank: usize,
) -> Option<Producer> {
    let mut v = tensor;
    loop {
        let (node, _) = graph.value(v).producer?;
        let n = graph.node(node);
        let op = n.op_type.as_str();
        if n.outputs.len() != 1 {
            return None;
        }
        if commutes(op, axis) {
            let input = n.input(0)?;
            if !only_read_by(graph, consumers, input, node) {
                return None;
            }
            v = input;
            continue;
        }
        if axis == 1 && output_channels(graph, node) == Some(channels) {
            return Some(Producer::Linear(node));
        }
        let channel_const = |k: ValueId| is_channel_constant(graph, k, axis, channels, rank);
        let split = |id: NodeId| -> Option<(ValueId, ValueId)> {
            let n = graph.node(id);
            let (a, b) = (n.input(0)?, n.input(1)?);
            match (channel_const(a), channel_const(b)) {
                (false, true) => Some((a, b)),
                (true, false) => Some((b, a)),
                _ => None,
            }
        };
        return match op {
            "LayerNormalization" => layer_norm_over(graph, node, axis, channels, rank)
                .then_some(Producer::LayerNorm(node)),
            "Mul" => split(node).map(|_| Producer::Affine {
                mul: node,
                add: None,
            }),
            "Add" => {
                let (u, _) = split(node)?;
                let (mul, _) = graph.value(u).producer?;
                let ok = graph.node(mul).op_type == "Mul"
                    && only_read_by(graph, consumers, u, node)
                    && split(mul).is_some();
                ok.then_some(Producer::Affine {
                    mul,
                    add: Some(node),
                })
            }
            _ => None,
        };
    }
}

/// Whether LayerNormalization `node` normalizes the last axis alone, which is `axis`,
/// with constant f32 scale (and bias, when present) of `channels` entries.
fn layer_norm_over(graph: &Graph, node: NodeId, axis: usize, channels: usize, rank: usize) -> bool {
    let n = graph.node(node);
    let normalized = n.attr_int("axis", -1);
    let normalized = if normalized < 0 {
        normalized + rank as i64
    } else {
        normalized
    };
    let per_channel = |slot: usize| {
        n.input(slot)
            .and_then(|v| graph.constant(v))
            .is_some_and(|t| t.dtype() == DType::F32 && t.shape() == [channels])
    };
    axis + 1 == rank
        && normalized == axis as i64
        && per_channel(1)
        && (n.input(2).is_none() || per_channel(2))
}

/// Whether `k` is an f32 constant that is the same along every axis but `axis` of a
/// rank-`rank` activation (where it has 1 or `channels` entries).
fn is_channel_constant(
    graph: &Graph,
    k: ValueId,
    axis: usize,
    channels: usize,
    rank: usize,
) -> bool {
    let Some(t) = graph.constant(k) else {
        return false;
    };
    if t.dtype() != DType::F32 || t.rank() > rank {
        return false;
    }
    let offset = rank - t.rank();
    t.shape()
        .iter()
        .enumerate()
        .all(|(i, &d)| d == 1 || (offset + i == axis && d == channels))
}

/// Rescales every site's channels with scales from `channel_ranges` (each channel's
/// largest magnitude on calibration data, per site tensor); sites without ranges are
/// left alone. Applied in order, each on the graph as the previous ones left it.
pub fn apply_equalization(
    graph: &mut Graph,
    sites: &[EqualizeSite],
    channel_ranges: &HashMap<ValueId, Vec<f32>>,
    opts: &EqualizeOptions,
) -> Result<EqualizeSummary, QuantError> {
    let mut summary = EqualizeSummary::default();
    for site in sites {
        let Some(ranges) = channel_ranges.get(&site.tensor) else {
            continue;
        };
        if ranges.len() != site.channels {
            return Err(QuantError::Node {
                node: graph.value(site.tensor).name.clone(),
                op: "equalize".into(),
                message: format!(
                    "{} channel ranges for {} channels",
                    ranges.len(),
                    site.channels
                ),
            });
        }
        let Some(scales) = scales(graph, site, ranges, opts) else {
            continue;
        };
        if !rescale_producer(graph, site, &scales) {
            continue;
        }
        for &(node, reader) in &site.readers {
            rescale_reader(graph, node, reader, site.channels, &scales);
        }
        let after: Vec<f64> = ranges
            .iter()
            .zip(&scales)
            .map(|(&r, s)| f64::from(r) / s)
            .collect();
        let ranges: Vec<f64> = ranges.iter().map(|&r| f64::from(r)).collect();
        let producer = match site.producer {
            Producer::Linear(n) | Producer::Affine { mul: n, .. } | Producer::LayerNorm(n) => {
                graph.node(n).op_type.clone()
            }
        };
        summary.tensors.push(EqualizedTensor {
            tensor: graph.value(site.tensor).name.clone(),
            channels: site.channels,
            producer,
            readers: site.readers.len(),
            spread_before: spread(&ranges),
            spread_after: spread(&after),
        });
    }
    Ok(summary)
}

/// Largest over smallest positive range.
fn spread(ranges: &[f64]) -> f64 {
    let max = ranges.iter().copied().fold(0.0, f64::max);
    let min = ranges
        .iter()
        .copied()
        .filter(|&r| r > 0.0)
        .fold(f64::INFINITY, f64::min);
    if min.is_finite() {
        max / min
    } else {
        1.0
    }
}

/// Each channel's scale `s` (the activation is divided by it), or `None` when the
/// activation carries no signal or is already balanced.
fn scales(
    graph: &Graph,
    site: &EqualizeSite,
    ranges: &[f32],
    opts: &EqualizeOptions,
) -> Option<Vec<f64>> {
    let r_x: Vec<f64> = ranges.iter().map(|&r| f64::from(r)).collect();
    let largest = r_x.iter().copied().fold(0.0, f64::max);
    if !(largest > 0.0 && largest.is_finite()) {
        return None;
    }
    let weighted = site.readers.iter().any(|(_, r)| r.pays());
    let raw: Vec<f64> = if weighted {
        let r_w = weight_ranges(graph, site);
        r_x.iter()
            .zip(&r_w)
            .map(|(&x, &w)| {
                if x > 0.0 && w > 0.0 {
                    x.powf(opts.alpha) / w.powf(1.0 - opts.alpha)
                } else {
                    f64::NAN
                }
            })
            .collect()
    } else {
        r_x.iter()
            .map(|&x| if x > 0.0 { x / largest } else { f64::NAN })
            .collect()
    };
    // Channels without signal (or weight) keep their scale relative to the largest.
    let reference = raw
        .iter()
        .zip(&r_x)
        .filter(|(s, _)| s.is_finite())
        .map(|(s, &x)| x / s)
        .fold(0.0, f64::max);
    if reference <= 0.0 {
        return None;
    }
    // Normalised so the largest equalized range is the activation's largest range.
    let norm = reference / largest;
    let (low, high) = (1.0 / opts.max_gain, opts.max_gain);
    let scales: Vec<f64> = raw
        .iter()
        .map(|&s| {
            if s.is_finite() {
                (s * norm).clamp(low, high)
            } else {
                1.0
            }
        })
        .collect();
    scales.iter().any(|&s| s != 1.0).then_some(scales)
}

/// Per input channel, the largest weight magnitude over the readers that pay.
fn weight_ranges(graph: &Graph, site: &EqualizeSite) -> Vec<f64> {
    let mut r_w = vec![0.0f64; site.channels];
    for &(node, reader) in site.readers.iter().filter(|(_, r)| r.pays()) {
        let Some(w) = graph.node(node).input(1).and_then(|v| graph.constant(v)) else {
            continue;
        };
        let Ok(values) = w.as_f32() else { continue };
        let shape = w.shape();
        for (i, &x) in values.iter().enumerate() {
            let c = input_channel(shape, reader, site.channels, i);
            r_w[c] = r_w[c].max(f64::from(x.abs()));
        }
    }
    r_w
}

/// The activation channel weight element `i` multiplies.
fn input_channel(shape: &[usize], reader: Reader, channels: usize, i: usize) -> usize {
    match reader {
        Reader::Conv => {
            let inner: usize = shape[2..].iter().product();
            (i / inner) % shape[1]
        }
        Reader::Depthwise => {
            let per_output: usize = shape[1..].iter().product();
            (i / per_output) / (shape[0] / channels)
        }
        Reader::Rows => i / shape[1],
        Reader::Columns => i % shape[1],
    }
}

/// Makes the producer output `y / s`; false (nothing changed) when it cannot.
fn rescale_producer(graph: &mut Graph, site: &EqualizeSite, scales: &[f64]) -> bool {
    let inverse: Vec<f64> = scales.iter().map(|s| 1.0 / s).collect();
    match site.producer {
        Producer::Linear(node) => fold_into(graph, node, &ChannelAffine::scaling(inverse)),
        Producer::Affine { mul, add } => {
            let rank = graph.value(site.tensor).shape.as_ref().map_or(0, Vec::len);
            let mut shape = vec![1; rank - site.axis];
            shape[0] = site.channels;
            for node in std::iter::once(mul).chain(add) {
                let n = graph.node(node);
                let slot = (0..2)
                    .find(|&s| n.input(s).is_some_and(|v| graph.constant(v).is_some()))
                    .expect("checked when planning");
                scale_constant_input(graph, node, slot, &inverse, shape.clone());
            }
            true
        }
        Producer::LayerNorm(node) => {
            for slot in 1..3 {
                if graph.node(node).input(slot).is_some() {
                    scale_constant_input(graph, node, slot, &inverse, vec![site.channels]);
                }
            }
            true
        }
    }
}

/// Replaces the constant input `slot` of `node` (one value, or one per channel) by a
/// new constant of `shape` holding it times `factors` per channel.
fn scale_constant_input(
    graph: &mut Graph,
    node: NodeId,
    slot: usize,
    factors: &[f64],
    shape: Vec<usize>,
) {
    let k = graph.node(node).input(slot).expect("constant operand");
    let values = float_values(graph.constant(k).expect("constant")).expect("f32");
    let scaled: Vec<f64> = factors
        .iter()
        .enumerate()
        .map(|(c, f)| values[if values.len() == 1 { 0 } else { c }] * f)
        .collect();
    let tensor = float_tensor(DType::F32, shape, scaled).expect("sizes match");
    let name = graph.fresh_value_name(&format!("{}_equalized", graph.value(k).name));
    let new = graph.add_constant(&name, tensor);
    graph.node_mut(node).inputs[slot] = Some(new);
}

/// Multiplies the reader's weights of input channel `c` by `scales[c]` (a new
/// constant: weights shared with other nodes are never changed).
fn rescale_reader(
    graph: &mut Graph,
    node: NodeId,
    reader: Reader,
    channels: usize,
    scales: &[f64],
) {
    let w_id = graph
        .node(node)
        .input(1)
        .expect("planned reader has a weight");
    let w = graph.constant(w_id).expect("constant weight");
    let shape = w.shape().to_vec();
    let values = w.as_f32().expect("f32 weight");
    let scaled: Vec<f32> = values
        .iter()
        .enumerate()
        .map(|(i, &x)| (f64::from(x) * scales[input_channel(&shape, reader, channels, i)]) as f32)
        .collect();
    let tensor = Tensor::new(shape, TensorData::F32(scaled)).expect("same shape");
    let name = graph.fresh_value_name(&format!("{}_equalized", graph.value(w_id).name));
    let new = graph.add_constant(&name, tensor);
    graph.node_mut(node).inputs[1] = Some(new);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::Attr;
    use rtq_test_support::{add_op, Rng};

    /// Channel `c` of a random tensor scaled by `gains[c]` along axis 1.
    fn input(rng: &mut Rng, shape: &[usize], gains: &[f32]) -> Tensor {
        let mut t = rng.tensor(shape);
        let inner: usize = shape[2..].iter().product();
        for (i, x) in t.as_f32_mut().unwrap().iter_mut().enumerate() {
            *x *= gains[(i / inner) % shape[1]];
        }
        t
    }

    fn run(g: &Graph, x: &Tensor) -> Vec<f32> {
        let plan = rtq_exec::Plan::new(g).unwrap();
        plan.run(&[("x".into(), x.clone())]).unwrap()[0].to_f32_vec()
    }

    /// Per channel (axis 1) largest magnitude of `name` on input `x`.
    fn channel_absmax(g: &Graph, name: &str, x: &Tensor) -> Vec<f32> {
        let v = g.value_by_name(name).unwrap();
        let plan = rtq_exec::Plan::new(g).unwrap();
        let mut seen = None;
        plan.run_observed(&[("x".into(), x.clone())], &mut |id, t| {
            if id == v {
                seen = Some(t.as_ref().clone());
            }
        })
        .unwrap();
        let t = seen.unwrap();
        let shape = t.shape().to_vec();
        let inner: usize = shape[2..].iter().product();
        let mut r = vec![0.0f32; shape[1]];
        for (i, &x) in t.as_f32().unwrap().iter().enumerate() {
            let c = (i / inner) % shape[1];
            r[c] = r[c].max(x.abs());
        }
        r
    }

    /// x[1,4,5,5] -> Conv(w1, 4->4, 1x1) -> Relu -> a -> depthwise Conv(3x3) -> y, and
    /// x -> Mul(k) -> Add(b) -> t -> Conv(w2, 1x1) -> z (a learnable-affine block).
    fn graph(rng: &mut Rng) -> Graph {
        let mut g = Graph::new("g", 13);
        let dims = |s: &[usize]| s.iter().map(|&d| rtq_ir::Dim::Known(d)).collect();
        let x = g.add_input("x", DType::F32, dims(&[1, 4, 5, 5]));
        let w1 = g.add_constant("w1", input(rng, &[4, 4, 1, 1], &[1.0, 0.1, 3.0, 0.01]));
        let b1 = g.add_constant("b1", Tensor::from_f32(vec![4], vec![0.1, 0.0, -0.2, 0.01]));
        let c = add_op(&mut g, "conv1", "Conv", &[Some(x), Some(w1), Some(b1)], &[]);
        let a = add_op(&mut g, "a", "Relu", &[Some(c)], &[]);
        let dw = g.add_constant("dw", rng.tensor(&[4, 1, 3, 3]));
        let group = [("group", Attr::Int(4)), ("pads", Attr::Ints(vec![1; 4]))];
        let y = add_op(&mut g, "y", "Conv", &[Some(a), Some(dw)], &group);
        let k = g.add_constant("k", Tensor::scalar_f32(0.5));
        let b = g.add_constant("b", Tensor::scalar_f32(0.25));
        let m = add_op(&mut g, "m", "Mul", &[Some(x), Some(k)], &[]);
        let t = add_op(&mut g, "t", "Add", &[Some(m), Some(b)], &[]);
        let w2 = g.add_constant("w2", rng.tensor(&[3, 4, 1, 1]));
        let z = add_op(&mut g, "z", "Conv", &[Some(t), Some(w2)], &[]);
        g.outputs.extend([y, z]);
        crate::infer_shapes(&mut g).unwrap();
        g
    }

    #[test]
    fn finds_the_producer_through_relu_and_the_affine_block() {
        let mut rng = Rng::new(7);
        let g = graph(&mut rng);
        let candidates: Vec<ValueId> = ["a", "t", "x"]
            .iter()
            .map(|n| g.value_by_name(n).unwrap())
            .collect();
        let sites = plan_equalization(&g, &candidates);
        // `x` is a graph input: nothing produces it.
        assert_eq!(sites.len(), 2);
        let conv1 = g.nodes().find(|(_, n)| n.name == "conv1").unwrap().0;
        assert_eq!(sites[0].producer, Producer::Linear(conv1));
        assert_eq!(sites[0].readers[0].1, Reader::Depthwise);
        assert!(matches!(
            sites[1].producer,
            Producer::Affine { add: Some(_), .. }
        ));
        assert_eq!((sites[1].axis, sites[1].channels), (1, 4));
    }

    #[test]
    fn depthwise_readers_get_every_channel_at_the_largest_range_and_outputs_stay() {
        let mut rng = Rng::new(11);
        let mut g = graph(&mut rng);
        let x = input(&mut rng, &[1, 4, 5, 5], &[1.0, 2.0, 0.5, 1.0]);
        let before = (run(&g, &x), channel_absmax(&g, "a", &x));
        let a = g.value_by_name("a").unwrap();
        let t = g.value_by_name("t").unwrap();
        let sites = plan_equalization(&g, &[a, t]);
        let ranges = HashMap::from([(a, before.1.clone()), (t, channel_absmax(&g, "t", &x))]);
        let summary =
            apply_equalization(&mut g, &sites, &ranges, &EqualizeOptions::default()).unwrap();
        assert_eq!(summary.tensors.len(), 2);
        rtq_ir::verify(&g).unwrap();
        // The function is unchanged.
        let after = run(&g, &x);
        for (p, q) in before.0.iter().zip(&after) {
            assert!((p - q).abs() <= 1e-4 * (1.0 + p.abs()), "{p} vs {q}");
        }
        // Depthwise reader: every live channel of `a` now spans the largest range.
        let largest = before.1.iter().copied().fold(0.0, f32::max);
        for (c, r) in channel_absmax(&g, "a", &x).iter().enumerate() {
            if before.1[c] > 0.0 {
                let expected = largest.min(before.1[c] * 256.0);
                assert!(
                    (r - expected).abs() <= 1e-4 * largest,
                    "channel {c}: {r} vs {expected}"
                );
            }
        }
        assert!(summary.tensors[0].spread_after < summary.tensors[0].spread_before);
    }

    #[test]
    fn dense_readers_balance_activation_against_weight_ranges() {
        let mut rng = Rng::new(3);
        let mut g = graph(&mut rng);
        let x = input(&mut rng, &[1, 4, 5, 5], &[1.0, 8.0, 0.25, 2.0]);
        let t = g.value_by_name("t").unwrap();
        let r_x = channel_absmax(&g, "t", &x);
        let w2 = g
            .constant(g.value_by_name("w2").unwrap())
            .unwrap()
            .to_f32_vec();
        let r_w: Vec<f64> = (0..4)
            .map(|c| {
                (0..3)
                    .map(|o| f64::from(w2[o * 4 + c].abs()))
                    .fold(0.0, f64::max)
            })
            .collect();
        let sites = plan_equalization(&g, &[t]);
        let before = run(&g, &x);
        apply_equalization(
            &mut g,
            &sites,
            &HashMap::from([(t, r_x.clone())]),
            &Default::default(),
        )
        .unwrap();
        // s[c] = sqrt(r_x / r_w): after, channel c spans sqrt(r_x r_w), up to a common
        // factor that keeps the largest range.
        let largest = f64::from(r_x.iter().copied().fold(0.0, f32::max));
        let balanced: Vec<f64> = (0..4)
            .map(|c| (f64::from(r_x[c]) * r_w[c]).sqrt())
            .collect();
        let factor = largest / balanced.iter().copied().fold(0.0, f64::max);
        let after = channel_absmax(&g, "t", &x);
        for c in 0..4 {
            let expected = balanced[c] * factor;
            assert!(
                (f64::from(after[c]) - expected).abs() < 1e-4 * largest,
                "channel {c}"
            );
        }
        let after_largest = after.iter().copied().fold(0.0, f32::max);
        assert!((f64::from(after_largest) - largest).abs() < 1e-4 * largest);
        let z = run(&g, &x);
        for (p, q) in before.iter().zip(&z) {
            assert!((p - q).abs() <= 1e-4 * (1.0 + p.abs()), "{p} vs {q}");
        }
    }

    #[test]
    fn a_reader_that_cannot_absorb_the_scale_rules_the_tensor_out() {
        let mut rng = Rng::new(5);
        let mut g = graph(&mut rng);
        // `a` is also read by an Add: no site for it.
        let a = g.value_by_name("a").unwrap();
        let s = add_op(&mut g, "s", "Add", &[Some(a), Some(a)], &[]);
        g.outputs.push(s);
        crate::infer_shapes(&mut g).unwrap();
        assert!(plan_equalization(&g, &[a]).is_empty());
        // The conv output before Relu read twice: the producer cannot be rescaled alone.
        let mut g = graph(&mut rng);
        let c = g.value_by_name("conv1").unwrap();
        g.outputs.push(c);
        let a = g.value_by_name("a").unwrap();
        assert!(plan_equalization(&g, &[a]).is_empty());
    }

    #[test]
    fn layer_norm_affine_before_a_matmul_is_equalized_on_the_last_axis() {
        let mut rng = Rng::new(9);
        let mut g = Graph::new("g", 13);
        let dims = |s: &[usize]| s.iter().map(|&d| rtq_ir::Dim::Known(d)).collect();
        let x = g.add_input("x", DType::F32, dims(&[1, 6, 4]));
        let gamma = g.add_constant("gamma", Tensor::from_f32(vec![4], vec![1.0, 9.0, 0.2, 3.0]));
        let beta = g.add_constant("beta", Tensor::from_f32(vec![4], vec![0.0, 1.0, 0.0, -1.0]));
        let m = add_op(&mut g, "m", "Mul", &[Some(x), Some(gamma)], &[]);
        let t = add_op(&mut g, "t", "Add", &[Some(m), Some(beta)], &[]);
        let w = g.add_constant("w", rng.tensor(&[4, 5]));
        let y = add_op(&mut g, "y", "MatMul", &[Some(t), Some(w)], &[]);
        g.outputs.push(y);
        crate::infer_shapes(&mut g).unwrap();
        let sites = plan_equalization(&g, &[t]);
        assert_eq!((sites.len(), sites[0].axis, sites[0].channels), (1, 2, 4));
        let xin = rng.tensor(&[1, 6, 4]);
        let before = run(&g, &xin);
        let ranges = HashMap::from([(t, vec![1.0, 10.0, 0.2, 4.0])]);
        apply_equalization(&mut g, &sites, &ranges, &Default::default()).unwrap();
        rtq_ir::verify(&g).unwrap();
        for (p, q) in before.iter().zip(&run(&g, &xin)) {
            assert!((p - q).abs() <= 1e-4 * (1.0 + p.abs()), "{p} vs {q}");
        }
        // gamma and beta became per-channel constants of shape [4].
        let mul = g.nodes().find(|(_, n)| n.name == "m").unwrap().1;
        let k = g.constant(mul.input(1).unwrap()).unwrap();
        assert_eq!(k.shape(), &[4]);
    }

    #[test]
    fn layer_normalization_op_absorbs_the_scale_in_its_gain_and_bias() {
        let mut rng = Rng::new(11);
        let mut g = Graph::new("g", 17);
        let dims = |s: &[usize]| s.iter().map(|&d| rtq_ir::Dim::Known(d)).collect();
        let x = g.add_input("x", DType::F32, dims(&[1, 6, 4]));
        let gamma = g.add_constant("gamma", Tensor::from_f32(vec![4], vec![1.0, 9.0, 0.2, 3.0]));
        let beta = g.add_constant("beta", Tensor::from_f32(vec![4], vec![0.0, 1.0, 0.0, -1.0]));
        let ln = [("axis", rtq_ir::Attr::Int(-1))];
        let t = add_op(
            &mut g,
            "ln",
            "LayerNormalization",
            &[Some(x), Some(gamma), Some(beta)],
            &ln,
        );
        let w = g.add_constant("w", rng.tensor(&[4, 5]));
        let y = add_op(&mut g, "y", "MatMul", &[Some(t), Some(w)], &[]);
        g.outputs.push(y);
        crate::infer_shapes(&mut g).unwrap();
        let sites = plan_equalization(&g, &[t]);
        assert_eq!(sites.len(), 1);
        assert_eq!(
            sites[0].producer,
            Producer::LayerNorm(g.value(t).producer.unwrap().0)
        );
        let xin = rng.tensor(&[1, 6, 4]);
        let before = run(&g, &xin);
        let ranges = HashMap::from([(t, vec![1.5, 12.0, 0.3, 5.0])]);
        let summary = apply_equalization(&mut g, &sites, &ranges, &Default::default()).unwrap();
        assert!(summary.tensors[0].spread_after < summary.tensors[0].spread_before);
        rtq_ir::verify(&g).unwrap();
        for (p, q) in before.iter().zip(&run(&g, &xin)) {
            assert!((p - q).abs() <= 1e-4 * (1.0 + p.abs()), "{p} vs {q}");
        }
        // Normalizing more than the last axis: the gain is not per channel.
        let mut g2 = Graph::new("g", 17);
        let x = g2.add_input("x", DType::F32, dims(&[1, 6, 4]));
        let gamma = g2.add_constant("gamma", Tensor::from_f32(vec![6, 4], vec![1.0; 24]));
        let ln = [("axis", rtq_ir::Attr::Int(1))];
        let t = add_op(
            &mut g2,
            "ln",
            "LayerNormalization",
            &[Some(x), Some(gamma)],
            &ln,
        );
        let w = g2.add_constant("w", rng.tensor(&[4, 5]));
        let y = add_op(&mut g2, "y", "MatMul", &[Some(t), Some(w)], &[]);
        g2.outputs.push(y);
        crate::infer_shapes(&mut g2).unwrap();
        assert!(plan_equalization(&g2, &[t]).is_empty());
    }
}
