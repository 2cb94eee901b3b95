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

use super::pool::{lock, Shared, StreamPool};
use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};
use cudarc::driver::{
    CudaEvent, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, DeviceSlice, HostSlice, SyncOnDrop,
};
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// Who owns the memory and how it is freed.
enum Kind {
    /// Device memory, allocated and freed in order on `owner` when `stream_ordered`.
    Device {
        owner: Arc<CudaStream>,
        stream_ordered: bool,
    },
    /// Page-locked host memory (`cuMemHostAlloc`).
    Pinned,
}

/// Which accesses since the last write may still be running.
struct State {
    /// The pool epoch these flags belong to; flags of another epoch are void.
    epoch: u64,
    /// Known streams that read since the last write (their read event marks the read).
    reads: Vec<bool>,
    /// Known stream of the last write, if it may still be running.
    write: Option<usize>,
    /// A graph launch that used the buffer after the accesses above.
    fence: Option<Arc<CudaEvent>>,
}

impl State {
    fn clear(&mut self) {
        self.reads.fill(false);
        self.write = None;
        self.fence = None;
    }
}

/// One allocation and the record of its accesses. Shared (by `Arc`) between the buffer and any
/// graph that uses it; freed when the last owner drops it, after every recorded access.
pub(crate) struct Allocation {
    ptr: u64,
    bytes: usize,
    kind: Kind,
    shared: Arc<Shared>,
    read_events: Vec<CudaEvent>,
    write_event: CudaEvent,
    state: Mutex<State>,
}

/// The events an allocation records its accesses with: one read event per known stream and
/// one write event. Created before the memory, so that no failure can leak the memory.
struct Events {
    reads: Vec<CudaEvent>,
    write: CudaEvent,
}

impl Events {
    fn new(shared: &Shared) -> Result<Events> {
        let ev = || {
            shared
                .ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .op("cuEventCreate")
        };
        Ok(Events {
            reads: shared.known.iter().map(|_| ev()).collect::<Result<_>>()?,
            write: ev()?,
        })
    }
}

impl Allocation {
    fn new(shared: &Arc<Shared>, events: Events, ptr: u64, bytes: usize, kind: Kind) -> Allocation {
        Allocation {
            ptr,
            bytes,
            kind,
            shared: shared.clone(),
            read_events: events.reads,
            write_event: events.write,
            state: Mutex::new(State {
                epoch: shared.epoch(),
                reads: vec![false; shared.known.len()],
                write: None,
                fence: None,
            }),
        }
    }

    /// Voids flags of an earlier epoch: a capture began since (after the host waited for all
    /// known streams) or ended (what it recorded never ran outside the graph).
    fn refresh(&self, st: &mut State) {
        let now = self.shared.epoch();
        if st.epoch != now {
            st.clear();
            st.epoch = now;
        }
    }

    /// Makes `stream` wait for the accesses a read (`write == false`) or a write must follow,
    /// records the new access, and returns what records its end once it is queued.
    fn access<'a>(self: &'a Arc<Self>, stream: &'a CudaStream, write: bool) -> SyncOnDrop<'a> {
        self.shared.register(self);
        let ctx = stream.context();
        let slot = self.shared.slot_of(stream);
        let mut st = lock(&self.state);
        self.refresh(&mut st);
        if let Some(f) = &st.fence {
            ctx.record_err(stream.wait(f));
        }
        if let Some(w) = st.write {
            if Some(w) != slot {
                ctx.record_err(stream.wait(&self.write_event));
            }
        }
        if write {
            for (j, live) in st.reads.iter().enumerate() {
                if *live && Some(j) != slot {
                    ctx.record_err(stream.wait(&self.read_events[j]));
                }
            }
        }
        match slot {
            Some(i) if ctx.is_managing_stream_synchronization() => {
                if write {
                    st.clear();
                    st.write = Some(i);
                    SyncOnDrop::Record(Some((&self.write_event, stream)))
                } else {
                    st.reads[i] = true;
                    SyncOnDrop::Record(Some((&self.read_events[i], stream)))
                }
            }
            _ => {
                // Not a stream of the pool: the host waits for it once the access is queued,
                // so the access is finished before anything else can see the buffer.
                if write {
                    st.clear();
                }
                SyncOnDrop::Sync(Some(stream))
            }
        }
    }

