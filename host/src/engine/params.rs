//! Per-call parameter arrays on the device (angles, boxes, sigmas, means, a generator's
//! state), correct when the stream of the call is being captured into a CUDA graph: by
//! [`StreamPool::begin_capture`](super::StreamPool::begin_capture), by `torch.cuda.graph`, or
//! by any other capture.
//!
//! A host-to-device copy queued on a capturing stream is not run but recorded: every replay of
//! the graph copies from the same host address again, long after the call returned and freed
//! its host values, and the kernels then read whatever lies there. So on a capturing stream the
//! values are copied now, outside the capture (on a private stream of the same context, which
//! the host waits for), into device memory that the graph keeps alive (a CUDA user object the
//! graph retains, released once the graph and every executable graph made from it are
//! destroyed). The graph then holds only the kernels that read them, and every replay reads
//! the values of the captured call. Outside a capture the copy is the ordinary stream-ordered
//! one, and the host does not wait.

use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::{
    self, CUgraph, CUstreamCaptureStatus, CUuserObject, CUuserObjectRetain_flags,
    CUuserObject_flags,
};
use cudarc::driver::{
    result, CudaSlice, CudaStream, DevicePtr, DeviceRepr, DeviceSlice, SyncOnDrop,
};
use std::any::Any;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Whether `stream` is being captured: `Some(graph)` with the graph being built, `None`
/// otherwise. A capture that an earlier call invalidated is an error: the work would be lost.
pub fn capturing(stream: &CudaStream) -> Result<Option<CUgraph>> {
    let mut status = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut id = 0u64;
    let mut graph: CUgraph = std::ptr::null_mut();
    let mut deps: *const sys::CUgraphNode = std::ptr::null();
    let mut edges: *const sys::CUgraphEdgeData = std::ptr::null();
    let mut n = 0usize;
    // SAFETY: `stream` is a live stream handle; every out-pointer addresses a local of the
    // type the driver writes.
    unsafe {
        sys::cuStreamGetCaptureInfo_v3(
            stream.cu_stream(),
            &mut status,
            &mut id,
            &mut graph,
            &mut deps,
            &mut edges,
            &mut n,
        )
    }
    .result()
    .op("cuStreamGetCaptureInfo")?;
    match status {
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE => Ok(None),
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE => Ok(Some(graph)),
        _ => Err(Error::Capture {
            during: "queue work on the stream",
            reason: "its capture was invalidated by an earlier call; end the capture and \
                     capture again",
        }),
    }
}

pub use crate::runtime::outside_capture;

/// Parameter values on the device (see the module documentation): a buffer of cudarc's, with
/// its events as the context tracks them, or memory that carries no events ([`upload_kept`],
/// and every upload during a capture, which the graph keeps alive with the owners of this
/// value).
///
/// Memory made during a capture is freed only after the host has waited for the context's
/// work (eager work may have used it too), at the next upload outside a capture; memory made
/// outside one is freed in order on the stream it was made on.
pub struct DeviceParams<T> {
    inner: Inner<T>,
}

enum Inner<T> {
    Ordered(CudaSlice<T>),
    Kept {
        ptr: sys::CUdeviceptr,
        len: usize,
        /// The stream that filled it, which frees it: the caller's, or during a capture a
        /// private one.
        stream: Arc<CudaStream>,
        /// Made during a capture: freed after the context's work, by [`release_pending`].
        captured: bool,
    },
}

// SAFETY: the kept variant's pointer is device memory that this value alone frees; nothing
// in it is tied to a host thread.
unsafe impl<T> Send for DeviceParams<T> {}
// SAFETY: shared access only reads the pointer and length.
unsafe impl<T> Sync for DeviceParams<T> {}

impl<T> DeviceSlice<T> for DeviceParams<T> {
    fn len(&self) -> usize {
        match &self.inner {
            Inner::Ordered(s) => s.len(),
            Inner::Kept { len, .. } => *len,
        }
    }

    fn stream(&self) -> &Arc<CudaStream> {
        match &self.inner {
            Inner::Ordered(s) => s.stream(),
            Inner::Kept { stream, .. } => stream,
        }
    }
}

impl<T> DevicePtr<T> for DeviceParams<T> {
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        match &self.inner {
            Inner::Ordered(s) => s.device_ptr(stream),
            // Filled before the upload returned; no event to wait on or record (an event
            // recorded outside a capture cannot be waited on inside it).
            Inner::Kept { ptr, .. } => (*ptr, SyncOnDrop::Sync(None)),
        }
    }
}

impl<T> Drop for DeviceParams<T> {
    fn drop(&mut self) {
        let Inner::Kept {
            ptr,
            stream,
            captured,
            ..
        } = &self.inner
        else {
            return;
        };
        if *captured {
            // Eager work on any stream may still read it: freed once the host has waited for
            // the context (see `release_pending`).
            queue_release(Box::new(Unfreed {
                ptr: *ptr,
                stream: stream.clone(),
            }));
            return;
        }
        // SAFETY: `ptr` was allocated on `stream` by `kept` and is freed once, here, in order
        // after the work queued on `stream` (its users order other streams' work before the
        // drop, as the type's contract says).
        let freed = unsafe { result::free_async(*ptr, stream.cu_stream()) };
        stream.context().record_err(freed);
    }
}

