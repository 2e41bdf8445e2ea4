//! Lowering Q/DQ patterns to integer kernels, for running a quantized model on the CPU.
//!
//! A Q/DQ model states its INT8 arithmetic as `DequantizeLinear` nodes in front of float
//! ops. Executed as written, every such op dequantizes and runs in f32, slower than the
//! FP32 model. This rewrite finds the patterns a backend runs in integers (as
//! TensorRT and onnxruntime do) and replaces the float op by an integer one (see
//! [`crate::ops::integer`]):
//!
//! * `Conv(DQ(Xq, sx), DQ(Wq, sw), B?)`, group 1 or one input channel per group
//!   (depthwise, at most 1024 taps) → `IntegerConv(Xq, sx, Wq, sw, B?)`;
//! * `ConvTranspose(DQ(Xq, sx), DQ(Wq, sw), B?)`, 2-D, group 1, strides equal to the
//!   kernel, no padding or dilation (windows that do not overlap, as in upsampling
//!   heads) → `IntegerConvTranspose`;
//! * `MatMul(DQ(Xq, sx), DQ(Wq, sw))` with a constant matrix `Wq` → `IntegerMatMul`;
//! * `Gemm(DQ(Xq, sx), DQ(Wq, sw), C?)` (no transA, alpha = beta = 1, C a constant
//!   per-column bias) → `IntegerMatMul` with `transB`.
//!
//! Conditions: `Xq` INT8 with a constant scalar scale; `Wq` a constant INT8 tensor with a
//! constant scale per tensor or per output channel (on the output-channel axis); zero
//! points absent or zero; the float op's output f32. The dequantize nodes are left for
//! dead-code elimination once nothing reads them. The result is exact integer
//! arithmetic (INT32 accumulation); it differs from the float emulation by the f32
//! rounding of the latter only.

use crate::igemm::Isa;
use crate::ops::integer::{INTEGER_DOMAIN, ISA_ATTR};
use crate::registry::is_default_domain;
use rtq_ir::{Attr, DType, Graph, Node, NodeId, Tensor, TensorData, ValueId};

/// Largest inner dimension lowered: INT32 accumulators of INT8 products stay exact
/// below it (with VNNI's +128 offset).
const MAX_DEPTH: usize = 1 << 16;

/// Most taps of a lowered depthwise convolution (its sums are computed exactly in f32).
const MAX_DEPTHWISE_TAPS: usize = crate::ops::integer_depthwise::MAX_TAPS;

/// Rewrites every pattern of `graph` (not inside control-flow bodies) into integer ops
/// whose weights are packed for `isa`; returns the names of the rewritten nodes.
pub fn lower_to_integer(graph: &mut Graph, isa: Isa) -> Vec<String> {
    let mut lowered = Vec::new();
    for id in graph.node_ids() {
        let node = graph.node(id);
        if !is_default_domain(&node.domain) {
            continue;
        }
        let rewrite = match node.op_type.as_str() {
            "Conv" => conv(graph, id),
            "ConvTranspose" => conv_transpose(graph, id),
            "MatMul" => matmul(graph, id),
            "Gemm" => gemm(graph, id),
            _ => None,
        };
        let Some((op, inputs, trans_b)) = rewrite else {
            continue;
        };
        let node = graph.node_mut(id);
        node.op_type = op.to_string();
        node.domain = INTEGER_DOMAIN.to_string();
        node.inputs = inputs;
        for name in ["alpha", "beta", "transA", "transB"] {
            node.attrs.remove(name);
        }
        if trans_b {
            node.attrs.insert("transB".into(), Attr::Int(1));
        }
        node.attrs
            .insert(ISA_ATTR.into(), Attr::String(isa.name().into()));
        lowered.push(node.name.clone());
    }
    lowered
}

