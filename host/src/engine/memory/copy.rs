//! Copies between host and device memory, and between devices, ordered by the buffers'
//! tracked accesses.

use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::CUevent_flags;
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
///
/// [`PinnedBuffer`]: super::PinnedBuffer
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
///
/// [`PinnedBuffer`]: super::PinnedBuffer
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

/// Refuses `stream` (argument `arg`) where it is not on the device of the buffer `side`, known
/// by its owning stream `owner`.
pub(super) fn stream_beside(
    (arg, stream): (&'static str, &CudaStream),
    (side, owner): (&str, &CudaStream),
) -> Result<()> {
    let (on, want) = (stream.context().ordinal(), owner.context().ordinal());
    if on != want {
        return Err(Error::arg(
            arg,
            format!("is a stream of device {on}, {side} lives on device {want}"),
        ));
    }
    Ok(())
}

/// Copies device memory of one GPU to device memory of another (or the same), without the host
/// waiting for either. `src_stream` must be a stream of the source's device and `dst_stream`
/// one of the destination's; lengths must be equal.
///
/// The copy runs on `src_stream` after the source's last write and after the destination's
/// earlier accesses (which `dst_stream` is made to wait for), and counts as a read of the
/// source on `src_stream` and a write of the destination on `dst_stream`: later work on either
/// device is ordered after it by the buffers' tracking, as within one device. It goes peer to
/// peer where direct access between the two devices is enabled ([`crate::Gpu::enable_peer_access`]);
/// otherwise the driver stages it through host memory.
pub fn peer<T, S: DevicePtr<T>, D: DevicePtrMut<T>>(
    src_stream: &Arc<CudaStream>,
    src: &S,
    dst_stream: &Arc<CudaStream>,
    dst: &mut D,
) -> Result<()> {
    stream_beside(("src_stream", src_stream), ("`src`", src.stream()))?;
    stream_beside(("dst_stream", dst_stream), ("`dst`", dst.stream()))?;
    copy(src.len(), dst.len(), || {
        let bytes = src.num_bytes();
        let untimed = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
        // The destination's guard first: `dst_stream` now waits for its earlier accesses, and
        // the copy's stream waits for that point of `dst_stream`.
        let (dst_ptr, _dst_done) = dst.device_ptr_mut(dst_stream);
        let free = dst_stream.record_event(untimed).op("cuEventRecord")?;
        let (src_ptr, _src_done) = src.device_ptr(src_stream);
        src_stream.wait(&free).op("cuStreamWaitEvent")?;
        // SAFETY: both addresses hold `bytes` bytes (equal lengths, checked above) in the
        // contexts named with them, and the guards order the copy after the accesses it must
        // follow and record it (on their own devices' streams) for later ones.
        unsafe {
            cudarc::driver::result::memcpy_peer_async(
                dst_stream.context().cu_ctx(),
                dst_ptr,
                src_stream.context().cu_ctx(),
                src_ptr,
                bytes,
                src_stream.cu_stream(),
            )
        }
        .op("cuMemcpyPeerAsync")?;
        // The destination's write is recorded on `dst_stream` once it has waited for the copy.
        let copied = src_stream.record_event(untimed).op("cuEventRecord")?;
        dst_stream.wait(&copied).op("cuStreamWaitEvent")
    })
}
