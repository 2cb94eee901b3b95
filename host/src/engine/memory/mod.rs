//! Device buffers and page-locked host buffers whose accesses are tracked per stream.
//!
//! # Why not cudarc's tracking alone
//!
//! cudarc 0.19's `CudaSlice` holds one read event and one write event. Every read re-records
//! the read event on the reading stream, so after reads on streams A and then B the event marks
//! only B's read. A writer (or the free in `Drop`) then waits for B but not A: if A's read is
//! still running, the writer overwrites data A has not read yet. `PinnedHostSlice` has the same
//! single event. The buffers here keep one read event *per stream*, and every stream that read
//! since the last write is waited on by the next writer and by the free. Reads wait for the last
//! write only. No access synchronizes the device or the host, except on a stream outside the
//! pool (see below).
//!
//! # Rules
//!
//! - Accesses are recorded for the streams of the [`StreamPool`] the buffer was made with (and
//!   the `Gpu`'s own stream). An access on any other stream is made safe by the host waiting for
//!   that stream right after the access is queued.
//! - Tracking is per buffer: two views of one buffer written on two streams are ordered one
//!   after the other. Use separate buffers for work that must run side by side.
//! - Buffers used in a CUDA graph are kept alive by the graph; each launch orders every later
//!   access after the launch. Do not drop buffers while a capture is in progress.
//!
//! The buffers implement cudarc's `DevicePtr`/`DevicePtrMut` (device) and `HostSlice` (pinned
//! host), so every launcher in [`crate::ops`] and cudarc's copies take them directly.
//!
//! [`StreamPool`]: crate::engine::StreamPool

mod copy;
mod device;
mod pinned;
mod remote;

pub use copy::{d2d, d2h, h2d, peer};
pub use device::{DeviceBuffer, DeviceView, DeviceViewMut};
pub use pinned::{PinnedBuffer, PinnedView, PinnedViewMut};
pub use remote::{read_remote, Remote};

use crate::error::{Error, Result};
use std::ops::Range;

pub(crate) fn check_range(range: &Range<usize>, len: usize) -> Result<()> {
    if range.start > range.end || range.end > len {
        return Err(Error::arg(
            "range",
            format!("{}..{} is not inside 0..{len}", range.start, range.end),
        ));
    }
    Ok(())
}

pub(crate) fn byte_len<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .filter(|b| *b <= isize::MAX as usize)
        .ok_or_else(|| Error::arg("len", format!("{len} elements overflow the address space")))
}
