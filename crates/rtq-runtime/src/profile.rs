//! Per-layer timing of one inference ([`InferBackend::profile`](crate::InferBackend::profile)),
//! as trtexec's `--dumpProfile` reports it.

use serde::{Deserialize, Serialize};

/// The time one layer (node) of the model took in a profiled inference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerTime {
    /// The node's name.
    pub name: String,
    /// Its op type (e.g. `Conv`, or `com.rtq.integer::ConvInteger` for an op of another
    /// domain).
    pub op: String,
    /// Wall time in milliseconds.
    pub ms: f64,
}
