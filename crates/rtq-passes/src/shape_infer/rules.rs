//! The table from op type to its shape-inference rule.

use super::ctx::{Fact, NodeCtx};
use super::{
    control_flow, conv_pool, elementwise, generators, indexing, linalg, normalization, quant,
    recurrent, reduce, reshape, resize, slice_concat,
};
use crate::PassError;
use std::collections::HashMap;
use std::sync::OnceLock;

/// A shape-inference rule: facts for the node's outputs in order (possibly fewer than
/// the node has; missing ones are unknown).
pub(crate) type Rule = fn(&NodeCtx<'_>) -> Result<Vec<Fact>, PassError>;

/// Every rule with the default-domain ops it serves: [`rule_for`] and
/// [`shape_rule_ops`] read this table and nothing else.
const RULES: &[(&[&str], Rule)] = &[
    (elementwise::SAME_AS_INPUT, elementwise::same_as_input),
    (elementwise::BROADCAST, elementwise::broadcast),
    (elementwise::COMPARISON, elementwise::comparison),
    (&["IsNaN", "IsInf"], elementwise::predicate),
    (&["Dropout"], elementwise::dropout),
    (&["Where"], elementwise::where_),
    (&["Conv", "ConvInteger", "QLinearConv"], conv_pool::conv),
    (&["ConvTranspose"], conv_pool::conv_transpose),
    (&["MaxPool", "AveragePool", "LpPool"], conv_pool::pool),
    (
        &["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"],
        conv_pool::global_pool,
    ),
    (&["RoiAlign", "MaxRoiPool"], conv_pool::roi_pool),
    (
        &["MatMul", "MatMulInteger", "QLinearMatMul"],
        linalg::matmul,
    ),
    (&["Gemm"], linalg::gemm),
    (&["Einsum"], linalg::einsum),
    (&["Reshape"], reshape::reshape),
    (&["Flatten"], reshape::flatten),
    (&["Squeeze"], reshape::squeeze),
    (&["Unsqueeze"], reshape::unsqueeze),
    (&["Transpose"], reshape::transpose),
    (&["DepthToSpace", "SpaceToDepth"], reshape::depth_space),
    (&["Concat"], slice_concat::concat),
    (&["Split"], slice_concat::split),
    (&["Slice"], slice_concat::slice),
    (&["Pad"], slice_concat::pad),
    (&["Expand"], slice_concat::expand),
    (&["Tile"], slice_concat::tile),
    (&["Gather"], indexing::gather),
    (&["GatherElements"], indexing::gather_elements),
    (&["GatherND"], indexing::gather_nd),
    (&["TopK"], indexing::top_k),
    (&["OneHot"], indexing::one_hot),
    (&["NonZero"], indexing::non_zero),
    (&["NonMaxSuppression"], indexing::non_max_suppression),
    (
        &[
            "ReduceMean",
            "ReduceSum",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSum",
            "ReduceLogSumExp",
            "ReduceSumSquare",
        ],
        reduce::reduce,
    ),
    (&["ArgMax", "ArgMin"], reduce::arg_reduce),
    (&["BatchNormalization"], normalization::batch_norm),
    (&["LayerNormalization"], normalization::layer_norm),
    (&["Shape"], generators::shape),
    (&["Size"], generators::size),
    (&["Cast"], generators::cast),
    (&["CastLike"], generators::cast_like),
    (&["Constant"], generators::constant),
    (&["ConstantOfShape"], generators::constant_of_shape),
    (&["Range"], generators::range),
    (&["EyeLike"], generators::eye_like),
    (
        &[
            "RandomNormal",
            "RandomUniform",
            "RandomNormalLike",
            "RandomUniformLike",
            "Bernoulli",
        ],
        generators::random,
    ),
    (&["QuantizeLinear"], quant::quantize),
    (&["DequantizeLinear"], quant::dequantize),
    (&["DynamicQuantizeLinear"], quant::dynamic_quantize),
    (&["Resize"], resize::resize),
    (&["GridSample"], resize::grid_sample),
    (&["RNN", "GRU", "LSTM"], recurrent::recurrent),
    (&["If"], control_flow::if_),
    (&["Loop"], control_flow::loop_),
    (&["Scan"], control_flow::scan),
];

fn table() -> &'static HashMap<&'static str, Rule> {
    static TABLE: OnceLock<HashMap<&'static str, Rule>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut map = HashMap::new();
        for &(ops, rule) in RULES {
            for &op in ops {
                let previous = map.insert(op, rule);
                debug_assert!(previous.is_none(), "op `{op}` has two shape rules");
            }
        }
        map
    })
}

/// The rule for a default-domain op, if rtq knows one.
pub(crate) fn rule_for(op: &str) -> Option<Rule> {
    table().get(op).copied()
}

/// Every default-domain op type shape inference has a rule for, sorted.
pub fn shape_rule_ops() -> Vec<&'static str> {
    let mut ops: Vec<&'static str> = table().keys().copied().collect();
    ops.sort_unstable();
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_covers_the_common_ops_and_nothing_twice() {
        for op in [
            "Conv",
            "Relu",
            "Add",
            "Reshape",
            "Resize",
            "QuantizeLinear",
            "Equal",
        ] {
            assert!(rule_for(op).is_some(), "{op}");
        }
        assert!(rule_for("Loop").is_some() && rule_for("Foo").is_none());
        let listed: usize = RULES.iter().map(|(ops, _)| ops.len()).sum();
        assert_eq!(shape_rule_ops().len(), listed, "an op is listed twice");
        assert!(shape_rule_ops().windows(2).all(|w| w[0] < w[1]));
    }
}
