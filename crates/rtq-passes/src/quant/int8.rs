//! INT8 explicit quantization: Q/DQ insertion following TensorRT's placement rules.
//!
//! * Inputs of Conv, ConvTranspose, Gemm and MatMul are quantized: activations per
//!   tensor, constant weights per output channel; biases stay in float.
//! * The outputs of weighted ops get no Q/DQ of their own (TensorRT fuses the
//!   epilogue); a residual Add gets Q/DQ on the skip-branch input so TensorRT can
//!   fuse it into the preceding convolution.
//! * Transformer rules (TensorRT's guide, NVIDIA ModelOpt's ONNX INT8 mode): both
//!   inputs of an activation-by-activation MatMul (attention) get per-tensor Q/DQ;
//!   LayerNormalization, Softmax and GELU are not quantized; a residual Add whose
//!   branch is a linear layer behind its fusible epilogue (bias Add, scale Mul,
//!   BatchNormalization, Relu) gets Q/DQ on the other input only; GEMV MatMuls (one
//!   output row or column) and attention over more than 512 keys stay in high
//!   precision; the quantized inputs of a Concat share one scale.
//! * Symmetric scales (amax / 127), zero point 0 (an explicit int8 0 on activation
//!   Q/DQ, which types the QuantizeLinear output; omitted on weight DequantizeLinear,
//!   where it defaults to 0), one shared Q/DQ pair per activation tensor.
//!
//! * FP8 E4M3 (`grid` = [`QuantGrid::Fp8E4M3`]): the same placement, Q/DQ with
//!   `FLOAT8E4M3FN` zero points and scales amax / 448, weights stored as FP8 (opset 19,
//!   where FP8 Q/DQ begin).
//!
//! The transform runs in two steps: [`plan_int8`] decides what to quantize (and so
//! which activations need calibration ranges), [`apply_int8`] rewrites the graph.

use super::placement::{
    fusible_backbone, gemv_reason, long_attention_reason, shared_scale_groups, INT8_WEIGHTED_OPS,
};
use super::weights::quantize_weights;
use super::{NodeFilter, QuantError, ScaleFormat};
use rtq_ir::{Attr, DType, Graph, NodeId, QuantGrid, QuantParams, Tensor, TensorData, ValueId};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Options of the INT8 transform.
#[derive(Debug, Clone)]
pub struct Int8Options {
    /// Nodes to keep in float.
    pub exclude: NodeFilter,
    /// Further op types whose float activation inputs are quantized (e.g. `AveragePool`,
    /// `GlobalAveragePool`, `MaxPool`, `Concat`), beyond the weighted ops and residual adds.
    pub extra_ops: Vec<String>,
    /// Quantize weights per output channel (true) or per tensor.
    pub per_channel: bool,
    /// Quantize the skip-branch input of residual Adds.
    pub residual_add: bool,
    /// Quantize GEMV MatMul/Gemm nodes too (output with one row or column), which
    /// are otherwise left in high precision.
    pub quantize_gemv: bool,
    /// Concrete shapes of values (by name) on a calibration sample: GEMV detection
    /// reads the graph's symbolic dims from them, as ModelOpt reads its calibration
    /// run's shapes. Empty: only dims known in the graph count.
    pub sample_shapes: Arc<HashMap<String, Vec<usize>>>,
    /// Type whose values the scales must be exact in (FP16 for mixed INT8/FP16 builds,
    /// whose FP16 conversion then stores them without rounding).
    pub scale_format: ScaleFormat,
    /// The grid quantized tensors take: INT8, or FP8 E4M3.
    pub grid: QuantGrid,
}

/// First default-domain opset with FP8 QuantizeLinear/DequantizeLinear.
pub const FP8_QDQ_OPSET: i64 = 19;

impl Default for Int8Options {
    fn default() -> Self {
        Int8Options {
            exclude: NodeFilter::default(),
            extra_ops: Vec::new(),
            per_channel: true,
            residual_add: true,
            quantize_gemv: false,
            sample_shapes: Arc::default(),
            scale_format: ScaleFormat::F32,
            grid: QuantGrid::Int8,
        }
    }
}