/// The new op, its inputs and whether its weights are transposed.
type Rewrite = (&'static str, Vec<Option<ValueId>>, bool);

/// `(Xq, sx)` when `v` is `DequantizeLinear(Xq, sx)` of INT8 data with a scalar
/// constant scale and no (or a zero) zero point.
fn dequantized_activation(graph: &Graph, v: ValueId) -> Option<(ValueId, ValueId)> {
    let (xq, sx, _) = dequantize(graph, v)?;
    let scale = graph.constant(sx)?;
    (scale.len() == 1).then_some((xq, sx))
}

/// `(Wq, sw, axis)` when `v` is `DequantizeLinear` of a constant INT8 tensor with a
/// constant scale (scalar, or per channel on `axis`) and no (or a zero) zero point.
fn dequantized_weight(graph: &Graph, v: ValueId) -> Option<(ValueId, ValueId, Option<usize>)> {
    let (wq, sw, axis) = dequantize(graph, v)?;
    let w = graph.constant(wq)?;
    let scale = graph.constant(sw)?;
    if scale.len() == 1 {
        return Some((wq, sw, None));
    }
    let rank = w.rank() as i64;
    let axis = if axis < 0 { axis + rank } else { axis };
    let axis = usize::try_from(axis).ok().filter(|&a| a < w.rank())?;
    (scale.rank() == 1 && scale.len() == w.shape()[axis]).then_some((wq, sw, Some(axis)))
}

/// `(q, scale, axis)` of the `DequantizeLinear` producing `v`, when its data is INT8,
/// its scale f32 and its zero point absent or all zero (no `block_size`).
fn dequantize(graph: &Graph, v: ValueId) -> Option<(ValueId, ValueId, i64)> {
    let (producer, _) = graph.value(v).producer?;
    let dq = graph.node(producer);
    if dq.op_type != "DequantizeLinear" || !is_default_domain(&dq.domain) {
        return None;
    }
    if dq.attr_int("block_size", 0) != 0 {
        return None;
    }
    let q = dq.input(0)?;
    let scale = dq.input(1)?;
    if !is_int8(graph, q) || graph.constant(scale)?.dtype() != DType::F32 {
        return None;
    }
    if let Some(zp) = dq.input(2) {
        let zero = graph.constant(zp)?;
        match zero.data() {
            TensorData::I8(z) if z.iter().all(|&z| z == 0) => {}
            _ => return None,
        }
    }
    Some((q, scale, dq.attr_int("axis", 1)))
}

/// Whether `v` holds INT8 data: so typed, or the output of a `QuantizeLinear` with an
/// INT8 zero point (models often carry no types for intermediate values).
fn is_int8(graph: &Graph, v: ValueId) -> bool {
    let value = graph.value(v);
    if let Some(dtype) = value.dtype {
        return dtype == DType::I8;
    }
    if let Some(t) = &value.constant {
        return t.dtype() == DType::I8;
    }
    let Some((producer, 0)) = value.producer else {
        return false;
    };
    let q = graph.node(producer);
    q.op_type == "QuantizeLinear"
        && q.attr_int("output_dtype", 0) == 0
        && q.input(2)
            .and_then(|zp| graph.constant(zp))
            .is_some_and(|zp| zp.dtype() == DType::I8)
}

/// Whether `v` is an f32 value (or of unknown type: the op's other inputs are f32
/// dequantized values, which makes its output f32).
fn is_f32(graph: &Graph, v: ValueId) -> bool {
    graph.value(v).dtype.is_none_or(|d| d == DType::F32)
}

/// A constant f32 bias of `len` values (any shape with that many elements on its last
/// axis, e.g. `[len]` or `[1, len]`).
fn bias(graph: &Graph, v: ValueId, len: usize) -> bool {
    graph.constant(v).is_some_and(|t| {
        t.dtype() == DType::F32 && t.len() == len && t.shape().last() == Some(&len)
    })
}

/// The quantized operands of a float op with an f32 output that reads a dequantized
/// activation at input 0 and a dequantized constant at input 1 (the weights).
struct Operands<'g> {
    /// The INT8 activation and its scalar scale.
    xq: ValueId,
    sx: ValueId,
    /// The INT8 weights, their scale and its axis (per channel), and the weights.
    wq: ValueId,
    sw: ValueId,
    axis: Option<usize>,
    w: &'g Tensor,
}

