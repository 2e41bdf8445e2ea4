//! Which reductions take `axes` as an input rather than an attribute, per opset.

/// Each `Reduce*` op with the default-domain opset from which its `axes` is input 1
/// instead of an attribute: ReduceSum's moved in opset 13, the others' in opset 18.
pub const REDUCE_AXES_INPUT_SINCE: &[(&str, i64)] = &[
    ("ReduceSum", 13),
    ("ReduceMean", 18),
    ("ReduceMax", 18),
    ("ReduceMin", 18),
    ("ReduceProd", 18),
    ("ReduceL1", 18),
    ("ReduceL2", 18),
    ("ReduceLogSum", 18),
    ("ReduceLogSumExp", 18),
    ("ReduceSumSquare", 18),
];

/// Whether `op` at default-domain `opset` takes `axes` as input 1 (false for an
/// attribute form and for ops that are no reduction).
pub fn reduce_axes_is_input(op: &str, opset: i64) -> bool {
    REDUCE_AXES_INPUT_SINCE
        .iter()
        .any(|&(o, since)| o == op && opset >= since)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_moved_at_13_for_sum_and_18_for_the_rest() {
        assert!(!reduce_axes_is_input("ReduceSum", 12));
        assert!(reduce_axes_is_input("ReduceSum", 13));
        assert!(!reduce_axes_is_input("ReduceMean", 17));
        assert!(reduce_axes_is_input("ReduceLogSum", 18));
        assert!(!reduce_axes_is_input("ArgMax", 22));
    }
}
