//! The record of who may still be using a buffer: every allocation's accesses per stream, and
//! the state a stream pool shares with every buffer allocated through it (its known streams,
//! the capture in progress). [`super::memory`]'s buffers and [`super::pool`]'s graphs both build
//! on it.

use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, SyncOnDrop};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Locks a mutex, taking the data even if another thread panicked while holding it (the
/// protected state is always left consistent between statements).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// State shared by a pool and every buffer allocated through it.
pub(crate) struct Shared {
    pub(crate) ctx: Arc<CudaContext>,
    /// The pool's streams, then the `Gpu`'s own stream: the streams whose accesses buffers
    /// track with events (any other stream is waited for by the host).
    pub(crate) known: Vec<Arc<CudaStream>>,
    /// Advances when a capture begins (after every known stream was synchronized) and when it
    /// ends; buffer states from an earlier epoch are complete or were only captured.
    pub(crate) epoch: AtomicU64,
    pub(crate) capture: Mutex<Option<CaptureState>>,
}

pub(crate) struct CaptureState {
    pub(crate) epoch: u64,
    pub(crate) touched: Vec<Arc<Allocation>>,
}

impl Shared {
    /// Index of `stream` among the known streams.
    pub(crate) fn slot_of(&self, stream: &CudaStream) -> Option<usize> {
        self.known
            .iter()
            .position(|k| k.cu_stream() == stream.cu_stream())
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The epoch of the capture in progress, if any.
    pub(crate) fn capture_epoch(&self) -> Option<u64> {
        lock(&self.capture).as_ref().map(|c| c.epoch)
    }

    /// Remembers that a capture in progress uses `alloc`: the graph keeps it alive and, after
    /// each launch, orders later accesses after the launch.
    pub(crate) fn register(&self, alloc: &Arc<Allocation>) {
        if let Some(c) = lock(&self.capture).as_mut() {
            if !c.touched.iter().any(|a| Arc::ptr_eq(a, alloc)) {
                c.touched.push(alloc.clone());
            }
        }
    }

    pub(crate) fn synchronize_known(&self) -> Result<()> {
        for s in &self.known {
            s.synchronize().op("cuStreamSynchronize")?;
        }
        self.ctx.check_err().op("an earlier asynchronous call")
    }
}

/// Who owns the memory and how it is freed.
pub(crate) enum Kind {
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
    pub(crate) ptr: u64,
    pub(crate) bytes: usize,
    kind: Kind,
    shared: Arc<Shared>,
    read_events: Vec<CudaEvent>,
    write_event: CudaEvent,
    state: Mutex<State>,
}

/// The events an allocation records its accesses with: one read event per known stream and
/// one write event. Created before the memory, so that no failure can leak the memory.
pub(crate) struct Events {
    reads: Vec<CudaEvent>,
    write: CudaEvent,
}

impl Events {
    pub(crate) fn new(shared: &Shared) -> Result<Events> {
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
    pub(crate) fn new(
        shared: &Arc<Shared>,
        events: Events,
        ptr: u64,
        bytes: usize,
        kind: Kind,
    ) -> Allocation {
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
    pub(crate) fn access<'a>(
        self: &'a Arc<Self>,
        stream: &'a CudaStream,
        write: bool,
    ) -> SyncOnDrop<'a> {
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
    pub(crate) fn host_wait(&self, write: bool) -> Result<()> {
        let mut st = lock(&self.state);
        self.refresh(&mut st);
        if self.shared.capture_epoch() == Some(st.epoch)
            && (st.write.is_some() || st.reads.iter().any(|r| *r))
        {
            return Err(Error::Capture {
                during: "wait on the host for a buffer's accesses",
                reason: "they are being captured",
            });
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

    /// Whether the device accesses a host write must follow have all finished, without
    /// waiting; when they have, the host may write (as after [`Allocation::host_wait`]).
    pub(crate) fn host_idle(&self) -> Result<bool> {
        let busy = {
            let mut st = lock(&self.state);
            self.refresh(&mut st);
            let mut busy = false;
            for e in self.pending(&st) {
                busy |= !e.try_is_complete().op("cuEventQuery")?;
            }
            busy
        };
        if busy {
            return Ok(false);
        }
        self.host_wait(true)?;
        Ok(true)
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
