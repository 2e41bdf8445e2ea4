//! Helpers shared by the op families' unit tests.

use rtq_ir::{Attr, Node, ValueId};

/// A default-domain node of `op` with `attrs` and `outputs` output slots, for `eval_node`.
pub(crate) fn node(op: &str, attrs: &[(&str, Attr)], outputs: usize) -> Node {
    Node {
        name: format!("{op}_0"),
        op_type: op.into(),
        domain: String::new(),
        inputs: vec![],
        outputs: (0..outputs as u32).map(ValueId).collect(),
        attrs: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}
