//! Copies between host and device memory, ordered by the buffers' tracked accesses.

use crate::error::{DriverContext, Error, Result};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, HostSlice};
use std::sync::Arc;

/// Runs `queue` (one copy) when the lengths agree and there is something to copy.
fn copy(src: usize, dst: usize, queue: impl FnOnce() -> Result<()>) -> Result<()> {
    if src != dst {
        return Err(Error::arg(
            "dst",
            format!("length {dst} differs from the source's length {src}"),
        ));
    }
    if src == 0 {
        return Ok(());
    }
    queue()
}

/// Copies host memory to the device on `stream`. From a [`PinnedBuffer`] the copy is
/// asynchronous (the host returns at once); from pageable memory (`Vec`, slices) the driver
/// stages it and the host waits until the source may be reused. Lengths must be equal.
pub fn h2d<T: DeviceRepr, S: HostSlice<T> + ?Sized, D: DevicePtrMut<T>>(
    stream: &Arc<CudaStream>,
    src: &S,
    dst: &mut D,
) -> Result<()> {
    copy(src.len(), dst.len(), || {
        stream.memcpy_htod(src, dst).op("cuMemcpyHtoDAsync")
    })
}

/// Copies device memory to the host on `stream`: asynchronous into a [`PinnedBuffer`],
/// finished on return into pageable memory. Lengths must be equal.
pub fn d2h<T: DeviceRepr, S: DevicePtr<T>, D: HostSlice<T> + ?Sized>(
    stream: &Arc<CudaStream>,
    src: &S,
    dst: &mut D,
) -> Result<()> {
    copy(src.len(), dst.len(), || {
        stream.memcpy_dtoh(src, dst).op("cuMemcpyDtoHAsync")
    })
}

/// Copies device memory to device memory on `stream`. Lengths must be equal.
pub fn d2d<T, S: DevicePtr<T>, D: DevicePtrMut<T>>(
    stream: &Arc<CudaStream>,
    src: &S,
    dst: &mut D,
) -> Result<()> {
    copy(src.len(), dst.len(), || {
        stream.memcpy_dtod(src, dst).op("cuMemcpyDtoDAsync")
    })
}
