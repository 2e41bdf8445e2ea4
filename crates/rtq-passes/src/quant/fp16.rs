//! Half-precision conversion: float weights and activations to FP16 (or BF16, see
//! [`Fp16Options::half`]), with the ops that need FP32 kept there and values beyond
//! the half type's range guarded.

use super::{NodeFilter, QuantError};
use rtq_ir::{Attr, DType, Graph, NodeId, Tensor, ValueId};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Largest finite FP16 value.
pub const FP16_MAX: f32 = 65504.0;

/// Largest finite value of half type `half` (FP16 or BF16).
fn half_max(half: DType) -> f32 {
    match half {
        DType::BF16 => half::bf16::MAX.to_f32(),
        _ => FP16_MAX,
    }
}

/// Name of half type `half` in value names and messages (`fp16`, `bf16`).
fn half_name(half: DType) -> &'static str {
    match half {
        DType::BF16 => "bf16",
        _ => "fp16",
    }
}

/// Ops kept in FP32: numerically fragile (exponentials, powers, long reductions,
/// normalisations whose variance overflows FP16, recurrent layers whose state
/// accumulates over the sequence — onnxruntime's CPU provider has no FP16 kernels for
/// them either), index/shape producing, defined on float32 only, or control flow (whose
/// bodies are not converted).
const KEEP_FP32_OPS: &[&str] = &[
    "Exp",
    "Log",
    "Pow",
    "Sqrt",
    "Reciprocal",
    "Erf",
    "ReduceSum",
    "ReduceSumSquare",
    "ReduceL2",
    "ReduceLogSumExp",
    "ReduceProd",
    "ReduceMean",
    "LayerNormalization",
    "InstanceNormalization",
    "GroupNormalization",
    "LpNormalization",
    "CumSum",
    "Range",
    "TopK",
    "NonMaxSuppression",
    "NonZero",
    "RoiAlign",
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "Einsum",
    "LSTM",
    "GRU",
    "RNN",
    // Control flow: bodies stay FP32, their captured inputs are cast to it.
    "If",
    "Loop",
    "Scan",
];

/// Q/DQ ops, which compute in half precision in mixed INT8/FP16 builds
/// ([`Fp16Options::half_qdq`]).
const QDQ_OPS: &[&str] = &["QuantizeLinear", "DequantizeLinear"];

/// The first default-domain opset whose QuantizeLinear/DequantizeLinear take FP16
/// inputs and scales.
pub const HALF_QDQ_OPSET: i64 = 19;

/// The first default-domain opset where Conv, ConvTranspose, pooling and most
/// activations are defined on bfloat16 (ONNX 1.17).
pub const BF16_OPSET: i64 = 22;

/// Inputs that ONNX requires to stay float32 whatever the data type (op, slot).
const FLOAT32_ONLY_INPUTS: &[(&str, usize)] = &[("Resize", 1), ("Resize", 2), ("Upsample", 1)];

/// Options of the FP16 transform.
#[derive(Debug, Clone)]
pub struct Fp16Options {
    /// Nodes to keep in FP32 beyond the built-in list.
    pub exclude: NodeFilter,
    /// Keep graph inputs and outputs FP32 (Casts at the boundary).
    pub keep_io_types: bool,
    /// Largest magnitude each tensor reached in an FP32 run on calibration data, when
    /// known: nodes producing values beyond `overflow_margin * 65504` stay FP32.
    pub observed_absmax: HashMap<ValueId, f32>,
    /// Fraction of the FP16 range an activation may use before its node stays FP32.
    pub overflow_margin: f32,
    /// Convert QuantizeLinear/DequantizeLinear too (FP16 data and scales, opset
    /// [`HALF_QDQ_OPSET`]): a mixed INT8/FP16 build, where whatever is not INT8 is
    /// FP16. Their scales should already be exact in FP16 (see
    /// [`super::ScaleFormat::F16`]); otherwise they are rounded to nearest.
    pub half_qdq: bool,
    /// The half type: [`DType::F16`] (default) or [`DType::BF16`] (FP32's range with
    /// 8 significant bits: the overflow guard and weight clamping then only apply at
    /// BF16's own limit).
    pub half: DType,
}

impl Default for Fp16Options {
    fn default() -> Self {
        Fp16Options {
            exclude: NodeFilter::default(),
            keep_io_types: true,
            observed_absmax: HashMap::new(),
            overflow_margin: 0.5,
            half_qdq: false,
            half: DType::F16,
        }
    }
}