/// Device memory made during a capture, waiting for [`release_pending`] to free it.
struct Unfreed {
    ptr: sys::CUdeviceptr,
    stream: Arc<CudaStream>,
}

impl Drop for Unfreed {
    fn drop(&mut self) {
        // SAFETY: dropped only by `release_pending`, after the context's work finished, so no
        // kernel reads `ptr` any more; freed once.
        let freed = unsafe { result::free_async(self.ptr, self.stream.cu_stream()) };
        self.stream.context().record_err(freed);
    }
}

/// `values` on the device for work queued on `stream`: copied in stream order, or, while
/// `stream` is being captured, copied now into memory the graph keeps alive (see the module
/// documentation). The buffer is freed when the last of its owners lets go.
pub fn upload<T: DeviceRepr + Send + Sync + 'static>(
    stream: &Arc<CudaStream>,
    values: &[T],
) -> Result<Arc<DeviceParams<T>>> {
    let Some(graph) = capturing(stream)? else {
        release_pending(stream)?;
        let dev = stream.clone_htod(values).op("cuMemcpyHtoDAsync")?;
        return Ok(Arc::new(DeviceParams {
            inner: Inner::Ordered(dev),
        }));
    };
    let dev = Arc::new(outside_capture(|| kept(stream, values, true))?);
    give_to_graph(graph, Box::new(dev.clone()))?;
    Ok(dev)
}

/// Uploads of values that never change once made (a product's tensor maps), kept across calls
/// and found again by their contents and stream: a call on a stream whose values were uploaded
/// there before reuses that device copy instead of copying again. Only the last
/// [`UploadCache::ENTRIES`] distinct uploads are kept. A copy is read only on the stream it was
/// made on, in order after it, and freed in that stream's order, so the guarantees are those of
/// [`upload`] whether or not the context tracks events. Nothing is kept where the context does
/// not track events (streams borrowed from another framework, which may be destroyed while a
/// kept copy still refers to them), nor during a capture, where the graph keeps its own copy.
#[derive(Default)]
pub struct UploadCache {
    entries: Mutex<Vec<Kept>>,
}

/// A kept upload: the handle of the stream it was made on (compared only; the device copy
/// holds the stream itself), its values, the device copy.
type Kept = (usize, Vec<u64>, Arc<DeviceParams<u64>>);

impl UploadCache {
    /// Distinct uploads kept (the most recently used).
    pub const ENTRIES: usize = 16;

    /// `values` on the device for work queued on `stream`: the copy kept for this stream, or
    /// a new upload (kept where the context tracks events, outside a capture).
    pub fn get(&self, stream: &Arc<CudaStream>, values: &[u64]) -> Result<Arc<DeviceParams<u64>>> {
        if !stream.context().is_event_tracking() || capturing(stream)?.is_some() {
            return upload(stream, values);
        }
        let on = stream.cu_stream() as usize;
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = entries
            .iter()
            .position(|(s, v, _)| *s == on && v.as_slice() == values)
        {
            let hit = entries.remove(i);
            let dev = hit.2.clone();
            entries.push(hit);
            return Ok(dev);
        }
        let dev = upload(stream, values)?;
        if entries.len() == Self::ENTRIES {
            entries.remove(0);
        }
        entries.push((on, values.to_vec(), dev.clone()));
        Ok(dev)
    }
}

/// Makes the graph being captured on `stream`, if any, keep `value` alive until it and its
/// executable graphs are destroyed: for what a captured launch reads that was made before the
/// capture (a generator, an augmentation's arrays), whose owner may go before the graph does.
pub fn keep_in_capture(stream: &CudaStream, value: Box<dyn Any + Send>) -> Result<()> {
    match capturing(stream)? {
        Some(graph) => give_to_graph(graph, value),
        None => Ok(()),
    }
}

/// [`upload`] for values that an object keeps across calls (a generator's state) rather than
/// one call's: copied now, the host waiting, into memory that carries no events, so that work
/// captured later reads it as well as eager work does. Work on it from several streams must
/// be ordered by the caller (the streams' own order, `wait_stream`).
pub fn upload_kept<T: DeviceRepr + Send + Sync + 'static>(
    stream: &Arc<CudaStream>,
    values: &[T],
) -> Result<Arc<DeviceParams<T>>> {
    let Some(graph) = capturing(stream)? else {
        release_pending(stream)?;
        return Ok(Arc::new(kept(stream, values, false)?));
    };
    let dev = Arc::new(outside_capture(|| kept(stream, values, true))?);
    give_to_graph(graph, Box::new(dev.clone()))?;
    Ok(dev)
}

