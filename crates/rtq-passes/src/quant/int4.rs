//! INT4 weight-only quantization (NVIDIA ModelOpt's ONNX `int4` mode, TensorRT's
//! weight-only GEMMs): the constant weight of each MatMul and Gemm is stored as signed
//! INT4 with one scale per block of `block_size` input channels and output channel,
//! behind a `DequantizeLinear` with `block_size` (opset 21); activations stay in the
//! high-precision type. Scales are symmetric, `clip * max|w_block| / 7`, values rounded
//! half to even and clamped to [-8, 7].
//!
//! Activation-aware tuning (AWQ) is computed elsewhere from calibration activations and
//! handed in per node as an [`Int4Tuning`]: a per-input-channel scale `s` multiplies the
//! weight's rows before quantization and divides the activation (a `Mul` by `1 / s`
//! inserted before the node), and a clip ratio shrinks every block's range. Error
//! compensation (GPTQ) goes further and hands in the INT4 values and scales themselves.

use super::{NodeFilter, QuantError};
use rtq_ir::{int4_from_f64, Attr, DType, Graph, NodeId, ScaleFormat, Tensor, TensorData, ValueId};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// First default-domain opset with INT4 and blocked `DequantizeLinear`.
pub const INT4_OPSET: i64 = 21;

/// Block sizes `--int4-block-size` accepts (ModelOpt's and TensorRT's).
pub const INT4_BLOCK_SIZES: [usize; 3] = [32, 64, 128];

/// Largest INT4 magnitude the scale maps `max|w|` to (symmetric; -8 is reachable by
/// rounding only).
const QMAX: f32 = 7.0;

/// Options of the INT4 weight-only transform.
#[derive(Debug, Clone)]
pub struct Int4Options {
    /// Input channels sharing one scale.
    pub block_size: usize,
    /// Nodes to keep in float.
    pub exclude: NodeFilter,
    /// Type the scales must be exact in (FP16 or BF16 when the rest of the model is).
    pub scale_format: ScaleFormat,
}

impl Default for Int4Options {
    fn default() -> Self {
        Int4Options {
            block_size: 128,
            exclude: NodeFilter::default(),
            scale_format: ScaleFormat::F32,
        }
    }
}

/// A weight to quantize: input 1 of `node`, a constant `[K, N]` matrix (`[N, K]` when
/// `transposed`, Gemm's `transB`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Int4Site {
    /// The MatMul or Gemm.
    pub node: NodeId,
    /// Input channels (the reduction axis).
    pub k: usize,
    /// Output channels.
    pub n: usize,
    /// The weight is stored `[N, K]`.
    pub transposed: bool,
}

/// What [`apply_int4`] will quantize.
#[derive(Debug, Clone, Default)]
pub struct Int4Plan {
    /// The weights, in graph order.
    pub sites: Vec<Int4Site>,
    /// MatMul/Gemm nodes left in float, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// Activation-aware choices for one site (AWQ): see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Int4Tuning {
    /// Per-input-channel scale `s` (length K), or `None`.
    pub input_scale: Option<Vec<f32>>,
    /// Fraction of each block's largest magnitude the scale maps to 7: one ratio for
    /// every block, or one per block and output channel (`ceil(K / block) x N`,
    /// row-major); `[1.0]`: no clipping.
    pub clip: Vec<f32>,
    /// INT4 values and scales chosen elsewhere (GPTQ's error-compensating rounding of the
    /// weight times `input_scale`), in the layout [`quantize_int4_blocks`] returns; `None`:
    /// round to nearest with `clip`.
    pub precomputed: Option<(Vec<i8>, Vec<f32>)>,
}

impl Default for Int4Tuning {
    fn default() -> Self {
        Int4Tuning {
            input_scale: None,
            clip: vec![1.0],
            precomputed: None,
        }
    }
}

impl Int4Tuning {
    /// The mean clip ratio (for the report).
    pub fn mean_clip(&self) -> f32 {
        self.clip.iter().sum::<f32>() / self.clip.len().max(1) as f32
    }
}