    /// The host waits for the device accesses a host read (`write == false`) or host write
    /// must follow.
    fn host_wait(&self, write: bool) -> Result<()> {
        let mut st = lock(&self.state);
        self.refresh(&mut st);
        if self.shared.capture_epoch() == Some(st.epoch)
            && (st.write.is_some() || st.reads.iter().any(|r| *r))
        {
            return Err(Error::Capture(
                "the host cannot wait for a buffer's accesses while they are being captured".into(),
            ));
        }
        if let Some(f) = &st.fence {
            f.synchronize().op("cuEventSynchronize")?;
        }
        if st.write.is_some() {
            self.write_event.synchronize().op("cuEventSynchronize")?;
        }
        if write {
            for (j, live) in st.reads.iter().enumerate() {
                if *live {
                    self.read_events[j].synchronize().op("cuEventSynchronize")?;
                }
            }
            st.clear();
        } else {
            st.write = None;
            if st.reads.iter().all(|r| !r) {
                st.fence = None;
            }
        }
        Ok(())
    }

    /// After a graph launch that used this buffer: every later access waits for `fence`.
    pub(crate) fn fenced(&self, fence: &Arc<CudaEvent>, epoch: u64) {
        let mut st = lock(&self.state);
        st.clear();
        st.epoch = epoch;
        st.fence = Some(fence.clone());
    }

    /// The events still pending for this allocation in the current epoch.
    fn pending<'a>(&'a self, st: &'a State) -> Vec<&'a CudaEvent> {
        if st.epoch != self.shared.epoch() {
            return Vec::new();
        }
        let mut v: Vec<&CudaEvent> = st.fence.iter().map(|f| f.as_ref()).collect();
        if st.write.is_some() {
            v.push(&self.write_event);
        }
        for (j, live) in st.reads.iter().enumerate() {
            if *live {
                v.push(&self.read_events[j]);
            }
        }
        v
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        let ctx = self.shared.ctx.clone();
        let st = std::mem::replace(
            &mut *lock(&self.state),
            State {
                epoch: 0,
                reads: Vec::new(),
                write: None,
                fence: None,
            },
        );
        let pending = self.pending(&st);
        match &self.kind {
            Kind::Device {
                owner,
                stream_ordered: true,
            } => {
                for e in pending {
                    ctx.record_err(owner.wait(e));
                }
                ctx.record_err(ctx.bind_to_thread());
                // SAFETY: `ptr` came from cuMemAllocAsync and is freed once; the owner stream
                // waits (above) for every access recorded, so the free follows them all.
                ctx.record_err(unsafe {
                    cudarc::driver::result::free_async(self.ptr, owner.cu_stream())
                });
            }
            Kind::Device { .. } => {
                for e in pending {
                    ctx.record_err(e.synchronize());
                }
                ctx.record_err(ctx.bind_to_thread());
                // SAFETY: `ptr` came from cuMemAlloc and is freed once, after the host waited
                // for every recorded access.
                ctx.record_err(unsafe { cudarc::driver::result::free_sync(self.ptr) });
            }
            Kind::Pinned => {
                for e in pending {
                    ctx.record_err(e.synchronize());
                }
                ctx.record_err(ctx.bind_to_thread());
                // SAFETY: `ptr` came from cuMemHostAlloc and is freed once, after the host
                // waited for every recorded access.
                ctx.record_err(unsafe { cudarc::driver::result::free_host(self.ptr as *mut _) });
            }
        }
    }
}

fn check_range(range: &Range<usize>, len: usize) -> Result<()> {
    if range.start > range.end || range.end > len {
        return Err(Error::arg(
            "range",
            format!("{}..{} is not inside 0..{len}", range.start, range.end),
        ));
    }
    Ok(())
}

fn byte_len<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .filter(|b| *b <= isize::MAX as usize)
        .ok_or_else(|| Error::arg("len", format!("{len} elements overflow the address space")))
}

/// An array of `T` in device memory, allocated from a [`StreamPool`], whose accesses on the
/// pool's streams are ordered by events (see the module docs).
pub struct DeviceBuffer<T> {
    alloc: Arc<Allocation>,
    ptr: u64,
    len: usize,
    owner: Arc<CudaStream>,
    _t: PhantomData<T>,
}

