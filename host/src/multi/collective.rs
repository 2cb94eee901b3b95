//! Collectives on tracked buffers, queued on engine streams: all-reduce, broadcast,
//! all-gather, reduce-scatter, and point-to-point send and receive.
//!
//! A [`Batch`] gathers collectives (one per GPU when one process drives several, or several
//! on one GPU) and queues them as one NCCL group. Every argument is checked when a collective
//! is added, so that either all of a batch is queued or none of it: a batch queued on only
//! some GPUs would leave the others waiting forever. The buffers' accesses are ordered like a
//! kernel's: a collective waits for the last write of what it reads and for every read of
//! what it writes, and later users wait for it, without the host waiting.

use super::comm::{nccl_error, Comm};
use super::library::{nccl, IN_PROGRESS, SUCCESS};
use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::CUstream;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, DeviceSlice, SyncOnDrop};
use cudarc::nccl::sys::{ncclDataType_t as D, ncclRedOp_t as R};
use std::ffi::{c_int, c_void};

/// An element type NCCL reduces and moves.
pub trait Element: DeviceRepr + bytemuck::Pod {
    /// NCCL's `ncclDataType_t` for it.
    const NCCL: c_int;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl Element for $t {
            const NCCL: c_int = D::$d as c_int;
        }
    )*};
}
element!(i8 => ncclInt8, u8 => ncclUint8, i32 => ncclInt32, u32 => ncclUint32, i64 => ncclInt64,
    u64 => ncclUint64, half::f16 => ncclFloat16, f32 => ncclFloat32, f64 => ncclFloat64,
    half::bf16 => ncclBfloat16);

/// How an all-reduce or reduce-scatter combines the ranks' elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    /// The sum divided by the number of ranks.
    Avg,
}

impl ReduceOp {
    fn nccl(self) -> c_int {
        (match self {
            ReduceOp::Sum => R::ncclSum,
            ReduceOp::Prod => R::ncclProd,
            ReduceOp::Max => R::ncclMax,
            ReduceOp::Min => R::ncclMin,
            ReduceOp::Avg => R::ncclAvg,
        }) as c_int
    }
}

#[derive(Clone, Copy, Debug)]
enum What {
    AllReduce(c_int),
    Broadcast(c_int),
    AllGather,
    ReduceScatter(c_int),
    Send(c_int),
    Recv(c_int),
}

/// One checked collective, ready to queue.
struct Call<'a> {
    comm: &'a Comm,
    stream: &'a CudaStream,
    what: What,
    send: u64,
    recv: u64,
    /// Elements NCCL's call takes (per rank where NCCL counts per rank).
    count: usize,
    dtype: c_int,
}

/// Collectives queued together as one NCCL group when [`Batch::run`] is called; dropping a
/// batch without running it queues nothing.
#[derive(Default)]
pub struct Batch<'a> {
    calls: Vec<Call<'a>>,
    /// Record each access once the group is queued (the buffers' tracking).
    guards: Vec<SyncOnDrop<'a>>,
}

/// The device ordinal of `stream`.
fn ordinal(stream: &CudaStream) -> usize {
    stream.context().ordinal()
}

impl<'a> Batch<'a> {
    pub fn new() -> Self {
        Batch::default()
    }

