use crate::{Graph, IrError, NodeId, Result};

impl Graph {
    /// The live nodes in an order where every node comes after the producers of its
    /// inputs (Kahn's algorithm, ties broken by insertion order so the order is stable).
    pub fn topo_order(&self) -> Result<Vec<NodeId>> {
        let ids = self.node_ids();
        let mut pending = vec![0usize; self.nodes_capacity()];
        let mut readers: Vec<Vec<NodeId>> = vec![Vec::new(); self.nodes_capacity()];
        for &id in &ids {
            for input in self.node(id).inputs.iter().flatten() {
                if let Some((producer, _)) = self.value(*input).producer {
                    if self.is_live(producer) {
                        pending[id.index()] += 1;
                        readers[producer.index()].push(id);
                    }
                }
            }
        }
        let mut ready: std::collections::BTreeSet<NodeId> = ids
            .iter()
            .copied()
            .filter(|id| pending[id.index()] == 0)
            .collect();
        let mut order = Vec::with_capacity(ids.len());
        while let Some(id) = ready.pop_first() {
            order.push(id);
            for &r in &readers[id.index()] {
                pending[r.index()] -= 1;
                if pending[r.index()] == 0 {
                    ready.insert(r);
                }
            }
        }
        if order.len() != ids.len() {
            let stuck = ids
                .iter()
                .find(|id| pending[id.index()] > 0)
                .expect("some node is left");
            return Err(IrError::Cycle(self.node(*stuck).name.clone()));
        }
        Ok(order)
    }

    fn nodes_capacity(&self) -> usize {
        self.node_ids().last().map_or(0, |id| id.index() + 1)
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, Graph};
    use std::collections::BTreeMap;

    #[test]
    fn orders_nodes_added_out_of_order() {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![]);
        let a = g.add_value("a", None, None);
        let b = g.add_value("b", None, None);
        let second = g.add_node("second", "Relu", vec![Some(a)], vec![b], BTreeMap::new());
        let first = g.add_node("first", "Relu", vec![Some(x)], vec![a], BTreeMap::new());
        assert_eq!(g.topo_order().unwrap(), vec![first, second]);
    }

    #[test]
    fn reports_cycles() {
        let mut g = Graph::new("g", 13);
        let a = g.add_value("a", None, None);
        let b = g.add_value("b", None, None);
        g.add_node("n1", "Relu", vec![Some(a)], vec![b], BTreeMap::new());
        g.add_node("n2", "Relu", vec![Some(b)], vec![a], BTreeMap::new());
        let err = g.topo_order().unwrap_err().to_string();
        assert!(err.contains("cycle"), "{err}");
    }
}