impl<T: bytemuck::Pod + DeviceRepr> DeviceBuffer<T> {
    /// `len` zeros, allocated (and zeroed) in order on pool stream `stream`.
    pub fn zeros(pool: &StreamPool, stream: usize, len: usize) -> Result<Self> {
        let mut b = Self::alloc(pool, stream, len)?;
        let s = pool.stream(stream)?.clone();
        b.fill_zeros(&s)?;
        Ok(b)
    }

    /// A copy of `data`, allocated and copied in order on pool stream `stream`.
    pub fn from_slice(pool: &StreamPool, stream: usize, data: &[T]) -> Result<Self> {
        let mut b = Self::alloc(pool, stream, data.len())?;
        let s = pool.stream(stream)?.clone();
        h2d(&s, data, &mut b)?;
        Ok(b)
    }

    fn alloc(pool: &StreamPool, stream: usize, len: usize) -> Result<Self> {
        let owner = pool.stream(stream)?.clone();
        let shared = pool.shared();
        // Never zero bytes: the driver refuses empty allocations.
        let bytes = byte_len::<T>(len)?.max(1);
        let events = Events::new(shared)?;
        shared.ctx.bind_to_thread().op("cuCtxSetCurrent")?;
        let stream_ordered = shared.ctx.has_async_alloc();
        let ptr = if stream_ordered {
            // SAFETY: a plain allocation on a live stream of this context.
            unsafe { cudarc::driver::result::malloc_async(owner.cu_stream(), bytes) }
                .op("cuMemAllocAsync")?
        } else {
            // SAFETY: a plain allocation in the current context.
            unsafe { cudarc::driver::result::malloc_sync(bytes) }.op("cuMemAlloc")?
        };
        let alloc = Arc::new(Allocation::new(
            shared,
            events,
            ptr,
            bytes,
            Kind::Device {
                owner: owner.clone(),
                stream_ordered,
            },
        ));
        if stream_ordered {
            // The allocation is ordered on the owner stream: later users wait for it as for a
            // write there.
            let g = alloc.access(&owner, true);
            drop(g);
        }
        Ok(DeviceBuffer {
            ptr: alloc.ptr,
            alloc,
            len,
            owner,
            _t: PhantomData,
        })
    }

    /// Sets every byte to zero, on `stream`.
    pub fn fill_zeros(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        let bytes = self.len * std::mem::size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        stream.context().bind_to_thread().op("cuCtxSetCurrent")?;
        let (ptr, _record) = self.device_ptr_mut(stream);
        // SAFETY: `ptr` addresses `bytes` bytes of this allocation, and the guard orders the
        // memset after the accesses it must follow and records it for later ones.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, 0, bytes, stream.cu_stream()) }
            .op("cuMemsetD8Async")
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A read-only view of elements `range`.
    pub fn view(&self, range: Range<usize>) -> Result<DeviceView<'_, T>> {
        check_range(&range, self.len)?;
        Ok(DeviceView {
            alloc: &self.alloc,
            owner: &self.owner,
            ptr: self.alloc.ptr + (range.start * std::mem::size_of::<T>()) as u64,
            len: range.end - range.start,
            _t: PhantomData,
        })
    }

    /// A writable view of elements `range`.
    pub fn view_mut(&mut self, range: Range<usize>) -> Result<DeviceViewMut<'_, T>> {
        check_range(&range, self.len)?;
        Ok(DeviceViewMut {
            alloc: &self.alloc,
            owner: &self.owner,
            ptr: self.alloc.ptr + (range.start * std::mem::size_of::<T>()) as u64,
            len: range.end - range.start,
            _t: PhantomData,
        })
    }

    /// Copies the whole buffer to a new host vector, on `stream`, and waits for it.
    pub fn to_vec(&self, stream: &Arc<CudaStream>) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len];
        d2h(stream, self, &mut v)?;
        stream.synchronize().op("cuStreamSynchronize")?;
        Ok(v)
    }

    /// Size in bytes of the allocation.
    pub fn bytes(&self) -> usize {
        self.alloc.bytes
    }
}