/// What the FP16 transform did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Fp16Summary {
    /// Nodes now computing in FP16.
    pub fp16_nodes: usize,
    /// Nodes kept in FP32, with the reason.
    pub kept_fp32: Vec<(String, String)>,
    /// Cast nodes inserted.
    pub casts: usize,
    /// Constants converted.
    pub constants: usize,
    /// Weight values clamped to ±65504.
    pub clamped_values: usize,
    /// Non-zero weight values that flush to zero in FP16.
    pub underflowed_values: usize,
}

fn is_f32(graph: &Graph, v: ValueId) -> bool {
    graph.value(v).dtype == Some(DType::F32)
}

/// Converts the graph to FP16 in place.
pub fn convert_fp16(graph: &mut Graph, opts: &Fp16Options) -> Result<Fp16Summary, QuantError> {
    let order = graph.topo_order().map_err(|e| QuantError::Node {
        node: graph.name.clone(),
        op: "graph".into(),
        message: e.to_string(),
    })?;
    let mut summary = Fp16Summary::default();
    let half = opts.half;
    let guard = format!("{} guard", half_name(half).to_uppercase());
    if !opts.keep_io_types {
        for i in graph.inputs.clone() {
            if is_f32(graph, i) {
                graph.value_mut(i).dtype = Some(half);
            }
        }
    }
    // 1. Decide each node's precision.
    let limit = opts.overflow_margin * half_max(half);
    let mut half_nodes: HashSet<NodeId> = HashSet::new();
    for &id in &order {
        let node = graph.node(id);
        let touches_float = node
            .inputs
            .iter()
            .flatten()
            .chain(node.outputs.iter())
            .any(|&v| is_f32(graph, v))
            || (node.op_type == "Cast" && node.attr_int("to", 0) == DType::F32.onnx_code() as i64);
        if !touches_float {
            continue;
        }
        let op = node.op_type.as_str();
        let kept_op = KEEP_FP32_OPS.contains(&op) && !(opts.half_qdq && QDQ_OPS.contains(&op));
        let reason = if kept_op {
            Some("op is kept in FP32".to_string())
        } else if opts.exclude.matches(node) {
            Some("excluded by filter".to_string())
        } else {
            let qdq = QDQ_OPS
                .contains(&op)
                .then(|| half_qdq_obstacle(graph, id, limit, &guard));
            qdq.flatten().or_else(|| {
                node.outputs.iter().find_map(|o| {
                    opts.observed_absmax
                        .get(o)
                        .filter(|&&m| m > limit)
                        .map(|m| {
                            format!(
                                "output `{}` reaches {m:.1}, beyond the {guard} {limit:.0}",
                                graph.value(*o).name
                            )
                        })
                })
            })
        };
        match reason {
            Some(r) => summary.kept_fp32.push((node.name.clone(), r)),
            None => {
                half_nodes.insert(id);
            }
        }
    }

    // 2. Retype node outputs and Casts of half nodes.
    for &id in &order {
        if !half_nodes.contains(&id) {
            continue;
        }
        summary.fp16_nodes += 1;
        let node = graph.node(id).clone();
        if QDQ_OPS.contains(&node.op_type.as_str()) {
            // Half-precision Q/DQ only exist from this opset on.
            graph.opset = graph.opset.max(HALF_QDQ_OPSET);
        }
        if half == DType::BF16 {
            // Conv, pooling and most activations take bfloat16 from this opset on.
            graph.opset = graph.opset.max(BF16_OPSET);
        }
        if node.outputs.iter().any(|&o| is_f32(graph, o)) || node.op_type == "Cast" {
            let input_is_float = node.input(0).is_some_and(
                |v| matches!(graph.value(v).dtype, Some(t) if t == DType::F32 || t == half),
            );
            retype_attrs(graph.node_mut(id), input_is_float, half);
        }
        for &o in &node.outputs {
            if is_f32(graph, o) {
                graph.value_mut(o).dtype = Some(half);
            }
        }
    }

    // 3. Fix every float edge whose precision differs from what its reader computes in.
    let mut half_consts: HashMap<ValueId, ValueId> = HashMap::new();
    let mut casts: HashMap<(ValueId, DType), ValueId> = HashMap::new();
    for &id in &order {
        let node = graph.node(id).clone();
        let wants_half = half_nodes.contains(&id);
        for (slot, input) in node.inputs.iter().enumerate() {
            let Some(v) = *input else { continue };
            let dtype = graph.value(v).dtype;
            if !matches!(dtype, Some(t) if t == DType::F32 || t == half) {
                continue;
            }
            let slot_half =
                wants_half && !FLOAT32_ONLY_INPUTS.contains(&(node.op_type.as_str(), slot));
            let target = if slot_half { half } else { DType::F32 };
            if dtype == Some(target) {
                continue;
            }
            let constant = graph.constant(v).filter(|_| target == half).cloned();
            let replacement = if let Some(t) = constant {
                // A float constant read in half precision: store a converted copy.
                match half_consts.get(&v) {
                    Some(&c) => c,
                    None => {
                        let (converted, clamped, underflowed) = to_half(&t, half);
                        summary.clamped_values += clamped;
                        summary.underflowed_values += underflowed;
                        summary.constants += 1;
                        let name = format!("{}_{}", graph.value(v).name, half_name(half));
                        let c = graph.add_constant(&name, converted);
                        half_consts.insert(v, c);
                        c
                    }
                }
            } else {
                match casts.get(&(v, target)) {
                    Some(&c) => c,
                    None => {
                        let c = insert_cast(graph, v, target);
                        summary.casts += 1;
                        casts.insert((v, target), c);
                        c
                    }
                }
            };
            graph.node_mut(id).inputs[slot] = Some(replacement);
        }
    }

    // 4. Keep the interface in FP32: outputs computed in half get a final Cast that
    //    takes over the output's name.
    if opts.keep_io_types {
        for i in 0..graph.outputs.len() {
            let out = graph.outputs[i];
            if graph.value(out).dtype != Some(half) || graph.value(out).constant.is_some() {
                continue;
            }
            let name = graph.value(out).name.clone();
            let cast_out = insert_cast(graph, out, DType::F32);
            summary.casts += 1;
            let fresh = graph.fresh_value_name(&format!("{name}_{}", half_name(half)));
            graph.rename_value(out, &fresh).ok();
            graph
                .rename_value(cast_out, &name)
                .map_err(|e| QuantError::Node {
                    node: name.clone(),
                    op: "Cast".into(),
                    message: e.to_string(),
                })?;
            graph.outputs[i] = cast_out;
        }
    }
    Ok(summary)
}

