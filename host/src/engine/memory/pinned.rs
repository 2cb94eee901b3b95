//! Page-locked host buffers and their views.

use super::{byte_len, check_range};
use crate::engine::pool::StreamPool;
use crate::engine::tracking::{Allocation, Events, Kind};
use crate::error::{DriverContext, Result};
use cudarc::driver::{CudaStream, HostSlice, SyncOnDrop};
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

/// An array of `T` in page-locked (pinned) host memory: copies from and to it run
/// asynchronously on a stream, overlapping with other work. Device accesses are tracked like
/// those of a [`DeviceBuffer`]; host access waits only for the device accesses it must follow.
///
/// [`DeviceBuffer`]: super::DeviceBuffer
pub struct PinnedBuffer<T> {
    alloc: Arc<Allocation>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: bytemuck::Pod> PinnedBuffer<T> {
    /// `len` zeros in page-locked host memory.
    pub fn zeros(pool: &StreamPool, len: usize) -> Result<Self> {
        let shared = pool.shared();
        let bytes = byte_len::<T>(len)?.max(1);
        let events = Events::new(shared)?;
        shared.ctx.bind_to_thread().op("cuCtxSetCurrent")?;
        // SAFETY: a plain page-locked allocation (flags 0: cached, readable at full speed by
        // the host, unlike write-combined memory).
        let ptr = unsafe { cudarc::driver::result::malloc_host(bytes, 0) }.op("cuMemHostAlloc")?;
        let alloc = Arc::new(Allocation::new(
            shared,
            events,
            ptr as u64,
            bytes,
            Kind::Pinned,
        ));
        // SAFETY: `ptr` points to `bytes` writable bytes just allocated for us alone.
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, bytes) };
        Ok(PinnedBuffer {
            alloc,
            len,
            _t: PhantomData,
        })
    }

    /// A page-locked copy of `data`.
    pub fn from_slice(pool: &StreamPool, data: &[T]) -> Result<Self> {
        let mut b = Self::zeros(pool, data.len())?;
        b.as_mut_slice()?.copy_from_slice(data);
        Ok(b)
    }

    /// The contents, once every device write queued so far has finished.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.alloc.host_wait(false)?;
        // SAFETY: the allocation holds `len` initialized `T` (zeroed at creation, `T: Pod`),
        // no device write is pending (waited above) and none can start while `&self` is
        // borrowed, because device writes need `&mut self`.
        Ok(unsafe { std::slice::from_raw_parts(self.alloc.ptr as *const T, self.len) })
    }

    /// The contents for writing, once every device access queued so far has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.alloc.host_wait(true)?;
        // SAFETY: as for `as_slice`; in addition no device read is pending, and `&mut self`
        // excludes every other access while the slice lives.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.alloc.ptr as *mut T, self.len) })
    }

    /// Whether every device access queued so far has finished (the host may write), without
    /// waiting.
    pub fn is_idle(&mut self) -> Result<bool> {
        self.alloc.host_idle()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A view of elements `range` for copies to the device.
    pub fn view(&self, range: Range<usize>) -> Result<PinnedView<'_, T>> {
        check_range(&range, self.len)?;
        Ok(PinnedView {
            alloc: &self.alloc,
            start: range.start,
            len: range.end - range.start,
            _t: PhantomData,
        })
    }

    /// A view of elements `range` for copies from the device.
    pub fn view_mut(&mut self, range: Range<usize>) -> Result<PinnedViewMut<'_, T>> {
        check_range(&range, self.len)?;
        Ok(PinnedViewMut {
            alloc: &self.alloc,
            start: range.start,
            len: range.end - range.start,
            _t: PhantomData,
        })
    }
}

/// A view into a [`PinnedBuffer`] that the device reads.
pub struct PinnedView<'a, T> {
    alloc: &'a Arc<Allocation>,
    start: usize,
    len: usize,
    _t: PhantomData<&'a T>,
}

/// A view into a [`PinnedBuffer`] that the device writes.
pub struct PinnedViewMut<'a, T> {
    alloc: &'a Arc<Allocation>,
    start: usize,
    len: usize,
    _t: PhantomData<&'a mut T>,
}

/// The address of element `start` of a pinned allocation, with an access by `stream`
/// recorded (a write when `write`).
fn pinned_access<'a, T>(
    alloc: &'a Arc<Allocation>,
    start: usize,
    stream: &'a CudaStream,
    write: bool,
) -> (*mut T, SyncOnDrop<'a>) {
    let guard = alloc.access(stream, write);
    // `start` lies inside the allocation: checked when the view was made (0 for the whole).
    ((alloc.ptr as *mut T).wrapping_add(start), guard)
}

macro_rules! host_slice {
    ($ty:ty, $start:expr, $($lt:lifetime)?) => {
        impl<$($lt,)? T> HostSlice<T> for $ty {
            fn len(&self) -> usize {
                self.len
            }
            unsafe fn stream_synced_slice<'b>(
                &'b self,
                stream: &'b CudaStream,
            ) -> (&'b [T], SyncOnDrop<'b>) {
                let (p, g) = pinned_access::<T>(&self.alloc, $start(self), stream, false);
                // SAFETY: `p` addresses `len` initialized elements inside the allocation; the
                // caller upholds cudarc's `HostSlice` contract (device use on `stream` only).
                (unsafe { std::slice::from_raw_parts(p, self.len) }, g)
            }
            unsafe fn stream_synced_mut_slice<'b>(
                &'b mut self,
                stream: &'b CudaStream,
            ) -> (&'b mut [T], SyncOnDrop<'b>) {
                let (p, g) = pinned_access::<T>(&self.alloc, $start(self), stream, true);
                // SAFETY: as above; `&mut self` makes this the only access through this view.
                (unsafe { std::slice::from_raw_parts_mut(p, self.len) }, g)
            }
        }
    };
}

host_slice!(PinnedBuffer<T>, |_b: &PinnedBuffer<T>| 0,);
host_slice!(PinnedView<'a, T>, |v: &PinnedView<'a, T>| v.start, 'a);
host_slice!(PinnedViewMut<'a, T>, |v: &PinnedViewMut<'a, T>| v.start, 'a);
