//! Communicators: one per GPU of a run, made either by one process for all its GPUs or by each
//! process for its own GPU after a [`Rendezvous`], in three steps:
//!
//! 1. join as a nonblocking communicator, so that waiting for the peers has a deadline;
//! 2. split it into a blocking communicator of the same ranks, also under the deadline, and
//!    free the nonblocking one: a blocking communicator queues a collective in the calling
//!    thread, where a nonblocking one hands every call to a thread of NCCL's and must be
//!    polled, which costs a small collective most of its latency;
//! 3. run one small all-reduce and exchange one element with every peer, under the deadline,
//!    so that every connection is made while every peer is known to be there (NCCL is asked
//!    to connect the collectives' channels at creation too), and no later call waits on the
//!    host for a peer.
//!
//! Every wait on the device has a deadline ([`Comm::synchronize`]): a peer that dies or fails
//! makes it end with an error, the communicator aborted, instead of a hang.

use super::library::{check, describe, nccl, Config, Nccl, IN_PROGRESS, SUCCESS};
use super::rendezvous::{check_rank, Rendezvous, ID_BYTES};
use crate::error::{DriverContext, Error, Result};
use crate::Gpu;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaStream};
use cudarc::nccl::sys::{ncclComm_t, ncclUniqueId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

/// How long a wait on NCCL (joining and connecting, a collective's completion) may take unless
/// told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// How long [`Comm::abort`] waits for a call of another thread on the communicator to return.
const ABORT_GRACE: Duration = Duration::from_secs(1);

/// One GPU's membership in a group of GPUs that run collectives together.
pub struct Comm {
    raw: ncclComm_t,
    rank: usize,
    world: usize,
    ctx: Arc<CudaContext>,
    timeout: Duration,
    /// Set once aborted: later calls are refused and the drop only frees.
    aborted: AtomicBool,
    /// NCCL allows one call at a time on a communicator.
    pub(super) busy: Mutex<()>,
    /// The stream NCCL's kernels go on, where not the stream each collective is given.
    pub(super) kernels: Option<Arc<CudaStream>>,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time (`busy`).
unsafe impl Send for Comm {}
// SAFETY: as for `Send`; every call on the communicator holds `busy`.
unsafe impl Sync for Comm {}

fn unique_id(n: &Nccl) -> Result<[u8; ID_BYTES]> {
    let mut id = ncclUniqueId {
        internal: [0; ID_BYTES],
    };
    // SAFETY: `ncclGetUniqueId` writes one id.
    check(n, unsafe { (n.get_unique_id)(&mut id) }, "ncclGetUniqueId")?;
    Ok(id.internal.map(|c| c as u8))
}

impl Comm {
    /// Communicators for `gpus`, all driven by this process (rank `i` on `gpus[i]`).
    pub fn local(gpus: &[&Gpu], timeout: Duration) -> Result<Vec<Comm>> {
        if gpus.is_empty() {
            return Err(Error::arg("gpus", "needs at least one GPU"));
        }
        for (i, g) in gpus.iter().enumerate() {
            if gpus[..i]
                .iter()
                .any(|h| h.info().ordinal == g.info().ordinal)
            {
                return Err(Error::arg(
                    "gpus",
                    format!("device {} is named twice", g.info().ordinal),
                ));
            }
        }
        let n = nccl()?;
        let id = unique_id(n)?;
        let world = gpus.len();
        let mut raws = vec![std::ptr::null_mut(); world];
        let mut cfgs: Vec<Config> = (0..world).map(|_| Config::nonblocking()).collect();
        // SAFETY: brackets the initialisations below, one group.
        check(n, unsafe { (n.group_start)() }, "ncclGroupStart")?;
        let mut first_error = None;
        for (rank, gpu) in gpus.iter().enumerate() {
            if let Err(e) = gpu.context().bind_to_thread().op("cuCtxSetCurrent") {
                first_error.get_or_insert(e);
                continue;
            }
            // SAFETY: writes one communicator handle; the id and config outlive the call (NCCL
            // copies them), the device is the thread's current one.
            let r = unsafe {
                (n.comm_init_rank_config)(
                    &mut raws[rank],
                    world as i32,
                    id_of(&id),
                    rank as i32,
                    &mut cfgs[rank],
                )
            };
            if r != SUCCESS && r != IN_PROGRESS {
                first_error.get_or_insert(nccl_error(n, r, "ncclCommInitRankConfig", raws[rank]));
            }
        }
        // SAFETY: closes the group opened above.
        let r = unsafe { (n.group_end)() };
        if r != SUCCESS && r != IN_PROGRESS {
            first_error.get_or_insert(nccl_error(n, r, "ncclGroupEnd", std::ptr::null_mut()));
        }
        let comms: Vec<Comm> = raws
            .into_iter()
            .zip(gpus)
            .enumerate()
            .filter(|(_, (raw, _))| !raw.is_null())
            .map(|(rank, (raw, gpu))| Comm::wrap(raw, rank, world, gpu.context(), timeout))
            .collect();
        if let Some(e) = first_error {
            comms.iter().for_each(Comm::abort);
            return Err(e);
        }
        for c in &comms {
            if let Err(e) = c.settle("joining the communicator") {
                comms.iter().for_each(Comm::abort);
                return Err(e);
            }
        }
        let comms = to_blocking(comms)?;
        let streams = comms
            .iter()
            .map(|c| c.ctx.new_stream().op("cuStreamCreate"))
            .collect::<Result<Vec<_>>>()?;
        warm_up(comms, streams)
    }

    /// This process's communicator for `gpu`, as rank `rank` of `world` processes that meet
    /// at `rendezvous`; fails, on every process that can tell, if they do not all arrive with
    /// the same world size within `timeout`.
    pub fn join(
        gpu: &Gpu,
        rank: usize,
        world: usize,
        rendezvous: &Rendezvous,
        timeout: Duration,
    ) -> Result<Comm> {
        check_rank(rank, world)?;
        let n = nccl()?;
        let id = rendezvous.exchange(rank, world, timeout, || unique_id(n))?;
        gpu.context().bind_to_thread().op("cuCtxSetCurrent")?;
        let mut raw = std::ptr::null_mut();
        let mut cfg = Config::nonblocking();
        // SAFETY: writes one communicator handle; NCCL copies the id and config.
        let r = unsafe {
            (n.comm_init_rank_config)(&mut raw, world as i32, id_of(&id), rank as i32, &mut cfg)
        };
        if raw.is_null() || (r != SUCCESS && r != IN_PROGRESS) {
            let e = nccl_error(n, r, "ncclCommInitRankConfig", raw);
            if !raw.is_null() {
                // SAFETY: the handle NCCL returned with its error, freed once and not used after.
                let _ = unsafe { (n.comm_abort)(raw) };
            }
            return Err(e);
        }
        let comm = Comm::wrap(raw, rank, world, gpu.context(), timeout);
        // On an error the communicator is aborted (by `settle`, or as it is dropped).
        comm.settle("joining the communicator")?;
        rendezvous.finish(rank);
        let comm = to_blocking(vec![comm])?;
        let stream = gpu.context().new_stream().op("cuStreamCreate")?;
        Ok(warm_up(comm, vec![stream])?.remove(0))
    }

    fn wrap(
        raw: ncclComm_t,
        rank: usize,
        world: usize,
        ctx: &Arc<CudaContext>,
        timeout: Duration,
    ) -> Comm {
        Comm {
            raw,
            rank,
            world,
            ctx: ctx.clone(),
            timeout,
            aborted: AtomicBool::new(false),
            busy: Mutex::new(()),
            kernels: None,
        }
    }

    /// This GPU's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of GPUs in the group.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// The device ordinal of this communicator's GPU.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The CUDA context of this communicator's GPU.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The same communicator with waits on it limited to `timeout` from now on.
    pub fn with_timeout(mut self, timeout: Duration) -> Comm {
        self.timeout = timeout;
        self
    }

    /// The same communicator with NCCL's kernels queued on `stream` (of this communicator's
    /// device, in any of its contexts) whatever stream a collective is given: that stream
    /// still orders the collective with the buffers' other users, through events to and from
    /// `stream`. With the training step's kernels kept to a green context's SMs (see
    /// [`Gpu::with_side_sms`]), a stream of the device's primary context lets NCCL's blocks
    /// always find SMs the step leaves free (they may run on the step's SMs too).
    pub fn with_kernel_stream(mut self, stream: Arc<CudaStream>) -> Result<Comm> {
        self.check_device(&stream)?;
        self.kernels = Some(stream);
        Ok(self)
    }

    /// Refuses a stream of another device than this communicator's.
    pub(super) fn check_device(&self, stream: &CudaStream) -> Result<()> {
        let on = stream.context().ordinal();
        if on != self.ordinal() {
            return Err(Error::arg(
                "stream",
                format!(
                    "is a stream of device {on}, the communicator of rank {} is on device {}",
                    self.rank,
                    self.ordinal()
                ),
            ));
        }
        Ok(())
    }

    /// The stream NCCL's kernels go on, where [`Comm::with_kernel_stream`] set one.
    pub fn kernel_stream(&self) -> Option<&Arc<CudaStream>> {
        self.kernels.as_ref()
    }

    /// How long a wait on this communicator may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether the communicator was aborted (after a failure here or on a peer): work that
    /// waits for its peers on the host, outside NCCL, stops then too.
    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }

    pub(super) fn raw(&self) -> Result<ncclComm_t> {
        if self.aborted.load(Ordering::Acquire) {
            return Err(Error::Nccl {
                op: "a collective",
                code: -1,
                reason: format!(
                    "the communicator of rank {} was aborted after an earlier failure",
                    self.rank
                ),
            });
        }
        Ok(self.raw)
    }

    /// Waits until NCCL has finished what was asked of this communicator on the host (joining,
    /// splitting, and, on a communicator that reports them, errors of queued collectives), up to
    /// the timeout; aborts it on an error or when time runs out.
    pub(super) fn settle(&self, during: &str) -> Result<()> {
        let n = nccl()?;
        let start = Instant::now();
        let deadline = start + self.timeout;
        loop {
            match self.async_error(n)? {
                SUCCESS => return Ok(()),
                IN_PROGRESS if Instant::now() < deadline => pause(start),
                IN_PROGRESS => return Err(self.time_out(during)),
                r => {
                    let e = self.failed(n, r, during);
                    self.abort();
                    return Err(e);
                }
            }
        }
    }

    fn async_error(&self, n: &Nccl) -> Result<i32> {
        let raw = self.raw()?;
        let mut state = SUCCESS;
        // SAFETY: a live communicator (not aborted); writes one result.
        let r = unsafe { (n.comm_get_async_error)(raw, &mut state) };
        check(n, r, "ncclCommGetAsyncError")?;
        Ok(state)
    }

    /// The error NCCL reported for this communicator's work, with the rank and what was waited
    /// for.
    fn failed(&self, n: &Nccl, r: i32, during: &str) -> Error {
        Error::Nccl {
            op: "asynchronous work",
            code: r,
            reason: format!(
                "rank {} of {}: {during}: {}",
                self.rank,
                self.world,
                describe(n, r, self.raw)
            ),
        }
    }

    fn time_out(&self, during: &str) -> Error {
        self.abort();
        Error::Timeout {
            during: format!("rank {} of {}: {during}", self.rank, self.world),
            seconds: self.timeout.as_secs_f64(),
        }
    }

    /// Waits on the host until the work queued so far on `stream` is done, up to the timeout,
    /// checking NCCL's asynchronous errors meanwhile: a collective that a peer never joins, or
    /// that fails on a peer, ends the wait with an error and the communicator aborted.
    pub fn synchronize(&self, stream: &CudaStream) -> Result<()> {
        let n = nccl()?;
        self.check_device(stream)?;
        // The event in the stream's own context (the device's, or a green context of it): the
        // driver records an event only on a stream of the context that made it.
        let done = stream
            .context()
            .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .op("cuEventCreate")?;
        done.record(stream).op("cuEventRecord")?;
        let start = Instant::now();
        let deadline = start + self.timeout;
        loop {
            if done.try_is_complete().op("cuEventQuery")? {
                return Ok(());
            }
            match self.async_error(n)? {
                SUCCESS | IN_PROGRESS => {}
                r => {
                    let e = self.failed(n, r, "a collective queued on the stream");
                    self.abort();
                    return Err(e);
                }
            }
            if Instant::now() >= deadline {
                return Err(self.time_out("waiting for the collectives queued on a stream"));
            }
            pause(start);
        }
    }

    /// Aborts the communicator: its collectives in flight end, and every later call on it
    /// fails. Peers waiting on it see their own timeouts or errors.
    pub fn abort(&self) {
        // NCCL wants no other call on the communicator while it is aborted: wait a little for
        // one in progress to return. A call still blocked after that (queueing behind work that
        // waits for a failed peer) returns only through the abort, which sets NCCL's abort flag
        // before anything else.
        let grace = Instant::now() + ABORT_GRACE;
        let _one = loop {
            match self.busy.try_lock() {
                Ok(g) => break Some(g),
                Err(TryLockError::Poisoned(p)) => break Some(p.into_inner()),
                Err(TryLockError::WouldBlock) if Instant::now() < grace => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(TryLockError::WouldBlock) => break None,
            }
        };
        if self.aborted.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Ok(n) = nccl() {
            let _ = self.ctx.bind_to_thread();
            // SAFETY: a live communicator, aborted once (the flag above); later calls through
            // `raw` are refused. A call of another thread still inside NCCL after the grace
            // period is blocked there, and NCCL ends it (its abort flag) before freeing anything.
            let _ = unsafe { (n.comm_abort)(self.raw) };
        }
    }
}

/// Dropping a communicator aborts it: collectives still running on it end unfinished, so a
/// program synchronizes ([`Comm::synchronize`]) before. (Finishing them instead would wait
/// without a deadline for peers that may be gone.)
impl Drop for Comm {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Waits between two polls: spinning for the first 200 µs (a small collective is queued or
/// done within that), then sleeping longer and longer, up to 2 ms.
fn pause(since: Instant) {
    let waited = since.elapsed();
    if waited < Duration::from_micros(200) {
        std::thread::yield_now();
    } else {
        std::thread::sleep((waited / 8).min(Duration::from_millis(2)));
    }
}

/// Step 2: splits every joined (nonblocking) communicator into a blocking one of the same
/// ranks, as one group, waits with the deadline until NCCL has made them, and frees the
/// nonblocking ones.
fn to_blocking(parents: Vec<Comm>) -> Result<Vec<Comm>> {
    let n = nccl()?;
    let mut raws = vec![std::ptr::null_mut(); parents.len()];
    let mut first_error = None;
    // SAFETY: brackets the splits below, one group.
    check(n, unsafe { (n.group_start)() }, "ncclGroupStart")?;
    for (p, raw) in parents.iter().zip(raws.iter_mut()) {
        let parent = match p.ctx.bind_to_thread().op("cuCtxSetCurrent").and(p.raw()) {
            Ok(parent) => parent,
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        let mut cfg = Config::blocking();
        // SAFETY: a live, idle communicator (joined and settled). NCCL copies the config and
        // writes the handle from its own thread when the split is done; `raws` outlives that,
        // as every parent is settled or aborted below before `raws` is read or dropped.
        let r = unsafe { (n.comm_split)(parent, 0, p.rank as i32, raw, &mut cfg) };
        if r != SUCCESS && r != IN_PROGRESS {
            first_error.get_or_insert(nccl_error(n, r, "ncclCommSplit", parent));
        }
    }
    // SAFETY: closes the group opened above.
    let r = unsafe { (n.group_end)() };
    if r != SUCCESS && r != IN_PROGRESS {
        first_error.get_or_insert(nccl_error(n, r, "ncclGroupEnd", std::ptr::null_mut()));
    }
    // The split runs on NCCL's thread and reports on the parent: wait for all of them before
    // anything is freed, on success and failure alike.
    for p in &parents {
        if first_error.is_some() {
            // The group's splits cannot all finish now: end the others' at once.
            p.abort();
        } else if let Err(e) = p.settle("creating the blocking communicator") {
            first_error = Some(e);
        }
    }
    let children: Vec<Comm> = raws
        .into_iter()
        .zip(&parents)
        .filter(|(raw, _)| !raw.is_null())
        .map(|(raw, p)| Comm::wrap(raw, p.rank, p.world, &p.ctx, p.timeout))
        .collect();
    if first_error.is_none() && children.len() != parents.len() {
        first_error = Some(Error::Nccl {
            op: "ncclCommSplit",
            code: -1,
            reason: "NCCL returned no communicator".into(),
        });
    }
    // The parents are idle now: dropping them frees them (and the children on an error).
    drop(parents);
    match first_error {
        Some(e) => Err(e),
        None => Ok(children),
    }
}

/// Step 3: one all-reduce of a single element on every communicator and one element sent to
/// and received from every peer, on `streams`, waited for with the deadline. NCCL's calls
/// block until the peers take part; they run on a thread of their own, so that a peer that
/// never does ends the wait at the deadline, the communicators aborted (which ends the
/// thread's calls too).
fn warm_up(comms: Vec<Comm>, streams: Vec<Arc<CudaStream>>) -> Result<Vec<Comm>> {
    let timeout = comms
        .iter()
        .map(Comm::timeout)
        .max()
        .unwrap_or(DEFAULT_TIMEOUT);
    let who = comms
        .iter()
        .map(|c| format!("rank {} of {}", c.rank, c.world))
        .collect::<Vec<_>>()
        .join(", ");
    let comms = Arc::new(comms);
    let (tx, rx) = mpsc::channel();
    let worker = {
        let comms = comms.clone();
        std::thread::spawn(move || {
            let r = exchange(&comms, &streams);
            drop(comms);
            // The receiver may be gone (timed out).
            let _ = tx.send(r);
        })
    };
    match rx.recv_timeout(timeout) {
        Ok(r) => {
            // The worker has let go of the communicators: it ends with the send.
            let _ = worker.join();
            r?;
            Arc::try_unwrap(comms).map_err(|_| Error::Nccl {
                op: "connecting to the peers",
                code: -1,
                reason: "the communicators are still shared".into(),
            })
        }
        Err(_) => {
            // Ends the worker's calls (NCCL's abort flag); it drops its share when they return.
            comms.iter().for_each(Comm::abort);
            Err(Error::Timeout {
                during: format!("{who}: connecting to the peers"),
                seconds: timeout.as_secs_f64(),
            })
        }
    }
}

fn exchange(comms: &[Comm], streams: &[Arc<CudaStream>]) -> Result<()> {
    let zeros = |s: &Arc<CudaStream>, n: usize| s.alloc_zeros::<f32>(n).op("cuMemAllocAsync");
    let world = comms.first().map_or(1, Comm::world_size);
    let mut sums = streams
        .iter()
        .map(|s| zeros(s, 1))
        .collect::<Result<Vec<_>>>()?;
    let outs = streams
        .iter()
        .map(|s| zeros(s, 1))
        .collect::<Result<Vec<_>>>()?;
    let mut ins = streams
        .iter()
        .map(|s| (0..world).map(|_| zeros(s, 1)).collect::<Result<Vec<_>>>())
        .collect::<Result<Vec<_>>>()?;
    let mut batch = super::Batch::new();
    for (((c, s), sum), (out, ins)) in comms
        .iter()
        .zip(streams)
        .zip(sums.iter_mut())
        .zip(outs.iter().zip(ins.iter_mut()))
    {
        batch.all_reduce_in_place(c, s, sum, super::ReduceOp::Sum)?;
        for (peer, inp) in ins.iter_mut().enumerate().filter(|(p, _)| *p != c.rank) {
            batch.send(c, s, out, peer)?;
            batch.recv(c, s, inp, peer)?;
        }
    }
    batch.run()?;
    for (c, s) in comms.iter().zip(streams) {
        c.synchronize(s)?;
    }
    Ok(())
}

/// An id as NCCL's type.
fn id_of(id: &[u8; ID_BYTES]) -> ncclUniqueId {
    ncclUniqueId {
        internal: id.map(|b| b as std::ffi::c_char),
    }
}

pub(super) fn nccl_error(n: &Nccl, r: i32, op: &'static str, comm: ncclComm_t) -> Error {
    Error::Nccl {
        op,
        code: r,
        reason: describe(n, r, comm),
    }
}
