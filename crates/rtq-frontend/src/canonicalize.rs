//! Rewrites opset-dependent op forms into rtq's canonical opset-13 form.

use crate::FrontendError;
use rtq_ir::{reduce_axes_is_input, Attr, Graph, Tensor, ValueId};
use std::collections::BTreeMap;

/// A node read from the model, before it enters the graph.
#[derive(Debug)]
pub(crate) struct NodeDraft {
    pub name: String,
    pub op: String,
    pub inputs: Vec<Option<ValueId>>,
    pub outputs: Vec<ValueId>,
    pub attrs: BTreeMap<String, Attr>,
}

impl NodeDraft {
    fn err(&self, message: impl Into<String>) -> FrontendError {
        FrontendError::bad_node(&self.name, &self.op, message)
    }

    /// Moves integer-list attribute `attr` into input slot `slot` as an int64 constant.
    fn attr_to_input(&mut self, graph: &mut Graph, attr: &str, slot: usize) {
        if let Some(values) = self.attrs.remove(attr).and_then(|a| a.as_ints()) {
            let c = graph.add_constant(
                &format!("{}_{attr}", self.name),
                Tensor::from_i64(vec![values.len()], values),
            );
            self.set_input(slot, c);
        }
    }

    fn set_input(&mut self, slot: usize, v: ValueId) {
        if self.inputs.len() <= slot {
            self.inputs.resize(slot + 1, None);
        }
        self.inputs[slot] = Some(v);
    }

    /// Reads a constant int64 input back into attribute `attr` (for ops whose canonical form keeps it as an attribute).
    fn input_to_attr(
        &mut self,
        graph: &Graph,
        slot: usize,
        attr: &str,
    ) -> Result<(), FrontendError> {
        let Some(Some(v)) = self.inputs.get(slot).copied() else {
            return Ok(());
        };
        let c = graph.constant(v).ok_or_else(|| {
            self.err(format!(
                "input `{}` must be a constant for rtq",
                graph.value(v).name
            ))
        })?;
        self.attrs
            .insert(attr.to_string(), Attr::Ints(c.to_i64_vec()));
        self.inputs.truncate(slot);
        Ok(())
    }
}

/// The opset whose op forms are rtq's canonical ones.
const CANONICAL_OPSET: i64 = 13;

/// Adds `draft` to `graph` in canonical form (possibly as several nodes).
pub(crate) fn add_canonical(
    graph: &mut Graph,
    opset: i64,
    mut d: NodeDraft,
) -> Result<(), FrontendError> {
    // Attributes removed long ago that carry no meaning in inference.
    d.attrs.remove("consumed_inputs");
    d.attrs.remove("is_test");
    match d.op.as_str() {
        "Unsqueeze" | "Squeeze" if opset < 13 => d.attr_to_input(graph, "axes", 1),
        op if reduce_axes_is_input(op, CANONICAL_OPSET) && !reduce_axes_is_input(op, opset) => {
            d.attr_to_input(graph, "axes", 1)
        }
        op if reduce_axes_is_input(op, opset) && !reduce_axes_is_input(op, CANONICAL_OPSET) => {
            d.input_to_attr(graph, 1, "axes")?
        }
        "Split" if opset < 13 => d.attr_to_input(graph, "split", 1),
        "Split" if opset >= 18 => {
            d.attrs.remove("num_outputs");
        }
        "Slice" if opset < 10 => {
            d.attr_to_input(graph, "starts", 1);
            d.attr_to_input(graph, "ends", 2);
            d.attr_to_input(graph, "axes", 3);
        }
        "Reshape" if opset < 5 => d.attr_to_input(graph, "shape", 1),
        "TopK" if opset < 10 => {
            if let Some(k) = d.attrs.remove("k").and_then(|a| a.as_int()) {
                let c = graph
                    .add_constant(&format!("{}_k", d.name), Tensor::from_i64(vec![1], vec![k]));
                d.set_input(1, c);
            }
        }
        "Pad" if opset < 11 => {
            d.attr_to_input(graph, "pads", 1);
            let value = d
                .attrs
                .remove("value")
                .and_then(|a| a.as_float())
                .unwrap_or(0.0);
            let c = graph.add_constant(&format!("{}_value", d.name), Tensor::scalar_f32(value));
            d.set_input(2, c);
        }
        "Clip" if opset < 11 => {
            for (attr, slot) in [("min", 1), ("max", 2)] {
                if let Some(v) = d.attrs.remove(attr).and_then(|a| a.as_float()) {
                    let c =
                        graph.add_constant(&format!("{}_{attr}", d.name), Tensor::scalar_f32(v));
                    d.set_input(slot, c);
                }
            }
        }
        "Dropout" => {
            d.attrs.remove("ratio");
        }
        "BatchNormalization" => {
            d.attrs.remove("spatial");
            d.attrs.remove("momentum");
        }
        "Gemm" if opset < 7 => {
            d.attrs.remove("broadcast");
        }
        "Upsample" => return add_upsample(graph, d),
        "Resize" if opset < 11 => return add_resize10(graph, d),
        "Softmax" | "LogSoftmax" | "Hardmax" if opset < 13 => return add_legacy_softmax(graph, d),
        _ => {}
    }
    graph.add_node(&d.name, &d.op, d.inputs, d.outputs, d.attrs);
    Ok(())
}

/// `Upsample` (opsets 7–9) and `Resize`-10 share the asymmetric, floor-rounding semantics.
fn resize_attrs(mode: &str) -> BTreeMap<String, Attr> {
    let mode = if mode == "bilinear" { "linear" } else { mode };
    let mut attrs = BTreeMap::new();
    attrs.insert("mode".to_string(), Attr::String(mode.to_string()));
    attrs.insert(
        "coordinate_transformation_mode".to_string(),
        Attr::String("asymmetric".to_string()),
    );
    attrs.insert(
        "nearest_mode".to_string(),
        Attr::String("floor".to_string()),
    );
    attrs
}