/// One quantized weight in the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Int4Layer {
    /// Node name.
    pub node: String,
    /// `K x N`.
    pub shape: [usize; 2],
    /// Relative weight error `||W - deq(Q(W))|| / ||W||` (on the AWQ-scaled weight).
    pub weight_error: f64,
    /// Whether a per-input-channel scale was applied.
    pub awq_scaled: bool,
    /// The mean clip ratio over the blocks.
    pub clip: f32,
    /// Whether the values came precomputed (GPTQ) rather than rounded to nearest.
    pub gptq: bool,
}

/// What [`apply_int4`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Int4Summary {
    /// Block size.
    pub block_size: usize,
    /// Each quantized weight.
    pub layers: Vec<Int4Layer>,
    /// Nodes left in float, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// Finds the MatMul/Gemm nodes whose weight can be stored as INT4.
pub fn plan_int4(graph: &Graph, opts: &Int4Options) -> Result<Int4Plan, QuantError> {
    if !INT4_BLOCK_SIZES.contains(&opts.block_size) {
        return Err(QuantError::Options(format!(
            "INT4 block size {} (use 32, 64 or 128)",
            opts.block_size
        )));
    }
    let order = graph.topo_order().map_err(|e| QuantError::Node {
        node: graph.name.clone(),
        op: "graph".into(),
        message: e.to_string(),
    })?;
    let mut plan = Int4Plan::default();
    for id in order {
        let node = graph.node(id);
        if !matches!(node.op_type.as_str(), "MatMul" | "Gemm") {
            continue;
        }
        if opts.exclude.matches(node) {
            plan.skipped
                .push((node.name.clone(), "excluded by filter".into()));
            continue;
        }
        match site(graph, id) {
            Ok(s) => plan.sites.push(s),
            Err(why) => plan.skipped.push((node.name.clone(), why)),
        }
    }
    Ok(plan)
}

/// The site of `node` (a MatMul or Gemm), or why its weight stays in float.
fn site(graph: &Graph, id: NodeId) -> Result<Int4Site, String> {
    let node = graph.node(id);
    let x = node.input(0).ok_or("missing input 0")?;
    let w = node.input(1).ok_or("missing input 1")?;
    if graph.value(x).constant.is_some() || graph.value(x).dtype != Some(DType::F32) {
        return Err("input 0 is not a float activation".into());
    }
    let Some(weight) = graph.constant(w).filter(|t| t.dtype() == DType::F32) else {
        return Err("weight is not a float constant".into());
    };
    if weight.rank() != 2 {
        return Err(format!(
            "weight of rank {} (INT4 takes matrices)",
            weight.rank()
        ));
    }
    let gemm = node.op_type == "Gemm";
    if gemm && node.attr_int("transA", 0) != 0 {
        return Err("transA: the activation's channels are not its last axis".into());
    }
    let transposed = gemm && node.attr_int("transB", 0) != 0;
    let (r, c) = (weight.shape()[0], weight.shape()[1]);
    let (k, n) = if transposed { (c, r) } else { (r, c) };
    Ok(Int4Site {
        node: id,
        k,
        n,
        transposed,
    })
}

