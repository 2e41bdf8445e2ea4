//! Which ONNX ops the frontend imports, and over which opsets.

use std::ops::RangeInclusive;

/// Default-domain opsets the frontend reads (older models are rejected with a clear error).
pub const SUPPORTED_OPSETS: RangeInclusive<i64> = 7..=22;

/// An importer's declaration: the op it handles, the opsets it handles it for and its input arity.
#[derive(Debug, Clone)]
pub(crate) struct OpSpec {
    /// ONNX op type.
    pub op: &'static str,
    /// Opsets (of the default domain) this declaration covers.
    pub opsets: RangeInclusive<i64>,
    /// Allowed number of inputs (omitted optional inputs count).
    pub inputs: RangeInclusive<usize>,
}

const ANY: RangeInclusive<i64> = 1..=i64::MAX;
const MANY: usize = usize::MAX;

macro_rules! specs {
    ($($op:literal $opsets:expr, $lo:literal ..= $hi:expr;)*) => {
        &[$(OpSpec { op: $op, opsets: $opsets, inputs: $lo..=$hi }),*]
    };
}

/// Every default-domain op the frontend imports. Canonicalisation of opset-dependent
/// forms lives in `canonicalize.rs`; this table is the gate and the arity check.
pub(crate) const OPS: &[OpSpec] = specs![
    "Abs" ANY, 1..=1; "Acos" ANY, 1..=1; "Acosh" ANY, 1..=1; "Add" ANY, 2..=2; "And" ANY, 2..=2;
    "ArgMax" ANY, 1..=1; "ArgMin" ANY, 1..=1; "Asin" ANY, 1..=1; "Asinh" ANY, 1..=1; "Atan" ANY, 1..=1;
    "Atanh" ANY, 1..=1; "AveragePool" ANY, 1..=1; "BatchNormalization" ANY, 5..=5; "Cast" ANY, 1..=1;
    "CastLike" ANY, 2..=2; "Ceil" ANY, 1..=1; "Celu" ANY, 1..=1; "Clip" ANY, 1..=3; "Concat" ANY, 1..=MANY;
    "Constant" ANY, 0..=0; "ConstantOfShape" ANY, 1..=1; "Conv" ANY, 2..=3; "ConvTranspose" ANY, 2..=3;
    "Cos" ANY, 1..=1; "Cosh" ANY, 1..=1; "CumSum" ANY, 2..=2; "DepthToSpace" ANY, 1..=1;
    "DequantizeLinear" ANY, 2..=3; "Div" ANY, 2..=2; "Dropout" ANY, 1..=3;
    "DynamicQuantizeLinear" ANY, 1..=1; "Einsum" ANY, 1..=MANY;
    "Elu" ANY, 1..=1; "Equal" ANY, 2..=2; "Erf" ANY, 1..=1; "Exp" ANY, 1..=1; "Expand" ANY, 2..=2;
    "EyeLike" ANY, 1..=1; "If" ANY, 1..=1; "Loop" ANY, 2..=MANY; "Scan" 9..=i64::MAX, 1..=MANY; "Flatten" ANY, 1..=1; "Floor" ANY, 1..=1; "Gather" ANY, 2..=2;
    "GatherElements" ANY, 2..=2; "GatherND" ANY, 2..=2; "Gelu" ANY, 1..=1; "Gemm" ANY, 2..=3;
    "GlobalAveragePool" ANY, 1..=1; "GlobalLpPool" ANY, 1..=1; "GlobalMaxPool" ANY, 1..=1;
    "Greater" ANY, 2..=2; "GreaterOrEqual" ANY, 2..=2; "GroupNormalization" ANY, 3..=3; "GRU" ANY, 3..=6;
    "HardSigmoid" ANY, 1..=1; "HardSwish" ANY, 1..=1; "Hardmax" ANY, 1..=1; "Identity" ANY, 1..=1;
    "InstanceNormalization" ANY, 3..=3; "IsInf" ANY, 1..=1; "IsNaN" ANY, 1..=1; "LRN" ANY, 1..=1;
    "LayerNormalization" ANY, 2..=3; "LeakyRelu" ANY, 1..=1; "LSTM" ANY, 3..=8; "Less" ANY, 2..=2; "LessOrEqual" ANY, 2..=2;
    "Log" ANY, 1..=1; "LogSoftmax" ANY, 1..=1; "LpNormalization" ANY, 1..=1; "LpPool" ANY, 1..=1;
    "MatMul" ANY, 2..=2; "Max" ANY, 1..=MANY; "MaxPool" ANY, 1..=1; "Mean" ANY, 1..=MANY;
    "MeanVarianceNormalization" ANY, 1..=1; "Min" ANY, 1..=MANY;
    "Mish" ANY, 1..=1; "Mod" ANY, 2..=2; "Mul" ANY, 2..=2; "Neg" ANY, 1..=1; "NonZero" ANY, 1..=1;
    "Not" ANY, 1..=1; "OneHot" ANY, 3..=3; "Or" ANY, 2..=2; "PRelu" ANY, 2..=2; "Pad" ANY, 1..=4;
    "Pow" ANY, 2..=2; "QuantizeLinear" ANY, 2..=3; "Range" ANY, 3..=3; "Reciprocal" ANY, 1..=1;
    "ReduceL1" ANY, 1..=2; "ReduceL2" ANY, 1..=2; "ReduceLogSum" ANY, 1..=2; "ReduceLogSumExp" ANY, 1..=2;
    "ReduceMax" ANY, 1..=2; "ReduceMean" ANY, 1..=2; "ReduceMin" ANY, 1..=2; "ReduceProd" ANY, 1..=2;
    "ReduceSum" ANY, 1..=2; "ReduceSumSquare" ANY, 1..=2; "Relu" ANY, 1..=1; "RNN" ANY, 3..=6; "Reshape" ANY, 1..=2;
    "Resize" ANY, 1..=4; "Round" ANY, 1..=1; "ScatterElements" ANY, 3..=3; "ScatterND" ANY, 3..=3;
    "Selu" ANY, 1..=1; "Shape" ANY, 1..=1; "Shrink" ANY, 1..=1; "Sigmoid" ANY, 1..=1; "Sign" ANY, 1..=1;
    "Sin" ANY, 1..=1; "Sinh" ANY, 1..=1; "Size" ANY, 1..=1; "Slice" ANY, 1..=5; "Softmax" ANY, 1..=1;
    "Softplus" ANY, 1..=1; "Softsign" ANY, 1..=1; "SpaceToDepth" ANY, 1..=1; "Split" ANY, 1..=2;
    "Sqrt" ANY, 1..=1; "Squeeze" ANY, 1..=2; "Sub" ANY, 2..=2; "Sum" ANY, 1..=MANY; "Tan" ANY, 1..=1;
    "Tanh" ANY, 1..=1; "ThresholdedRelu" ANY, 1..=1; "Tile" ANY, 2..=2; "TopK" ANY, 1..=2;
    "Transpose" ANY, 1..=1; "Trilu" ANY, 1..=2; "Unsqueeze" ANY, 1..=2; "Upsample" 7..=9, 1..=2;
    "Where" ANY, 3..=3; "Xor" ANY, 2..=2;
];

