//! A data loader: a pool of host threads fills page-locked slots with batches (decoding files,
//! generating data) ahead of the pipeline that copies them to the device, as PyTorch's
//! `DataLoader` workers feed a training loop.
//!
//! Each slot is owned by exactly one side at a time, by move: the pipeline holds it between
//! [`Loader::get`] and [`Loader::release`] and while the copies that read it may still run (the
//! slot's own tracked accesses, queried with events, never a device-wide wait); a worker holds
//! it while filling. A slot cannot be refilled while the pipeline can still name it or a copy
//! still reads it, and a batch cannot be read before its worker handed it back. The threads
//! never wait on the device: only the pipeline's thread does, when it needs a batch whose slot
//! is still being copied from. Memory is the slots, however many batches stream.

use super::memory::PinnedBuffer;
use crate::error::{Error, Result};
use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Host memory a worker fills, which device accesses (copies) may still be using.
pub trait HostSlot: Send + 'static {
    /// Whether no device access queued so far uses the slot, without waiting.
    fn is_idle(&mut self) -> Result<bool>;
    /// Returns once no device access queued so far uses the slot.
    fn wait_idle(&mut self) -> Result<()>;
}

impl<T: bytemuck::Pod + Send> HostSlot for PinnedBuffer<T> {
    fn is_idle(&mut self) -> Result<bool> {
        PinnedBuffer::is_idle(self)
    }
    fn wait_idle(&mut self) -> Result<()> {
        self.as_mut_slice().map(|_| ())
    }
}

impl<A: HostSlot, B: HostSlot> HostSlot for (A, B) {
    fn is_idle(&mut self) -> Result<bool> {
        Ok(self.0.is_idle()? && self.1.is_idle()?)
    }
    fn wait_idle(&mut self) -> Result<()> {
        self.0.wait_idle()?;
        self.1.wait_idle()
    }
}

/// Fills batch `index` into a slot; runs on the loader's threads.
pub type Fill<S> = dyn Fn(usize, &mut S) -> Result<()> + Send + Sync;

struct Job<S> {
    index: usize,
    slot: S,
}

struct Done<S> {
    index: usize,
    slot: S,
    result: Result<()>,
    busy: Duration,
}

/// What one run of the loader measured.
#[derive(Clone, Debug, Default)]
pub struct LoaderStats {
    /// Batches filled.
    pub batches: usize,
    /// Worker threads.
    pub workers: usize,
    /// Time the workers spent filling, summed over workers.
    pub busy: Duration,
    /// Time the pipeline's thread waited for a slot's earlier copies before it could hand the
    /// slot to a thread (only when it needed that batch next).
    pub slot_wait: Duration,
    /// Time the pipeline waited in [`Loader::get`] for a batch not yet filled (the threads
    /// behind, or the slot's earlier copy not finished: `slot_wait` is part of it).
    pub starved: Duration,
    /// From [`Loader::start`] to [`Loader::finish`].
    pub wall: Duration,
}

impl LoaderStats {
    /// Batches per second the workers could fill if never kept waiting.
    pub fn capacity(&self) -> f64 {
        if self.busy.is_zero() {
            f64::INFINITY
        } else {
            self.batches as f64 * self.workers as f64 / self.busy.as_secs_f64()
        }
    }

    /// Share of the workers' time spent filling.
    pub fn utilization(&self) -> f64 {
        let all = self.wall.as_secs_f64() * self.workers as f64;
        if all > 0.0 {
            (self.busy.as_secs_f64() / all).min(1.0)
        } else {
            0.0
        }
    }
}

/// A pool of `workers` threads filling a ring of slots with batches `0..n` of a run, in order
/// of need (see the module docs).
pub struct Loader<S: HostSlot> {
    slots: Vec<Option<S>>,
    jobs: Option<Sender<Job<S>>>,
    done: Receiver<Done<S>>,
    threads: Vec<JoinHandle<()>>,
    arrived: BTreeMap<usize, Done<S>>,
    /// Slots released for their next batch, in order, whose copies may still be running.
    pending: VecDeque<(usize, S)>,
    end: usize,
    next: usize,
    released: usize,
    out: usize,
    started: Instant,
    stats: LoaderStats,
}

