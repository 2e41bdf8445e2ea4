//! Precision transforms: INT8 explicit quantization (Q/DQ insertion following TensorRT's
//! placement rules), activation channel equalization ahead of it, and FP16 conversion. Both are ordinary graph transforms with
//! include/exclude filters, run as passes ([`Int8QdqPass`], [`Fp16Pass`]); rtq makes every precision decision in the graph itself.

mod bias;
mod bodies;
mod equalize;
mod error;
mod filter;
mod fp16;
mod int4;
mod int8;
mod passes;
mod placement;
mod weights;

pub use bias::{apply_bias_shifts, bias_site, BiasSite};
pub use bodies::{
    apply_int8_in_bodies, body_at, body_label, holds_weighted_ops, weighted_ops_in_bodies,
    BodiesSummary, BodyPath, BodyQuantSummary, BodyRanges,
};
pub use equalize::{
    apply_equalization, plan_equalization, EqualizeOptions, EqualizeSite, EqualizeSummary,
    EqualizedTensor,
};
pub use error::QuantError;
pub use filter::NodeFilter;
pub use fp16::{convert_fp16, Fp16Options, Fp16Summary, BF16_OPSET, FP16_MAX, HALF_QDQ_OPSET};
pub use int4::{
    apply_int4, dequantize_int4_blocks, int4_activations, int4_block_scale, plan_int4,
    quantize_int4_blocks, scale_rows, Int4Layer, Int4Options, Int4Plan, Int4Site, Int4Summary,
    Int4Tuning, INT4_BLOCK_SIZES, INT4_OPSET,
};
pub use int8::{
    apply_int8, plan_int8, Int8Options, Int8Plan, Int8Summary, WeightQuant, FP8_QDQ_OPSET,
};
pub use passes::{
    EqualizePass, Fp16Pass, Int4WeightsPass, Int8BodiesPass, Int8QdqPass, PRECISION_PASS_NAMES,
};
pub use placement::{INT8_ATTENTION_MAX_KEYS, INT8_WEIGHTED_OPS};
pub use rtq_ir::ScaleFormat;
pub use weights::{quantize_per_channel, quantize_symmetric, quantize_weights};
