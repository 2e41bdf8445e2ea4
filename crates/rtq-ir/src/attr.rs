use crate::{Graph, Tensor};
use std::fmt;
use std::sync::Arc;

/// The body of a control-flow node (`If`'s branches, `Loop`'s and `Scan`'s body): a
/// graph of its own whose trailing [`Graph::captures`] inputs stand for the outer
/// values it reads, which the node lists as its trailing inputs (so every pass sees
/// them as ordinary uses). Shared: cloning is cheap; two are equal when they are the
/// same body.
#[derive(Debug, Clone)]
pub struct Subgraph(pub Arc<Graph>);

impl PartialEq for Subgraph {
    fn eq(&self, other: &Subgraph) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for Subgraph {
    type Target = Graph;
    fn deref(&self) -> &Graph {
        &self.0
    }
}

/// A node attribute, as ONNX's `AttributeProto` holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    /// One integer.
    Int(i64),
    /// One float.
    Float(f32),
    /// One string (ONNX strings are bytes; rtq keeps them as UTF-8 with lossy decoding).
    String(String),
    /// One tensor.
    Tensor(Tensor),
    /// Integers.
    Ints(Vec<i64>),
    /// Floats.
    Floats(Vec<f32>),
    /// Strings.
    Strings(Vec<String>),
    /// A subgraph (control flow).
    Graph(Subgraph),
}

impl Attr {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Attr::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The float (integers widen), if this is one.
    pub fn as_float(&self) -> Option<f32> {
        match self {
            Attr::Float(v) => Some(*v),
            Attr::Int(v) => Some(*v as f32),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Attr::String(v) => Some(v),
            _ => None,
        }
    }

    /// The integers (a single integer reads as one), if this holds integers.
    pub fn as_ints(&self) -> Option<Vec<i64>> {
        match self {
            Attr::Ints(v) => Some(v.clone()),
            Attr::Int(v) => Some(vec![*v]),
            _ => None,
        }
    }

    /// The floats, if this holds floats.
    pub fn as_floats(&self) -> Option<&[f32]> {
        match self {
            Attr::Floats(v) => Some(v),
            _ => None,
        }
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Attr::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The subgraph, if this is one.
    pub fn as_graph(&self) -> Option<&Subgraph> {
        match self {
            Attr::Graph(g) => Some(g),
            _ => None,
        }
    }
}

impl fmt::Display for Attr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Attr::Int(v) => write!(f, "{v}"),
            Attr::Float(v) => write!(f, "{v:?}"),
            Attr::String(v) => write!(f, "{v:?}"),
            Attr::Tensor(t) => write!(f, "tensor<{}{:?}>", t.dtype(), t.shape()),
            Attr::Ints(v) => write!(f, "{v:?}"),
            Attr::Floats(v) => write!(f, "{v:?}"),
            Attr::Strings(v) => write!(f, "{v:?}"),
            Attr::Graph(g) => write!(
                f,
                "graph<{}: {} nodes, {} inputs ({} captured), {} outputs>",
                g.name,
                g.node_count(),
                g.inputs.len(),
                g.captures,
                g.outputs.len()
            ),
        }
    }
}