impl<S: HostSlot> Loader<S> {
    /// A loader over `slots` (at least one) with `workers` threads (1 to 256) running `fill`.
    pub fn new(
        slots: Vec<S>,
        workers: usize,
        fill: impl Fn(usize, &mut S) -> Result<()> + Send + Sync + 'static,
    ) -> Result<Loader<S>> {
        if slots.is_empty() {
            return Err(Error::arg("slots", "needs at least one slot"));
        }
        if !(1..=256).contains(&workers) {
            return Err(Error::arg(
                "workers",
                format!("must be in 1..=256, got {workers}"),
            ));
        }
        let fill: Arc<Fill<S>> = Arc::new(fill);
        let (jobs, queue) = channel::<Job<S>>();
        let queue = Arc::new(Mutex::new(queue));
        let (report, done) = channel::<Done<S>>();
        let mut threads = Vec::with_capacity(workers);
        for w in 0..workers {
            let (queue, report, fill) = (queue.clone(), report.clone(), fill.clone());
            let t = std::thread::Builder::new()
                .name(format!("loader-{w}"))
                .spawn(move || work(&queue, &report, &*fill))
                .map_err(|e| Error::arg("workers", format!("cannot start a thread: {e}")))?;
            threads.push(t);
        }
        Ok(Loader {
            slots: slots.into_iter().map(Some).collect(),
            jobs: Some(jobs),
            done,
            threads,
            arrived: BTreeMap::new(),
            pending: VecDeque::new(),
            end: 0,
            next: 0,
            released: 0,
            out: 0,
            started: Instant::now(),
            stats: LoaderStats {
                workers,
                ..Default::default()
            },
        })
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Always false: a loader has at least one slot.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Slot `s` while no run holds it (for capturing the copies that read it).
    pub fn slot(&self, s: usize) -> Result<&S> {
        self.slots
            .get(s)
            .and_then(|x| x.as_ref())
            .ok_or_else(|| Error::arg("s", format!("slot {s} is not in hand (or not a slot)")))
    }

    /// Starts a run of batches `0..n` (after [`Loader::finish`] of the run before): the first
    /// slots' worth is handed to the workers at once.
    pub fn start(&mut self, n: usize) -> Result<()> {
        self.finish()?;
        self.end = n;
        self.next = 0;
        self.released = 0;
        self.started = Instant::now();
        self.stats = LoaderStats {
            workers: self.stats.workers,
            ..Default::default()
        };
        for i in 0..n.min(self.len()) {
            self.refill(i)?;
        }
        self.pump()
    }

    /// Queues slot `index % slots` for batch `index`: it goes to a thread once its copies are
    /// done ([`Loader::pump`]).
    fn refill(&mut self, index: usize) -> Result<()> {
        let s = index % self.len();
        let slot = self.slots[s]
            .take()
            .ok_or_else(|| Error::arg("index", format!("slot {s} of batch {index} is in use")))?;
        self.pending.push_back((index, slot));
        Ok(())
    }

    /// Hands the threads every pending slot, in order, whose copies have finished.
    fn pump(&mut self) -> Result<()> {
        while let Some((_, slot)) = self.pending.front_mut() {
            if !slot.is_idle()? {
                break;
            }
            let (index, slot) = self.pending.pop_front().expect("front exists");
            let jobs = self.jobs.as_ref().expect("workers run until drop");
            jobs.send(Job { index, slot })
                .map_err(|_| Error::arg("workers", "the loader's threads have stopped"))?;
            self.out += 1;
        }
        Ok(())
    }

    /// Takes one finished batch from the threads, waiting at most `wait`; false if none came.
    fn receive(&mut self, wait: Option<Duration>) -> Result<bool> {
        let stopped = || Error::arg("workers", "the loader's threads have stopped");
        let d = match wait {
            None => self.done.recv().map_err(|_| stopped())?,
            Some(t) => match self.done.recv_timeout(t) {
                Ok(d) => d,
                Err(RecvTimeoutError::Timeout) => return Ok(false),
                Err(RecvTimeoutError::Disconnected) => return Err(stopped()),
            },
        };
        self.out -= 1;
        self.stats.busy += d.busy;
        self.arrived.insert(d.index, d);
        Ok(true)
    }

    /// Waits for batch `i` (the next of the run, in order) and lends its slot until
    /// [`Loader::release`]. A fill that failed is this call's error.
    pub fn get(&mut self, i: usize) -> Result<&S> {
        if i != self.next || i >= self.end {
            return Err(Error::arg(
                "i",
                format!(
                    "batches are taken in order: expected batch {} of 0..{}, got {i}",
                    self.next, self.end
                ),
            ));
        }
        let t = Instant::now();
        loop {
            self.pump()?;
            if self.arrived.contains_key(&i) {
                break;
            }
            if self.out > 0 {
                // A thread is filling: take what it finishes, and look at the copies again
                // now and then.
                self.receive(Some(Duration::from_micros(100)))?;
            } else if let Some((_, slot)) = self.pending.front_mut() {
                // Batch `i` waits for its slot's copies: this thread waits on their events.
                let w = Instant::now();
                slot.wait_idle()?;
                self.stats.slot_wait += w.elapsed();
            } else {
                return Err(Error::arg(
                    "i",
                    format!("batch {i} was never handed to the threads"),
                ));
            }
        }
        self.stats.starved += t.elapsed();
        let d = self.arrived.remove(&i).expect("arrived above");
        let s = i % self.len();
        self.slots[s] = Some(d.slot);
        self.next += 1;
        d.result?;
        self.stats.batches += 1;
        Ok(self.slots[s].as_ref().expect("just put back"))
    }

    /// Batch `i` (taken, and released in order) has been queued for copying: its slot is
    /// handed to the threads for batch `i + slots` once those copies are done.
    pub fn release(&mut self, i: usize) -> Result<()> {
        if i != self.released || i >= self.next {
            return Err(Error::arg(
                "i",
                format!(
                    "batches are released in order once taken: expected batch {} (taken up to {}), got {i}",
                    self.released, self.next
                ),
            ));
        }
        self.released += 1;
        let refill = i + self.len();
        if refill < self.end {
            self.refill(refill)?;
        }
        self.pump()
    }

    /// Ends the run: waits for the batches still being filled and takes every slot back.
    pub fn finish(&mut self) -> Result<LoaderStats> {
        while self.out > 0 {
            self.receive(None)?;
        }
        let n = self.slots.len();
        for (i, d) in std::mem::take(&mut self.arrived) {
            self.slots[i % n] = Some(d.slot);
        }
        for (i, slot) in std::mem::take(&mut self.pending) {
            self.slots[i % n] = Some(slot);
        }
        self.end = self.released;
        self.next = self.released;
        self.stats.wall = self.started.elapsed();
        Ok(self.stats.clone())
    }
}

impl<S: HostSlot> Drop for Loader<S> {
    fn drop(&mut self) {
        // Closing the queue ends each thread after its current batch.
        self.jobs.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A worker: takes jobs until the queue closes; a fill that panics reports an error instead.
fn work<S: HostSlot>(queue: &Mutex<Receiver<Job<S>>>, report: &Sender<Done<S>>, fill: &Fill<S>) {
    loop {
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok(Job { index, mut slot }) = job else {
            return;
        };
        let t = Instant::now();
        let result =
            catch_unwind(AssertUnwindSafe(|| fill(index, &mut slot))).unwrap_or_else(|p| {
                let why = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                Err(Error::arg("fill", format!("batch {index}: {why}")))
            });
        let busy = t.elapsed();
        if report
            .send(Done {
                index,
                slot,
                result,
                busy,
            })
            .is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Host memory with no device accesses: what the protocol needs, without a GPU.
    struct Plain(Vec<usize>);
    impl HostSlot for Plain {
        fn is_idle(&mut self) -> Result<bool> {
            Ok(true)
        }
        fn wait_idle(&mut self) -> Result<()> {
            Ok(())
        }
    }

    fn loader(slots: usize, workers: usize, fail_at: Option<usize>) -> Loader<Plain> {
        let s = (0..slots).map(|_| Plain(vec![usize::MAX; 3])).collect();
        Loader::new(s, workers, move |i, p: &mut Plain| {
            if Some(i) == fail_at {
                return Err(Error::arg("input", format!("batch {i} is broken")));
            }
            if i % 7 == 3 {
                std::thread::sleep(Duration::from_millis(2));
            }
            p.0.fill(i);
            Ok(())
        })
        .unwrap()
    }

    #[test]
    fn batches_arrive_in_order_each_in_its_slot_and_reuse_waits_for_release() {
        for (slots, workers) in [(1, 1), (2, 3), (5, 2), (8, 8)] {
            let mut l = loader(slots, workers, None);
            for n in [0, 1, 3, 40] {
                l.start(n).unwrap();
                for i in 0..n {
                    let got = l.get(i).unwrap();
                    assert_eq!(got.0, vec![i; 3], "slots {slots} workers {workers}");
                    // The slot of i is lent out: it cannot be refilled before release.
                    assert!(l.slot(i % slots).is_ok());
                    l.release(i).unwrap();
                }
                // End of stream: nothing more to take.
                assert!(l.get(n).is_err());
                let st = l.finish().unwrap();
                assert_eq!(st.batches, n);
                for s in 0..slots {
                    assert!(l.slot(s).is_ok(), "every slot back after the run");
                }
            }
        }
    }

    #[test]
    fn taking_out_of_order_or_releasing_early_is_refused() {
        let mut l = loader(2, 1, None);
        l.start(4).unwrap();
        assert!(l.get(1).is_err());
        assert!(l.release(0).is_err());
        l.get(0).unwrap();
        l.release(0).unwrap();
        l.finish().unwrap();
        assert!(Loader::new(Vec::<Plain>::new(), 1, |_, _| Ok(())).is_err());
        assert!(Loader::new(vec![Plain(vec![])], 0, |_, _| Ok(())).is_err());
    }

    #[test]
    fn a_failing_or_panicking_fill_is_the_error_of_its_batch_and_the_loader_goes_on() {
        let mut l = loader(3, 2, Some(4));
        l.start(10).unwrap();
        for i in 0..4 {
            l.get(i).unwrap();
            l.release(i).unwrap();
        }
        let e = l.get(4).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("batch 4 is broken"), "{e}");
        l.finish().unwrap();
        l.start(3).unwrap();
        for i in 0..3 {
            assert_eq!(l.get(i).unwrap().0, vec![i; 3]);
            l.release(i).unwrap();
        }
        l.finish().unwrap();

        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let mut p = Loader::new(vec![Plain(vec![0])], 1, move |i, _: &mut Plain| {
            c.fetch_add(1, Ordering::SeqCst);
            if i == 1 {
                panic!("decoder crashed");
            }
            Ok(())
        })
        .unwrap();
        p.start(3).unwrap();
        p.get(0).unwrap();
        p.release(0).unwrap();
        let e = p.get(1).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("decoder crashed"), "{e}");
        drop(p);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