fn add_upsample(graph: &mut Graph, d: NodeDraft) -> Result<(), FrontendError> {
    let mode = d
        .attrs
        .get("mode")
        .and_then(Attr::as_str)
        .unwrap_or("nearest")
        .to_string();
    let scales = match (d.input(1), d.attrs.get("scales").and_then(Attr::as_floats)) {
        (Some(v), _) => v,
        (None, Some(s)) => graph.add_constant(
            &format!("{}_scales", d.name),
            Tensor::from_f32(vec![s.len()], s.to_vec()),
        ),
        (None, None) => return Err(d.err("needs scales")),
    };
    let x = d.input(0).ok_or_else(|| d.err("missing input X"))?;
    graph.add_node(
        &d.name,
        "Resize",
        vec![Some(x), None, Some(scales)],
        d.outputs,
        resize_attrs(&mode),
    );
    Ok(())
}

fn add_resize10(graph: &mut Graph, d: NodeDraft) -> Result<(), FrontendError> {
    let mode = d
        .attrs
        .get("mode")
        .and_then(Attr::as_str)
        .unwrap_or("nearest")
        .to_string();
    let x = d.input(0).ok_or_else(|| d.err("missing input X"))?;
    let scales = d.input(1).ok_or_else(|| d.err("missing input scales"))?;
    graph.add_node(
        &d.name,
        "Resize",
        vec![Some(x), None, Some(scales)],
        d.outputs,
        resize_attrs(&mode),
    );
    Ok(())
}

/// Before opset 13, Softmax coerced its input to 2-D at `axis` (default 1). The
/// canonical form makes that explicit: Shape, Flatten(axis), Softmax(-1), Reshape.
/// When the input rank is known and `axis` is the last axis, the forms agree and
/// the node is kept as it is.
fn add_legacy_softmax(graph: &mut Graph, mut d: NodeDraft) -> Result<(), FrontendError> {
    let x = d.input(0).ok_or_else(|| d.err("missing input"))?;
    let axis = d.attrs.remove("axis").and_then(|a| a.as_int()).unwrap_or(1);
    let rank = graph.value(x).shape.as_ref().map(|s| s.len() as i64);
    if let Some(rank) = rank {
        let norm = if axis < 0 { axis + rank } else { axis };
        if norm == rank - 1 {
            d.attrs.insert("axis".into(), Attr::Int(-1));
            graph.add_node(&d.name, &d.op, d.inputs, d.outputs, d.attrs);
            return Ok(());
        }
    }
    let out = *d.outputs.first().ok_or_else(|| d.err("has no output"))?;
    let base = d.name.clone();
    let shape = graph.add_value(&format!("{base}_shape"), Some(rtq_ir::DType::I64), None);
    graph.add_node(
        &format!("{base}_shape"),
        "Shape",
        vec![Some(x)],
        vec![shape],
        BTreeMap::new(),
    );
    let flat = graph.add_value(&format!("{base}_flat"), graph.value(x).dtype, None);
    let mut fattrs = BTreeMap::new();
    fattrs.insert("axis".to_string(), Attr::Int(axis));
    graph.add_node(
        &format!("{base}_flatten"),
        "Flatten",
        vec![Some(x)],
        vec![flat],
        fattrs,
    );
    let soft = graph.add_value(&format!("{base}_2d"), graph.value(x).dtype, None);
    let mut sattrs = d.attrs;
    sattrs.insert("axis".to_string(), Attr::Int(-1));
    graph.add_node(&base, &d.op, vec![Some(flat)], vec![soft], sattrs);
    graph.add_node(
        &format!("{base}_reshape"),
        "Reshape",
        vec![Some(soft), Some(shape)],
        vec![out],
        BTreeMap::new(),
    );
    Ok(())
}

impl NodeDraft {
    fn input(&self, slot: usize) -> Option<ValueId> {
        self.inputs.get(slot).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtq_ir::DType;

    /// `op` at `opset` with `axes` as attribute or constant input, canonicalised.
    fn reduce(op: &str, opset: i64, axes_input: bool) -> rtq_ir::Node {
        let mut g = Graph::new("g", opset);
        let x = g.add_input("x", DType::F32, vec![rtq_ir::Dim::Known(2); 2]);
        let y = g.add_value("y", None, None);
        let mut d = NodeDraft {
            name: "r".into(),
            op: op.into(),
            inputs: vec![Some(x)],
            outputs: vec![y],
            attrs: BTreeMap::new(),
        };
        if axes_input {
            let axes = g.add_constant("axes", Tensor::from_i64(vec![1], vec![1]));
            d.inputs.push(Some(axes));
        } else {
            d.attrs.insert("axes".into(), Attr::Ints(vec![1]));
        }
        add_canonical(&mut g, opset, d).unwrap();
        let (_, node) = g.nodes().next().unwrap();
        node.clone()
    }

    #[test]
    fn reduce_axes_take_the_opset_13_form() {
        let sum = reduce("ReduceSum", 11, false);
        assert_eq!((sum.inputs.len(), sum.attr_ints("axes")), (2, None));
        let sum = reduce("ReduceSum", 18, true);
        assert_eq!((sum.inputs.len(), sum.attr_ints("axes")), (2, None));
        for opset in [13, 18] {
            let lse = reduce("ReduceLogSum", opset, opset >= 18);
            assert_eq!(
                (lse.inputs.len(), lse.attr_ints("axes")),
                (1, Some(vec![1]))
            );
        }
    }
}
