use crate::{Attr, DType, IrError, Result, Shape, Tensor};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Index of a node in its graph's arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// Index of a value (a tensor edge: graph input, constant or node output) in its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl NodeId {
    /// The arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl ValueId {
    /// The arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A tensor flowing through the graph, with the facts known about it.
#[derive(Debug, Clone)]
pub struct Value {
    /// Label (the ONNX tensor name); unique within the graph.
    pub name: String,
    /// Element type, when known.
    pub dtype: Option<DType>,
    /// Shape, when known (dimensions may be symbolic).
    pub shape: Option<Shape>,
    /// The node and output slot producing it; `None` for graph inputs and constants.
    pub producer: Option<(NodeId, usize)>,
    /// The data, for initializers and folded constants.
    pub constant: Option<Arc<Tensor>>,
}

/// An operation: an ONNX op type with its inputs, outputs and attributes.
#[derive(Debug, Clone)]
pub struct Node {
    /// Label (the ONNX node name); unique within the graph.
    pub name: String,
    /// ONNX operator type, e.g. `Conv`.
    pub op_type: String,
    /// Operator domain; empty for the default ONNX domain.
    pub domain: String,
    /// Inputs by slot; `None` marks an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs by slot.
    pub outputs: Vec<ValueId>,
    /// Attributes by name.
    pub attrs: BTreeMap<String, Attr>,
}

impl Node {
    /// The control-flow bodies among the attributes (`then_branch`/`else_branch`,
    /// `body`), by attribute name.
    pub fn subgraphs(&self) -> impl Iterator<Item = (&str, &crate::Subgraph)> {
        self.attrs
            .iter()
            .filter_map(|(k, a)| a.as_graph().map(|g| (k.as_str(), g)))
    }

    /// The inputs the op defines: all but the trailing ones its bodies capture.
    pub fn declared_inputs(&self) -> &[Option<ValueId>] {
        &self.inputs[..self.inputs.len() - self.capture_count()]
    }

    /// The trailing inputs that are the outer values its bodies capture (the same for
    /// every body of the node).
    pub fn captured_inputs(&self) -> &[Option<ValueId>] {
        &self.inputs[self.inputs.len() - self.capture_count()..]
    }

    fn capture_count(&self) -> usize {
        let captures = self.subgraphs().map(|(_, g)| g.captures).max().unwrap_or(0);
        captures.min(self.inputs.len())
    }

    /// The attribute `name`, if set.
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.get(name)
    }

    /// Integer attribute `name`, or `default`.
    pub fn attr_int(&self, name: &str, default: i64) -> i64 {
        self.attr(name).and_then(Attr::as_int).unwrap_or(default)
    }

    /// Float attribute `name`, or `default`.
    pub fn attr_float(&self, name: &str, default: f32) -> f32 {
        self.attr(name).and_then(Attr::as_float).unwrap_or(default)
    }

    /// Integer-list attribute `name`, if set.
    pub fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).and_then(Attr::as_ints)
    }

    /// String attribute `name`, or `default`.
    pub fn attr_str<'a>(&'a self, name: &str, default: &'a str) -> &'a str {
        self.attr(name).and_then(Attr::as_str).unwrap_or(default)
    }

    /// The value at input slot `slot`, if present.
    pub fn input(&self, slot: usize) -> Option<ValueId> {
        self.inputs.get(slot).copied().flatten()
    }
}

/// A model's computation graph plus the model-level facts rtq carries through.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Graph name.
    pub name: String,
    /// Graph inputs fed at run time (initializers are not listed here).
    pub inputs: Vec<ValueId>,
    /// Graph outputs.
    pub outputs: Vec<ValueId>,
    /// Default-domain opset the graph's ops follow.
    pub opset: i64,
    /// Opsets of other domains the model imports, as (domain, version).
    pub extra_opsets: Vec<(String, i64)>,
    /// Producer name recorded in the source model.
    pub producer: String,
    /// Free-form metadata (`metadata_props`), kept in order.
    pub metadata: Vec<(String, String)>,
    /// For a control-flow body: how many of the trailing `inputs` stand for values of
    /// the enclosing graph (read by name in ONNX, explicit node inputs in rtq's IR).
    pub captures: usize,
    nodes: Vec<Option<Node>>,
    values: Vec<Value>,
    names: HashMap<String, ValueId>,
    node_names: HashSet<String>,
    /// Last suffix handed out per base name, so repeated bases stay O(1).
    suffixes: HashMap<String, usize>,
}

