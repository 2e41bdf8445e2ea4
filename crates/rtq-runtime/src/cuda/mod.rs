//! CUDA through cudarc (feature `cuda`): whether a driver is present
//! ([`driver_available`]) and which device an ordinal names ([`probe`]), the check
//! [`Backend::Cuda`] runs first.
//!
//! Internally, the device layer the TensorRT backend runs on: a device with one
//! non-blocking stream, growable device buffers, event timers and CUDA graphs.
//!
//! cudarc loads `libcuda` at run time, so builds need no CUDA installation. Before
//! touching cudarc the driver library is probed, and every cudarc call is guarded
//! against panics, so a machine without a driver or GPU gets a [`RuntimeError`],
//! never a panic.
//!
//! [`Backend::Cuda`]: crate::Backend::Cuda

use crate::RuntimeError;
use serde::{Deserialize, Serialize};

// With `cuda` alone only the driver and device check uses the device layer.
#[cfg(feature = "cuda")]
#[cfg_attr(not(feature = "tensorrt"), allow(dead_code))]
mod buffer;
#[cfg(feature = "cuda")]
#[cfg_attr(not(feature = "tensorrt"), allow(dead_code))]
mod device;
#[cfg(feature = "cuda")]
#[cfg_attr(not(feature = "tensorrt"), allow(dead_code))]
mod graph;
#[cfg(feature = "cuda")]
#[cfg_attr(not(feature = "tensorrt"), allow(dead_code))]
mod timer;

#[cfg(feature = "cuda")]
#[cfg_attr(not(feature = "tensorrt"), allow(unused_imports))]
pub(crate) use {buffer::DeviceBuffer, device::CudaDevice, graph::CudaGraphExec, timer::GpuTimer};

/// Facts about a CUDA device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Total device memory in bytes.
    pub total_memory_bytes: usize,
}

impl DeviceInfo {
    /// The compute capability as `major.minor`.
    pub fn compute_capability_string(&self) -> String {
        format!(
            "{}.{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// Whether the CUDA driver library can be loaded (always false without the `cuda` feature).
pub fn driver_available() -> bool {
    #[cfg(feature = "cuda")]
    {
        device::driver_present()
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

/// Opens CUDA device `ordinal` and describes it: the check [`Backend::Cuda`] runs first.
///
/// Errors: [`RuntimeError::CudaNotBuilt`] without the `cuda` feature,
/// [`RuntimeError::NoCudaDriver`] without a driver, [`RuntimeError::NoCudaDevice`] when
/// the device does not exist.
///
/// [`Backend::Cuda`]: crate::Backend::Cuda
pub fn probe(ordinal: usize) -> Result<DeviceInfo, RuntimeError> {
    #[cfg(feature = "cuda")]
    {
        device::open_context(ordinal).map(|(_, info)| info)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = ordinal;
        Err(RuntimeError::CudaNotBuilt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_capability_formats() {
        let info = DeviceInfo {
            ordinal: 0,
            name: "GPU".into(),
            compute_capability: (8, 9),
            total_memory_bytes: 1,
        };
        assert_eq!(info.compute_capability_string(), "8.9");
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn probe_without_the_feature_says_how_to_rebuild() {
        assert!(matches!(probe(0), Err(RuntimeError::CudaNotBuilt)));
        assert!(!driver_available());
    }
}