impl Operands<'_> {
    /// The integer op's inputs: `Xq, x_scale, Wq, w_scale`, then `bias` (or none).
    fn inputs(&self, bias: Option<ValueId>) -> Vec<Option<ValueId>> {
        vec![
            Some(self.xq),
            Some(self.sx),
            Some(self.wq),
            Some(self.sw),
            bias,
        ]
    }
}

/// [`Operands`] of `node`, when its inputs and output are of that form.
fn operands<'g>(graph: &'g Graph, node: &Node) -> Option<Operands<'g>> {
    if !is_f32(graph, *node.outputs.first()?) {
        return None;
    }
    let (xq, sx) = dequantized_activation(graph, node.input(0)?)?;
    let (wq, sw, axis) = dequantized_weight(graph, node.input(1)?)?;
    Some(Operands {
        xq,
        sx,
        wq,
        sw,
        axis,
        w: graph.constant(wq)?,
    })
}

fn conv(graph: &Graph, id: NodeId) -> Option<Rewrite> {
    let node = graph.node(id);
    let group = usize::try_from(node.attr_int("group", 1)).ok()?;
    if group == 0 {
        return None;
    }
    let ops = operands(graph, node)?;
    let w = ops.w;
    if w.rank() < 3 || ops.axis.is_some_and(|a| a != 0) {
        return None;
    }
    // Products summed per output: input channels per group times kernel taps.
    let depth = w.len().checked_div(w.shape()[0])?;
    if depth > MAX_DEPTH {
        return None;
    }
    // Groups of one input channel (depthwise) with few enough taps; other groupings
    // stay in float.
    if group > 1 && (w.shape()[1] != 1 || w.shape()[0] % group != 0 || depth > MAX_DEPTHWISE_TAPS) {
        return None;
    }
    let b = node.input(2);
    if b.is_some_and(|b| !bias(graph, b, w.shape()[0])) {
        return None;
    }
    Some(("IntegerConv", ops.inputs(b), false))
}

/// A 2-D, group-1 ConvTranspose whose windows do not overlap (strides equal to the
/// kernel, no padding, dilation or output padding): each output is one product sum.
fn conv_transpose(graph: &Graph, id: NodeId) -> Option<Rewrite> {
    let node = graph.node(id);
    if node.attr_int("group", 1) != 1
        || node.attr_str("auto_pad", "NOTSET") != "NOTSET"
        || node.attr("output_shape").is_some()
    {
        return None;
    }
    let ops = operands(graph, node)?;
    let w = ops.w;
    if w.rank() != 4 || ops.axis.is_some_and(|a| a != 1) || w.shape()[0] > MAX_DEPTH {
        return None;
    }
    let kernel: Vec<i64> = w.shape()[2..].iter().map(|&d| d as i64).collect();
    let all = |name: &str, value: i64| {
        node.attr_ints(name)
            .is_none_or(|v| v.iter().all(|&d| d == value))
    };
    if node.attr_ints("strides").as_ref() != Some(&kernel)
        || node.attr_ints("kernel_shape").is_some_and(|k| k != kernel)
        || !all("dilations", 1)
        || !all("pads", 0)
        || !all("output_padding", 0)
    {
        return None;
    }
    let b = node.input(2);
    if b.is_some_and(|b| !bias(graph, b, w.shape()[1])) {
        return None;
    }
    Some(("IntegerConvTranspose", ops.inputs(b), false))
}

