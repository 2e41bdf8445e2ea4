//! Kernels, one op family per module. Each module exposes a `KERNELS` table mapping op
//! types to kernel functions; [`FAMILIES`] lists them for the registry.

use crate::registry::Kernel;

mod arg;
mod binary;
mod cast;
pub(crate) mod chain;
mod columns;
mod compare;
mod concat;
mod constant;
mod control_flow;
pub(crate) mod conv;
mod conv_channels;
mod conv_depthwise;
mod conv_direct;
pub(crate) mod conv_transpose;
mod cumsum;
mod einsum;
mod expand;
pub(crate) mod fused;
mod gather;
pub(crate) mod integer;
pub(crate) mod integer_depthwise;
mod integer_depthwise_vnni;
mod integer_direct;
mod matmul;
mod nonzero;
mod norm;
mod onehot;
mod pad;
mod pool;
mod quant;
mod recurrent;
mod reduce;
mod resize;
mod scatter;
mod shape_ops;
mod slice;
mod softmax;
mod transpose;
mod trilu;
pub(crate) mod unary;
mod window;
mod winograd;

/// Every op family's kernel table.
pub(crate) const FAMILIES: &[&[(&str, Kernel)]] = &[
    arg::KERNELS,
    binary::KERNELS,
    cast::KERNELS,
    compare::KERNELS,
    concat::KERNELS,
    constant::KERNELS,
    control_flow::KERNELS,
    conv::KERNELS,
    conv_transpose::KERNELS,
    cumsum::KERNELS,
    einsum::KERNELS,
    expand::KERNELS,
    gather::KERNELS,
    matmul::KERNELS,
    nonzero::KERNELS,
    norm::KERNELS,
    onehot::KERNELS,
    pad::KERNELS,
    pool::KERNELS,
    quant::KERNELS,
    recurrent::KERNELS,
    reduce::KERNELS,
    resize::KERNELS,
    scatter::KERNELS,
    shape_ops::KERNELS,
    slice::KERNELS,
    softmax::KERNELS,
    transpose::KERNELS,
    trilu::KERNELS,
    unary::KERNELS,
];
