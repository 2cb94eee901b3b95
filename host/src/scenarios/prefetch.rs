//! Seeds 001 and 002: prefetching. Batch N+1 is copied to the device on a copy stream while
//! batch N is computed on the compute stream and batch N-1 copied back on a third stream;
//! device buffers form rings of `depth` (2: double buffering), each reuse ordered by events,
//! with no device-wide synchronization in the loop.

use super::{recorded, sample_indices, time_three_ways, Check, Common, Report, OVERLAPPED_LANES};
use crate::data::{randn_f32, POISON_F32};
use crate::engine::memory::{d2h, h2d};
use crate::engine::pipeline::StageCall;
use crate::engine::{DeviceBuffer, OpKind, PinnedBuffer, PipelineSpec, Plan, Recorder, StreamPool};
use crate::error::{Error, Result};
use crate::ops::heavy::heavy;
use crate::reference::heavy::compare_f32;
use crate::Gpu;

/// Options of `prefetch`.
#[derive(Clone, Debug)]
pub struct Options {
    /// f32 elements per batch.
    pub batch: usize,
    /// Batches in the (page-locked) dataset; one timed run processes each once.
    pub batches: usize,
    /// Ring depth (2: double buffering, 3: triple).
    pub depth: usize,
    /// Heavy kernel passes per batch: the compute stage's length relative to the copies.
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

/// H2D on `copy`, compute on `compute`, D2H on `copy back`, rings of `depth`.
pub fn spec(depth: usize) -> PipelineSpec {
    PipelineSpec::new(depth)
        .lane("copy")
        .lane("compute")
        .lane("copy back")
        .persistent("dataset")
        .ring("x")
        .ring("y")
        .persistent("results")
        .stage("h2d", OpKind::H2D, "copy", &["dataset"], &["x"])
        .stage("compute", OpKind::Compute, "compute", &["x"], &["y"])
        .stage("d2h", OpKind::D2H, "copy back", &["y"], &["results"])
}

/// The scenario's buffers.
pub struct Buffers {
    /// Page-locked input batches.
    pub dataset: PinnedBuffer<f32>,
    /// Device ring of inputs.
    pub x: Vec<DeviceBuffer<f32>>,
    /// Device ring of outputs.
    pub y: Vec<DeviceBuffer<f32>>,
    /// Page-locked results, one per batch.
    pub results: PinnedBuffer<f32>,
}

impl Buffers {
    /// Dataset from `host` (`batches * batch` values), rings of `depth`, poisoned results.
    pub fn new(pool: &StreamPool, host: &[f32], o: &Options) -> Result<Buffers> {
        let mut x = Vec::new();
        let mut y = Vec::new();
        for _ in 0..o.depth {
            x.push(DeviceBuffer::zeros(pool, 0, o.batch)?);
            y.push(DeviceBuffer::zeros(pool, 1, o.batch)?);
        }
        Ok(Buffers {
            dataset: PinnedBuffer::from_slice(pool, host)?,
            x,
            y,
            results: PinnedBuffer::from_slice(
                pool,
                &vec![f32::from_bits(POISON_F32); o.batch * o.batches],
            )?,
        })
    }

    /// Queues stage `c` (indices as in [`spec`]).
    pub fn stage(&mut self, gpu: &Gpu, o: &Options, c: &StageCall) -> Result<()> {
        let k = c.iteration % o.batches;
        let r = k * o.batch..(k + 1) * o.batch;
        match c.stage {
            0 => h2d(c.stream, &self.dataset.view(r)?, &mut self.x[c.slot]),
            1 => {
                for _ in 0..o.compute_reps {
                    heavy(gpu, c.stream, &self.x[c.slot], &mut self.y[c.slot])?;
                }
                Ok(())
            }
            _ => d2h(c.stream, &self.y[c.slot], &mut self.results.view_mut(r)?),
        }
    }
}

fn run_once(
    gpu: &Gpu,
    pool: &StreamPool,
    plan: &Plan,
    lanes: &[usize],
    bufs: &mut Buffers,
    o: &Options,
    rec: Option<&mut Recorder>,
) -> Result<()> {
    plan.run(pool, lanes, 0..o.batches, rec, |c| bufs.stage(gpu, o, c))
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    if !(1..=1 << 28).contains(&o.batch) {
        return Err(Error::arg(
            "batch",
            format!("must be in 1..=2^28, got {}", o.batch),
        ));
    }
    if !(1..=crate::engine::pipeline::MAX_DEPTH).contains(&o.depth) {
        return Err(Error::arg(
            "depth",
            format!("must be in 1..=16, got {}", o.depth),
        ));
    }
    if o.batches < o.depth || !o.batches.is_multiple_of(o.depth) || o.batches > 4096 {
        return Err(Error::arg(
            "batches",
            format!(
                "must be a multiple of the depth {} up to 4096 (the graph replays whole ring periods), got {}",
                o.depth, o.batches
            ),
        ));
    }
    if (o.batch as u128) * (o.batches as u128) > 1 << 30 {
        return Err(Error::arg(
            "batches",
            "batch * batches must be at most 2^30 elements (4 GiB per host buffer)",
        ));
    }
    if !(1..=10_000).contains(&o.compute_reps) {
        return Err(Error::arg(
            "compute_reps",
            format!("must be in 1..=10000, got {}", o.compute_reps),
        ));
    }
    Ok(())
}

/// Runs the scenario.
pub fn run(gpu: &Gpu, common: &Common, o: &Options) -> Result<Report> {
    validate(o)?;
    let pool = StreamPool::with_streams(gpu, 3)?;
    let plan = spec(o.depth).plan()?;
    let host = randn_f32(o.batch * o.batches, common.seed);
    let mut bufs = Buffers::new(&pool, &host, o)?;
    let (serial, overlapped, graph_ms) =
        time_three_ways(&pool, &plan, common, 0..o.batches, |c| {
            bufs.stage(gpu, o, c)
        })?;
    bufs.results
        .as_mut_slice()?
        .fill(f32::from_bits(POISON_F32));
    let timeline = recorded(&pool, 3 * o.batches, |rec| {
        run_once(
            gpu,
            &pool,
            &plan,
            &OVERLAPPED_LANES,
            &mut bufs,
            o,
            Some(rec),
        )
    })?;
    let results = bufs.results.as_slice()?;
    let idx = sample_indices(host.len(), common.sample, common.seed);
    let xs: Vec<f32> = idx.iter().map(|&i| host[i]).collect();
    let ys: Vec<f32> = idx.iter().map(|&i| results[i]).collect();
    let unwritten = results.iter().filter(|v| v.to_bits() == POISON_F32).count();
    let mut check = Check::default();
    check.add("results", &compare_f32(&xs, &ys), unwritten);
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
                || (iv.kind == OpKind::D2H && iv.iteration == Some(o.batches - 1))
        })
        .map(|iv| iv.duration_us())
        .sum();
    let notes = vec![
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
            "seeds 001/002: {} batches of {} f32 from page-locked memory, ring depth {}, H2D / heavy x{} / D2H on three streams",
            o.batches, o.batch, o.depth, o.compute_reps
        ),
        serial_ms: serial,
        overlapped_ms: overlapped,
        graph_ms,
        rows: Vec::new(),
        table: Vec::new(),
        metrics,
        timeline,
        check,
        notes,
    })
}