/// Blockwise INT4 quantization of a weight `w` (`[K, N]` row-major, `[N, K]` when
/// `transposed`): values, and scales shaped like the weight with the K axis reduced to
/// `ceil(K / block)` blocks. `clip` is one ratio, or one per block and output channel
/// (see [`Int4Tuning::clip`]).
pub fn quantize_int4_blocks(
    w: &[f32],
    site: &Int4Site,
    block: usize,
    clip: &[f32],
    format: ScaleFormat,
) -> (Vec<i8>, Vec<f32>) {
    let (k, n) = (site.k, site.n);
    let blocks = k.div_ceil(block);
    // Element (kk, nn) of the [K, N] view, and the index of its block's scale in the
    // stored layout ([blocks, N], or [N, blocks] when transposed).
    let at = |kk: usize, nn: usize| {
        if site.transposed {
            nn * k + kk
        } else {
            kk * n + nn
        }
    };
    let scale_at = |b: usize, nn: usize| {
        if site.transposed {
            nn * blocks + b
        } else {
            b * n + nn
        }
    };
    let mut scales = vec![1.0f32; blocks * n];
    for b in 0..blocks {
        for nn in 0..n {
            let amax = (b * block..((b + 1) * block).min(k))
                .map(|kk| w[at(kk, nn)].abs())
                .fold(0.0f32, f32::max);
            let ratio = if clip.len() == 1 {
                clip[0]
            } else {
                clip[b * n + nn]
            };
            if let Some(s) = int4_block_scale(amax, ratio, format) {
                scales[scale_at(b, nn)] = s;
            }
        }
    }
    let mut q = vec![0i8; w.len()];
    for kk in 0..k {
        for nn in 0..n {
            let s = scales[scale_at(kk / block, nn)];
            q[at(kk, nn)] = int4_from_f64(f64::from(w[at(kk, nn)] / s));
        }
    }
    (q, scales)
}

/// The scale of a block whose largest magnitude is `amax` with clip `ratio`:
/// `amax * ratio / 7` made exact in `format`; `None` when that is not a positive finite
/// value (an all-zero block, which then keeps the scale 1).
pub fn int4_block_scale(amax: f32, ratio: f32, format: ScaleFormat) -> Option<f32> {
    let s = format.round(amax * ratio / QMAX);
    (s.is_finite() && s > 0.0).then_some(s)
}

/// The weight [`quantize_int4_blocks`] stored as `q` with `scales`, dequantized (same
/// layout as the weight).
pub fn dequantize_int4_blocks(q: &[i8], scales: &[f32], site: &Int4Site, block: usize) -> Vec<f32> {
    let blocks = site.k.div_ceil(block);
    q.iter()
        .enumerate()
        .map(|(i, &v)| {
            let s = if site.transposed {
                let (kk, nn) = (i % site.k, i / site.k);
                scales[nn * blocks + kk / block]
            } else {
                let (kk, nn) = (i / site.n, i % site.n);
                scales[(kk / block) * site.n + nn]
            };
            f32::from(v) * s
        })
        .collect()
}