/// A constant weight to quantize: node input `slot` of `node`, channels along `axis`
/// (`None` = one scale for the whole tensor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightQuant {
    /// Consumer node.
    pub node: NodeId,
    /// Input slot of the weight.
    pub slot: usize,
    /// Output-channel axis, or `None` for per-tensor.
    pub axis: Option<usize>,
}

/// What [`apply_int8`] will do.
#[derive(Debug, Clone, Default)]
pub struct Int8Plan {
    /// Activation tensors that need a calibrated range, in graph order.
    pub activations: Vec<ValueId>,
    /// Node inputs (node, slot) that read one of `activations` through Q/DQ.
    pub edges: Vec<(NodeId, usize)>,
    /// Constant weights quantized to int8.
    pub weights: Vec<WeightQuant>,
    /// Nodes with at least one quantized input.
    pub quantized_nodes: Vec<NodeId>,
    /// Candidate nodes left in float, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Activations that share one scale (the largest of their ranges): the quantized
    /// inputs of a Concat.
    pub shared: Vec<Vec<ValueId>>,
    /// Type whose values the scales are made exact in.
    pub scale_format: ScaleFormat,
    /// The grid quantized tensors take.
    pub grid: QuantGrid,
}

impl Int8Plan {
    /// The part of the plan that quantizes `node` alone: its input Q/DQ and weights.
    pub fn only(&self, graph: &Graph, node: NodeId) -> Int8Plan {
        let edges: Vec<(NodeId, usize)> = self
            .edges
            .iter()
            .copied()
            .filter(|(n, _)| *n == node)
            .collect();
        let mut activations: Vec<ValueId> = edges
            .iter()
            .filter_map(|&(n, slot)| graph.node(n).input(slot))
            .collect();
        activations.dedup();
        Int8Plan {
            activations,
            shared: shared_scale_groups(graph, &edges),
            edges,
            weights: self
                .weights
                .iter()
                .filter(|w| w.node == node)
                .cloned()
                .collect(),
            quantized_nodes: vec![node],
            skipped: Vec::new(),
            scale_format: self.scale_format,
            grid: self.grid,
        }
    }
}

/// What [`apply_int8`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Int8Summary {
    /// Nodes with quantized inputs.
    pub quantized_nodes: usize,
    /// Q/DQ pairs inserted on activations.
    pub activation_qdq: usize,
    /// Weights stored as int8 behind a DequantizeLinear.
    pub weight_qdq: usize,
    /// Nodes left in float, with the reason.
    pub skipped: Vec<(String, String)>,
}

fn is_float_activation(graph: &Graph, v: ValueId) -> Result<bool, String> {
    let value = graph.value(v);
    if value.constant.is_some() {
        return Ok(false);
    }
    match value.dtype {
        Some(DType::F32) => Ok(true),
        Some(other) => Err(format!("input `{}` is {other}, not float", value.name)),
        None => Err(format!("input `{}` has no known element type", value.name)),
    }
}

fn is_float_constant(graph: &Graph, v: ValueId) -> bool {
    graph.constant(v).is_some_and(|t| t.dtype() == DType::F32)
}

