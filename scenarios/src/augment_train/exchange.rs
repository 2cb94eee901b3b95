//! How the GPUs of a data-parallel step share their gradients: NCCL's all-reduce, or, on two
//! GPUs driven by one process, peer copies.
//!
//! An all-reduce runs as NCCL's kernels on SMs of every GPU, which the step's products then
//! share, and they wait on those SMs for their peers. Peer copies run on the copy engines and
//! take no SM: each GPU's gradient buckets are copied into slots on the other GPU, and each
//! GPU's update takes the mean of its own gradient and the one that arrived
//! ([`sgd_pair`]), summed in f32 whichever comes first, so
//! that both GPUs' weights stay bit-identical. On two GPUs this sends the bytes a ring
//! all-reduce sends (every GPU its whole gradient, once); on N it would send N - 1 times them,
//! so it is offered for two.
//!
//! The slots pass between the two GPUs' host threads over channels, as in the encoder-decoder's
//! ring: the sender takes a free slot, queues the copy into it and passes it on; the receiver
//! queues its update on it and gives it back, so that neither host waits for a device and the
//! buffers' tracking orders every copy after the update that last read its slot. Every item
//! (bucket) has [`DEPTH`] slots, so a step's copy waits at most for the update two steps
//! before it.

use super::model::{bucket_spans, GradDtype};
use cudarc::driver::{CudaStream, DevicePtr, DeviceRepr};
use half::bf16;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};
use streamline::engine::memory::peer;
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::error::{Error, Result};
use streamline::multi::Comm;
use streamline::ops::train::{sgd_pair, GradElement};
use streamline::Gpu;
use streamline_testing::reference::train::Mlp;

/// How a data-parallel step's gradients travel between its GPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Exchange {
    /// Peer copies on two GPUs that reach each other's memory directly, else the all-reduce.
    #[default]
    Auto,
    /// NCCL's all-reduce (average), on any number of GPUs.
    AllReduce,
    /// Each GPU's gradient copied by the copy engines to the other, the mean taken in the
    /// update: two GPUs only.
    PeerCopies,
}

/// Slots per item and direction: a copy into a slot waits for the update two steps before.
pub(crate) const DEPTH: usize = 2;

/// A slot with the item (bucket) it carries.
type Slot<T> = (usize, DeviceBuffer<T>);

/// One GPU's end of a two-way exchange of items of `T` with one other GPU.
pub(crate) struct PeerLink<T> {
    /// Free slots on the other GPU, handed back once read.
    free: Receiver<Slot<T>>,
    /// Where filled slots go to the other GPU.
    fill: Sender<Slot<T>>,
    /// Slots on this GPU the other has filled.
    filled: Receiver<Slot<T>>,
    /// Where read slots go back to the other GPU.
    back: Sender<Slot<T>>,
    /// The stream of the other GPU its slots are written on.
    land: Arc<CudaStream>,
    /// This GPU's communicator: aborted when any GPU's thread fails; its timeout bounds waits.
    comm: Arc<Comm>,
}

/// The two ends of an exchange of items of lengths `sizes` between the GPUs of `a` and `b`
/// (each a pool, the lane its slots are written on, and its communicator): [`DEPTH`] slots per
/// item on each GPU, allocated on that lane.
pub(crate) fn link_pair<T: bytemuck::Pod + DeviceRepr>(
    a: (&StreamPool, usize, &Arc<Comm>),
    b: (&StreamPool, usize, &Arc<Comm>),
    sizes: &[usize],
) -> Result<(PeerLink<T>, PeerLink<T>)> {
    let (a_fill, b_filled) = mpsc::channel();
    let (b_back, a_free) = mpsc::channel();
    let (b_fill, a_filled) = mpsc::channel();
    let (a_back, b_free) = mpsc::channel();
    // Slots on each GPU go to the other's free list, in the order it will fill them.
    for (pool, lane, back) in [(b.0, b.1, &b_back), (a.0, a.1, &a_back)] {
        for _ in 0..DEPTH {
            for (i, &n) in sizes.iter().enumerate() {
                let slot = DeviceBuffer::zeros(pool, lane, n)?;
                // The receiver is alive: it is held above.
                let _ = back.send((i, slot));
            }
        }
    }
    let end = |free, fill, filled, back, land: &StreamPool, lane, comm: &Arc<Comm>| {
        Ok(PeerLink {
            free,
            fill,
            filled,
            back,
            land: land.stream(lane)?.clone(),
            comm: comm.clone(),
        })
    };
    Ok((
        end(a_free, a_fill, a_filled, a_back, b.0, b.1, a.2)?,
        end(b_free, b_fill, b_filled, b_back, a.0, a.1, b.2)?,
    ))
}

impl<T> PeerLink<T> {
    /// Queues the copy of item `item` (`src`, on this GPU) into a free slot of the other GPU,
    /// on `stream` (of this GPU), after `src`'s last write, and passes the slot on.
    pub(crate) fn send(
        &self,
        stream: &Arc<CudaStream>,
        item: usize,
        src: &impl DevicePtr<T>,
    ) -> Result<()> {
        let (got, mut slot) = self.wait(&self.free, "a free slot on the other GPU")?;
        expect(item, got)?;
        peer(stream, src, &self.land, &mut slot)?;
        self.fill.send((item, slot)).map_err(|_| gone())
    }

