//! Decoding ahead of the queue (`--decode gpu`, pipelined). nvJPEG's call for a batch returns
//! about when the batch is decoded, and while the one thread that queues every stage waits in
//! it, no training step is queued. So a host thread of its own makes those calls: it takes the
//! loader's batches in order, decodes each into a spare set of the decode stage's buffers on a
//! stream no lane uses, and marks it with an event. The decode stage then swaps that set into
//! its ring slot, has its lane wait for the event, and hands the set it replaced back for a
//! later batch; the thread runs ahead of the queue by the sets it holds.
//!
//! Order on the device comes from the buffers' own tracking: the thread's stream is one of
//! the pool's, so its writes into a handed-back set wait for the augmentation and training
//! step that last read it (the decoder waits on the host for that stream before the hardware
//! decoders, which write when called), and the readers of a swapped-in set wait for the
//! thread's writes.

use super::decode::{Extents, FileDecoder};
use super::feed::{lock, Slot, Source};
use super::*;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;
use std::ops::Range;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use streamline::engine::memory::h2d;
use streamline::engine::Loader;
use streamline::error::DriverContext;

/// Sets the decoding thread holds: how many batches it may run ahead of the queue.
pub(super) const AHEAD: usize = 2;

/// What the decode stage writes for one batch: the decoded images, their extents and the
/// targets.
pub(super) struct Set {
    pub(super) images: DeviceBuffer<u8>,
    pub(super) targets: DeviceBuffer<f32>,
    pub(super) extents: Extents,
}

/// A batch the thread is done with: its index, its set, and the event that marks its writes
/// (none for a batch past the run's end, handed back untouched).
type Done = Result<(usize, Set, Option<CudaEvent>)>;

/// What the decoding thread works with.
pub(super) struct Work {
    pub(super) files: Arc<Mutex<FileDecoder>>,
    pub(super) loader: Arc<Mutex<Loader<Slot>>>,
    pub(super) source: Arc<Source>,
    /// A pool stream that no lane uses.
    pub(super) stream: Arc<CudaStream>,
}

/// The decoding thread of one run of batches.
pub(super) struct Ahead {
    jobs: Option<Sender<(usize, Set)>>,
    done: Receiver<Done>,
    thread: Option<JoinHandle<Duration>>,
    /// Sets handed to the thread and not yet taken back.
    out: usize,
    next: usize,
}

impl Ahead {
    /// Starts decoding batches `range` of the loader's run, the first ones into `spares` (at
    /// least one).
    pub(super) fn start(work: Work, spares: Vec<Set>, range: Range<usize>) -> Result<Ahead> {
        if spares.is_empty() {
            return Err(Error::arg(
                "spares",
                "decoding ahead needs at least one spare set",
            ));
        }
        let (jobs, queue) = channel::<(usize, Set)>();
        let (report, done) = channel::<Done>();
        let end = range.end;
        let thread = std::thread::Builder::new()
            .name("decode-ahead".into())
            .spawn(move || run(&work, &queue, &report, end))
            .map_err(|e| Error::arg("decode", format!("cannot start a thread: {e}")))?;
        let mut a = Ahead {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
            out: 0,
            next: range.start,
        };
        for set in spares {
            a.give(set)?;
        }
        Ok(a)
    }

    /// Hands `set` to the thread for the next batch.
    fn give(&mut self, set: Set) -> Result<()> {
        let i = self.next;
        self.jobs
            .as_ref()
            .and_then(|j| j.send((i, set)).ok())
            .ok_or_else(|| Error::arg("decode", "the decoding thread has stopped"))?;
        self.next += 1;
        self.out += 1;
        Ok(())
    }

    /// Takes the next set back from the thread, which must be batch `i`'s (waiting for it
    /// while the thread is behind).
    fn take(&mut self, i: usize) -> Result<(Set, Option<CudaEvent>)> {
        let (j, set, event) = self
            .done
            .recv()
            .map_err(|_| Error::arg("decode", "the decoding thread has stopped"))??;
        self.out -= 1;
        if j != i {
            return Err(Error::arg(
                "decode",
                format!("batch {i} was due from the decoding thread, batch {j} came"),
            ));
        }
        Ok((set, event))
    }

