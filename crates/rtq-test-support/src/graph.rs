//! Building test graphs node by node.

use crate::attrs;
use rtq_ir::{Attr, Graph, ValueId};

/// Adds node `name` running `op` on `inputs` with `attrs` to `g`; returns its one output,
/// a value also called `name` (type and shape unknown).
pub fn add_op(
    g: &mut Graph,
    name: &str,
    op: &str,
    inputs: &[Option<ValueId>],
    attrs: &[(&str, Attr)],
) -> ValueId {
    let y = g.add_value(name, None, None);
    g.add_node(name, op, inputs.to_vec(), vec![y], self::attrs(attrs));
    y
}
