//! What an op rule sees of a node: its input facts, constants and the symbolic integer
//! values known for small integer tensors; plus error builders naming the node.

use super::symbolic::{SymInt, SymTable};
use super::PASS;
use crate::util::describe_value;
use crate::{Conflict, PassError};
use rtq_ir::{DType, Dim, Graph, Node, Shape, Tensor, ValueId};

/// Inferred facts about one output: its element type and shape, each when known.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Fact {
    /// Element type.
    pub dtype: Option<DType>,
    /// Shape (dimensions may be symbolic or `?`).
    pub shape: Option<Shape>,
}

impl Fact {
    /// A fact with both parts.
    pub fn new(dtype: Option<DType>, shape: Option<Shape>) -> Fact {
        Fact { dtype, shape }
    }

    /// A fact with a known shape.
    pub fn shaped(dtype: Option<DType>, shape: Shape) -> Fact {
        Fact::new(dtype, Some(shape))
    }
}

/// The view of one node an op rule works from.
pub(crate) struct NodeCtx<'a> {
    /// The graph.
    pub graph: &'a Graph,
    /// The node being inferred.
    pub node: &'a Node,
    /// Symbolic values of small integer tensors computed so far.
    pub syms: &'a SymTable,
}

/// Most elements a constant may have to be read as a shape-like integer list.
const MAX_INT_LIST: usize = 1 << 16;

impl<'a> NodeCtx<'a> {
    /// The value at input `slot`.
    pub fn input(&self, slot: usize) -> Option<ValueId> {
        self.node.input(slot)
    }

    /// Number of input slots (present or omitted).
    pub fn num_inputs(&self) -> usize {
        self.node.inputs.len()
    }

    /// Element type of input `slot`.
    pub fn dtype(&self, slot: usize) -> Option<DType> {
        self.graph.value(self.input(slot)?).dtype
    }

    /// Shape of input `slot`.
    pub fn shape(&self, slot: usize) -> Option<&'a [Dim]> {
        let graph: &'a Graph = self.graph;
        graph.value(self.input(slot)?).shape.as_deref()
    }

    /// Rank of input `slot`.
    pub fn rank(&self, slot: usize) -> Option<usize> {
        self.shape(slot).map(<[Dim]>::len)
    }

    /// Constant data of input `slot`.
    pub fn constant(&self, slot: usize) -> Option<&'a Tensor> {
        let graph: &'a Graph = self.graph;
        graph.constant(self.input(slot)?).map(|t| t.as_ref())
    }

    /// Symbolic integer elements of input `slot`: a small integer constant, or a value
    /// whose elements shape propagation tracked (e.g. the output of `Shape`).
    pub fn sym_ints(&self, slot: usize) -> Option<Vec<SymInt>> {
        let v = self.input(slot)?;
        if let Some(t) = self.graph.constant(v) {
            if t.dtype().is_float() || matches!(t.dtype(), DType::String) || t.len() > MAX_INT_LIST
            {
                return None;
            }
            return Some(t.to_i64_vec().into_iter().map(SymInt::Int).collect());
        }
        self.syms.get(&v).cloned()
    }

    /// Integer elements of input `slot` when all are known.
    pub fn ints(&self, slot: usize) -> Option<Vec<i64>> {
        self.sym_ints(slot)?.iter().map(SymInt::as_int).collect()
    }

    /// Float elements of constant input `slot`.
    pub fn floats(&self, slot: usize) -> Option<Vec<f64>> {
        let t = self.constant(slot)?;
        if !t.dtype().is_float() {
            return None;
        }
        Some((0..t.len()).map(|i| t.data().get_f64(i)).collect())
    }

    /// Integer attribute `name`, or `default`.
    pub fn attr_int(&self, name: &str, default: i64) -> i64 {
        self.node.attr_int(name, default)
    }

    /// Integer-list attribute `name`.
    pub fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        self.node.attr_ints(name)
    }

    /// `axis` (possibly negative) resolved against `rank`; an error naming the node if
    /// out of range.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize, PassError> {
        let r = rank as i64;
        let a = if axis < 0 { axis + r } else { axis };
        if (0..r).contains(&a) {
            Ok(a as usize)
        } else {
            Err(self.invalid(format!("axis {axis} is out of range for rank {rank}")))
        }
    }

    /// Like [`NodeCtx::axis`] for a list, rejecting duplicates.
    pub fn axes(&self, axes: &[i64], rank: usize) -> Result<Vec<usize>, PassError> {
        let mut out = Vec::with_capacity(axes.len());
        for &a in axes {
            let a = self.axis(a, rank)?;
            if out.contains(&a) {
                return Err(self.invalid(format!("axis {a} appears twice in {axes:?}")));
            }
            out.push(a);
        }
        Ok(out)
    }

    /// Describes input `slot` as ``input `x`: float[1,3]``.
    pub fn describe(&self, slot: usize) -> String {
        match self.input(slot) {
            Some(v) => format!("input {}", describe_value(self.graph, v)),
            None => format!("input {slot} (omitted)"),
        }
    }

    /// A conflict between two facts of this node.
    pub fn conflict(&self, reason: impl Into<String>, first: String, second: String) -> PassError {
        PassError::Conflict(Box::new(Conflict {
            pass: PASS,
            node: self.node.name.clone(),
            op: self.node.op_type.clone(),
            reason: reason.into(),
            first,
            second,
        }))
    }

    /// A malformed-node error.
    pub fn invalid(&self, reason: impl Into<String>) -> PassError {
        PassError::InvalidNode {
            pass: PASS,
            node: self.node.name.clone(),
            op: self.node.op_type.clone(),
            reason: reason.into(),
        }
    }
}