    /// Number of collectives gathered.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether nothing was gathered.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    fn check_stream(comm: &Comm, stream: &CudaStream) -> Result<()> {
        comm.check_device(stream)?;
        let mut status = cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: a live stream; writes one status.
        unsafe { cudarc::driver::sys::cuStreamIsCapturing(stream.cu_stream(), &mut status) }
            .result()
            .op("cuStreamIsCapturing")?;
        if status != cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
            return Err(Error::Capture {
                during: "queue an NCCL collective",
                reason: "collectives are not captured into CUDA graphs: queue them outside the capture, between graph launches",
            });
        }
        Ok(())
    }

    fn check_buffer<T>(
        comm: &Comm,
        arg: &'static str,
        b: &impl DeviceSlice<T>,
        len: usize,
    ) -> Result<()> {
        let on = ordinal(b.stream());
        if on != comm.ordinal() {
            return Err(Error::arg(
                arg,
                format!(
                    "lives on device {on}, the communicator of rank {} is on device {}",
                    comm.rank(),
                    comm.ordinal()
                ),
            ));
        }
        if b.len() != len {
            return Err(Error::arg(
                arg,
                format!("holds {} elements, the collective needs {len}", b.len()),
            ));
        }
        Ok(())
    }

    /// Adds an all-reduce of `send` into `recv` (both `len` elements).
    pub fn all_reduce<T: Element>(
        &mut self,
        comm: &'a Comm,
        stream: &'a CudaStream,
        send: &'a impl DevicePtr<T>,
        recv: &'a mut impl DevicePtrMut<T>,
        op: ReduceOp,
    ) -> Result<()> {
        let n = send.len();
        self.apart(comm, stream, send, recv, (n, n), What::AllReduce(op.nccl()))
    }

    /// Adds an all-reduce of `buf` into itself.
    pub fn all_reduce_in_place<T: Element>(
        &mut self,
        comm: &'a Comm,
        stream: &'a CudaStream,
        buf: &'a mut impl DevicePtrMut<T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.in_place(comm, stream, buf, What::AllReduce(op.nccl()))
    }

    /// Adds a broadcast of rank `root`'s `buf` into every rank's `buf`.
    pub fn broadcast<T: Element>(
        &mut self,
        comm: &'a Comm,
        stream: &'a CudaStream,
        buf: &'a mut impl DevicePtrMut<T>,
        root: usize,
    ) -> Result<()> {
        if root >= comm.world_size() {
            return Err(Error::arg(
                "root",
                format!(
                    "must be in 0..{} (the world size), got {root}",
                    comm.world_size()
                ),
            ));
        }
        self.in_place(comm, stream, buf, What::Broadcast(root as c_int))
    }

    /// Adds an all-gather: every rank's `send` (`n` elements) into `recv` (`n` x world size,
    /// rank `r`'s part at `r n`).
    pub fn all_gather<T: Element>(
        &mut self,
        comm: &'a Comm,
        stream: &'a CudaStream,
        send: &'a impl DevicePtr<T>,
        recv: &'a mut impl DevicePtrMut<T>,
    ) -> Result<()> {
        let n = send.len();
        let lens = (n, n * comm.world_size());
        self.apart(comm, stream, send, recv, lens, What::AllGather)
    }

    /// Adds a reduce-scatter: the ranks' `send` (`n` x world size) reduced, rank `r` getting
    /// part `r` (`n` elements) in `recv`.
    pub fn reduce_scatter<T: Element>(
        &mut self,
        comm: &'a Comm,
        stream: &'a CudaStream,
        send: &'a impl DevicePtr<T>,
        recv: &'a mut impl DevicePtrMut<T>,
        op: ReduceOp,
    ) -> Result<()> {
        let n = recv.len();
        let lens = (n * comm.world_size(), n);
        self.apart(
            comm,
            stream,
            send,
            recv,
            lens,
            What::ReduceScatter(op.nccl()),
        )
    }

    /// Adds a send of `buf` to rank `peer` (which adds the matching [`Batch::recv`]).
    pub fn send<T: Element>(
        &mut self,
        comm: &'a Comm,
        stream: &'a CudaStream,
        buf: &'a impl DevicePtr<T>,
        peer: usize,
    ) -> Result<()> {
        Self::check_peer(comm, peer)?;
        Self::check_stream(comm, stream)?;
        Self::check_buffer(comm, "buf", buf, buf.len())?;
        let (p, g) = buf.device_ptr(stream);
        let what = What::Send(peer as c_int);
        self.push(
            comm,
            stream,
            what,
            p,
            0,
            buf.len(),
            T::NCCL,
            [Some(g), None],
        );
        Ok(())
    }

    /// Adds a receive into `buf` from rank `peer`.
    pub fn recv<T: Element>(
        &mut self,
        comm: &'a Comm,
        stream: &'a CudaStream,
        buf: &'a mut impl DevicePtrMut<T>,
        peer: usize,
    ) -> Result<()> {
        Self::check_peer(comm, peer)?;
        self.in_place(comm, stream, buf, What::Recv(peer as c_int))
    }

    /// A collective that reads and writes `buf` alone (a receive only writes it).
    fn in_place<T: Element>(
        &mut self,
        comm: &'a Comm,
        stream: &'a CudaStream,
        buf: &'a mut impl DevicePtrMut<T>,
        what: What,
    ) -> Result<()> {
        let n = buf.len();
        Self::check_stream(comm, stream)?;
        Self::check_buffer(comm, "buf", &*buf, n)?;
        let (p, g) = buf.device_ptr_mut(stream);
        let send = if matches!(what, What::Recv(_)) { 0 } else { p };
        self.push(comm, stream, what, send, p, n, T::NCCL, [Some(g), None]);
        Ok(())
    }

    /// A collective from `send` into `recv`, of `lens` elements each; NCCL counts the smaller.
    fn apart<T: Element>(
        &mut self,
        comm: &'a Comm,
        stream: &'a CudaStream,
        send: &'a impl DevicePtr<T>,
        recv: &'a mut impl DevicePtrMut<T>,
        lens: (usize, usize),
        what: What,
    ) -> Result<()> {
        Self::check_stream(comm, stream)?;
        Self::check_buffer(comm, "send", send, lens.0)?;
        Self::check_buffer(comm, "recv", &*recv, lens.1)?;
        let (s, g1) = send.device_ptr(stream);
        let (r, g2) = recv.device_ptr_mut(stream);
        let count = lens.0.min(lens.1);
        self.push(
            comm,
            stream,
            what,
            s,
            r,
            count,
            T::NCCL,
            [Some(g1), Some(g2)],
        );
        Ok(())
    }

    fn check_peer(comm: &Comm, peer: usize) -> Result<()> {
        if peer >= comm.world_size() || peer == comm.rank() {
            return Err(Error::arg(
                "peer",
                format!(
                    "must be another rank in 0..{} than this one ({}), got {peer}",
                    comm.world_size(),
                    comm.rank()
                ),
            ));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        comm: &'a Comm,
        stream: &'a CudaStream,
        what: What,
        send: u64,
        recv: u64,
        count: usize,
        dtype: c_int,
        guards: [Option<SyncOnDrop<'a>>; 2],
    ) {
        self.calls.push(Call {
            comm,
            stream,
            what,
            send,
            recv,
            count,
            dtype,
        });
        self.guards.extend(guards.into_iter().flatten());
    }

    /// Queues every gathered collective as one group and waits (on the host) until NCCL has
    /// queued them, not until they finish; their buffers' later users are ordered after them.
    pub fn run(self) -> Result<()> {
        let Batch { calls, guards } = self;
        if calls.is_empty() {
            return Ok(());
        }
        let n = nccl()?;
        let mut comms: Vec<&Comm> = Vec::new();
        for c in &calls {
            if !comms.iter().any(|k| std::ptr::eq(*k, c.comm)) {
                comms.push(c.comm);
            }
        }
        // Locked in one order (by address), whatever order the batch named them in.
        comms.sort_by_key(|c| *c as *const Comm as usize);
        let locks: Vec<_> = comms
            .iter()
            .map(|c| c.busy.lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let raws = comms.iter().map(|c| c.raw()).collect::<Result<Vec<_>>>()?;
        // A communicator with a stream of its own for its kernels: that stream waits for what
        // each call's stream has queued (the buffers' earlier users among it), and each call's
        // stream for the kernels, once queued.
        for c in &calls {
            if let Some(k) = &c.comm.kernels {
                k.join(c.stream).op("cuStreamWaitEvent")?;
            }
        }
        // Every join tried. Where one fails, the communicators are aborted (ending their
        // kernels) and the host then waits for the kernels' streams, so that no buffer's access
        // is recorded before its collective has stopped.
        let join_back = || -> Result<()> {
            let mut first = None;
            for c in &calls {
                if let Some(k) = &c.comm.kernels {
                    if let Err(e) = c.stream.join(k).op("cuStreamWaitEvent") {
                        first.get_or_insert(e);
                    }
                }
            }
            first.map_or(Ok(()), Err)
        };
        let fail = |e: Error, unjoined: bool| -> Result<()> {
            comms.iter().for_each(|c| c.abort());
            if unjoined {
                for c in &calls {
                    if let Some(k) = &c.comm.kernels {
                        let _ = k.synchronize();
                    }
                }
            }
            Err(e)
        };
        // SAFETY: opens the group the calls below join; closed below on every path.
        let r = unsafe { (n.group_start)() };
        if r != SUCCESS {
            return Err(nccl_error(n, r, "ncclGroupStart", std::ptr::null_mut()));
        }
        let mut failed = None;
        for c in &calls {
            let raw = raws[comms
                .iter()
                .position(|k| std::ptr::eq(*k, c.comm))
                .expect("gathered")];
            if let Err(e) = c.comm.context().bind_to_thread().op("cuCtxSetCurrent") {
                failed.get_or_insert(e);
                break;
            }
            let (s, r) = (c.send as *const c_void, c.recv as *mut c_void);
            let stream: CUstream = c
                .comm
                .kernels
                .as_ref()
                .map_or(c.stream.cu_stream(), |k| k.cu_stream());
            // SAFETY: the addresses are the checked buffers' (on the communicator's device, of
            // the lengths each call reads and writes), kept alive and ordered by the guards
            // until the group is queued; the stream is live and on the same device.
            let res = unsafe {
                match c.what {
                    What::AllReduce(op) => (n.all_reduce)(s, r, c.count, c.dtype, op, raw, stream),
                    What::Broadcast(root) => {
                        (n.broadcast)(s, r, c.count, c.dtype, root, raw, stream)
                    }
                    What::AllGather => (n.all_gather)(s, r, c.count, c.dtype, raw, stream),
                    What::ReduceScatter(op) => {
                        (n.reduce_scatter)(s, r, c.count, c.dtype, op, raw, stream)
                    }
                    What::Send(peer) => (n.send)(s, c.count, c.dtype, peer, raw, stream),
                    What::Recv(peer) => (n.recv)(r, c.count, c.dtype, peer, raw, stream),
                }
            };
            if res != SUCCESS && res != IN_PROGRESS {
                failed.get_or_insert(nccl_error(n, res, "queueing a collective", raw));
                break;
            }
        }
        // SAFETY: closes the group opened above.
        let r = unsafe { (n.group_end)() };
        if r != SUCCESS && r != IN_PROGRESS {
            failed.get_or_insert(nccl_error(n, r, "ncclGroupEnd", std::ptr::null_mut()));
        }
        // Whatever happened, the calls' streams wait for what reached the kernels' streams,
        // before another thread may queue more on them.
        let joined = join_back();
        drop(locks);
        if let Some(e) = failed {
            return fail(e, joined.is_err());
        }
        for c in &comms {
            if let Err(e) = c.settle("queueing collectives") {
                // The group failed on one GPU: end every GPU's part before the guards record
                // the buffers' accesses.
                return fail(e, joined.is_err());
            }
        }
        if let Err(e) = joined {
            // A call's stream could not be ordered after its collective: none may go on.
            return fail(e, true);
        }
        // Every access is recorded on its stream now, after the group's kernels.
        drop(guards);
        Ok(())
    }
}

impl Comm {
    /// All-reduces `send` into `recv` on `stream` (one GPU of the group; the others make the
    /// same call).
    pub fn all_reduce<T: Element>(
        &self,
        stream: &CudaStream,
        send: &impl DevicePtr<T>,
        recv: &mut impl DevicePtrMut<T>,
        op: ReduceOp,
    ) -> Result<()> {
        alone(|b| b.all_reduce(self, stream, send, recv, op))
    }

    /// All-reduces `buf` into itself on `stream`.
    pub fn all_reduce_in_place<T: Element>(
        &self,
        stream: &CudaStream,
        buf: &mut impl DevicePtrMut<T>,
        op: ReduceOp,
    ) -> Result<()> {
        alone(|b| b.all_reduce_in_place(self, stream, buf, op))
    }

    /// Broadcasts rank `root`'s `buf` into every rank's `buf`, on `stream`.
    pub fn broadcast<T: Element>(
        &self,
        stream: &CudaStream,
        buf: &mut impl DevicePtrMut<T>,
        root: usize,
    ) -> Result<()> {
        alone(|b| b.broadcast(self, stream, buf, root))
    }

    /// All-gathers every rank's `send` into `recv`, on `stream`.
    pub fn all_gather<T: Element>(
        &self,
        stream: &CudaStream,
        send: &impl DevicePtr<T>,
        recv: &mut impl DevicePtrMut<T>,
    ) -> Result<()> {
        alone(|b| b.all_gather(self, stream, send, recv))
    }

    /// Reduce-scatters the ranks' `send` into each rank's part `recv`, on `stream`.
    pub fn reduce_scatter<T: Element>(
        &self,
        stream: &CudaStream,
        send: &impl DevicePtr<T>,
        recv: &mut impl DevicePtrMut<T>,
        op: ReduceOp,
    ) -> Result<()> {
        alone(|b| b.reduce_scatter(self, stream, send, recv, op))
    }
}

/// Queues the one collective that `add` adds, as a batch of its own.
fn alone<'a>(add: impl FnOnce(&mut Batch<'a>) -> Result<()>) -> Result<()> {
    let mut b = Batch::new();
    add(&mut b)?;
    b.run()
}
