//! Test helpers: build a one-node graph and run shape inference on it.

use super::ctx::Fact;
use super::infer_shapes;
use crate::PassError;
use rtq_ir::{Attr, DType, Dim, Graph, Shape, Tensor, ValueId};
use std::collections::BTreeMap;

/// A known dimension.
pub(crate) fn s(n: usize) -> Dim {
    Dim::Known(n)
}

/// A symbolic dimension.
pub(crate) fn sym(name: &str) -> Dim {
    Dim::Sym(name.to_string())
}

/// A one-node graph under construction; the node is named `n`.
pub(crate) struct Case {
    graph: Graph,
    op: String,
    inputs: Vec<Option<ValueId>>,
    attrs: BTreeMap<String, Attr>,
    outputs: usize,
}

impl Case {
    /// A case for `op` with one output.
    pub fn new(op: &str) -> Case {
        Case {
            graph: Graph::new("t", 13),
            op: op.to_string(),
            inputs: Vec::new(),
            attrs: BTreeMap::new(),
            outputs: 1,
        }
    }

    /// Adds a graph input with these facts.
    pub fn input(mut self, dtype: DType, shape: Shape) -> Case {
        let name = format!("in{}", self.inputs.len());
        let v = self.graph.add_input(&name, dtype, shape);
        self.inputs.push(Some(v));
        self
    }

    /// Adds a graph input whose shape is unknown.
    pub fn unknown_input(mut self, dtype: DType) -> Case {
        let name = format!("in{}", self.inputs.len());
        let v = self.graph.add_value(&name, Some(dtype), None);
        self.graph.inputs.push(v);
        self.inputs.push(Some(v));
        self
    }

    /// Adds a constant input.
    pub fn constant(mut self, t: Tensor) -> Case {
        let name = format!("c{}", self.inputs.len());
        let v = self.graph.add_constant(&name, t);
        self.inputs.push(Some(v));
        self
    }

    /// Adds an i64 vector constant input.
    pub fn ints(self, v: &[i64]) -> Case {
        self.constant(Tensor::from_i64(vec![v.len()], v.to_vec()))
    }

    /// Adds an omitted optional input.
    pub fn none(mut self) -> Case {
        self.inputs.push(None);
        self
    }

    /// Sets an attribute.
    pub fn attr(mut self, name: &str, value: Attr) -> Case {
        self.attrs.insert(name.to_string(), value);
        self
    }

    /// Sets the number of outputs.
    pub fn outputs(mut self, n: usize) -> Case {
        self.outputs = n;
        self
    }

    /// Builds the graph (outputs are graph outputs named `out0`, ...).
    pub fn build(self) -> Graph {
        let mut g = self.graph;
        let outs: Vec<ValueId> = (0..self.outputs)
            .map(|i| g.add_value(&format!("out{i}"), None, None))
            .collect();
        g.add_node("n", &self.op, self.inputs, outs.clone(), self.attrs);
        g.outputs = outs;
        g
    }

    /// Runs shape inference and returns the facts of the node's outputs.
    pub fn infer(self) -> Result<Vec<Fact>, PassError> {
        let mut g = self.build();
        infer_shapes(&mut g)?;
        Ok(g.outputs
            .iter()
            .map(|&o| Fact::new(g.value(o).dtype, g.value(o).shape.clone()))
            .collect())
    }

    /// Runs shape inference and returns output 0's shape.
    pub fn shape(self) -> Option<Shape> {
        self.infer().expect("inference succeeds")[0].shape.clone()
    }
}

/// Infers `op` over graph inputs with the given facts and attributes.
pub(crate) fn infer_one(
    op: &str,
    inputs: &[(DType, Shape)],
    attrs: &[(&str, Attr)],
) -> Result<Vec<Fact>, PassError> {
    let mut case = Case::new(op);
    for (dtype, shape) in inputs {
        case = case.input(*dtype, shape.clone());
    }
    for (k, v) in attrs {
        case = case.attr(k, v.clone());
    }
    if op == "Dropout" {
        case = case.outputs(2);
    }
    case.infer()
}
