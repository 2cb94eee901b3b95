//! Running a [`Plan`]: eagerly, captured into a CUDA graph, or as a stream of any length whose
//! steady state replays two captured graphs in turn.
//!
//! Work is issued in *steps*. At step `t` the stage with skew `k` runs iteration `t - k`. With
//! no skew a step is an iteration (every stage of iteration `i`, then of `i + 1`). With the
//! plan's skew ([`Plan::skew`]) later stages run earlier iterations, so that every window of
//! steps holds work for every lane: a graph of such a window starts and ends with all lanes
//! busy instead of filling and draining the pipeline, which is what lets replays of a short
//! window run as fast as the eager loop.

use super::interrupt;
use super::pipeline::Plan;
use super::pool::{Graph, StreamPool};
use super::timeline::Recorder;
use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};
use std::ops::Range;
use std::sync::Arc;

/// One call of a stage, handed to the function that queues its work.
pub struct StageCall<'a> {
    /// Stage index in the description.
    pub stage: usize,
    /// Stage name.
    pub name: &'a str,
    /// Iteration.
    pub iteration: usize,
    /// Ring slot of this iteration (`iteration % depth`).
    pub slot: usize,
    /// The stream to queue the work on.
    pub stream: &'a Arc<CudaStream>,
    /// Index of that stream in the pool.
    pub stream_index: usize,
}

/// A cross-stream dependency of one stage, with the rank of its source in issue order.
struct Wait {
    from: usize,
    distance: usize,
    stream: usize,
    /// Larger is issued later: `(skew - distance) * stages + position in the order`.
    rank: i64,
}

