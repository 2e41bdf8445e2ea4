//! Growable device buffers.

use super::device::guarded;
use super::CudaDevice;
use crate::RuntimeError;
use cudarc::driver::{CudaSlice, DevicePtr};

/// Device memory that grows on demand and is reused across inferences; starts empty
/// (`Default`).
#[derive(Debug, Default)]
pub(crate) struct DeviceBuffer {
    slice: Option<CudaSlice<u8>>,
}

impl DeviceBuffer {
    /// Bytes allocated.
    pub(crate) fn capacity(&self) -> usize {
        self.slice.as_ref().map_or(0, |s| s.len())
    }

    /// Makes the buffer hold at least `bytes` bytes (at least one, so the address is
    /// never NULL). Returns whether it was reallocated (its address changed).
    pub(crate) fn ensure(
        &mut self,
        device: &CudaDevice,
        what: &str,
        bytes: usize,
    ) -> Result<bool, RuntimeError> {
        let bytes = bytes.max(1);
        if self.capacity() >= bytes {
            return Ok(false);
        }
        self.slice = None;
        let slice = guarded(
            &format!("allocating {bytes} device bytes for `{what}`"),
            || device.stream().alloc_zeros::<u8>(bytes),
        )?;
        self.slice = Some(slice);
        Ok(true)
    }

    /// The device address (0 when nothing is allocated).
    pub(crate) fn device_ptr(&self, device: &CudaDevice) -> u64 {
        match &self.slice {
            Some(slice) => {
                let (ptr, _sync) = slice.device_ptr(device.stream());
                ptr
            }
            None => 0,
        }
    }

    /// Copies `src` to the start of the buffer on the device's stream.
    pub(crate) fn upload(
        &mut self,
        device: &CudaDevice,
        what: &str,
        src: &[u8],
    ) -> Result<(), RuntimeError> {
        if src.is_empty() {
            return Ok(());
        }
        let capacity = self.capacity();
        let slice = self
            .slice
            .as_mut()
            .filter(|_| capacity >= src.len())
            .ok_or_else(|| RuntimeError::Cuda {
                op: format!("copying `{what}` to the device"),
                message: format!("{} bytes do not fit the {capacity}-byte buffer", src.len()),
            })?;
        guarded(&format!("copying `{what}` to the device"), || {
            device
                .stream()
                .memcpy_htod(src, &mut slice.slice_mut(0..src.len()))
        })
    }

    /// Copies the first `dst.len()` bytes of the buffer into `dst` on the device's stream.
    pub(crate) fn download(
        &self,
        device: &CudaDevice,
        what: &str,
        dst: &mut [u8],
    ) -> Result<(), RuntimeError> {
        if dst.is_empty() {
            return Ok(());
        }
        let capacity = self.capacity();
        let slice = self
            .slice
            .as_ref()
            .filter(|_| capacity >= dst.len())
            .ok_or_else(|| RuntimeError::Cuda {
                op: format!("copying `{what}` to the host"),
                message: format!("{} bytes exceed the {capacity}-byte buffer", dst.len()),
            })?;
        let n = dst.len();
        guarded(&format!("copying `{what}` to the host"), || {
            device.stream().memcpy_dtoh(&slice.slice(0..n), dst)
        })
    }
}