impl Graph {
    /// The inputs fed at run time: all but a body's trailing captured ones.
    pub fn declared_inputs(&self) -> &[ValueId] {
        &self.inputs[..self.inputs.len() - self.captures.min(self.inputs.len())]
    }

    /// A control-flow body's trailing inputs standing for the outer values it reads.
    pub fn captured_inputs(&self) -> &[ValueId] {
        &self.inputs[self.inputs.len() - self.captures.min(self.inputs.len())..]
    }

    /// An empty graph following default-domain opset `opset`.
    pub fn new(name: impl Into<String>, opset: i64) -> Graph {
        Graph {
            name: name.into(),
            opset,
            ..Graph::default()
        }
    }

    /// Adds a value with a unique name derived from `name`.
    pub fn add_value(&mut self, name: &str, dtype: Option<DType>, shape: Option<Shape>) -> ValueId {
        let name = self.claim_name(name, false);
        let id = ValueId(self.values.len() as u32);
        self.names.insert(name.clone(), id);
        self.values.push(Value {
            name,
            dtype,
            shape,
            producer: None,
            constant: None,
        });
        id
    }

    /// Adds a graph input.
    pub fn add_input(&mut self, name: &str, dtype: DType, shape: Shape) -> ValueId {
        let id = self.add_value(name, Some(dtype), Some(shape));
        self.inputs.push(id);
        id
    }

    /// Adds a constant (initializer) value holding `tensor`.
    pub fn add_constant(&mut self, name: &str, tensor: Tensor) -> ValueId {
        let shape = tensor.shape().iter().map(|&d| d.into()).collect();
        let id = self.add_value(name, Some(tensor.dtype()), Some(shape));
        self.values[id.index()].constant = Some(Arc::new(tensor));
        id
    }