    /// The decode stage of batch `i` on `stream`: batch `i`'s set swapped into `slot` (the
    /// ring slot's buffers), `stream` made to wait for its writes, and the set it replaced
    /// handed back for a later batch.
    pub(super) fn swap_in(
        &mut self,
        i: usize,
        stream: &Arc<CudaStream>,
        slot: (&mut DeviceBuffer<u8>, &mut DeviceBuffer<f32>, &mut Extents),
    ) -> Result<()> {
        let (mut set, event) = self.take(i)?;
        let event = event
            .ok_or_else(|| Error::arg("decode", format!("batch {i} is past the end of the run")))?;
        stream.wait(&event).op("cuStreamWaitEvent")?;
        std::mem::swap(slot.0, &mut set.images);
        std::mem::swap(slot.1, &mut set.targets);
        std::mem::swap(slot.2, &mut set.extents);
        self.give(set)
    }

    /// Ends the run: takes every set back (the ones past the run's end come back untouched)
    /// and waits for the thread. Returns the sets and the thread's time in decoding calls.
    pub(super) fn finish(mut self) -> Result<(Vec<Set>, Duration)> {
        let mut sets = Vec::with_capacity(self.out);
        let mut first_error = None;
        while self.out > 0 {
            match self.done.recv() {
                Ok(Ok((_, set, _))) => sets.push(set),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => break,
            }
            self.out -= 1;
        }
        self.jobs = None;
        let busy = self.join()?;
        match first_error {
            Some(e) => Err(e),
            None => Ok((sets, busy)),
        }
    }

    fn join(&mut self) -> Result<Duration> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(busy)) => Ok(busy),
            Some(Err(_)) => Err(Error::arg("decode", "the decoding thread panicked")),
            None => Ok(Duration::ZERO),
        }
    }
}

/// A run left early (an error in another stage) still stops the thread before its loader
/// and sets go.
impl Drop for Ahead {
    fn drop(&mut self) {
        self.jobs = None;
        while self.out > 0 && self.done.recv().is_ok() {
            self.out -= 1;
        }
        let _ = self.join();
    }
}

/// The thread: each batch below `end` read from the loader, decoded into its set and marked
/// with an event; the others handed back as they came. Stops at the first error (reported)
/// or when the queue side hangs up. Returns the time spent decoding.
fn run(work: &Work, jobs: &Receiver<(usize, Set)>, done: &Sender<Done>, end: usize) -> Duration {
    let mut busy = Duration::ZERO;
    if let Err(e) = work.stream.context().bind_to_thread().op("cuCtxSetCurrent") {
        let _ = done.send(Err(e));
        return busy;
    }
    for (i, mut set) in jobs.iter() {
        if i >= end {
            if done.send(Ok((i, set, None))).is_err() {
                break;
            }
            continue;
        }
        let r = decode(work, i, &mut set, &mut busy);
        let failed = r.is_err();
        if done.send(r.map(|e| (i, set, Some(e)))).is_err() || failed {
            break;
        }
    }
    busy
}

/// Batch `i` from the loader into `set`, on the thread's stream.
fn decode(work: &Work, i: usize, set: &mut Set, busy: &mut Duration) -> Result<CudaEvent> {
    let mut loader = lock(&work.loader);
    let slot = loader.get(i)?;
    let folder = work
        .source
        .files()
        .ok_or_else(|| Error::arg("decode", "decoding ahead needs a folder of files"))?;
    let t = Instant::now();
    let mut files = lock(&work.files);
    files.decode(
        folder,
        &work.stream,
        slot,
        &mut set.extents,
        &mut set.images,
    )?;
    h2d(
        &work.stream,
        &slot.targets.view(0..slot.targets.len())?,
        &mut set.targets,
    )?;
    let event = work
        .stream
        .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
        .op("cuEventRecord")?;
    *busy += t.elapsed();
    loader.release(i)?;
    Ok(event)
}