/// Rewrites `graph` per `plan`: every site's weight becomes INT4 behind a blocked
/// DequantizeLinear, with `tuning`'s input scale (a `Mul` before the node) and clip.
pub fn apply_int4(
    graph: &mut Graph,
    plan: &Int4Plan,
    opts: &Int4Options,
    tuning: &HashMap<NodeId, Int4Tuning>,
) -> Result<Int4Summary, QuantError> {
    let mut summary = Int4Summary {
        block_size: opts.block_size,
        skipped: plan.skipped.clone(),
        ..Default::default()
    };
    if !plan.sites.is_empty() {
        graph.opset = graph.opset.max(INT4_OPSET);
    }
    let default = Int4Tuning::default();
    for site in &plan.sites {
        let t = tuning.get(&site.node).unwrap_or(&default);
        let node = graph.node(site.node).clone();
        let w = node.input(1).expect("planned weight");
        let name = graph.value(w).name.clone();
        let tensor = graph.constant(w).expect("planned weight is constant");
        let mut data = tensor.as_f32().map_err(|e| QuantError::Node {
            node: node.name.clone(),
            op: node.op_type.clone(),
            message: format!("weight `{name}`: {e}"),
        })?;
        let shape = tensor.shape().to_vec();
        let scaled: Vec<f32>;
        if let Some(s) = &t.input_scale {
            scaled = scale_rows(data, site, s);
            data = &scaled;
        }
        let blocks = site.k.div_ceil(opts.block_size);
        let (q, scales) = match &t.precomputed {
            Some((q, scales)) => {
                if q.len() != data.len() || scales.len() != blocks * site.n {
                    return Err(QuantError::Node {
                        node: node.name.clone(),
                        op: node.op_type.clone(),
                        message: format!(
                            "precomputed INT4 weight of {} values and {} scales for a {}x{} \
                             weight in blocks of {}",
                            q.len(),
                            scales.len(),
                            site.k,
                            site.n,
                            opts.block_size
                        ),
                    });
                }
                (q.clone(), scales.clone())
            }
            None => quantize_int4_blocks(data, site, opts.block_size, &t.clip, opts.scale_format),
        };
        let weight_error = relative_error(data, &q, &scales, site, opts.block_size);
        let scale_shape = if site.transposed {
            vec![site.n, blocks]
        } else {
            vec![blocks, site.n]
        };
        let suffix = if t.input_scale.is_some() { "_awq" } else { "" };
        let qw = graph.add_constant(
            &format!("{name}{suffix}_int4"),
            Tensor::new(shape.clone(), TensorData::I4(q)).expect("same shape"),
        );
        let scale = graph.add_constant(
            &format!("{name}{suffix}_int4_scale"),
            Tensor::from_f32(scale_shape, scales),
        );
        let dq = graph.add_value(
            &format!("{name}{suffix}_dequantized"),
            Some(DType::F32),
            graph.value(w).shape.clone(),
        );
        let mut attrs = BTreeMap::new();
        attrs.insert(
            "axis".to_string(),
            Attr::Int(if site.transposed { 1 } else { 0 }),
        );
        attrs.insert("block_size".to_string(), Attr::Int(opts.block_size as i64));
        graph.add_node(
            &format!("{name}{suffix}_DequantizeLinear"),
            "DequantizeLinear",
            vec![Some(qw), Some(scale)],
            vec![dq],
            attrs,
        );
        graph.node_mut(site.node).inputs[1] = Some(dq);
        if let Some(s) = &t.input_scale {
            divide_activation(graph, site.node, s);
        }
        summary.layers.push(Int4Layer {
            node: node.name.clone(),
            shape: [site.k, site.n],
            weight_error,
            awq_scaled: t.input_scale.is_some(),
            clip: t.mean_clip(),
            gptq: t.precomputed.is_some(),
        });
    }
    Ok(summary)
}

/// The weight with row `k` of its `[K, N]` view multiplied by `s[k]`.
pub fn scale_rows(w: &[f32], site: &Int4Site, s: &[f32]) -> Vec<f32> {
    let mut out = w.to_vec();
    for (i, v) in out.iter_mut().enumerate() {
        let k = if site.transposed {
            i % site.k
        } else {
            i / site.n
        };
        *v *= s[k];
    }
    out
}

/// `||w - deq(q)|| / ||w||` over the weight.
fn relative_error(w: &[f32], q: &[i8], scales: &[f32], site: &Int4Site, block: usize) -> f64 {
    let (mut err, mut energy) = (0.0f64, 0.0f64);
    for (&x, d) in w.iter().zip(dequantize_int4_blocks(q, scales, site, block)) {
        err += ((x - d) as f64).powi(2);
        energy += (x as f64).powi(2);
    }
    if energy > 0.0 {
        (err / energy).sqrt()
    } else {
        0.0
    }
}

/// Inserts `x * (1 / s)` before input 0 of `node` (the activation's last axis is K).
fn divide_activation(graph: &mut Graph, node: NodeId, s: &[f32]) {
    let x = graph.node(node).input(0).expect("planned activation");
    let name = graph.node(node).name.clone();
    let inverse = graph.add_constant(
        &format!("{name}_awq_inverse_scale"),
        Tensor::from_f32(vec![s.len()], s.iter().map(|&v| 1.0 / v).collect()),
    );
    let scaled = graph.add_value(
        &format!("{name}_awq_input"),
        Some(DType::F32),
        graph.value(x).shape.clone(),
    );
    graph.add_node(
        &format!("{name}_awq_scale"),
        "Mul",
        vec![Some(x), Some(inverse)],
        vec![scaled],
        BTreeMap::new(),
    );
    graph.node_mut(node).inputs[0] = Some(scaled);
}

