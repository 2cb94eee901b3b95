//! Seeds 001 and 002: prefetching. Batch N+1 is copied to the device on a copy stream while
//! batch N is computed on the compute stream and batch N-1 copied back on a third stream;
//! device buffers form rings of `depth` (2: double buffering), each reuse ordered by events,
//! with no device-wide synchronization in the loop. The batches stream from a producer into
//! page-locked slots and the results to a consumer, as a data loader feeds a training loop: a
//! slot is refilled only after the copy that read it has completed (its tracked accesses), so
//! memory is bounded by the ring and a run can stream any number of batches.

use super::{
    median_ms, recorded, sample_indices, Check, Common, Footprint, Report, MIB, OVERLAPPED_LANES,
};
use streamline::engine::memory::{d2h, h2d};
use streamline::engine::pipeline::StageCall;
use streamline::engine::{
    DeviceBuffer, OpKind, PinnedBuffer, PipelineSpec, Plan, Recorder, SteadyGraphs, StreamPool,
    Streamed,
};
use streamline::error::{Error, Result};
use streamline::ops::heavy::heavy;
use streamline::Gpu;
use streamline_testing::data::{randn_f32, POISON_F32};
use streamline_testing::reference::heavy::compare_f32;

/// Options of `prefetch`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// f32 elements per batch.
    #[arg(long, value_parser = super::parse_count, default_value_t = Options::default().batch)]
    pub batch: usize,
    /// Batches one timed run streams through the pipeline (any number).
    #[arg(long, default_value_t = Options::default().batches)]
    pub batches: usize,
    /// Ring depth (2: double buffering, 3: triple).
    #[arg(long, default_value_t = Options::default().depth)]
    pub depth: usize,
    /// Heavy kernel passes per batch: the compute stage's length relative to the copies.
    #[arg(long, default_value_t = Options::default().compute_reps)]
    pub compute_reps: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            batch: 1 << 22,
            batches: 32,
            depth: 2,
            compute_reps: 48,
        }
    }
}