/// Imported ops that never reach the graph: a `Constant` node becomes a constant value
/// and `Upsample` becomes `Resize` (import.rs and canonicalize.rs).
const REWRITTEN_AWAY: &[&str] = &["Constant", "Upsample"];

/// Every default-domain op type the frontend imports at some supported opset, sorted.
pub fn imported_ops() -> Vec<&'static str> {
    let mut ops: Vec<&'static str> = OPS.iter().map(|s| s.op).collect();
    ops.sort_unstable();
    ops.dedup();
    ops
}

/// The imported op types that import rewrites into other forms, so no imported graph
/// holds a node of them.
pub fn rewritten_ops() -> &'static [&'static str] {
    REWRITTEN_AWAY
}

/// The declaration for `op` at `opset`, if the frontend imports it.
pub(crate) fn lookup(op: &str, opset: i64) -> Option<&'static OpSpec> {
    OPS.iter().find(|s| s.op == op && s.opsets.contains(&opset))
}

/// Whether the frontend imports default-domain op `op` at `opset`.
pub fn is_known_op(op: &str, opset: i64) -> bool {
    lookup(op, opset).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_no_duplicates() {
        let mut names: Vec<_> = OPS.iter().map(|s| s.op).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
        assert_eq!(imported_ops(), names);
        assert!(rewritten_ops().iter().all(|op| names.contains(op)));
    }

    #[test]
    fn upsample_only_before_opset_10() {
        assert!(is_known_op("Upsample", 9));
        assert!(!is_known_op("Upsample", 13));
        assert!(is_known_op("Conv", 21));
        assert!(is_known_op("If", 13));
        // Scan-8 (batch axis, sequence_lens) differs from Scan-9 on.
        assert!(!is_known_op("Scan", 8) && is_known_op("Scan", 9));
    }
}