/// The activation input of every site, by node (what AWQ measures).
pub fn int4_activations(graph: &Graph, plan: &Int4Plan) -> Vec<(NodeId, ValueId)> {
    plan.sites
        .iter()
        .filter_map(|s| graph.node(s.node).input(0).map(|x| (s.node, x)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::Dim;

    /// x[2, K] -> MatMul(w [K, N]) -> y ; y -> Gemm(w2 [N2, N], transB) -> z
    fn graph(k: usize, n: usize) -> Graph {
        let mut g = Graph::new("g", 17);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(2), Dim::Known(k)]);
        let w: Vec<f32> = (0..k * n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let w = g.add_constant("w", Tensor::from_f32(vec![k, n], w));
        let y = g.add_value(
            "y",
            Some(DType::F32),
            Some(vec![Dim::Known(2), Dim::Known(n)]),
        );
        g.add_node(
            "mm",
            "MatMul",
            vec![Some(x), Some(w)],
            vec![y],
            BTreeMap::new(),
        );
        let w2: Vec<f32> = (0..3 * n).map(|i| (i as f32 * 0.37).sin()).collect();
        let w2 = g.add_constant("w2", Tensor::from_f32(vec![3, n], w2));
        let z = g.add_value(
            "z",
            Some(DType::F32),
            Some(vec![Dim::Known(2), Dim::Known(3)]),
        );
        let mut attrs = BTreeMap::new();
        attrs.insert("transB".to_string(), Attr::Int(1));
        g.add_node("gemm", "Gemm", vec![Some(y), Some(w2)], vec![z], attrs);
        g.outputs.push(z);
        g
    }

    #[test]
    fn blocks_follow_k_in_both_layouts() {
        let g = graph(40, 5);
        let opts = Int4Options {
            block_size: 32,
            ..Default::default()
        };
        let plan = plan_int4(&g, &opts).unwrap();
        assert_eq!(plan.sites.len(), 2);
        assert_eq!(
            (plan.sites[0].k, plan.sites[0].n, plan.sites[0].transposed),
            (40, 5, false)
        );
        assert_eq!(
            (plan.sites[1].k, plan.sites[1].n, plan.sites[1].transposed),
            (5, 3, true)
        );
        // [K=40, N=5] in blocks of 32: 2 blocks x 5 columns; the second holds 8 rows.
        let w = g
            .constant(g.value_by_name("w").unwrap())
            .unwrap()
            .to_f32_vec();
        let (q, s) = quantize_int4_blocks(&w, &plan.sites[0], 32, &[1.0], ScaleFormat::F32);
        assert_eq!(s.len(), 10);
        for nn in 0..5 {
            let amax = (32..40).map(|kk| w[kk * 5 + nn].abs()).fold(0.0, f32::max);
            assert_eq!(s[5 + nn], amax / 7.0);
            // The largest value of each block lands on +-7.
            assert!((32..40).any(|kk| q[kk * 5 + nn].abs() == 7));
        }
        assert!(q.iter().all(|&v| (-8..=7).contains(&v)));
    }

    #[test]
    fn apply_writes_blocked_dequantize_and_awq_mul() {
        let mut g = graph(64, 4);
        let opts = Int4Options {
            block_size: 32,
            ..Default::default()
        };
        let plan = plan_int4(&g, &opts).unwrap();
        let s: Vec<f32> = (0..64).map(|i| 1.0 + i as f32 / 64.0).collect();
        let tuning = HashMap::from([(
            plan.sites[0].node,
            Int4Tuning {
                input_scale: Some(s.clone()),
                clip: vec![0.9],
                precomputed: None,
            },
        )]);
        let summary = apply_int4(&mut g, &plan, &opts, &tuning).unwrap();
        rtq_ir::verify(&g).unwrap();
        assert_eq!(g.opset, INT4_OPSET);
        assert_eq!(summary.layers.len(), 2);
        assert!(summary.layers[0].awq_scaled && summary.layers[0].clip == 0.9);
        assert!(summary
            .layers
            .iter()
            .all(|l| l.weight_error > 0.0 && l.weight_error < 0.2));
        let dq = g
            .nodes()
            .find(|(_, n)| n.name == "w_awq_DequantizeLinear")
            .unwrap()
            .1;
        assert_eq!(dq.attr_int("block_size", 0), 32);
        assert_eq!(dq.attr_int("axis", -1), 0);
        let q = g.constant(dq.input(0).unwrap()).unwrap();
        assert_eq!(q.dtype(), DType::I4);
        let scale = g.constant(dq.input(1).unwrap()).unwrap();
        assert_eq!(scale.shape(), &[2, 4]);
        // The Gemm's transposed weight [3, 4] blocks along axis 1: K = 4 < 32, one block.
        let dq2 = g
            .nodes()
            .find(|(_, n)| n.name == "w2_DequantizeLinear")
            .unwrap()
            .1;
        assert_eq!(dq2.attr_int("axis", -1), 1);
        assert_eq!(g.constant(dq2.input(1).unwrap()).unwrap().shape(), &[3, 1]);
        // The MatMul reads x / s.
        let mul = g.nodes().find(|(_, n)| n.name == "mm_awq_scale").unwrap().1;
        let inv = g.constant(mul.input(1).unwrap()).unwrap().to_f32_vec();
        assert_eq!(inv[63], 1.0 / s[63]);
    }

    #[test]
    fn bad_block_sizes_and_non_matrix_weights_are_refused_or_skipped() {
        let g = graph(8, 2);
        let err = plan_int4(
            &g,
            &Int4Options {
                block_size: 48,
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("48"), "{err}");
        let opts = Int4Options {
            exclude: NodeFilter {
                names: vec!["gemm".into()],
                op_types: vec![],
            },
            ..Default::default()
        };
        let plan = plan_int4(&g, &opts).unwrap();
        assert_eq!(plan.sites.len(), 1);
        assert_eq!(
            plan.skipped,
            vec![("gemm".into(), "excluded by filter".into())]
        );
    }

    #[test]
    fn precomputed_values_are_written_as_given() {
        let mut g = graph(40, 5);
        let opts = Int4Options {
            block_size: 32,
            ..Default::default()
        };
        let plan = plan_int4(&g, &opts).unwrap();
        let q: Vec<i8> = (0..200).map(|i| (i % 16) as i8 - 8).collect();
        let scales: Vec<f32> = (0..10).map(|i| 0.01 * (i + 1) as f32).collect();
        let mut tuning = HashMap::from([(
            plan.sites[0].node,
            Int4Tuning {
                precomputed: Some((q.clone(), scales.clone())),
                ..Default::default()
            },
        )]);
        let summary = apply_int4(&mut g.clone(), &plan, &opts, &tuning).unwrap();
        assert!(summary.layers[0].gptq && !summary.layers[1].gptq);
        apply_int4(&mut g, &plan, &opts, &tuning).unwrap();
        let dq = g
            .nodes()
            .find(|(_, n)| n.name == "w_DequantizeLinear")
            .unwrap()
            .1;
        let got = g.constant(dq.input(0).unwrap()).unwrap();
        assert_eq!(got.data(), &TensorData::I4(q));
        assert_eq!(
            g.constant(dq.input(1).unwrap()).unwrap().to_f32_vec(),
            scales
        );
        // Values that do not fit the weight are refused.
        tuning.get_mut(&plan.sites[0].node).unwrap().precomputed = Some((vec![0; 3], vec![1.0]));
        let mut g = graph(40, 5);
        assert!(apply_int4(&mut g, &plan, &opts, &tuning).is_err());
    }
}
