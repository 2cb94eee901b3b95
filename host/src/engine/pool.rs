//! A pool of CUDA streams, the events that order work between them, and CUDA graph capture of
//! work spread over the pool.

use super::tracking::{lock, Allocation, CaptureState, Shared};
use crate::error::{DriverContext, Error, Result};
use crate::runtime::Gpu;
use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaEvent, CudaGraph, CudaStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One stream of a pool: its name (shown in traces) and its priority, in CUDA's convention
/// (lower is more urgent, 0 is the default), as `torch.cuda.Stream(priority=...)` takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSpec {
    /// Name shown in traces and reports.
    pub name: String,
    /// Priority; values outside the device's range are clamped to the nearest allowed one.
    pub priority: i32,
}

impl StreamSpec {
    /// A stream of default priority.
    pub fn new(name: impl Into<String>) -> Self {
        StreamSpec {
            name: name.into(),
            priority: 0,
        }
    }

    /// The same stream with another priority.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
}

/// A pool of streams on one device (seed 000's `torch.cuda.Stream(priority=...)`), with the
/// events that order work between them.
pub struct StreamPool {
    shared: Arc<Shared>,
    specs: Vec<StreamSpec>,
    priorities: Vec<i32>,
}

impl StreamPool {
    /// Creates one stream per spec. Priorities are clamped into the device's range (see
    /// [`StreamPool::priority_range`]); the clamped values are reported by
    /// [`StreamPool::priority`].
    pub fn new(gpu: &Gpu, specs: &[StreamSpec]) -> Result<StreamPool> {
        if specs.is_empty() || specs.len() > 64 {
            return Err(Error::arg(
                "specs",
                format!("a pool has 1..=64 streams, got {}", specs.len()),
            ));
        }
        let ctx = gpu.context().clone();
        if !ctx.is_event_tracking() {
            return Err(Error::arg(
                "gpu",
                "the context's event tracking is disabled; buffers rely on it to record accesses",
            ));
        }
        let (least, greatest) = priority_range(&ctx)?;
        let mut known = Vec::with_capacity(specs.len() + 1);
        let mut priorities = Vec::with_capacity(specs.len());
        for s in specs {
            let p = s.priority.clamp(greatest, least);
            known.push(
                ctx.new_stream_with_priority(p)
                    .op("cuStreamCreateWithPriority")?,
            );
            priorities.push(p);
        }
        known.push(gpu.stream().clone());
        Ok(StreamPool {
            shared: Arc::new(Shared {
                ctx,
                known,
                epoch: AtomicU64::new(0),
                capture: Mutex::new(None),
            }),
            specs: specs.to_vec(),
            priorities,
        })
    }

    /// One stream of default priority per name (a pipeline's lanes: `copy`, `compute`,
    /// `copy back`), so traces and reports say what each stream does.
    pub fn named<S: AsRef<str>>(gpu: &Gpu, names: &[S]) -> Result<StreamPool> {
        let specs: Vec<StreamSpec> = names.iter().map(|n| StreamSpec::new(n.as_ref())).collect();
        StreamPool::new(gpu, &specs)
    }

    /// `n` streams of default priority named `stream 0`, `stream 1`, ...
    pub fn with_streams(gpu: &Gpu, n: usize) -> Result<StreamPool> {
        let specs: Vec<StreamSpec> = (0..n)
            .map(|i| StreamSpec::new(format!("stream {i}")))
            .collect();
        StreamPool::new(gpu, &specs)
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.shared.ctx
    }

    /// Number of streams in the pool.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether the pool is empty (never: a pool has at least one stream).
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// Stream `i` of the pool.
    pub fn stream(&self, i: usize) -> Result<&Arc<CudaStream>> {
        self.check(i, "stream")?;
        Ok(&self.shared.known[i])
    }

    /// Name of stream `i` (empty for an index outside the pool).
    pub fn name(&self, i: usize) -> &str {
        self.specs.get(i).map(|s| s.name.as_str()).unwrap_or("")
    }

