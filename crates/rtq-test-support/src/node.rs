//! Single nodes for `eval_node` and attribute maps.

use rtq_ir::{Attr, Node, ValueId};
use std::collections::BTreeMap;

/// The attribute map of `pairs`.
pub fn attrs(pairs: &[(&str, Attr)]) -> BTreeMap<String, Attr> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// A default-domain node `{op}_0` of `op` with `attrs` and `outputs` output slots, for
/// `eval_node`. Other names or domains: `Node { name: .., ..node(..) }`.
pub fn node(op: &str, attrs: &[(&str, Attr)], outputs: usize) -> Node {
    Node {
        name: format!("{op}_0"),
        op_type: op.into(),
        domain: String::new(),
        inputs: vec![],
        outputs: (0..outputs as u32).map(ValueId).collect(),
        attrs: self::attrs(attrs),
    }
}