/// Why Q/DQ node `id` cannot compute in FP16, if it cannot: its float side spans
/// `(quantized extreme - zero point) * scale`, which must stay within `limit`, and
/// only constant scales and zero points of INT8, UINT8, FP8 E4M3 and INT4 are judged.
fn half_qdq_obstacle(graph: &Graph, id: NodeId, limit: f32, guard: &str) -> Option<String> {
    let node = graph.node(id);
    let constant = |slot: usize| node.input(slot).and_then(|v| graph.constant(v));
    let Some(scale) = constant(1) else {
        return Some("its scale is not a constant".into());
    };
    let int_type = match node.op_type.as_str() {
        "DequantizeLinear" => node.input(0).and_then(|v| graph.value(v).dtype),
        _ => graph.value(node.outputs[0]).dtype,
    };
    let (lo, hi) = match int_type {
        Some(DType::I8) => (-128.0f32, 127.0f32),
        Some(DType::U8) => (0.0, 255.0),
        Some(DType::F8E4M3) => (-448.0, 448.0),
        Some(DType::I4) => (-8.0, 7.0),
        other => {
            return Some(format!(
                "only 8-bit and INT4 Q/DQ run in FP16, not {other:?}"
            ))
        }
    };
    let zero_points = constant(2).map(|z| z.to_f32_vec()).unwrap_or_default();
    let scales = scale.to_f32_vec();
    let span = scales.iter().enumerate().fold(0.0f32, |m, (i, s)| {
        let zp = zero_points
            .get(i)
            .or(zero_points.first())
            .copied()
            .unwrap_or(0.0);
        m.max((hi - zp).abs().max((lo - zp).abs()) * s.abs())
    });
    (span > limit)
        .then(|| format!("its quantization range reaches {span:.1}, beyond the {guard} {limit:.0}"))
}

/// Adds `Cast(v, to)` and returns its output.
fn insert_cast(graph: &mut Graph, v: ValueId, to: DType) -> ValueId {
    let name = graph.value(v).name.clone();
    let suffix = if to == DType::F32 {
        "fp32"
    } else {
        half_name(to)
    };
    let out = graph.add_value(
        &format!("{name}_to_{suffix}"),
        Some(to),
        graph.value(v).shape.clone(),
    );
    let mut attrs = BTreeMap::new();
    attrs.insert("to".to_string(), Attr::Int(to.onnx_code() as i64));
    graph.add_node(
        &format!("{name}_cast_{suffix}"),
        "Cast",
        vec![Some(v)],
        vec![out],
        attrs,
    );
    out
}