    /// Adds a node; its outputs' producers are set to it. The node name is made unique.
    pub fn add_node(
        &mut self,
        name: &str,
        op_type: &str,
        inputs: Vec<Option<ValueId>>,
        outputs: Vec<ValueId>,
        attrs: BTreeMap<String, Attr>,
    ) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        let name = self.claim_name(if name.is_empty() { op_type } else { name }, true);
        for (slot, &out) in outputs.iter().enumerate() {
            self.values[out.index()].producer = Some((id, slot));
        }
        self.node_names.insert(name.clone());
        self.nodes.push(Some(Node {
            name,
            op_type: op_type.to_string(),
            domain: String::new(),
            inputs,
            outputs,
            attrs,
        }));
        id
    }

    /// Removes a node; its outputs lose their producer.
    pub fn remove_node(&mut self, id: NodeId) -> Option<Node> {
        let node = self.nodes.get_mut(id.index())?.take()?;
        for &out in &node.outputs {
            if self.values[out.index()].producer.map(|(n, _)| n) == Some(id) {
                self.values[out.index()].producer = None;
            }
        }
        self.node_names.remove(&node.name);
        Some(node)
    }

    /// The live node `id`; panics on a removed node (an rtq bug).
    pub fn node(&self, id: NodeId) -> &Node {
        self.nodes[id.index()].as_ref().expect("node is live")
    }

    /// The live node `id`, mutably.
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.nodes[id.index()].as_mut().expect("node is live")
    }

    /// Whether node `id` is still in the graph.
    pub fn is_live(&self, id: NodeId) -> bool {
        self.nodes.get(id.index()).is_some_and(Option::is_some)
    }

    /// The live nodes in insertion order.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (NodeId(i as u32), n)))
    }

    /// Ids of the live nodes in insertion order.
    pub fn node_ids(&self) -> Vec<NodeId> {
        self.nodes().map(|(id, _)| id).collect()
    }

    /// Number of live nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_some()).count()
    }

    /// The value `id`.
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    /// The value `id`, mutably. Renaming must go through [`Graph::rename_value`].
    pub fn value_mut(&mut self, id: ValueId) -> &mut Value {
        &mut self.values[id.index()]
    }

    /// All values ever added, live or not, with their ids.
    pub fn values(&self) -> impl Iterator<Item = (ValueId, &Value)> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, v)| (ValueId(i as u32), v))
    }

    /// Number of values ever added (the bound of [`ValueId::index`]).
    pub fn value_count(&self) -> usize {
        self.values.len()
    }

    /// The value named `name`.
    pub fn value_by_name(&self, name: &str) -> Option<ValueId> {
        self.names.get(name).copied()
    }

    /// The constant data of `id`, if it is a constant.
    pub fn constant(&self, id: ValueId) -> Option<&Arc<Tensor>> {
        self.values[id.index()].constant.as_ref()
    }

    /// The constant data of `id`, mutably, when `id` is a constant whose tensor nothing
    /// else (no clone of the graph, no executor) holds: rewrites in place then cost no copy.
    pub fn unique_constant_mut(&mut self, id: ValueId) -> Option<&mut Tensor> {
        self.values[id.index()]
            .constant
            .as_mut()
            .and_then(Arc::get_mut)
    }

    /// Turns `id` into a constant holding `tensor`. A node still producing `id` must be
    /// removed by the caller ([`verify`](crate::verify) rejects a value that is both).
    pub fn set_constant(&mut self, id: ValueId, tensor: Tensor) {
        let v = &mut self.values[id.index()];
        v.dtype = Some(tensor.dtype());
        v.shape = Some(tensor.shape().iter().map(|&d| d.into()).collect());
        v.constant = Some(Arc::new(tensor));
    }

    /// Renames value `id`; fails if another value holds `name`.
    pub fn rename_value(&mut self, id: ValueId, name: &str) -> Result<()> {
        if let Some(&other) = self.names.get(name) {
            if other != id {
                return Err(IrError::Invalid(format!("value name `{name}` is taken")));
            }
            return Ok(());
        }
        let old = std::mem::replace(&mut self.values[id.index()].name, name.to_string());
        self.names.remove(&old);
        self.names.insert(name.to_string(), id);
        Ok(())
    }

    /// Whether `id` is a graph input.
    pub fn is_graph_input(&self, id: ValueId) -> bool {
        self.inputs.contains(&id)
    }

    /// Whether `id` is a graph output.
    pub fn is_graph_output(&self, id: ValueId) -> bool {
        self.outputs.contains(&id)
    }

    /// For each value (indexed by [`ValueId::index`]), the (node, input slot) pairs reading it.
    pub fn consumers(&self) -> Vec<Vec<(NodeId, usize)>> {
        let mut uses = vec![Vec::new(); self.values.len()];
        for (id, node) in self.nodes() {
            for (slot, input) in node.inputs.iter().enumerate() {
                if let Some(v) = input {
                    uses[v.index()].push((id, slot));
                }
            }
        }
        uses
    }

    /// Makes every node input reading `old` read `new` instead (graph outputs are untouched).
    pub fn replace_uses(&mut self, old: ValueId, new: ValueId) {
        for node in self.nodes.iter_mut().flatten() {
            for input in node.inputs.iter_mut() {
                if *input == Some(old) {
                    *input = Some(new);
                }
            }
        }
    }

    /// Reroutes every reader of `old` to `new`. When `old` is a graph output, `new` takes
    /// its place and its name, so the model's interface keeps its names; returns false
    /// (changing nothing) when that is impossible because `new` is itself a graph input
    /// or output.
    pub fn bypass(&mut self, old: ValueId, new: ValueId) -> bool {
        if self.is_graph_output(old) {
            if self.is_graph_input(new) || self.is_graph_output(new) {
                return false;
            }
            let name = self.values[old.index()].name.clone();
            let temp = self.fresh_value_name(&format!("{name}__bypassed"));
            self.rename_value(old, &temp).expect("fresh name");
            self.rename_value(new, &name).expect("name just freed");
            for out in self.outputs.iter_mut() {
                if *out == old {
                    *out = new;
                }
            }
        }
        self.replace_uses(old, new);
        true
    }

    /// A value name not yet used in the graph, equal to `base` when that is free.
    pub fn fresh_value_name(&self, base: &str) -> String {
        unique_name(base, |n| self.names.contains_key(n))
    }

    /// A node name not yet used in the graph, equal to `base` when that is free.
    pub fn fresh_node_name(&self, base: &str) -> String {
        unique_name(base, |n| self.node_names.contains(n))
    }

    /// A free value (or node) name for `base`, resuming the suffix search where the
    /// last one for this base stopped: importing many nodes that share a name stays linear.
    fn claim_name(&mut self, base: &str, node: bool) -> String {
        let taken = |g: &Graph, n: &str| {
            if node {
                g.node_names.contains(n)
            } else {
                g.names.contains_key(n)
            }
        };
        if !taken(self, base) {
            return base.to_string();
        }
        let key = format!("{}{base}", if node { "n:" } else { "v:" });
        let mut i = self.suffixes.get(&key).copied().unwrap_or(0);
        loop {
            i += 1;
            let candidate = format!("{base}_{i}");
            if !taken(self, &candidate) {
                self.suffixes.insert(key, i);
                return candidate;
            }
        }
    }

    /// Values that nodes or graph outputs read: every value that must be emitted.
    pub fn live_values(&self) -> HashSet<ValueId> {
        let mut live: HashSet<ValueId> = self.inputs.iter().copied().collect();
        live.extend(self.outputs.iter().copied());
        for (_, node) in self.nodes() {
            live.extend(node.inputs.iter().flatten().copied());
            live.extend(node.outputs.iter().copied());
        }
        live
    }
}