impl Plan {
    /// Each stage's skew in steps, as large as the dependencies allow up to its position in
    /// the order. A stage that refills (at distance `d`) what a later stage reads stays within
    /// `d - 1` steps of it, so with a ring of depth 1 nothing is skewed.
    pub fn skew(&self) -> Vec<usize> {
        let n = self.spec().stages.len();
        let mut k = vec![0i64; n];
        for (p, &s) in self.order().iter().enumerate() {
            k[s] = p as i64;
        }
        // Lowering only: each pass moves a source down to the bound its dependent sets; the
        // bounds of every cycle add up to at least zero, so this ends.
        loop {
            let mut changed = false;
            for d in self.dependencies() {
                let bound = k[d.to] + (d.distance as i64 - 1).max(0);
                if k[d.from] > bound {
                    k[d.from] = bound;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let min = k.iter().copied().min().unwrap_or(0);
        k.iter().map(|&v| (v - min) as usize).collect()
    }

    fn check_streams(&self, pool: &StreamPool, lane_streams: &[usize]) -> Result<()> {
        let lanes = self.spec().lanes.len();
        if lane_streams.len() != lanes {
            return Err(Error::arg(
                "lane_streams",
                format!("has {} entries for {lanes} lanes", lane_streams.len()),
            ));
        }
        if let Some(&bad) = lane_streams.iter().find(|&&s| s >= pool.len()) {
            return Err(Error::arg(
                "lane_streams",
                format!("stream {bad} is outside the pool of {}", pool.len()),
            ));
        }
        Ok(())
    }

    /// Checks that `skew` issues every dependency's source before its dependent.
    fn check_skew(&self, skew: &[usize]) -> Result<()> {
        let n = self.spec().stages.len();
        if skew.len() != n {
            return Err(Error::arg(
                "skew",
                format!("has {} entries for {n} stages", skew.len()),
            ));
        }
        for d in self.dependencies() {
            let (f, t) = (skew[d.from] as i64, skew[d.to] as i64);
            let ok = if d.distance == 0 {
                f <= t
            } else {
                f - (d.distance as i64) < t
            };
            if !ok {
                return Err(Error::arg(
                    "skew",
                    format!(
                        "{skew:?} issues stage {} after stage {} that depends on it",
                        self.spec().stages[d.from].name,
                        self.spec().stages[d.to].name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Queues `iterations` of the pipeline: stage functions are called in plan order, each
    /// preceded by the event waits its dependencies need and followed by the event record its
    /// dependents need. Nothing synchronizes the device or the host. Work queued on these
    /// streams before is ordered before the first iteration. With a recorder, every stage call
    /// is timed on the track of its stream (the pool's stream index).
    pub fn run(
        &self,
        pool: &StreamPool,
        lane_streams: &[usize],
        iterations: Range<usize>,
        recorder: Option<&mut Recorder>,
        stage: impl FnMut(&StageCall) -> Result<()>,
    ) -> Result<()> {
        let skew = vec![0; self.spec().stages.len()];
        let steps = iterations.clone();
        self.run_steps(
            pool,
            lane_streams,
            iterations,
            steps,
            &skew,
            recorder,
            stage,
        )
    }

    /// Queues the calls of `steps` (stage `s` of step `t` runs iteration `t - skew[s]`) that
    /// fall inside `iterations`, as [`Plan::run`] does. A dependency whose source was issued
    /// before this call is ordered by the join at its start (every stream used waits for every
    /// other's earlier work on those streams; work queued on another stream, such as a graph
    /// launched outside the lanes, must be joined by the caller).
    #[allow(clippy::too_many_arguments)]
    pub fn run_steps(
        &self,
        pool: &StreamPool,
        lane_streams: &[usize],
        iterations: Range<usize>,
        steps: Range<usize>,
        skew: &[usize],
        mut recorder: Option<&mut Recorder>,
        mut stage: impl FnMut(&StageCall) -> Result<()>,
    ) -> Result<()> {
        self.check_streams(pool, lane_streams)?;
        self.check_skew(skew)?;
        let spec = self.spec();
        let n = spec.stages.len();
        let stream_of = |s: usize| lane_streams[spec.stages[s].lane];
        let mut pos = vec![0; n];
        for (k, &s) in self.order().iter().enumerate() {
            pos[s] = k;
        }
        let mut waits: Vec<Vec<Wait>> = (0..n).map(|_| Vec::new()).collect();
        let mut needed = vec![false; n];
        for d in self.dependencies() {
            if stream_of(d.from) != stream_of(d.to) {
                needed[d.from] = true;
                waits[d.to].push(Wait {
                    from: d.from,
                    distance: d.distance,
                    stream: stream_of(d.from),
                    rank: (skew[d.from] as i64 - d.distance as i64) * n as i64 + pos[d.from] as i64,
                });
            }
        }
        // An event slot is recorded again `ring` iterations later, after its last wait.
        let max_distance = self
            .dependencies()
            .iter()
            .map(|d| d.distance)
            .max()
            .unwrap_or(0);
        let ring = max_distance + skew.iter().copied().max().unwrap_or(0) + 1;
        let mut events: Vec<Vec<CudaEvent>> = Vec::with_capacity(n);
        for &need in &needed {
            let k = if need { ring } else { 0 };
            events.push(
                (0..k)
                    .map(|_| {
                        pool.context()
                            .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                            .op("cuEventCreate")
                    })
                    .collect::<Result<_>>()?,
            );
        }
        // Everything queued on the streams before is ordered before the first step.
        let mut used: Vec<usize> = lane_streams.to_vec();
        used.sort_unstable();
        used.dedup();
        for &a in &used {
            for &b in &used {
                pool.wait_stream(a, b)?;
            }
        }
        let skewed = skew.iter().any(|&k| k > 0);
        // Per stream waited on: (stream, rank, source stage, source iteration).
        let mut latest: Vec<(usize, i64, usize, usize)> = Vec::with_capacity(pool.len());
        let (first, first_step) = (iterations.start, steps.start);
        for t in steps {
            interrupt::check(|| {
                if skewed {
                    format!("stopped before step {t} (of those from {first_step}), after the work already queued")
                } else {
                    format!("stopped before iteration {t} (of those from {first}), after the work already queued")
                }
            })?;
            for &s in self.order() {
                let Some(i) = t.checked_sub(skew[s]) else {
                    continue;
                };
                if !iterations.contains(&i) {
                    continue;
                }
                let stage_spec = &spec.stages[s];
                let si = lane_streams[stage_spec.lane];
                let stream = pool.stream(si)?;
                // The latest source issued in this call on each other stream: stream order
                // covers that stream's earlier ones. (`latest` is reused: no allocation per call.)
                latest.clear();
                for w in &waits[s] {
                    let Some(j) = i.checked_sub(w.distance) else {
                        continue;
                    };
                    if j < first || j + skew[w.from] < first_step {
                        continue;
                    }
                    match latest.iter_mut().find(|e| e.0 == w.stream) {
                        Some(e) if w.rank > e.1 => *e = (w.stream, w.rank, w.from, j),
                        Some(_) => {}
                        None => latest.push((w.stream, w.rank, w.from, j)),
                    }
                }
                for &(_, _, f, j) in &latest {
                    stream.wait(&events[f][j % ring]).op("cuStreamWaitEvent")?;
                }
                let call = StageCall {
                    stage: s,
                    name: &stage_spec.name,
                    iteration: i,
                    slot: i % spec.depth,
                    stream,
                    stream_index: si,
                };
                match recorder.as_deref_mut() {
                    Some(r) => r.op(
                        si,
                        stream,
                        stage_spec.name.clone(),
                        stage_spec.kind,
                        Some(i),
                        || stage(&call),
                    )?,
                    None => stage(&call)?,
                }
                if needed[s] {
                    events[s][i % ring].record(stream).op("cuEventRecord")?;
                }
            }
        }
        Ok(())
    }

    /// Captures `iterations` of the pipeline (as [`Plan::run`] queues them) into a CUDA graph
    /// launched on stream `origin`. Replays repeat exactly the captured iterations (same
    /// buffers, same ring slots), so `iterations` usually covers whole ring periods.
    pub fn capture(
        &self,
        pool: &StreamPool,
        lane_streams: &[usize],
        origin: usize,
        iterations: Range<usize>,
        stage: impl FnMut(&StageCall) -> Result<()>,
    ) -> Result<Graph> {
        let skew = vec![0; self.spec().stages.len()];
        let steps = iterations.clone();
        self.capture_steps(pool, lane_streams, origin, iterations, steps, &skew, stage)
    }

    /// Captures what [`Plan::run_steps`] queues into a CUDA graph launched on `origin`.
    #[allow(clippy::too_many_arguments)]
    pub fn capture_steps(
        &self,
        pool: &StreamPool,
        lane_streams: &[usize],
        origin: usize,
        iterations: Range<usize>,
        steps: Range<usize>,
        skew: &[usize],
        mut stage: impl FnMut(&StageCall) -> Result<()>,
    ) -> Result<Graph> {
        self.check_streams(pool, lane_streams)?;
        self.check_skew(skew)?;
        let capture = pool.begin_capture(origin)?;
        // `stage` is borrowed, not moved, so that what it owns (buffers its calls use) is
        // dropped after the capture ends: a buffer freed during a capture would record its
        // free into the graph.
        self.run_steps(
            pool,
            lane_streams,
            iterations,
            steps,
            skew,
            None,
            &mut stage,
        )?;
        capture.end()
    }

    /// Captures the pipeline's steady state as two graphs of `len` steps each (a multiple of
    /// the ring depth), for [`SteadyGraphs::stream`]. The stage functions run as for a capture:
    /// they queue work and touch no host data.
    pub fn capture_steady(
        &self,
        pool: &StreamPool,
        lane_streams: &[usize],
        origin: usize,
        len: usize,
        mut stage: impl FnMut(&StageCall) -> Result<()>,
    ) -> Result<SteadyGraphs> {
        let depth = self.spec().depth;
        if len == 0 || !len.is_multiple_of(depth) {
            return Err(Error::arg(
                "len",
                format!("must be a positive multiple of the ring depth {depth}, got {len}"),
            ));
        }
        let skew = self.skew();
        let first = skew.iter().copied().max().unwrap_or(0);
        let mut cap = |w: Range<usize>| {
            self.capture_steps(
                pool,
                lane_streams,
                origin,
                0..usize::MAX,
                w,
                &skew,
                &mut stage,
            )
        };
        let g0 = cap(first..first + len)?;
        let g1 = cap(first + len..first + 2 * len)?;
        g0.upload()?;
        g1.upload()?;
        Ok(SteadyGraphs {
            graphs: [g0, g1],
            origin,
            lanes: lane_streams.to_vec(),
            skew,
            first,
            len,
        })
    }
}

/// Two captured windows of a pipeline's steady state (see [`Plan::capture_steady`]). Replay
/// `p` runs window `p % 2` on the buffers that window was captured with: iteration `i` of the
/// stream uses ring slot `i % depth` as always, and the host data of a window's iterations
/// repeats every `2 len` iterations, so host slots indexed by `i % (2 len)` line up (one slot
/// per iteration of the two windows).
pub struct SteadyGraphs {
    graphs: [Graph; 2],
    origin: usize,
    lanes: Vec<usize>,
    skew: Vec<usize>,
    first: usize,
    len: usize,
}

impl SteadyGraphs {
    /// Each stage's skew (see [`Plan::skew`]).
    pub fn skew(&self) -> &[usize] {
        &self.skew
    }

    /// Steps one replay covers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a window has at least one step.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Streams iterations `0..n` of `plan` (the plan they were captured from): the steps before
    /// the first whole window and after the last eagerly, the windows in between by replaying
    /// the graphs in turn. `host` gets every eager stage call ([`Streamed::Call`]), each
    /// window's steps before its replay is queued ([`Streamed::Before`]: fill its input slots)
    /// and right after ([`Streamed::After`]: hand them back, or read what an earlier window
    /// wrote while this one runs). Stage `s` runs iterations `steps - skew[s]` in a window.
    pub fn stream(
        &self,
        plan: &Plan,
        pool: &StreamPool,
        n: usize,
        mut host: impl FnMut(Streamed) -> Result<()>,
    ) -> Result<()> {
        let replays = n.saturating_sub(self.first) / self.len;
        let end = self.first + replays * self.len;
        let run = |steps: Range<usize>, host: &mut dyn FnMut(Streamed) -> Result<()>| {
            plan.run_steps(pool, &self.lanes, 0..n, steps, &self.skew, None, |c| {
                host(Streamed::Call(c))
            })
        };
        if replays == 0 {
            return run(0..n + self.first, &mut host);
        }
        run(0..self.first, &mut host)?;
        for p in 0..replays {
            interrupt::check(|| format!("stopped before graph replay {p} of {replays}"))?;
            let w = self.first + p * self.len..self.first + (p + 1) * self.len;
            host(Streamed::Before(w.clone()))?;
            self.graphs[p % 2].launch()?;
            host(Streamed::After(w))?;
        }
        // The last replay ran on the origin stream, which need not be one of the lanes.
        for &lane in &self.lanes {
            pool.wait_stream(lane, self.origin)?;
        }
        run(end..n + self.first, &mut host)
    }
}

/// What [`SteadyGraphs::stream`] hands the host.
pub enum Streamed<'a, 'b> {
    /// A stage call of the eager steps: queue its work (and do its host part).
    Call(&'a StageCall<'b>),
    /// A window's steps, before its replay is queued.
    Before(Range<usize>),
    /// A window's steps, right after its replay is queued.
    After(Range<usize>),
}

#[cfg(test)]
mod tests {
    use crate::engine::{OpKind, PipelineSpec};

    /// The `prefetch` scenario's pipeline: copy in, compute, copy out, each on its own lane.
    fn prefetch(depth: usize) -> PipelineSpec {
        PipelineSpec::new(depth)
            .lane("h2d")
            .lane("compute")
            .lane("d2h")
            .persistent("staging")
            .ring("x")
            .ring("y")
            .persistent("results")
            .stage("h2d", OpKind::H2D, "h2d", &["staging"], &["x"])
            .stage("compute", OpKind::Compute, "compute", &["x"], &["y"])
            .stage("d2h", OpKind::D2H, "d2h", &["y"], &["results"])
    }

    #[test]
    fn skew_follows_the_order_as_far_as_the_ring_allows() {
        let p = prefetch(2).plan().unwrap();
        assert_eq!(p.skew(), vec![0, 1, 2]);
        p.check_skew(&p.skew()).unwrap();
        // Depth 1: the copy in refills x right after compute read it, so nothing overlaps.
        let p = prefetch(1).plan().unwrap();
        assert_eq!(p.skew(), vec![0, 0, 0]);
        assert!(p.check_skew(&[0, 1, 2]).is_err());
        assert!(p.check_skew(&[0, 0]).is_err());
        // A persistent resource written every iteration and read by a later stage.
        let q = PipelineSpec::new(2)
            .lane("a")
            .lane("b")
            .persistent("in")
            .persistent("w")
            .ring("x")
            .stage("load", OpKind::H2D, "a", &["in"], &["x"])
            .stage("step", OpKind::Compute, "b", &["x"], &["w"])
            .plan()
            .unwrap();
        let k = q.skew();
        q.check_skew(&k).unwrap();
        assert_eq!(k, vec![0, 1]);
    }
}