/// Rewrites the attributes that set the element type of a node's output, for a node
/// whose float32 outputs become `half` (float16 or bfloat16): `Cast`'s `to`; the `value` tensor of
/// `Constant`/`ConstantOfShape` (ConstantOfShape's default is a float32 zero); the
/// `dtype` of `EyeLike`, the `Random*` generators and `Bernoulli` (whose `*Like` forms
/// and EyeLike otherwise follow their input, float only if `input_is_float`).
fn retype_attrs(node: &mut rtq_ir::Node, input_is_float: bool, half: DType) {
    let (f32_code, f16_code) = (DType::F32.onnx_code() as i64, half.onnx_code() as i64);
    let op = node.op_type.as_str();
    match op {
        "Cast" if node.attr_int("to", 0) == f32_code => {
            node.attrs.insert("to".into(), Attr::Int(f16_code));
        }
        "Constant" | "ConstantOfShape" => {
            let converted = match node.attrs.get("value") {
                Some(Attr::Tensor(t)) if t.dtype() == DType::F32 => Some(to_half(t, half).0),
                None if op == "ConstantOfShape" => {
                    let zero = Tensor::new(vec![1], rtq_ir::TensorData::zeros(half, 1));
                    Some(zero.expect("one value"))
                }
                _ => None,
            };
            if let Some(t) = converted {
                node.attrs.insert("value".into(), Attr::Tensor(t));
            }
        }
        "EyeLike" | "RandomNormal" | "RandomUniform" | "RandomNormalLike" | "RandomUniformLike"
        | "Bernoulli" => {
            let follows_input = op.ends_with("Like") || op == "Bernoulli";
            let dtype = match node.attrs.get("dtype") {
                Some(Attr::Int(code)) => Some(*code),
                _ => None,
            };
            let float_out = match dtype {
                Some(code) => code == f32_code,
                None => !follows_input || input_is_float,
            };
            if float_out {
                node.attrs.insert("dtype".into(), Attr::Int(f16_code));
            }
        }
        _ => {}
    }
}