/// `base`, or the first of `base_1`, `base_2`, ... that `taken` does not claim.
pub fn unique_name(base: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_string();
    }
    (1..)
        .map(|i| format!("{base}_{i}"))
        .find(|n| !taken(n))
        .expect("an unbounded range has a free name")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dim;

    fn relu_graph() -> (Graph, ValueId, ValueId, NodeId) {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Sym("N".into()), Dim::Known(4)]);
        let y = g.add_value("y", Some(DType::F32), None);
        let n = g.add_node("relu", "Relu", vec![Some(x)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        (g, x, y, n)
    }

    #[test]
    fn names_are_made_unique() {
        let (mut g, _, _, _) = relu_graph();
        let a = g.add_value("y", None, None);
        assert_eq!(g.value(a).name, "y_1");
        let n = g.add_node("relu", "Relu", vec![Some(a)], vec![], BTreeMap::new());
        assert_eq!(g.node(n).name, "relu_1");
    }

    #[test]
    fn many_equal_names_stay_fast_and_unique() {
        let mut g = Graph::new("g", 13);
        let ids: Vec<ValueId> = (0..20_000).map(|_| g.add_value("t", None, None)).collect();
        let names: HashSet<&str> = ids.iter().map(|&v| g.value(v).name.as_str()).collect();
        assert_eq!(names.len(), ids.len());
        assert_eq!(g.value(ids[2]).name, "t_2");
    }

    #[test]
    fn remove_node_clears_producer() {
        let (mut g, _, y, n) = relu_graph();
        assert_eq!(g.value(y).producer, Some((n, 0)));
        g.remove_node(n);
        assert!(g.value(y).producer.is_none());
        assert_eq!(g.node_count(), 0);
        assert!(!g.is_live(n));
    }

    #[test]
    fn bypass_keeps_output_name() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Known(2)]);
        let r = g.add_value("r", Some(DType::F32), None);
        g.add_node("relu", "Relu", vec![Some(x)], vec![r], BTreeMap::new());
        let y = g.add_value("y", Some(DType::F32), None);
        let id = g.add_node("id", "Identity", vec![Some(r)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        assert!(g.bypass(y, r));
        g.remove_node(id);
        assert_eq!(g.outputs, vec![r]);
        assert_eq!(g.value(r).name, "y");
        // An input cannot take an output's place.
        let mut g2 = Graph::new("g", 13);
        let x2 = g2.add_input("x", DType::F32, vec![]);
        let y2 = g2.add_value("y", None, None);
        g2.outputs.push(y2);
        assert!(!g2.bypass(y2, x2));
        let _ = x;
    }
}