fn matmul(graph: &Graph, id: NodeId) -> Option<Rewrite> {
    let ops = operands(graph, graph.node(id))?;
    let w = ops.w;
    if w.rank() != 2 || ops.axis.is_some_and(|a| a != 1) || w.shape()[0] > MAX_DEPTH {
        return None;
    }
    Some(("IntegerMatMul", ops.inputs(None), false))
}

fn gemm(graph: &Graph, id: NodeId) -> Option<Rewrite> {
    let node = graph.node(id);
    let trans_b = node.attr_int("transB", 0) != 0;
    if node.attr_int("transA", 0) != 0
        || node.attr_float("alpha", 1.0) != 1.0
        || (node.input(2).is_some() && node.attr_float("beta", 1.0) != 1.0)
    {
        return None;
    }
    // Gemm's A is a matrix (the spec's rule; IntegerMatMul also takes more dims).
    let ops = operands(graph, node)?;
    let w = ops.w;
    let (k, n, out_axis) = if trans_b {
        (w.shape().get(1)?, w.shape()[0], 0)
    } else {
        (w.shape().first()?, *w.shape().get(1)?, 1)
    };
    if w.rank() != 2 || ops.axis.is_some_and(|a| a != out_axis) || *k > MAX_DEPTH {
        return None;
    }
    let c = node.input(2);
    if c.is_some_and(|c| !bias(graph, c, n)) {
        return None;
    }
    Some(("IntegerMatMul", ops.inputs(c), trans_b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Plan;
    use rtq_ir::{Dim, Tensor};
    use std::collections::BTreeMap;

    /// Seeded values roughly normal around 0.
    fn values(len: usize, seed: u64, scale: f32) -> Vec<f32> {
        let mut s = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        (0..len)
            .map(|_| {
                let mut u = 0.0;
                for _ in 0..4 {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    u += (s >> 40) as f32 / (1u64 << 24) as f32;
                }
                (u - 2.0) * scale
            })
            .collect()
    }

    fn dims(shape: &[usize]) -> Vec<Dim> {
        shape.iter().map(|&d| Dim::Known(d)).collect()
    }

    /// Symmetric per-row INT8 weights and their scales.
    fn quantize_rows(w: &[f32], rows: usize) -> (Vec<i8>, Vec<f32>) {
        let per = w.len() / rows;
        let mut q = Vec::with_capacity(w.len());
        let mut scales = Vec::with_capacity(rows);
        for r in 0..rows {
            let row = &w[r * per..][..per];
            let amax = row.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-8);
            let s = amax / 127.0;
            scales.push(s);
            q.extend(
                row.iter()
                    .map(|v| (v / s).round().clamp(-127.0, 127.0) as i8),
            );
        }
        (q, scales)
    }

    /// `x -> Q -> DQ -> op(DQ(Wq), bias)`, as rtq writes it; `wq_shape` and the scale
    /// axis are the op's.
    #[allow(clippy::too_many_arguments)]
    fn qdq_graph(
        op: &str,
        x_shape: &[usize],
        wq: Vec<i8>,
        wq_shape: &[usize],
        w_scales: Vec<f32>,
        axis: i64,
        bias: Option<Tensor>,
        attrs: BTreeMap<String, Attr>,
    ) -> Graph {
        let mut g = Graph::new("t", 21);
        let x = g.add_input("x", DType::F32, dims(x_shape));
        let sx = g.add_constant("sx", Tensor::from_f32(vec![], vec![0.02]));
        let zx = g.add_constant("zx", Tensor::new(vec![], TensorData::I8(vec![0])).unwrap());
        let xq = g.add_value("xq", None, None);
        let xd = g.add_value("xd", None, None);
        g.add_node(
            "q",
            "QuantizeLinear",
            vec![Some(x), Some(sx), Some(zx)],
            vec![xq],
            BTreeMap::new(),
        );
        g.add_node(
            "dqx",
            "DequantizeLinear",
            vec![Some(xq), Some(sx), Some(zx)],
            vec![xd],
            BTreeMap::new(),
        );
        let wq = g.add_constant(
            "wq",
            Tensor::new(wq_shape.to_vec(), TensorData::I8(wq)).unwrap(),
        );
        let n = w_scales.len();
        let sw = g.add_constant(
            "sw",
            Tensor::from_f32(if n == 1 { vec![] } else { vec![n] }, w_scales),
        );
        let wd = g.add_value("wd", None, None);
        let mut dq_attrs = BTreeMap::new();
        dq_attrs.insert("axis".to_string(), Attr::Int(axis));
        g.add_node(
            "dqw",
            "DequantizeLinear",
            vec![Some(wq), Some(sw)],
            vec![wd],
            dq_attrs,
        );
        let b = bias.map(|b| g.add_constant("b", b));
        let y = g.add_value("y", None, None);
        let mut inputs = vec![Some(xd), Some(wd)];
        if b.is_some() {
            inputs.push(b);
        }
        g.add_node("op", op, inputs, vec![y], attrs);
        g.outputs.push(y);
        g
    }

    /// Runs `g` as written and lowered for every instruction set; checks each lowered
    /// result against the float emulation (relative to the output's range) and that all
    /// instruction sets agree exactly.
    fn check(g: &Graph, x: Tensor, expect_lowered: bool) {
        let reference = Plan::new(g)
            .unwrap()
            .run(&[("x".into(), x.clone())])
            .unwrap();
        let want = reference[0].as_f32().unwrap();
        let range = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        let mut first: Option<Vec<f32>> = None;
        for isa in Isa::available() {
            let mut lowered = g.clone();
            let names = lower_to_integer(&mut lowered, isa);
            assert_eq!(names.len(), usize::from(expect_lowered), "{}", isa.name());
            let got = Plan::new(&lowered)
                .unwrap()
                .run(&[("x".into(), x.clone())])
                .unwrap();
            assert_eq!(got[0].shape(), reference[0].shape());
            let got = got[0].as_f32().unwrap().to_vec();
            let worst = got
                .iter()
                .zip(want)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                worst <= 1e-5 * range.max(1.0),
                "{}: max diff {worst} (range {range})",
                isa.name()
            );
            match &first {
                Some(f) => assert_eq!(f, &got, "{} differs from the first path", isa.name()),
                None => first = Some(got),
            }
        }
    }

    fn conv_attrs(pads: i64, stride: i64) -> BTreeMap<String, Attr> {
        let mut a = BTreeMap::new();
        a.insert("pads".into(), Attr::Ints(vec![pads; 4]));
        a.insert("strides".into(), Attr::Ints(vec![stride; 2]));
        a
    }

    #[test]
    fn conv_patterns_run_in_integers_like_the_float_emulation() {
        for (c, m, k, pads, stride, hw) in [
            (3, 8, 3, 1, 1, 9),
            (16, 24, 1, 0, 1, 7),
            (5, 40, 3, 1, 2, 11),
            (32, 17, 1, 0, 2, 6),
        ] {
            let w = values(m * c * k * k, 1, 0.3);
            let (wq, sw) = quantize_rows(&w, m);
            let bias = Tensor::from_f32(vec![m], values(m, 2, 0.5));
            let g = qdq_graph(
                "Conv",
                &[2, c, hw, hw],
                wq,
                &[m, c, k, k],
                sw,
                0,
                Some(bias),
                conv_attrs(pads, stride),
            );
            check(
                &g,
                Tensor::from_f32(vec![2, c, hw, hw], values(2 * c * hw * hw, 3, 1.0)),
                true,
            );
        }
    }

    #[test]
    fn depthwise_conv_patterns_run_in_integers_like_the_float_emulation() {
        // (channels, multiplier, kernel, pads, stride, size): PP-OCR's 3x3 and 5x5
        // depthwise layers at stride 1 and 2, a channel multiplier, a map narrower
        // than a vector and one wider, with and without a bias.
        for (i, (c, mult, k, pads, stride, hw)) in [
            (8, 1, 3, 1, 1, 20),
            (6, 1, 5, 2, 2, 21),
            (4, 2, 3, 1, 1, 9),
            (3, 1, 5, 2, 1, 37),
        ]
        .into_iter()
        .enumerate()
        {
            let m = c * mult;
            let w = values(m * k * k, 20 + i as u64, 0.3);
            let (wq, sw) = quantize_rows(&w, m);
            let bias = (i % 2 == 0).then(|| Tensor::from_f32(vec![m], values(m, 2, 0.5)));
            let mut attrs = conv_attrs(pads, stride);
            attrs.insert("group".into(), Attr::Int(c as i64));
            let g = qdq_graph(
                "Conv",
                &[2, c, hw, hw],
                wq,
                &[m, 1, k, k],
                sw,
                0,
                bias,
                attrs,
            );
            let x = values(2 * c * hw * hw, 30 + i as u64, 1.0);
            check(&g, Tensor::from_f32(vec![2, c, hw, hw], x), true);
        }
        // A 1-D depthwise convolution (the generic kernel on every CPU).
        let (c, k, len) = (5, 7, 40);
        let (wq, sw) = quantize_rows(&values(c * k, 40, 0.3), c);
        let mut attrs = BTreeMap::new();
        attrs.insert("pads".into(), Attr::Ints(vec![3, 3]));
        attrs.insert("group".into(), Attr::Int(c as i64));
        let g = qdq_graph("Conv", &[1, c, len], wq, &[c, 1, k], sw, 0, None, attrs);
        let x = values(c * len, 41, 1.0);
        check(&g, Tensor::from_f32(vec![1, c, len], x), true);
    }

    #[test]
    fn conv_transpose_patterns_run_in_integers_like_the_float_emulation() {
        // (input channels, output channels, kernel, size, bias): PP-OCR det's 2x2
        // upsampling (24 -> 24 and 24 -> 1), a 3x3 stride-3 one on odd sizes, and one
        // whose products span several tiles of input rows (3 rows each).
        for (i, (c, m, k, (h, w), with_bias)) in [
            (24, 24, 2, (10, 12), true),
            (24, 1, 2, (9, 7), true),
            (5, 3, 3, (4, 5), false),
            (4, 64, 2, (10, 70), true),
        ]
        .into_iter()
        .enumerate()
        {
            // Weights [c, m, k, k], one scale per output channel (axis 1).
            let wf = values(c * m * k * k, 50 + i as u64, 0.3);
            let taps = k * k;
            let amax = |mo: usize| {
                (0..c)
                    .flat_map(|ci| &wf[(ci * m + mo) * taps..][..taps])
                    .fold(0f32, |a, v| a.max(v.abs()))
            };
            let sw: Vec<f32> = (0..m).map(|mo| amax(mo).max(1e-6) / 127.0).collect();
            let wq: Vec<i8> = wf
                .iter()
                .enumerate()
                .map(|(j, v)| (v / sw[(j / taps) % m]).round() as i8)
                .collect();
            let bias = with_bias.then(|| Tensor::from_f32(vec![m], values(m, 2, 0.5)));
            let mut attrs = BTreeMap::new();
            attrs.insert("strides".into(), Attr::Ints(vec![k as i64; 2]));
            let g = qdq_graph(
                "ConvTranspose",
                &[2, c, h, w],
                wq,
                &[c, m, k, k],
                sw,
                1,
                bias,
                attrs,
            );
            let x = values(2 * c * h * w, 60 + i as u64, 1.0);
            check(&g, Tensor::from_f32(vec![2, c, h, w], x), true);
        }
        // Overlapping windows (stride 1) stay in float.
        let mut attrs = BTreeMap::new();
        attrs.insert("strides".into(), Attr::Ints(vec![1, 1]));
        let g = qdq_graph(
            "ConvTranspose",
            &[1, 2, 4, 4],
            vec![3; 2 * 3 * 4],
            &[2, 3, 2, 2],
            vec![0.1; 3],
            1,
            None,
            attrs,
        );
        check(
            &g,
            Tensor::from_f32(vec![1, 2, 4, 4], values(32, 70, 1.0)),
            false,
        );
    }

    #[test]
    fn matmul_and_gemm_patterns_run_in_integers() {
        let (k, n) = (48, 20);
        let w = values(k * n, 4, 0.2);
        // MatMul: W [K, N], scales per column (axis 1).
        let wt: Vec<f32> = (0..n)
            .flat_map(|j| (0..k).map(move |i| (i, j)))
            .map(|(i, j)| w[i * n + j])
            .collect();
        let (qt, sw) = quantize_rows(&wt, n);
        let q: Vec<i8> = (0..k)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .map(|(i, j)| qt[j * k + i])
            .collect();
        let x = || Tensor::from_f32(vec![2, 5, k], values(2 * 5 * k, 5, 1.0));
        let g = qdq_graph(
            "MatMul",
            &[2, 5, k],
            q.clone(),
            &[k, n],
            sw.clone(),
            1,
            None,
            BTreeMap::new(),
        );
        check(&g, x(), true);
        // Gemm with transB: W stored [N, K], scales on axis 0, bias [N].
        let mut attrs = BTreeMap::new();
        attrs.insert("transB".to_string(), Attr::Int(1));
        let bias = Tensor::from_f32(vec![n], values(n, 6, 0.5));
        let g = qdq_graph(
            "Gemm",
            &[7, k],
            qt.clone(),
            &[n, k],
            sw.clone(),
            0,
            Some(bias),
            attrs,
        );
        check(
            &g,
            Tensor::from_f32(vec![7, k], values(7 * k, 7, 1.0)),
            true,
        );
        // Gemm without transB, per-tensor weight scale.
        let g = qdq_graph(
            "Gemm",
            &[7, k],
            q,
            &[k, n],
            vec![0.01],
            1,
            None,
            BTreeMap::new(),
        );
        check(
            &g,
            Tensor::from_f32(vec![7, k], values(7 * k, 8, 1.0)),
            true,
        );
    }

    #[test]
    fn fp8_patterns_are_not_lowered() {
        use rtq_ir::F8E4M3;
        let (c, m, hw) = (4, 6, 5);
        let w = values(m * c * 9, 12, 0.3);
        let (wq, sw) = quantize_rows(&w, m);
        let int8 = qdq_graph(
            "Conv",
            &[1, c, hw, hw],
            wq.clone(),
            &[m, c, 3, 3],
            sw.clone(),
            0,
            None,
            conv_attrs(1, 1),
        );
        let x = || Tensor::from_f32(vec![1, c, hw, hw], values(c * hw * hw, 13, 1.0));
        // The INT8 graph lowers; each FP8 variant (activations, weights, both) does not.
        check(&int8, x(), true);
        let fp8_zero = Tensor::new(vec![], TensorData::F8E4M3(vec![F8E4M3::ZERO])).unwrap();
        let fp8_weights = Tensor::new(
            vec![m, c, 3, 3],
            TensorData::F8E4M3(wq.iter().map(|&q| F8E4M3::from_f32(f32::from(q))).collect()),
        )
        .unwrap();
        for (activations, weights) in [(true, false), (false, true), (true, true)] {
            let mut g = int8.clone();
            if activations {
                let zx = g.value_by_name("zx").unwrap();
                g.set_constant(zx, fp8_zero.clone());
            }
            if weights {
                let wq = g.value_by_name("wq").unwrap();
                g.set_constant(wq, fp8_weights.clone());
            }
            check(&g, x(), false);
        }
    }

    #[test]
    fn int4_patterns_are_not_lowered() {
        let (k, n) = (32, 12);
        let w = values(k * n, 14, 0.3);
        let (wq, sw) = quantize_rows(&w, k);
        let int8 = qdq_graph(
            "MatMul",
            &[3, k],
            wq.clone(),
            &[k, n],
            vec![sw[0]],
            1,
            None,
            BTreeMap::new(),
        );
        let x = || Tensor::from_f32(vec![3, k], values(3 * k, 15, 1.0));
        check(&int8, x(), true);
        let int4_zero = Tensor::new(vec![], TensorData::I4(vec![0])).unwrap();
        let int4_weights = Tensor::new(
            vec![k, n],
            TensorData::I4(wq.iter().map(|&q| q.clamp(-8, 7)).collect()),
        )
        .unwrap();
        // INT4 activations (typed by their zero point), weights, or both.
        for (activations, weights) in [(true, false), (false, true), (true, true)] {
            let mut g = int8.clone();
            if activations {
                let zx = g.value_by_name("zx").unwrap();
                g.set_constant(zx, int4_zero.clone());
            }
            if weights {
                let wq = g.value_by_name("wq").unwrap();
                g.set_constant(wq, int4_weights.clone());
            }
            check(&g, x(), false);
        }
        // INT4 activations from `output_dtype` (opset 21), without zero points.
        let mut g = int8.clone();
        for name in ["q", "dqx"] {
            let id = g
                .node_ids()
                .into_iter()
                .find(|&id| g.node(id).name == name)
                .unwrap();
            let node = g.node_mut(id);
            node.inputs.truncate(2);
            if name == "q" {
                node.attrs.insert("output_dtype".into(), Attr::Int(22));
            }
        }
        check(&g, x(), false);
        // INT4 weights in blocks along K: neither INT8 nor per-channel.
        let mut g = int8.clone();
        let wq = g.value_by_name("wq").unwrap();
        g.set_constant(wq, int4_weights);
        let sw = g.value_by_name("sw").unwrap();
        g.set_constant(
            sw,
            Tensor::from_f32(vec![k / 16, n], vec![0.05; k / 16 * n]),
        );
        let dqw = g
            .node_ids()
            .into_iter()
            .find(|&id| g.node(id).name == "dqw")
            .unwrap();
        let attrs = &mut g.node_mut(dqw).attrs;
        attrs.insert("axis".into(), Attr::Int(0));
        attrs.insert("block_size".into(), Attr::Int(16));
        check(&g, x(), false);
    }

    #[test]
    fn patterns_outside_the_integer_rules_stay_as_written() {
        // Per-channel scales on the wrong axis of a MatMul weight (rows, not columns).
        let (k, n) = (8, 4);
        let g = qdq_graph(
            "MatMul",
            &[3, k],
            vec![1; k * n],
            &[k, n],
            vec![0.1; k],
            0,
            None,
            BTreeMap::new(),
        );
        check(
            &g,
            Tensor::from_f32(vec![3, k], values(3 * k, 9, 1.0)),
            false,
        );
        // A grouped convolution of two channels per group.
        let mut attrs = conv_attrs(0, 1);
        attrs.insert("group".into(), Attr::Int(2));
        let g = qdq_graph(
            "Conv",
            &[1, 4, 5, 5],
            vec![3; 6 * 2],
            &[6, 2, 1, 1],
            vec![0.1; 6],
            0,
            None,
            attrs,
        );
        check(
            &g,
            Tensor::from_f32(vec![1, 4, 5, 5], values(100, 10, 1.0)),
            false,
        );
        // Gemm with alpha != 1.
        let mut attrs = BTreeMap::new();
        attrs.insert("alpha".to_string(), Attr::Float(0.5));
        let g = qdq_graph(
            "Gemm",
            &[3, k],
            vec![2; k * n],
            &[k, n],
            vec![0.1],
            1,
            None,
            attrs,
        );
        check(
            &g,
            Tensor::from_f32(vec![3, k], values(3 * k, 11, 1.0)),
            false,
        );
    }
}
