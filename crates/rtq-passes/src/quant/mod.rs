//! Precision transforms: INT8 explicit quantization (Q/DQ insertion following TensorRT's
//! placement rules) and FP16 conversion. Both are ordinary graph transforms with
//! include/exclude filters; rtq makes every precision decision in the graph itself.

mod error;
mod filter;
mod fp16;
mod int8;
mod scale;
mod weights;

pub use error::QuantError;
pub use filter::NodeFilter;
pub use fp16::{convert_fp16, Fp16Options, Fp16Summary, FP16_MAX, HALF_QDQ_OPSET};
pub use int8::{apply_int8, plan_int8, Int8Options, Int8Plan, Int8Summary, WeightQuant};
pub use scale::ScaleFormat;
pub use weights::{quantize_per_channel, quantize_symmetric};
