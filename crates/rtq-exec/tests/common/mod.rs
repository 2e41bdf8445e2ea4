//! Helpers shared by the executor's op-level integration tests.

use rtq_exec::eval_node;
use rtq_ir::{Attr, Tensor};
use rtq_test_support::node;

/// A 1-D int64 tensor of `v` (shapes, axes, indices).
pub fn ints(v: &[i64]) -> Tensor {
    Tensor::from_i64(vec![v.len()], v.to_vec())
}

/// Runs single-output `op` with `attrs` on `inputs`; panics naming the op on error.
pub fn run(op: &str, attrs: &[(&str, Attr)], inputs: &[Option<&Tensor>]) -> Tensor {
    eval_node(&node(op, attrs, 1), inputs)
        .unwrap_or_else(|e| panic!("{op}: {e}"))
        .remove(0)
}