/// Converts an f32 tensor to `half` (FP16 or BF16), clamping to its largest finite
/// value; returns (tensor, clamped, underflowed).
fn to_half(t: &Tensor, half: DType) -> (Tensor, usize, usize) {
    let max = half_max(half);
    let mut clamped = 0;
    let clamp = |x: f32| {
        if x.is_finite() && x.abs() > max {
            clamped += 1;
            x.signum() * max
        } else {
            x
        }
    };
    let values: Vec<f32> = t.to_f32_vec().into_iter().map(clamp).collect();
    let tensor = Tensor::from_f32(t.shape().to_vec(), values.clone()).cast(half);
    let underflowed = values
        .iter()
        .zip(tensor.to_f32_vec())
        .filter(|&(&y, h)| y != 0.0 && h == 0.0)
        .count();
    (tensor, clamped, underflowed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Pass;
    use rtq_ir::Dim;

    fn graph() -> (Graph, ValueId) {
        // x -> Conv(w) -> c -> Exp -> e -> Relu -> y
        let mut g = Graph::new("g", 13);
        let shape = vec![Dim::Known(1), Dim::Known(1), Dim::Known(2), Dim::Known(2)];
        let x = g.add_input("x", DType::F32, shape.clone());
        let w = g.add_constant("w", Tensor::from_f32(vec![1, 1, 1, 1], vec![1e6]));
        let c = g.add_value("c", Some(DType::F32), Some(shape.clone()));
        g.add_node(
            "conv",
            "Conv",
            vec![Some(x), Some(w)],
            vec![c],
            BTreeMap::new(),
        );
        let e = g.add_value("e", Some(DType::F32), Some(shape.clone()));
        g.add_node("exp", "Exp", vec![Some(c)], vec![e], BTreeMap::new());
        let y = g.add_value("y", Some(DType::F32), Some(shape));
        g.add_node("relu", "Relu", vec![Some(e)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        (g, c)
    }

    #[test]
    fn bf16_keeps_large_values_and_raises_the_opset() {
        // The FP16 graph's 1e6 weight is clamped to 65504 there; BF16 holds it.
        let (mut g, _) = graph();
        let opts = Fp16Options {
            half: DType::BF16,
            ..Default::default()
        };
        let s = convert_fp16(&mut g, &opts).unwrap();
        assert_eq!(s.clamped_values, 0);
        assert_eq!(g.opset, BF16_OPSET);
        let w = g.constant(g.value_by_name("w_bf16").unwrap()).unwrap();
        assert_eq!(w.dtype(), DType::BF16);
        assert_eq!(w.to_f32_vec(), vec![half::bf16::from_f32(1e6).to_f32()]);
        let c = g.value_by_name("c").unwrap();
        assert_eq!(g.value(c).dtype, Some(DType::BF16));
        crate::infer_shapes(&mut g).unwrap();
        rtq_ir::verify(&g).unwrap();
    }

    #[test]
    fn converts_weights_keeps_blocked_ops_and_interface() {
        let (mut g, c) = graph();
        let s = convert_fp16(&mut g, &Fp16Options::default()).unwrap();
        rtq_ir::verify(&g).unwrap();
        assert_eq!(s.fp16_nodes, 2, "conv and relu");
        assert_eq!(s.kept_fp32.len(), 1, "exp");
        assert_eq!(s.clamped_values, 1);
        assert_eq!(g.value(c).dtype, Some(DType::F16));
        // Interface unchanged: input and output are still float with their names.
        assert_eq!(g.value(g.inputs[0]).dtype, Some(DType::F32));
        let out = g.outputs[0];
        assert_eq!(g.value(out).name, "y");
        assert_eq!(g.value(out).dtype, Some(DType::F32));
        // Casts: x->fp16, c->fp32 (for Exp), e->fp16 (for Relu), y->fp32.
        assert_eq!(s.casts, 4);
        let w16 = g.constant(g.value_by_name("w_fp16").unwrap()).unwrap();
        assert_eq!(w16.dtype(), DType::F16);
        assert_eq!(w16.to_f32_vec(), vec![FP16_MAX]);
    }

    #[test]
    fn type_setting_attributes_follow_the_output_to_half() {
        // shape -> ConstantOfShape(value=2.5f32) -> c ; c + x -> y
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(2), Dim::Known(3)]);
        let shape = g.add_constant("shape", Tensor::from_i64(vec![2], vec![2, 3]));
        let c = g.add_value("c", Some(DType::F32), None);
        let mut attrs = BTreeMap::new();
        attrs.insert(
            "value".to_string(),
            Attr::Tensor(Tensor::from_f32(vec![1], vec![2.5])),
        );
        let fill = g.add_node("fill", "ConstantOfShape", vec![Some(shape)], vec![c], attrs);
        let d = g.add_value("d", Some(DType::F32), None);
        let zeros = g.add_node(
            "zeros",
            "ConstantOfShape",
            vec![Some(shape)],
            vec![d],
            BTreeMap::new(),
        );
        let e = g.add_value("e", Some(DType::F32), None);
        let eye = g.add_node("eye", "EyeLike", vec![Some(x)], vec![e], BTreeMap::new());
        let s1 = g.add_value("s1", Some(DType::F32), None);
        g.add_node(
            "add1",
            "Add",
            vec![Some(c), Some(d)],
            vec![s1],
            BTreeMap::new(),
        );
        let y = g.add_value("y", Some(DType::F32), None);
        g.add_node(
            "add2",
            "Add",
            vec![Some(s1), Some(e)],
            vec![y],
            BTreeMap::new(),
        );
        g.outputs.push(y);
        convert_fp16(&mut g, &Fp16Options::default()).unwrap();
        let value = |n: NodeId| match g.node(n).attrs.get("value") {
            Some(Attr::Tensor(t)) => (t.dtype(), t.to_f32_vec()),
            other => panic!("{other:?}"),
        };
        assert_eq!(value(fill), (DType::F16, vec![2.5]));
        assert_eq!(value(zeros), (DType::F16, vec![0.0]));
        assert_eq!(
            g.node(eye).attr_int("dtype", 0),
            DType::F16.onnx_code() as i64
        );
        assert_eq!(g.value(c).dtype, Some(DType::F16));
        // Shape inference agrees with the declared types.
        crate::InferShapes.run(&mut g).unwrap();
    }

    #[test]
    fn observed_overflow_keeps_node_fp32() {
        let (mut g, c) = graph();
        let opts = Fp16Options {
            observed_absmax: HashMap::from([(c, 1e5)]),
            ..Default::default()
        };
        let s = convert_fp16(&mut g, &opts).unwrap();
        assert!(
            s.kept_fp32
                .iter()
                .any(|(n, r)| n == "conv" && r.contains("FP16 guard")),
            "{:?}",
            s.kept_fp32
        );
        assert_eq!(g.value(c).dtype, Some(DType::F32));
    }
}