/// A read-only view into a [`DeviceBuffer`].
pub struct DeviceView<'a, T> {
    alloc: &'a Arc<Allocation>,
    owner: &'a Arc<CudaStream>,
    ptr: u64,
    len: usize,
    _t: PhantomData<&'a T>,
}

/// A writable view into a [`DeviceBuffer`].
pub struct DeviceViewMut<'a, T> {
    alloc: &'a Arc<Allocation>,
    owner: &'a Arc<CudaStream>,
    ptr: u64,
    len: usize,
    _t: PhantomData<&'a mut T>,
}

macro_rules! device_slice {
    ($ty:ty, $($lt:lifetime)?) => {
        impl<$($lt,)? T> DeviceSlice<T> for $ty {
            fn len(&self) -> usize {
                self.len
            }
            fn stream(&self) -> &Arc<CudaStream> {
                &self.owner
            }
        }
        impl<$($lt,)? T> DevicePtr<T> for $ty {
            fn device_ptr<'b>(&'b self, stream: &'b CudaStream) -> (CUdeviceptr, SyncOnDrop<'b>) {
                (self.ptr, self.alloc.access(stream, false))
            }
        }
    };
}

device_slice!(DeviceBuffer<T>,);
device_slice!(DeviceView<'a, T>, 'a);
device_slice!(DeviceViewMut<'a, T>, 'a);

impl<T> DevicePtrMut<T> for DeviceBuffer<T> {
    fn device_ptr_mut<'b>(&'b mut self, stream: &'b CudaStream) -> (CUdeviceptr, SyncOnDrop<'b>) {
        (self.ptr, self.alloc.access(stream, true))
    }
}

impl<T> DevicePtrMut<T> for DeviceViewMut<'_, T> {
    fn device_ptr_mut<'b>(&'b mut self, stream: &'b CudaStream) -> (CUdeviceptr, SyncOnDrop<'b>) {
        (self.ptr, self.alloc.access(stream, true))
    }
}

/// An array of `T` in page-locked (pinned) host memory: copies from and to it run
/// asynchronously on a stream, overlapping with other work. Device accesses are tracked like
/// those of a [`DeviceBuffer`]; host access waits only for the device accesses it must follow.
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

fn same_len(src: usize, dst: usize) -> Result<()> {
    if src != dst {
        return Err(Error::arg(
            "dst",
            format!("length {dst} differs from the source's length {src}"),
        ));
    }
    Ok(())
}

/// Copies host memory to the device on `stream`. From a [`PinnedBuffer`] the copy is
/// asynchronous (the host returns at once); from pageable memory (`Vec`, slices) the driver
/// stages it and the host waits until the source may be reused. Lengths must be equal.
pub fn h2d<T: DeviceRepr, S: HostSlice<T> + ?Sized, D: DevicePtrMut<T>>(
    stream: &Arc<CudaStream>,
    src: &S,
    dst: &mut D,
) -> Result<()> {
    same_len(src.len(), dst.len())?;
    if src.len() == 0 {
        return Ok(());
    }
    stream.memcpy_htod(src, dst).op("cuMemcpyHtoDAsync")
}

/// Copies device memory to the host on `stream`: asynchronous into a [`PinnedBuffer`],
/// finished on return into pageable memory. Lengths must be equal.
pub fn d2h<T: DeviceRepr, S: DevicePtr<T>, D: HostSlice<T> + ?Sized>(
    stream: &Arc<CudaStream>,
    src: &S,
    dst: &mut D,
) -> Result<()> {
    same_len(src.len(), dst.len())?;
    if src.len() == 0 {
        return Ok(());
    }
    stream.memcpy_dtoh(src, dst).op("cuMemcpyDtoHAsync")
}

/// Copies device memory to device memory on `stream`. Lengths must be equal.
pub fn d2d<T, S: DevicePtr<T>, D: DevicePtrMut<T>>(
    stream: &Arc<CudaStream>,
    src: &S,
    dst: &mut D,
) -> Result<()> {
    same_len(src.len(), dst.len())?;
    if src.len() == 0 {
        return Ok(());
    }
    stream.memcpy_dtod(src, dst).op("cuMemcpyDtoDAsync")
}