/// H2D on `h2d`, compute on `compute`, D2H on `d2h`, device rings of `depth`. The host slots
/// (`staging`, `results`) are ordered by their own tracked accesses, not by the plan.
pub fn spec(depth: usize) -> PipelineSpec {
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

/// Ring periods one captured window of the steady state replays (two windows alternate).
/// The windows are skewed (each starts and ends with every lane busy), so a replay does not
/// fill and drain the pipeline; several periods per window amortize the launch.
pub const GRAPH_PERIODS: usize = 4;

/// Steps one graph window covers at ring depth `depth`.
pub fn graph_batches(depth: usize) -> usize {
    depth * GRAPH_PERIODS
}

/// Values of batch `i` at the positions its stamp overwrites: distinct per batch, so a result
/// that came from another batch (a slot reused too early) fails the check.
const STAMP: usize = 8;

fn stamp(i: usize, j: usize) -> f32 {
    ((i % 4099) as f32) * 1e-3 + (j as f32) * 1e-4 - 2.0
}

/// The producer of the synthetic stream: every batch is the base batch with its first
/// [`STAMP`] values replaced by its own, written into the free slot it is given.
fn produce(i: usize, slot: &mut [f32]) {
    for (j, v) in slot.iter_mut().take(STAMP).enumerate() {
        *v = stamp(i, j);
    }
}

/// The scenario's buffers: two periods of page-locked host slots on each side (so the host
/// fills one period while the device works on the other; with graphs, two windows), device
/// rings of `depth`. Host memory is `4 depth` batches (`4 graph_batches(depth)` with graphs),
/// whatever the number of batches streamed.
pub struct Buffers {
    /// Page-locked input slots, `2 depth` of them (`2 graph_batches(depth)` with graphs):
    /// batch `i` goes through slot `i % len`.
    pub staging: Vec<PinnedBuffer<f32>>,
    /// Device ring of inputs.
    pub x: Vec<DeviceBuffer<f32>>,
    /// Device ring of outputs.
    pub y: Vec<DeviceBuffer<f32>>,
    /// Page-locked result slots, as `staging`.
    pub results: Vec<PinnedBuffer<f32>>,
    /// Positions checked in every batch besides the stamp, and the base batch's values there.
    sample: Vec<(usize, f32)>,
    /// Whether the stage of the H2D fills its slot from the producer (not while capturing).
    produce: bool,
    check: Check,
    /// Batches consumed over every run.
    consumed: usize,
    /// This run's next batch to fill and next to consume.
    next_fill: usize,
    next_consume: usize,
}

impl Buffers {
    /// Slots holding `base` (one batch), rings of `depth`, poisoned results: two ring periods
    /// of host slots on each side, or with `graph` two graphs' worth ([`graph_batches`]).
    pub fn new(
        pool: &StreamPool,
        base: &[f32],
        o: &Options,
        sample: &[usize],
        graph: bool,
    ) -> Result<Buffers> {
        let mut x = Vec::new();
        let mut y = Vec::new();
        for _ in 0..o.depth {
            x.push(DeviceBuffer::zeros(pool, 0, o.batch)?);
            y.push(DeviceBuffer::zeros(pool, 1, o.batch)?);
        }
        let slots = 2 * if graph {
            graph_batches(o.depth)
        } else {
            o.depth
        };
        let poison = vec![f32::from_bits(POISON_F32); o.batch];
        Ok(Buffers {
            staging: (0..slots)
                .map(|_| PinnedBuffer::from_slice(pool, base))
                .collect::<Result<_>>()?,
            x,
            y,
            results: (0..slots)
                .map(|_| PinnedBuffer::from_slice(pool, &poison))
                .collect::<Result<_>>()?,
            sample: sample
                .iter()
                .filter(|&&k| k >= STAMP)
                .map(|&k| (k, base[k]))
                .collect(),
            produce: true,
            check: Check::default(),
            consumed: 0,
            next_fill: 0,
            next_consume: 0,
        })
    }

    /// What the consumer's checks found so far (every batch's stamp and sampled values).
    pub fn check(&self) -> &Check {
        &self.check
    }

    /// Batches consumed (checked) so far.
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    fn slots(&self) -> usize {
        self.staging.len()
    }

    /// Starts a run: batch numbers begin at 0 again.
    fn begin(&mut self) {
        self.produce = true;
        self.next_fill = 0;
        self.next_consume = 0;
    }

    /// Hands the slots of the batches before `end` not yet filled to the producer, each once
    /// the copy that last read it has completed (the slot's tracked accesses: the host waits
    /// for that copy's event, never for the device).
    fn fill_until(&mut self, end: usize) -> Result<()> {
        while self.next_fill < end {
            let i = self.next_fill;
            let s = i % self.slots();
            produce(i, self.staging[s].as_mut_slice()?);
            self.next_fill += 1;
        }
        Ok(())
    }

    /// Consumes what is left of a run of [`Plan::run`] over `0..end` with [`Buffers::stage`].
    pub fn drain(&mut self, end: usize) -> Result<()> {
        self.consume_until(end)
    }

    /// Consumes the batches before `end` not yet consumed, each once its copy back has
    /// completed.
    fn consume_until(&mut self, end: usize) -> Result<()> {
        while self.next_consume < end {
            self.consume(self.next_consume)?;
            self.next_consume += 1;
        }
        Ok(())
    }

    /// Checks batch `i`'s results, once its copy back has completed, and poisons its slot.
    fn consume(&mut self, i: usize) -> Result<()> {
        let s = i % self.slots();
        let out = self.results[s].as_mut_slice()?;
        let mut xs: Vec<f32> = (0..STAMP.min(out.len())).map(|j| stamp(i, j)).collect();
        let mut ys: Vec<f32> = (0..xs.len()).map(|j| out[j]).collect();
        for &(k, v) in &self.sample {
            xs.push(v);
            ys.push(out[k]);
        }
        let unwritten = ys.iter().filter(|v| v.to_bits() == POISON_F32).count();
        self.check
            .add(&format!("batch {i}"), &compare_f32(&xs, &ys), unwritten);
        for j in 0..STAMP.min(out.len()) {
            out[j] = f32::from_bits(POISON_F32);
        }
        for &(k, _) in &self.sample {
            out[k] = f32::from_bits(POISON_F32);
        }
        self.consumed += 1;
        Ok(())
    }

    /// Queues stage `c` (indices as in [`spec`]). Before the H2D of batch `i` the producer
    /// fills its slot; before the D2H of batch `i` the results of the batch that used the same
    /// slot before are consumed.
    pub fn stage(&mut self, gpu: &Gpu, o: &Options, c: &StageCall) -> Result<()> {
        let (i, s) = (c.iteration, c.iteration % self.slots());
        match c.stage {
            0 => {
                if self.produce {
                    self.fill_until(i + 1)?;
                }
                h2d(
                    c.stream,
                    &self.staging[s].view(0..o.batch)?,
                    &mut self.x[c.slot],
                )
            }
            1 => {
                for _ in 0..o.compute_reps {
                    heavy(gpu, c.stream, &self.x[c.slot], &mut self.y[c.slot])?;
                }
                Ok(())
            }
            _ => {
                if self.produce {
                    self.consume_until((i + 1).saturating_sub(self.slots()))?;
                }
                d2h(
                    c.stream,
                    &self.y[c.slot],
                    &mut self.results[s].view_mut(0..o.batch)?,
                )
            }
        }
    }
}

/// Streams `o.batches` batches through the pipeline eagerly (producer, three stages,
/// consumer), lanes on `lanes`.
pub fn stream_eager(
    gpu: &Gpu,
    pool: &StreamPool,
    plan: &Plan,
    lanes: &[usize],
    bufs: &mut Buffers,
    o: &Options,
    rec: Option<&mut Recorder>,
) -> Result<()> {
    bufs.begin();
    plan.run(pool, lanes, 0..o.batches, rec, |c| bufs.stage(gpu, o, c))?;
    bufs.consume_until(o.batches)
}

/// The pipeline's steady state captured as two skewed windows of [`graph_batches`] steps (the
/// buffers must have been made for graphs: host slots for two windows).
pub fn capture_periods(
    gpu: &Gpu,
    pool: &StreamPool,
    plan: &Plan,
    bufs: &mut Buffers,
    o: &Options,
) -> Result<SteadyGraphs> {
    let d = graph_batches(o.depth);
    if bufs.slots() != 2 * d {
        return Err(Error::arg(
            "bufs",
            "made without graph slots (Buffers::new with graph = true)",
        ));
    }
    bufs.produce = false;
    plan.capture_steady(pool, &OVERLAPPED_LANES, 0, d, |c| bufs.stage(gpu, o, c))
}

/// Streams `o.batches` batches (any number): the first and last steps eagerly, the steady
/// state by replaying `graphs` in turn. The producer fills a window's slots before its replay;
/// the consumer reads the windows before while it runs.
pub fn stream_graph(
    gpu: &Gpu,
    pool: &StreamPool,
    plan: &Plan,
    graphs: &SteadyGraphs,
    bufs: &mut Buffers,
    o: &Options,
) -> Result<()> {
    bufs.begin();
    let d2h = graphs.skew()[2];
    graphs.stream(plan, pool, o.batches, |h| match h {
        Streamed::Call(c) => bufs.stage(gpu, o, c),
        Streamed::Before(w) => bufs.fill_until(w.end),
        Streamed::After(w) => bufs.consume_until(w.start.saturating_sub(d2h)),
    })?;
    bufs.consume_until(o.batches)
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    if !(1..=1 << 28).contains(&o.batch) {
        return Err(Error::arg(
            "batch",
            format!("must be in 1..=2^28, got {}", o.batch),
        ));
    }
    if !(1..=streamline::engine::pipeline::MAX_DEPTH).contains(&o.depth) {
        return Err(Error::arg(
            "depth",
            format!("must be in 1..=16, got {}", o.depth),
        ));
    }
    if !(1..=1 << 40).contains(&o.batches) {
        return Err(Error::arg(
            "batches",
            format!("must be in 1..=2^40, got {}", o.batches),
        ));
    }
    crate::within("compute_reps", o.compute_reps, 1..=10_000)?;
    Ok(())
}

/// Runs the scenario: the batches stream from a producer through page-locked slots, so host and
/// device memory hold `O(depth)` batches however many are streamed.
pub fn run(gpu: &Gpu, common: &Common, o: &Options) -> Result<Report> {
    validate(o)?;
    let plan = spec(o.depth).plan()?;
    let pool = StreamPool::named(gpu, &plan.spec().lanes)?;
    let base = randn_f32(o.batch, common.seed);
    let sample = sample_indices(o.batch, common.sample.min(256), common.seed);
    let mut bufs = Buffers::new(&pool, &base, o, &sample, common.graph)?;
    // The recorded run comes first, so that an interrupted long run still has its trace.
    let recorded_batches = o.batches.min(64);
    let short = Options {
        batches: recorded_batches,
        ..o.clone()
    };
    let timeline = recorded(&pool, 3 * recorded_batches, |rec| {
        stream_eager(
            gpu,
            &pool,
            &plan,
            &OVERLAPPED_LANES,
            &mut bufs,
            &short,
            Some(rec),
        )
    })?;
    let before = Footprint::now(gpu)?;
    let serial = median_ms(&pool, &[0], common.reps, || {
        stream_eager(gpu, &pool, &plan, &[0, 0, 0], &mut bufs, o, None)
    })?;
    let overlapped = median_ms(&pool, &OVERLAPPED_LANES, common.reps, || {
        stream_eager(gpu, &pool, &plan, &OVERLAPPED_LANES, &mut bufs, o, None)
    })?;
    let graph_ms = if common.graph {
        let graphs = capture_periods(gpu, &pool, &plan, &mut bufs, o)?;
        Some(median_ms(&pool, &OVERLAPPED_LANES, common.reps, || {
            stream_graph(gpu, &pool, &plan, &graphs, &mut bufs, o)
        })?)
    } else {
        None
    };
    let check = bufs.check.clone();
    let after = Footprint::now(gpu)?;
    let metrics = timeline.metrics();
    let busiest = metrics
        .tracks
        .iter()
        .max_by(|a, b| a.busy_us.total_cmp(&b.busy_us))
        .map(|t| t.name.clone())
        .unwrap_or_default();
    // The pipeline's fill and drain: the first batch's H2D runs before any compute exists and
    // the last batch's D2H after all of it, so neither can be hidden; their share shrinks as
    // 1 / batches.
    let ramp_us: f64 = timeline
        .intervals
        .iter()
        .filter(|iv| {
            (iv.kind == OpKind::H2D && iv.iteration == Some(0))
                || (iv.kind == OpKind::D2H && iv.iteration == Some(recorded_batches - 1))
        })
        .map(|iv| iv.duration_us())
        .sum();
    let notes = vec![
        format!(
            "memory while streaming {} batches in all: host RSS {:.1} MiB before the first timed run, {:.1} MiB after the last; device memory in use {:.1} MiB before, {:.1} MiB after",
            bufs.consumed,
            before.host_rss as f64 / MIB,
            after.host_rss as f64 / MIB,
            before.device_used as f64 / MIB,
            after.device_used as f64 / MIB
        ),
        format!(
            "fill and drain (first H2D, last D2H, never hideable): {ramp_us:.1} µs = {:.1}% of the copy time; the rest of the copies is hidden at {:.1}%",
            if metrics.copy_us > 0.0 { 100.0 * ramp_us / metrics.copy_us } else { 0.0 },
            if metrics.copy_us > ramp_us {
                100.0 * (metrics.copy_hidden_fraction * metrics.copy_us / (metrics.copy_us - ramp_us)).min(1.0)
            } else {
                100.0
            }
        ),
        format!(
            "copy time hidden under compute: {:.1}%; longest stage ({busiest}) busy {:.1}% of the wall time",
            100.0 * metrics.copy_hidden_fraction,
            100.0 * metrics.longest_track_fraction
        ),
        format!(
            "compute is {} the copies here (heavy x{} per batch); the pipelined time can only approach the longest stage",
            if metrics.compute_us >= metrics.copy_us { "longer than" } else { "shorter than" },
            o.compute_reps
        ),
    ];
    Ok(Report {
        name: "prefetch".into(),
        workload: format!(
            "seeds 001/002: {} batches of {} f32 streamed from a producer through {} page-locked slots, ring depth {}, H2D / heavy x{} / D2H on three streams; every batch's stamp and {} sampled values checked ({} batches in all)",
            o.batches, o.batch, bufs.slots(), o.depth, o.compute_reps, bufs.sample.len(), bufs.consumed
        ),
        serial_ms: serial,
        overlapped_ms: overlapped,
        graph_ms,
        runs: None,
        rows: Vec::new(),
        table: Vec::new(),
        metrics,
        timeline,
        check,
        notes,
    })
}