/// Decides which tensors and weights to quantize.
pub fn plan_int8(graph: &Graph, opts: &Int8Options) -> Result<Int8Plan, QuantError> {
    let order = graph.topo_order().map_err(|e| QuantError::Node {
        node: graph.name.clone(),
        op: "graph".into(),
        message: e.to_string(),
    })?;
    let position: HashMap<NodeId, usize> = order.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut plan = Int8Plan {
        scale_format: opts.scale_format,
        grid: opts.grid,
        ..Int8Plan::default()
    };
    let mut activations: BTreeSet<(usize, ValueId)> = BTreeSet::new();
    let producer_op = |v: ValueId| {
        graph
            .value(v)
            .producer
            .map(|(n, _)| graph.node(n).op_type.as_str())
    };
    let value_position = |v: ValueId| graph.value(v).producer.map_or(0, |(n, _)| position[&n] + 1);
    let consumers = graph.consumers();

    for &id in &order {
        let node = graph.node(id);
        let op = node.op_type.as_str();
        let candidate = INT8_WEIGHTED_OPS.contains(&op)
            || (op == "Add" && opts.residual_add)
            || opts.extra_ops.iter().any(|o| o == op);
        if !candidate {
            continue;
        }
        if opts.exclude.matches(node) {
            plan.skipped
                .push((node.name.clone(), "excluded by filter".into()));
            continue;
        }
        // A node that already reads Q/DQ (a QAT model, or one quantized before) keeps
        // them and their scales: nothing is quantized twice.
        let reads_qdq = node
            .inputs
            .iter()
            .flatten()
            .any(|&v| producer_op(v) == Some("DequantizeLinear"));
        if reads_qdq {
            plan.skipped.push((
                node.name.clone(),
                "already quantized in the model (reads a DequantizeLinear)".into(),
            ));
            continue;
        }
        let mut edges: Vec<usize> = Vec::new();
        let mut weights: Vec<WeightQuant> = Vec::new();
        let result: Result<(), String> = (|| {
            match op {
                "Conv" | "ConvTranspose" | "Gemm" | "MatMul" => {
                    let x = node.input(0).ok_or("missing input 0")?;
                    let w = node.input(1).ok_or("missing input 1")?;
                    if !is_float_activation(graph, x)? {
                        return Err("input 0 is constant".into());
                    }
                    if !opts.quantize_gemv {
                        if let Some(why) = gemv_reason(graph, id, &opts.sample_shapes) {
                            return Err(why);
                        }
                    }
                    if let Some(why) = long_attention_reason(graph, &consumers, id) {
                        return Err(why);
                    }
                    edges.push(0);
                    if is_float_constant(graph, w) {
                        let rank = graph.constant(w).map_or(0, |t| t.rank());
                        let axis = match op {
                            "Conv" => Some(0),
                            "ConvTranspose" if node.attr_int("group", 1) == 1 => Some(1),
                            "ConvTranspose" => None,
                            "Gemm" if node.attr_int("transB", 0) != 0 => Some(0),
                            "Gemm" => Some(1),
                            _ if rank >= 2 => Some(rank - 1),
                            _ => None,
                        };
                        let axis = if opts.per_channel { axis } else { None };
                        weights.push(WeightQuant {
                            node: id,
                            slot: 1,
                            axis,
                        });
                    } else if is_float_activation(graph, w)? {
                        edges.push(1);
                    } else {
                        return Err("weight is neither a float constant nor a float tensor".into());
                    }
                }
                "Add" => {
                    let a = node.input(0).ok_or("missing input 0")?;
                    let b = node.input(1).ok_or("missing input 1")?;
                    if !is_float_activation(graph, a)? || !is_float_activation(graph, b)? {
                        return Err("not a residual add (one input is constant)".into());
                    }
                    let weighted = |v| fusible_backbone(graph, v).is_some();
                    match (weighted(a), weighted(b)) {
                        (false, false) => {
                            return Err(
                                "no input comes from a weighted op (or its fusible epilogue)"
                                    .into(),
                            )
                        }
                        (true, false) => edges.push(1),
                        (false, true) => edges.push(0),
                        // Both branches end in a weighted op: the one computed earlier is the skip branch.
                        (true, true) => edges.push(if value_position(a) < value_position(b) {
                            0
                        } else {
                            1
                        }),
                    }
                }
                _ => {
                    for (slot, input) in node.inputs.iter().enumerate() {
                        if let Some(v) = input {
                            if is_float_activation(graph, *v).unwrap_or(false) {
                                edges.push(slot);
                            }
                        }
                    }
                    if edges.is_empty() {
                        return Err("no float activation input".into());
                    }
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => {
                for &slot in &edges {
                    let v = node.input(slot).expect("checked");
                    activations.insert((value_position(v), v));
                    plan.edges.push((id, slot));
                }
                plan.weights.extend(weights);
                plan.quantized_nodes.push(id);
            }
            Err(reason) => plan.skipped.push((node.name.clone(), reason)),
        }
    }
    plan.activations = activations.into_iter().map(|(_, v)| v).collect();
    plan.shared = shared_scale_groups(graph, &plan.edges);
    Ok(plan)
}

/// Rewrites `graph` per `plan`, with `ranges` giving each planned activation's amax.
pub fn apply_int8(
    graph: &mut Graph,
    plan: &Int8Plan,
    ranges: &HashMap<ValueId, f32>,
) -> Result<Int8Summary, QuantError> {
    let mut dequantized: HashMap<ValueId, ValueId> = HashMap::new();
    let grid = plan.grid;
    if grid == QuantGrid::Fp8E4M3 && !(plan.activations.is_empty() && plan.weights.is_empty()) {
        graph.opset = graph.opset.max(FP8_QDQ_OPSET);
    }
    // Each activation's amax; the members of a shared group take the group's largest.
    let mut amax_of: HashMap<ValueId, f32> = HashMap::new();
    for &v in &plan.activations {
        let amax = ranges
            .get(&v)
            .copied()
            .ok_or_else(|| QuantError::MissingRange(graph.value(v).name.clone()))?;
        amax_of.insert(v, amax);
    }
    for group in &plan.shared {
        let amax = group
            .iter()
            .filter_map(|v| amax_of.get(v))
            .fold(0f32, |a, &b| if b.is_nan() || b > a { b } else { a });
        for v in group {
            if let Some(slot) = amax_of.get_mut(v) {
                *slot = amax;
            }
        }
    }
    for &v in &plan.activations {
        let name = graph.value(v).name.clone();
        let amax = amax_of[&v];
        let params = QuantParams::new(grid, amax);
        if !params.is_valid() {
            return Err(QuantError::BadRange { tensor: name, amax });
        }
        let scale = params.stored_scale(plan.scale_format);
        let scale = graph.add_constant(&format!("{name}_scale"), Tensor::scalar_f32(scale));
        let zero = graph.add_constant(
            &format!("{name}_zero_point"),
            Tensor::new(vec![], TensorData::zeros(grid.dtype(), 1)).expect("scalar"),
        );
        let shape = graph.value(v).shape.clone();
        let q = graph.add_value(
            &format!("{name}_quantized"),
            Some(grid.dtype()),
            shape.clone(),
        );
        graph.add_node(
            &format!("{name}_QuantizeLinear"),
            "QuantizeLinear",
            vec![Some(v), Some(scale), Some(zero)],
            vec![q],
            BTreeMap::new(),
        );
        let dq = graph.add_value(&format!("{name}_dequantized"), Some(DType::F32), shape);
        graph.add_node(
            &format!("{name}_DequantizeLinear"),
            "DequantizeLinear",
            vec![Some(q), Some(scale), Some(zero)],
            vec![dq],
            BTreeMap::new(),
        );
        dequantized.insert(v, dq);
    }
    for &(node, slot) in &plan.edges {
        let v = graph.node(node).input(slot).expect("planned edge exists");
        let dq = dequantized[&v];
        graph.node_mut(node).inputs[slot] = Some(dq);
    }

    let mut weight_dq: HashMap<(ValueId, Option<usize>), ValueId> = HashMap::new();
    for wq in &plan.weights {
        let w = graph
            .node(wq.node)
            .input(wq.slot)
            .expect("planned weight exists");
        if let Some(&dq) = weight_dq.get(&(w, wq.axis)) {
            graph.node_mut(wq.node).inputs[wq.slot] = Some(dq);
            continue;
        }
        let tensor = graph
            .constant(w)
            .expect("planned weight is constant")
            .clone();
        let name = graph.value(w).name.clone();
        let data = tensor.as_f32().map_err(|e| QuantError::Node {
            node: graph.node(wq.node).name.clone(),
            op: graph.node(wq.node).op_type.clone(),
            message: format!("weight `{name}`: {e}"),
        })?;
        let (axis_for_quant, shape_for_quant) = match wq.axis {
            Some(axis) if axis < tensor.rank() => (axis, tensor.shape().to_vec()),
            _ => (0, vec![1, tensor.len()]),
        };
        let (q, scales) = quantize_weights(
            data,
            &shape_for_quant,
            axis_for_quant,
            grid,
            plan.scale_format,
        );
        let channels = scales.len();
        let per_channel = wq.axis.is_some_and(|a| a < tensor.rank());
        let scale_t = if per_channel {
            Tensor::from_f32(vec![channels], scales)
        } else {
            Tensor::scalar_f32(scales[0])
        };
        let qw = graph.add_constant(
            &format!("{name}_quantized"),
            Tensor::new(tensor.shape().to_vec(), q).expect("same shape"),
        );
        let scale = graph.add_constant(&format!("{name}_scale"), scale_t);
        let dq = graph.add_value(
            &format!("{name}_dequantized"),
            Some(DType::F32),
            graph.value(w).shape.clone(),
        );
        let mut attrs = BTreeMap::new();
        if per_channel {
            attrs.insert(
                "axis".to_string(),
                Attr::Int(wq.axis.expect("per channel") as i64),
            );
        }
        graph.add_node(
            &format!("{name}_DequantizeLinear"),
            "DequantizeLinear",
            // No zero-point input: it is optional and 0 when absent (the int8 or FP8
            // type comes from the quantized weight), which saves a byte per channel.
            vec![Some(qw), Some(scale)],
            vec![dq],
            attrs,
        );
        weight_dq.insert((w, wq.axis), dq);
        graph.node_mut(wq.node).inputs[wq.slot] = Some(dq);
    }
    Ok(Int8Summary {
        quantized_nodes: plan.quantized_nodes.len(),
        activation_qdq: dequantized.len(),
        weight_qdq: weight_dq.len(),
        skipped: plan.skipped.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::Dim;

    /// x -> Conv(w) -> Relu -> a ; a -> Conv(w2) -> b ; Add(b, a) -> y
    fn residual_graph() -> (Graph, ValueId, ValueId) {
        let mut g = Graph::new("g", 13);
        let shape = Some(vec![
            Dim::Known(1),
            Dim::Known(2),
            Dim::Known(4),
            Dim::Known(4),
        ]);
        let x = g.add_input("x", DType::F32, shape.clone().unwrap());
        let w = g.add_constant(
            "w",
            Tensor::from_f32(vec![2, 2, 1, 1], vec![1.0, -2.0, 0.5, 0.25]),
        );
        let w2 = g.add_constant(
            "w2",
            Tensor::from_f32(vec![2, 2, 1, 1], vec![0.1, 0.2, 0.3, 0.4]),
        );
        let c = g.add_value("c", Some(DType::F32), shape.clone());
        g.add_node(
            "conv1",
            "Conv",
            vec![Some(x), Some(w)],
            vec![c],
            BTreeMap::new(),
        );
        let a = g.add_value("a", Some(DType::F32), shape.clone());
        g.add_node("relu", "Relu", vec![Some(c)], vec![a], BTreeMap::new());
        let b = g.add_value("b", Some(DType::F32), shape.clone());
        g.add_node(
            "conv2",
            "Conv",
            vec![Some(a), Some(w2)],
            vec![b],
            BTreeMap::new(),
        );
        let y = g.add_value("y", Some(DType::F32), shape);
        g.add_node(
            "add",
            "Add",
            vec![Some(b), Some(a)],
            vec![y],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        (g, x, a)
    }

    #[test]
    fn plans_conv_inputs_and_residual_skip_branch() {
        let (g, x, a) = residual_graph();
        let plan = plan_int8(&g, &Int8Options::default()).unwrap();
        assert_eq!(plan.activations, vec![x, a]);
        assert_eq!(plan.weights.len(), 2);
        assert!(plan.weights.iter().all(|w| w.axis == Some(0)));
        // conv1, conv2 and the add (on its input 1, the relu output = skip branch).
        assert_eq!(plan.quantized_nodes.len(), 3);
        let add = g.nodes().find(|(_, n)| n.op_type == "Add").unwrap().0;
        assert!(plan.edges.contains(&(add, 1)) && !plan.edges.contains(&(add, 0)));
    }

    #[test]
    fn apply_shares_qdq_and_stores_int8_weights() {
        let (mut g, x, a) = residual_graph();
        let plan = plan_int8(&g, &Int8Options::default()).unwrap();
        let ranges = HashMap::from([(x, 2.0), (a, 4.0)]);
        let summary = apply_int8(&mut g, &plan, &ranges).unwrap();
        assert_eq!(summary.activation_qdq, 2);
        assert_eq!(summary.weight_qdq, 2);
        rtq_ir::verify(&g).unwrap();
        let q_count = g
            .nodes()
            .filter(|(_, n)| n.op_type == "QuantizeLinear")
            .count();
        assert_eq!(q_count, 2, "one shared pair per activation");
        let wq = g.value_by_name("w_quantized").unwrap();
        let t = g.constant(wq).unwrap();
        assert_eq!(t.dtype(), DType::I8);
        assert_eq!(t.to_i64_vec(), vec![64, -127, 127, 64]);
        let scale = g.constant(g.value_by_name("a_scale").unwrap()).unwrap();
        assert_eq!(scale.as_f32().unwrap(), &[4.0 / 127.0]);
        // No Q/DQ on outputs of weighted ops: conv outputs feed their readers directly.
        let c = g.value_by_name("c").unwrap();
        assert!(g.consumers()[c.index()]
            .iter()
            .all(|&(n, _)| g.node(n).op_type == "Relu"));
    }

    #[test]
    fn fp8_grid_stores_e4m3_weights_and_zero_points_at_opset_19() {
        let (mut g, x, a) = residual_graph();
        let opts = Int8Options {
            grid: QuantGrid::Fp8E4M3,
            ..Default::default()
        };
        let plan = plan_int8(&g, &opts).unwrap();
        let summary = apply_int8(&mut g, &plan, &HashMap::from([(x, 2.0), (a, 4.48)])).unwrap();
        assert_eq!((summary.activation_qdq, summary.weight_qdq), (2, 2));
        rtq_ir::verify(&g).unwrap();
        assert_eq!(g.opset, FP8_QDQ_OPSET);
        let scale = g.constant(g.value_by_name("a_scale").unwrap()).unwrap();
        assert_eq!(scale.as_f32().unwrap(), &[4.48f32 / 448.0]);
        let zero = g
            .constant(g.value_by_name("a_zero_point").unwrap())
            .unwrap();
        assert_eq!(zero.dtype(), DType::F8E4M3);
        let q = g.value_by_name("a_quantized").unwrap();
        assert_eq!(g.value(q).dtype, Some(DType::F8E4M3));
        // w = [[1, -2], [0.5, 0.25]] per output channel: scales 2/448 and 0.5/448;
        // each channel's largest weight lands on 448, the others on exact E4M3 values.
        let w = g.constant(g.value_by_name("w_quantized").unwrap()).unwrap();
        assert_eq!(w.dtype(), DType::F8E4M3);
        assert_eq!(w.to_f32_vec(), vec![224.0, -448.0, 448.0, 224.0]);
        let ws = g.constant(g.value_by_name("w_scale").unwrap()).unwrap();
        assert_eq!(ws.as_f32().unwrap(), &[2.0 / 448.0, 0.5 / 448.0]);
    }

    #[test]
    fn an_already_quantized_graph_is_not_quantized_again() {
        let (mut g, x, a) = residual_graph();
        let plan = plan_int8(&g, &Int8Options::default()).unwrap();
        apply_int8(&mut g, &plan, &HashMap::from([(x, 2.0), (a, 4.0)])).unwrap();
        let again = plan_int8(&g, &Int8Options::default()).unwrap();
        assert!(again.quantized_nodes.is_empty() && again.activations.is_empty());
        assert_eq!(again.skipped.len(), 3, "{:?}", again.skipped);
        assert!(again
            .skipped
            .iter()
            .all(|(_, why)| why.contains("already quantized")));
    }

    #[test]
    fn exclusions_and_missing_ranges_are_reported() {
        let (mut g, x, _) = residual_graph();
        let opts = Int8Options {
            exclude: NodeFilter {
                names: vec!["conv2".into()],
                op_types: vec!["Add".into()],
            },
            ..Default::default()
        };
        let plan = plan_int8(&g, &opts).unwrap();
        assert_eq!(plan.activations, vec![x]);
        assert_eq!(plan.skipped.len(), 2);
        let err = apply_int8(&mut g, &plan, &HashMap::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("`x`"), "{err}");
        let err = apply_int8(&mut g, &plan, &HashMap::from([(x, f32::NAN)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a positive finite"), "{err}");
    }

    #[test]
    fn mixed_int8_fp16_stores_half_qdq_with_exact_scales() {
        use crate::quant::{convert_fp16, Fp16Options, HALF_QDQ_OPSET};
        let (mut g, x, a) = residual_graph();
        let opts = Int8Options {
            scale_format: ScaleFormat::F16,
            ..Default::default()
        };
        let plan = plan_int8(&g, &opts).unwrap();
        // 0.1 / 127 is not a half: the scale is rounded up to one.
        let ranges = HashMap::from([(x, 2.0), (a, 0.1)]);
        apply_int8(&mut g, &plan, &ranges).unwrap();
        let a_scale = g.value_by_name("a_scale").unwrap();
        let rounded = g.constant(a_scale).unwrap().as_f32().unwrap()[0];
        assert!(rounded > 0.1 / 127.0 && half::f16::from_f32(rounded).to_f32() == rounded);
        let fp16 = Fp16Options {
            half_qdq: true,
            ..Default::default()
        };
        convert_fp16(&mut g, &fp16).unwrap();
        crate::infer_shapes(&mut g).unwrap();
        rtq_ir::verify(&g).unwrap();
        assert_eq!(g.opset, HALF_QDQ_OPSET);
        for (_, n) in g.nodes() {
            match n.op_type.as_str() {
                "QuantizeLinear" | "DequantizeLinear" => {
                    let scale = g.constant(n.input(1).unwrap()).unwrap();
                    assert_eq!(scale.dtype(), DType::F16, "{}", n.name);
                }
                "Conv" | "Add" | "Relu" => {
                    let out = g.value(n.outputs[0]).dtype;
                    assert_eq!(out, Some(DType::F16), "{}", n.name);
                }
                _ => {}
            }
        }
        // The half scale holds the rounded value exactly.
        let half_scale = g.value_by_name("a_scale_fp16").unwrap();
        assert_eq!(g.constant(half_scale).unwrap().to_f32_vec(), vec![rounded]);
        // Without `half_qdq`, Q/DQ stay FP32 between Casts and the opset is kept.
        let (mut g, x, a) = residual_graph();
        let plan = plan_int8(&g, &Int8Options::default()).unwrap();
        apply_int8(&mut g, &plan, &HashMap::from([(x, 2.0), (a, 0.1)])).unwrap();
        let s = convert_fp16(&mut g, &Fp16Options::default()).unwrap();
        assert_eq!(g.opset, 13);
        assert!(s
            .kept_fp32
            .iter()
            .any(|(_, why)| why.contains("kept in FP32")));
    }

    #[test]
    fn mixed_build_keeps_the_quantizer_of_an_overflowing_activation_fp32() {
        use crate::quant::{convert_fp16, Fp16Options};
        let (mut g, x, a) = residual_graph();
        let opts = Int8Options {
            scale_format: ScaleFormat::F16,
            ..Default::default()
        };
        let plan = plan_int8(&g, &opts).unwrap();
        // A range whose scale (1e7 / 127) is beyond FP16: stored FP32, Q/DQ kept FP32.
        apply_int8(&mut g, &plan, &HashMap::from([(x, 1e7), (a, 1.0)])).unwrap();
        let x_scale = g.constant(g.value_by_name("x_scale").unwrap()).unwrap();
        assert_eq!(x_scale.as_f32().unwrap(), &[1e7 / 127.0]);
        let fp16 = Fp16Options {
            half_qdq: true,
            ..Default::default()
        };
        let s = convert_fp16(&mut g, &fp16).unwrap();
        for node in ["x_QuantizeLinear", "x_DequantizeLinear"] {
            assert!(
                s.kept_fp32
                    .iter()
                    .any(|(n, why)| n == node && why.contains("FP16 guard")),
                "{node}: {:?}",
                s.kept_fp32
            );
        }
        // `a`'s pair is in FP16.
        assert!(!s.kept_fp32.iter().any(|(n, _)| n.starts_with("a_")));
        crate::infer_shapes(&mut g).unwrap();
        rtq_ir::verify(&g).unwrap();
    }
}