    /// Priority stream `i` was created with, after clamping (0 outside the pool).
    pub fn priority(&self, i: usize) -> i32 {
        self.priorities.get(i).copied().unwrap_or(0)
    }

    /// The device's stream priorities as `(least, greatest)`: e.g. `(0, -5)`, where -5 is the
    /// most urgent. Both are 0 where priorities are not supported.
    pub fn priority_range(&self) -> Result<(i32, i32)> {
        priority_range(&self.shared.ctx)
    }

    fn check(&self, i: usize, arg: &'static str) -> Result<()> {
        if i >= self.len() {
            return Err(Error::arg(
                arg,
                format!("stream index {i} is outside the pool of {}", self.len()),
            ));
        }
        Ok(())
    }

    /// An event for ordering only (no timestamp), recorded on stream `i` now.
    pub fn record(&self, i: usize) -> Result<CudaEvent> {
        self.stream(i)?
            .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .op("cuEventRecord")
    }

    /// Makes stream `waiter` wait for `event` (work queued on `waiter` later starts after the
    /// work `event` captured), like `torch.cuda.Stream.wait_event`.
    pub fn wait_event(&self, waiter: usize, event: &CudaEvent) -> Result<()> {
        self.stream(waiter)?.wait(event).op("cuStreamWaitEvent")
    }

    /// Makes stream `waiter` wait for everything queued on stream `other` so far, like
    /// `torch.cuda.Stream.wait_stream`. Neither the host nor other streams wait.
    pub fn wait_stream(&self, waiter: usize, other: usize) -> Result<()> {
        self.check(waiter, "waiter")?;
        self.check(other, "other")?;
        if waiter == other {
            return Ok(());
        }
        let e = self.record(other)?;
        self.wait_event(waiter, &e)
    }

    /// A new event that records a timestamp (cudarc's default events do not).
    pub fn timing_event(&self) -> Result<CudaEvent> {
        timing_event(&self.shared.ctx)
    }

    /// The host waits for every stream of the pool (and the `Gpu`'s stream); reports errors of
    /// earlier asynchronous calls.
    pub fn synchronize(&self) -> Result<()> {
        self.shared.synchronize_known()
    }

    /// Starts capturing the work queued on the pool's streams into a CUDA graph, from stream
    /// `origin`; every other stream of the pool joins the capture. Until
    /// [`Capture::end`], work queued on the pool is recorded, not run.
    ///
    /// The host first waits for all work already queued (once, outside the captured loop), so
    /// that the captured work needs no dependency on anything outside the graph; each launch of
    /// the graph is then ordered after everything queued before it.
    pub fn begin_capture(&self, origin: usize) -> Result<Capture<'_>> {
        self.check(origin, "origin")?;
        if self.shared.capture_epoch().is_some() {
            return Err(Error::Capture {
                during: "begin a capture",
                reason: "a capture is already in progress",
            });
        }
        self.shared.synchronize_known()?;
        let epoch = self.shared.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        *lock(&self.shared.capture) = Some(CaptureState {
            epoch,
            touched: Vec::new(),
        });
        let o = &self.shared.known[origin];
        let started = o
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .op("cuStreamBeginCapture")
            .and_then(|_| {
                // Fork: every other stream of the pool waits on the origin, which makes it part
                // of the capture.
                let fork = o
                    .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .op("cuEventRecord")?;
                for (i, s) in self.shared.known[..self.len()].iter().enumerate() {
                    if i != origin {
                        s.wait(&fork).op("cuStreamWaitEvent")?;
                    }
                }
                Ok(())
            });
        let capture = Capture {
            pool: self,
            origin,
            done: false,
        };
        started?;
        Ok(capture)
    }
}

fn priority_range(ctx: &Arc<CudaContext>) -> Result<(i32, i32)> {
    ctx.bind_to_thread().op("cuCtxSetCurrent")?;
    cudarc::driver::result::stream::get_priority_range().op("cuCtxGetStreamPriorityRange")
}

