//! What the scenarios that drive several GPUs from one process share: a host thread per GPU,
//! all started together, with every communicator aborted when one of them fails (so that no
//! thread waits forever for a peer that stopped), and the host time of a run.

use std::sync::Barrier;
use std::time::Instant;
use streamline::error::{Error, Result};
use streamline::multi::Comm;
use streamline::timing::median;
use streamline::Gpu;

use crate::{Check, Report};

/// Devices `1..n`, opened, for a run on devices `0..n` whose device 0 is `gpu`: `n` must be in
/// `2..=` the devices here, and `gpu` device 0.
pub(crate) fn open_peers(gpu: &Gpu, n: usize) -> Result<Vec<Gpu>> {
    let devices = streamline::runtime::device_count()?;
    if !(2..=devices).contains(&n) {
        return Err(Error::arg(
            "gpus",
            format!("{n} GPUs asked for and {devices} here: a run on several GPUs takes from 2 up to the devices here"),
        ));
    }
    let ordinal = gpu.info().ordinal;
    if ordinal != 0 {
        return Err(Error::arg(
            "device",
            format!("a run on {n} GPUs uses devices 0..{n}: leave --device at 0, got {ordinal}"),
        ));
    }
    (1..n).map(|d| Gpu::new(d, None)).collect()
}

/// One GPU's work in [`together`].
pub(crate) type Job<'a> = Box<dyn FnOnce() -> Result<()> + Send + 'a>;

/// Aborts every communicator when dropped armed: a thread that fails or panics leaves its
/// peers' collectives waiting for it, and their threads may be waiting on the host for work
/// queued behind those collectives; aborting ends both.
struct AbortAll<'a>(&'a [&'a Comm], bool);

impl Drop for AbortAll<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.iter().for_each(|c| c.abort());
        }
    }
}

/// Runs every job on a thread of its own, all starting together; the first error wins, and a
/// failing (or panicking) job aborts `comms`.
pub(crate) fn together(comms: &[&Comm], jobs: Vec<Job<'_>>) -> Result<()> {
    let start = Barrier::new(jobs.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let mut guard = AbortAll(comms, true);
                    let r = job();
                    guard.1 = r.is_err();
                    r
                })
            })
            .collect();
        let mut first = Ok(());
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(Error::Interrupted("a GPU's thread panicked".into())));
            if first.is_ok() {
                first = r;
            }
        }
        first
    })
}

/// Median host milliseconds of `work` over `reps` runs after one warm-up run.
pub(crate) fn wall_ms(reps: usize, mut work: impl FnMut() -> Result<()>) -> Result<f64> {
    work()?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        work()?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(&v))
}

/// The report of a run on several GPUs set against a run on one (`one_ms` and `many_ms` per
/// step, `runs` naming the two), with no timeline: a scenario that records its GPUs adds theirs
/// ([`streamline::engine::Timeline::of_devices`]).
pub(crate) fn report_against_one(
    name: &str,
    workload: String,
    (one_ms, many_ms): (f64, f64),
    runs: [&str; 2],
    table: Vec<Vec<String>>,
    check: Check,
    notes: Vec<String>,
) -> Report {
    Report {
        name: name.into(),
        workload,
        serial_ms: one_ms,
        overlapped_ms: many_ms,
        graph_ms: None,
        runs: Some(runs.map(String::from)),
        rows: Vec::new(),
        table,
        metrics: streamline::engine::Timeline::default().metrics(),
        timeline: Default::default(),
        check,
        notes,
    }
}
