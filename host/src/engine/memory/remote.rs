//! Work on one GPU reading a buffer of another GPU in place, over the link between them,
//! ordered by the buffer's tracking on its own device.
//!
//! A copy to the reading GPU first ([`super::peer`]) writes the bytes into the reader's memory
//! and has the reader read them again; reading in place moves each byte once, by the reading
//! kernel's own loads, and needs no buffer on the reading side. The price is that the reading
//! kernel's blocks hold their SMs while its loads cross the link, where a copy runs on the copy
//! engines beside the SMs' work: for work that overlaps compute with the transfer (a gradient
//! exchanged during the next product, say), the copy first is usually faster.

use crate::error::{DriverContext, Error, Result};
use crate::Gpu;
use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};
use cudarc::driver::{CudaEvent, CudaStream, DevicePtr, DeviceSlice, SyncOnDrop};
use std::marker::PhantomData;
use std::sync::Arc;

/// A buffer of another GPU as work queued inside [`read_remote`] sees it: its device address
/// and length. Launchers take it like any buffer ([`DevicePtr`]). On the stream `read_remote`
/// was given its ordering is `read_remote`'s; on any other stream the launch also waits for
/// the buffer's last write and the host waits for the launch, so that it is over before the
/// read is recorded.
pub struct Remote<'a, T> {
    ptr: CUdeviceptr,
    len: usize,
    /// The stream of the buffer's own device its reads are recorded on.
    home: &'a Arc<CudaStream>,
    /// The stream `read_remote` orders, and the buffer's last write as `home` saw it.
    stream: &'a CudaStream,
    written: &'a CudaEvent,
    _t: PhantomData<&'a T>,
}

impl<T> DeviceSlice<T> for Remote<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn stream(&self) -> &Arc<CudaStream> {
        self.home
    }
}

impl<T> DevicePtr<T> for Remote<'_, T> {
    fn device_ptr<'b>(&'b self, stream: &'b CudaStream) -> (CUdeviceptr, SyncOnDrop<'b>) {
        if stream.cu_stream() == self.stream.cu_stream() {
            // Ordered by `read_remote`, around the whole of its work.
            return (self.ptr, SyncOnDrop::Record(None));
        }
        stream.context().record_err(stream.wait(self.written));
        (self.ptr, SyncOnDrop::Sync(Some(stream)))
    }
}

/// Queues `work` on `stream` (of `gpu`) reading `src`, a buffer of another device that `gpu`
/// reaches directly ([`Gpu::enable_peer_access`]), or of `gpu`'s own, in place, and returns
/// what `work` returns. `home` must be a stream of `src`'s device, one of its pool's for the
/// host never to wait.
///
/// The work runs after `src`'s last write and counts as a read of `src` on `home`: later writes
/// of `src` on its own device wait for it, as for any read there. `work` reads the [`Remote`]
/// it is given (it cannot write it), on `stream` without the host waiting, or on another
/// stream of `gpu` with the host waiting for that launch; it may also use buffers of `gpu` as
/// usual.
pub fn read_remote<T, S: DevicePtr<T>, R>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    src: &S,
    home: &Arc<CudaStream>,
    work: impl FnOnce(&Remote<'_, T>) -> Result<R>,
) -> Result<R> {
    let (here, on, there) = (
        gpu.info().ordinal,
        stream.context().ordinal(),
        src.stream().context().ordinal(),
    );
    if on != here {
        return Err(Error::arg(
            "stream",
            format!("is a stream of device {on}, the reading GPU is device {here}"),
        ));
    }
    super::copy::stream_beside(("home", home), ("`src`", src.stream()))?;
    if !gpu.reaches(there) {
        return Err(Error::arg(
            "src",
            format!(
                "lives on device {there}, whose memory device {here} does not reach directly: \
                 enable peer access between them first (where the hardware allows it)"
            ),
        ));
    }
    let untimed = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
    // `home` waits for the last write; the read is recorded there when `_read` drops, after
    // `home` has waited for the work below.
    let (ptr, _read) = src.device_ptr(home);
    let written = home.record_event(untimed).op("cuEventRecord")?;
    stream.wait(&written).op("cuStreamWaitEvent")?;
    let remote = Remote {
        ptr,
        len: src.len(),
        home,
        stream,
        written: &written,
        _t: PhantomData,
    };
    let out = work(&remote);
    // Whatever `work` queued before any failure is waited for before the read is recorded;
    // where the driver refuses that order, by the host.
    let ordered = stream
        .record_event(untimed)
        .and_then(|done| home.wait(&done));
    if ordered.is_err() {
        let _ = stream.synchronize();
    }
    ordered.op("cuStreamWaitEvent")?;
    out
}