/// `values` in new device memory of `stream`'s context, carrying no events: during a capture
/// (`captured`) filled on a private stream that the host waits for; otherwise allocated and
/// filled in order on `stream` itself, which frees it in order too.
fn kept<T: DeviceRepr>(
    stream: &Arc<CudaStream>,
    values: &[T],
    captured: bool,
) -> Result<DeviceParams<T>> {
    let on = if captured {
        stream.context().new_stream().op("cuStreamCreate")?
    } else {
        stream.clone()
    };
    let bytes = std::mem::size_of_val(values).max(1);
    // SAFETY: a new allocation in stream order on `on`, which no capture involves.
    let ptr = unsafe { result::malloc_async(on.cu_stream(), bytes) }.op("cuMemAllocAsync")?;
    let kept = DeviceParams {
        inner: Inner::Kept {
            ptr,
            len: values.len(),
            stream: on.clone(),
            captured,
        },
    };
    // SAFETY: `ptr` holds `bytes >= size_of_val(values)` bytes. The driver stages a copy from
    // pageable memory before the call returns, so `values` may go after it; during a capture
    // the host also waits for the copy below.
    unsafe { result::memcpy_htod_async(ptr, values, on.cu_stream()) }.op("cuMemcpyHtoDAsync")?;
    if captured {
        on.synchronize().op("cuStreamSynchronize")?;
    }
    Ok(kept)
}

/// Uploads made into memory a graph keeps, since the process started: how a caller (a test)
/// sees that work was captured rather than run.
pub fn uploads_into_graphs() -> u64 {
    INTO_GRAPHS.load(Ordering::Relaxed)
}

static INTO_GRAPHS: AtomicU64 = AtomicU64::new(0);

/// Values whose graphs were destroyed, waiting to be dropped: the driver calls a user
/// object's destructor where no CUDA call may be made, so it only hands the value over, and
/// the next upload drops it.
static RELEASED: Mutex<Vec<Box<dyn Any + Send>>> = Mutex::new(Vec::new());
static ANY_RELEASED: AtomicBool = AtomicBool::new(false);

fn release_pending(stream: &CudaStream) -> Result<()> {
    if !ANY_RELEASED.swap(false, Ordering::AcqRel) {
        return Ok(());
    }
    let done = std::mem::take(&mut *RELEASED.lock().unwrap_or_else(|p| p.into_inner()));
    let ctx = stream.context();
    ctx.bind_to_thread().op("cuCtxSetCurrent")?;
    // What was made during a capture may have been read by eager work on any stream. Another
    // thread may be capturing in the driver's global mode, which forbids this thread the
    // context-wide wait (and the attempt would end that capture): waited for in relaxed mode,
    // and if the driver still refuses, the memory waits for a later upload.
    match outside_capture(|| ctx.synchronize().op("cuCtxSynchronize")) {
        Ok(()) => drop(done),
        Err(_) => {
            RELEASED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(done);
            ANY_RELEASED.store(true, Ordering::Release);
        }
    }
    Ok(())
}

/// Hands `value` to the next [`release_pending`].
fn queue_release(value: Box<dyn Any + Send>) {
    RELEASED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(value);
    ANY_RELEASED.store(true, Ordering::Release);
}

/// The destructor of a user object made by [`give_to_graph`].
unsafe extern "C" fn release(value: *mut c_void) {
    // SAFETY: `value` is the pointer `give_to_graph` made with `Box::into_raw` for this user
    // object, which the driver destroys once.
    let value = unsafe { Box::from_raw(value as *mut Box<dyn Any + Send>) };
    queue_release(*value);
}

/// Makes `graph` (being captured) own `value` until it and its executable graphs are
/// destroyed.
fn give_to_graph(graph: CUgraph, value: Box<dyn Any + Send>) -> Result<()> {
    INTO_GRAPHS.fetch_add(1, Ordering::Relaxed);
    let raw = Box::into_raw(Box::new(value)) as *mut c_void;
    let mut object: CUuserObject = std::ptr::null_mut();
    // SAFETY: `raw` stays valid until `release` takes it back; the flag is the one the driver
    // requires.
    let made = unsafe {
        sys::cuUserObjectCreate(
            &mut object,
            raw,
            Some(release),
            1,
            CUuserObject_flags::CU_USER_OBJECT_NO_DESTRUCTOR_SYNC as u32,
        )
    }
    .result();
    if let Err(e) = made {
        // SAFETY: the driver did not take `raw`; it is ours to reclaim.
        drop(unsafe { Box::from_raw(raw as *mut Box<dyn Any + Send>) });
        return Err(e).op("cuUserObjectCreate");
    }
    // SAFETY: `graph` is the graph of a capture in progress (from `capturing`); the object's one
    // reference moves to it.
    unsafe {
        sys::cuGraphRetainUserObject(
            graph,
            object,
            1,
            CUuserObjectRetain_flags::CU_GRAPH_USER_OBJECT_MOVE as u32,
        )
    }
    .result()
    .inspect_err(|_| {
        // SAFETY: the reference was not moved; dropping it destroys the object, whose
        // destructor queues the value for release.
        let _ = unsafe { sys::cuUserObjectRelease(object, 1) };
    })
    .op("cuGraphRetainUserObject")
}
