//! Communicators: one per GPU of a run, made either by one process for all its GPUs or by each
//! process for its own GPU after a [`Rendezvous`], in two steps:
//!
//! 1. join as a nonblocking communicator, so that waiting for the peers, and every later wait
//!    on NCCL, has a deadline;
//! 2. run one small all-reduce, so that the connections between the GPUs are made while every
//!    peer is known to be there.
//!
//! Every wait on the device has a deadline too ([`Comm::synchronize`]): a peer that dies or
//! fails makes it end with an error, the communicator aborted, instead of a hang.

use super::library::{check, describe, nccl, Config, Nccl, IN_PROGRESS, SUCCESS};
use super::rendezvous::{check_rank, Rendezvous, ID_BYTES};
use crate::error::{DriverContext, Error, Result};
use crate::Gpu;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaStream};
use cudarc::nccl::sys::{ncclComm_t, ncclUniqueId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a wait on NCCL (joining, queueing, a collective's completion) may take unless told
/// otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

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
        let streams = comms
            .iter()
            .map(|c| c.ctx.new_stream().op("cuStreamCreate"))
            .collect::<Result<Vec<_>>>()?;
        if let Err(e) = warm_up(&comms, &streams) {
            comms.iter().for_each(Comm::abort);
            return Err(e);
        }
        Ok(comms)
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
        warm_up(std::slice::from_ref(&comm), &[gpu.stream().clone()])?;
        Ok(comm)
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

    /// How long a wait on this communicator may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
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
    /// queueing a collective), up to the timeout; aborts it on an error or when time runs out.
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
        self.ctx.bind_to_thread().op("cuCtxSetCurrent")?;
        let done = self
            .ctx
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
        if self.aborted.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Ok(n) = nccl() {
            let _ = self.ctx.bind_to_thread();
            // SAFETY: a live communicator, aborted once (the flag above); it is not used after.
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

/// Step 2: one all-reduce of a single element on every communicator, on `streams`, waited for
/// with the deadline.
fn warm_up(comms: &[Comm], streams: &[Arc<CudaStream>]) -> Result<()> {
    let mut bufs = streams
        .iter()
        .map(|s| s.alloc_zeros::<f32>(1).op("cuMemAllocAsync"))
        .collect::<Result<Vec<_>>>()?;
    let mut batch = super::Batch::new();
    for ((c, s), b) in comms.iter().zip(streams).zip(bufs.iter_mut()) {
        batch.all_reduce_in_place(c, s, b, super::ReduceOp::Sum)?;
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