/// A new event that records a timestamp.
pub(crate) fn timing_event(ctx: &Arc<CudaContext>) -> Result<CudaEvent> {
    ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .op("cuEventCreate")
}

/// A capture in progress (see [`StreamPool::begin_capture`]). Dropping it without
/// [`Capture::end`] ends the capture and discards what was recorded.
pub struct Capture<'p> {
    pool: &'p StreamPool,
    origin: usize,
    done: bool,
}

impl Capture<'_> {
    /// Joins every stream of the pool back into the origin, ends the capture and instantiates
    /// the graph.
    pub fn end(mut self) -> Result<Graph> {
        self.done = true;
        let shared = self.pool.shared.clone();
        let o = shared.known[self.origin].clone();
        let joined: Result<()> = (|| {
            for (i, s) in shared.known[..self.pool.len()].iter().enumerate() {
                if i != self.origin {
                    let e = s
                        .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                        .op("cuEventRecord")?;
                    o.wait(&e).op("cuStreamWaitEvent")?;
                }
            }
            Ok(())
        })();
        let ended = o.end_capture(CUgraphInstantiate_flags(0));
        let state = lock(&shared.capture).take();
        shared.epoch.fetch_add(1, Ordering::AcqRel);
        joined?;
        let graph = ended.op("cuStreamEndCapture")?.ok_or(Error::Capture {
            during: "end the capture",
            reason: "it recorded no work",
        })?;
        let ctx = &shared.ctx;
        let no_timing = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
        let joins = shared
            .known
            .iter()
            .map(|_| ctx.new_event(no_timing).op("cuEventCreate"))
            .collect::<Result<Vec<_>>>()?;
        Ok(Graph {
            graph,
            origin: self.origin,
            touched: state.map(|s| s.touched).unwrap_or_default(),
            fence: Arc::new(ctx.new_event(no_timing).op("cuEventCreate")?),
            joins,
            shared,
        })
    }
}

impl Drop for Capture<'_> {
    fn drop(&mut self) {
        if !self.done {
            let shared = &self.pool.shared;
            let o = &shared.known[self.origin];
            // Discard the partial graph; the error (if any) is what the caller is handling.
            if let Ok(Some(g)) = o.end_capture(CUgraphInstantiate_flags(0)) {
                drop(g);
            }
            lock(&shared.capture).take();
            shared.epoch.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// An instantiated CUDA graph of work captured over a [`StreamPool`]. It keeps the buffers it
/// uses alive; each launch runs after everything queued on the pool before it, and every later
/// access of those buffers waits for the launch.
pub struct Graph {
    graph: CudaGraph,
    origin: usize,
    touched: Vec<Arc<Allocation>>,
    fence: Arc<CudaEvent>,
    joins: Vec<CudaEvent>,
    shared: Arc<Shared>,
}

impl Graph {
    /// Number of buffers the graph uses.
    pub fn buffers(&self) -> usize {
        self.touched.len()
    }

    /// Index (in the pool) of the stream the graph is launched on.
    pub fn origin(&self) -> usize {
        self.origin
    }

    /// Queues one run of the graph on its origin stream.
    pub fn launch(&self) -> Result<()> {
        if self.shared.capture_epoch().is_some() {
            return Err(Error::Capture {
                during: "launch a graph",
                reason: "a capture is in progress",
            });
        }
        let o = &self.shared.known[self.origin];
        for (s, e) in self.shared.known.iter().zip(&self.joins) {
            if s.cu_stream() != o.cu_stream() {
                e.record(s).op("cuEventRecord")?;
                o.wait(e).op("cuStreamWaitEvent")?;
            }
        }
        self.graph.launch().op("cuGraphLaunch")?;
        self.fence.record(o).op("cuEventRecord")?;
        let epoch = self.shared.epoch();
        for a in &self.touched {
            a.fenced(&self.fence, epoch);
        }
        Ok(())
    }

    /// Uploads the graph to the device ahead of its first launch.
    pub fn upload(&self) -> Result<()> {
        self.graph.upload().op("cuGraphUpload")
    }
}