    /// The slot holding the other GPU's item `item`, once its copy is queued: work that reads
    /// it is ordered after the copy by the buffer's tracking.
    pub(crate) fn receive(&self, item: usize) -> Result<DeviceBuffer<T>> {
        let (got, slot) = self.wait(&self.filled, "the other GPU's gradient")?;
        expect(item, got)?;
        Ok(slot)
    }

    /// Gives a received slot back, once the work that reads it is queued.
    pub(crate) fn give_back(&self, item: usize, slot: DeviceBuffer<T>) -> Result<()> {
        self.back.send((item, slot)).map_err(|_| gone())
    }

    /// The next slot from `from`, waiting while the other thread may still send one: not past
    /// the communicator's timeout, nor once a thread has failed (the communicators aborted).
    fn wait(&self, from: &Receiver<Slot<T>>, what: &str) -> Result<Slot<T>> {
        let start = Instant::now();
        loop {
            match from.recv_timeout(Duration::from_millis(20)) {
                Ok(v) => return Ok(v),
                Err(RecvTimeoutError::Disconnected) => return Err(gone()),
                Err(RecvTimeoutError::Timeout) if self.comm.is_aborted() => {
                    return Err(Error::Interrupted(format!(
                        "rank {}: stopped waiting for {what}: another GPU's thread failed",
                        self.comm.rank()
                    )))
                }
                Err(RecvTimeoutError::Timeout) if start.elapsed() >= self.comm.timeout() => {
                    return Err(Error::Timeout {
                        during: format!("rank {}: waiting for {what}", self.comm.rank()),
                        seconds: self.comm.timeout().as_secs_f64(),
                    })
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

/// One GPU's ends of the exchanges of a step's gradients with the other GPU: `dL/dW2`, and
/// `dL/dW1`'s buckets in the type they travel in.
pub(crate) struct Peers {
    pub(crate) w2: PeerLink<f32>,
    pub(crate) w1_f32: Option<PeerLink<f32>>,
    pub(crate) w1_bf16: Option<PeerLink<bf16>>,
}

/// The two GPUs' [`Peers`] for an MLP `m` whose `dL/dW1` is in `buckets` buckets travelling as
/// `grad`: each side a pool, the lane its slots are written on, and its communicator.
pub(crate) fn peers_pair(
    a: (&StreamPool, usize, &Arc<Comm>),
    b: (&StreamPool, usize, &Arc<Comm>),
    m: &Mlp,
    buckets: usize,
    grad: GradDtype,
) -> Result<(Peers, Peers)> {
    let sizes: Vec<usize> = bucket_spans(m.inputs, buckets)
        .map(|(_, n)| n * m.hidden)
        .collect();
    let (w2a, w2b) = link_pair(a, b, &[m.hidden * m.outputs])?;
    let ((fa, fb), (ha, hb)) = match grad {
        GradDtype::F32 => {
            let (x, y) = link_pair(a, b, &sizes)?;
            ((Some(x), Some(y)), (None, None))
        }
        GradDtype::Bf16 => {
            let (x, y) = link_pair(a, b, &sizes)?;
            ((None, None), (Some(x), Some(y)))
        }
    };
    Ok((
        Peers {
            w2: w2a,
            w1_f32: fa,
            w1_bf16: ha,
        },
        Peers {
            w2: w2b,
            w1_f32: fb,
            w1_bf16: hb,
        },
    ))
}

impl<T: GradElement> PeerLink<T> {
    /// Queues `w = w - lr * (own + other) / 2` on `stream` ([`sgd_pair`]), `other` the other
    /// GPU's item `item` once its copy is queued, and gives that slot back.
    pub(crate) fn update_by_mean(
        &self,
        (gpu, stream): (&Gpu, &CudaStream),
        item: usize,
        own: &DeviceBuffer<T>,
        w: &mut DeviceBuffer<f32>,
        lr: f32,
    ) -> Result<()> {
        self.with_other(item, |other| sgd_pair(gpu, stream, w, (own, other), lr))
    }

    /// Queues `queue(other)`, `other` the other GPU's item `item` once its copy is queued, and
    /// gives that slot back.
    pub(crate) fn with_other<R>(
        &self,
        item: usize,
        queue: impl FnOnce(&DeviceBuffer<T>) -> Result<R>,
    ) -> Result<R> {
        let other = self.receive(item)?;
        let r = queue(&other)?;
        self.give_back(item, other)?;
        Ok(r)
    }
}

fn expect(item: usize, got: usize) -> Result<()> {
    if item == got {
        Ok(())
    } else {
        Err(Error::Interrupted(format!(
            "the exchange between GPUs fell out of step: item {got} came where {item} was due"
        )))
    }
}

fn gone() -> Error {
    Error::Interrupted("the other GPU's thread of the exchange has stopped".into())
}

#[cfg(test)]
mod tests {
    use super::{expect, Exchange};
    use clap::ValueEnum;

    /// The names the command line takes.
    #[test]
    fn exchanges_are_named_as_the_command_line_takes_them() {
        let names: Vec<String> = Exchange::value_variants()
            .iter()
            .filter_map(|e| e.to_possible_value().map(|v| v.get_name().to_string()))
            .collect();
        assert_eq!(names, ["auto", "all-reduce", "peer-copies"]);
        assert!(expect(3, 3).is_ok());
        let e = expect(3, 4).unwrap_err().to_string();
        assert!(e.contains("item 4 came where 3 was due"), "{e}");
    }
}
