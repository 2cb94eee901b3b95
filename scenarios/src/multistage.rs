//! Seed 002's multi-stage pipeline: batches are copied to the device on one stream, multiplied
//! by a first weight matrix on a second and by a second weight matrix on a third, each stage
//! waiting for the previous one by event; rings of two buffers let batch N+1's copy and first
//! product overlap batch N's second product.

use super::{recorded, sample_indices, time_three_ways, Check, Common, Report, OVERLAPPED_LANES};
use streamline::engine::memory::{d2h, h2d};
use streamline::engine::pipeline::StageCall;
use streamline::engine::{DeviceBuffer, OpKind, PinnedBuffer, PipelineSpec, StreamPool};
use streamline::error::{Error, Result};
use streamline::ops::matmul::{sgemm, Gemm, Kernel};
use streamline::Gpu;
use streamline_testing::data::{randn_f32, POISON_F32};
use streamline_testing::reference::matmul as refmm;

/// Options of `multistage`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Rows per batch.
    #[arg(long, default_value_t = Options::default().rows)]
    pub rows: usize,
    /// Columns of a batch, and size of the square weight matrices.
    #[arg(long, default_value_t = Options::default().size)]
    pub size: usize,
    /// Batches per run (even: the graph replays whole ring periods).
    #[arg(long, default_value_t = Options::default().batches)]
    pub batches: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rows: 512,
            size: 512,
            batches: 8,
        }
    }
}

const DEPTH: usize = 2;

/// H2D on `copy`, `x @ w1` on `stage 1` (its result also copied back, for the check),
/// `h @ w2` and the copy back on `stage 2`.
pub fn spec() -> PipelineSpec {
    PipelineSpec::new(DEPTH)
        .lane("copy")
        .lane("stage 1")
        .lane("stage 2")
        .persistent("dataset")
        .persistent("w1")
        .persistent("w2")
        .ring("x")
        .ring("h")
        .ring("y")
        .persistent("hidden")
        .persistent("results")
        .stage("h2d", OpKind::H2D, "copy", &["dataset"], &["x"])
        .stage("x @ w1", OpKind::Compute, "stage 1", &["x", "w1"], &["h"])
        .stage("d2h hidden", OpKind::D2H, "stage 1", &["h"], &["hidden"])
        .stage("h @ w2", OpKind::Compute, "stage 2", &["h", "w2"], &["y"])
        .stage("d2h", OpKind::D2H, "stage 2", &["y"], &["results"])
}

/// The scenario's buffers (public for the schedule-shuffling tests).
pub struct Buffers {
    /// Page-locked input batches.
    pub dataset: PinnedBuffer<f32>,
    /// First weight matrix.
    pub w1: DeviceBuffer<f32>,
    /// Second weight matrix.
    pub w2: DeviceBuffer<f32>,
    /// Ring of inputs.
    pub x: Vec<DeviceBuffer<f32>>,
    /// Ring of first products.
    pub h: Vec<DeviceBuffer<f32>>,
    /// Ring of second products.
    pub y: Vec<DeviceBuffer<f32>>,
    /// Page-locked first products, per batch.
    pub hidden: PinnedBuffer<f32>,
    /// Page-locked second products, per batch.
    pub results: PinnedBuffer<f32>,
}

impl Buffers {
    /// Queues stage `c` (indices as in [`spec`]).
    pub fn stage(&mut self, gpu: &Gpu, o: &Options, c: &StageCall) -> Result<()> {
        let per = o.rows * o.size;
        let r = c.iteration % o.batches * per..(c.iteration % o.batches + 1) * per;
        let g = Gemm::dense(o.rows, o.size, o.size);
        let s = c.slot;
        match c.stage {
            0 => h2d(c.stream, &self.dataset.view(r)?, &mut self.x[s]),
            1 => sgemm(
                gpu,
                c.stream,
                Kernel::Auto,
                &g,
                &self.x[s],
                &self.w1,
                &mut self.h[s],
            ),
            2 => d2h(c.stream, &self.h[s], &mut self.hidden.view_mut(r)?),
            3 => sgemm(
                gpu,
                c.stream,
                Kernel::Auto,
                &g,
                &self.h[s],
                &self.w2,
                &mut self.y[s],
            ),
            _ => d2h(c.stream, &self.y[s], &mut self.results.view_mut(r)?),
        }
    }
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    if !(1..=8192).contains(&o.rows) || !(1..=8192).contains(&o.size) {
        return Err(Error::arg("rows", "rows and size must be in 1..=8192"));
    }
    if o.batches < DEPTH || !o.batches.is_multiple_of(DEPTH) || o.batches > 256 {
        return Err(Error::arg(
            "batches",
            format!("must be an even number in 2..=256, got {}", o.batches),
        ));
    }
    if (o.rows * o.size) as u128 * o.batches as u128 > 1 << 28 {
        return Err(Error::arg(
            "batches",
            "rows * size * batches must be at most 2^28",
        ));
    }
    Ok(())
}

/// Runs the scenario.
pub fn run(gpu: &Gpu, common: &Common, o: &Options) -> Result<Report> {
    validate(o)?;
    let plan = spec().plan()?;
    let pool = StreamPool::named(gpu, &plan.spec().lanes)?;
    let per = o.rows * o.size;
    let host = randn_f32(per * o.batches, common.seed);
    let w1h = randn_f32(o.size * o.size, common.seed + 1);
    let w2h = randn_f32(o.size * o.size, common.seed + 2);
    let poison = vec![f32::from_bits(POISON_F32); per * o.batches];
    let ring = |lane: usize| -> Result<Vec<DeviceBuffer<f32>>> {
        (0..DEPTH)
            .map(|_| DeviceBuffer::zeros(&pool, lane, per))
            .collect()
    };
    let mut b = Buffers {
        dataset: PinnedBuffer::from_slice(&pool, &host)?,
        w1: DeviceBuffer::from_slice(&pool, 1, &w1h)?,
        w2: DeviceBuffer::from_slice(&pool, 2, &w2h)?,
        x: ring(0)?,
        h: ring(1)?,
        y: ring(2)?,
        hidden: PinnedBuffer::from_slice(&pool, &poison)?,
        results: PinnedBuffer::from_slice(&pool, &poison)?,
    };
    let (serial, overlapped, graph_ms) =
        time_three_ways(&pool, &plan, common, 0..o.batches, |c| b.stage(gpu, o, c))?;
    b.hidden.as_mut_slice()?.fill(f32::from_bits(POISON_F32));
    b.results.as_mut_slice()?.fill(f32::from_bits(POISON_F32));
    let timeline = recorded(&pool, 5 * o.batches, |rec| {
        plan.run(&pool, &OVERLAPPED_LANES, 0..o.batches, Some(rec), |c| {
            b.stage(gpu, o, c)
        })
    })?;
    // Each stage against the f64 reference of its own inputs (the first product's GPU output
    // is the second's input), on sampled rows of every batch.
    let g = Gemm::dense(o.rows, o.size, o.size);
    let hidden = b.hidden.as_slice()?;
    let results = b.results.as_slice()?;
    let rows = sample_indices(o.rows, (common.sample / o.size).max(1), common.seed);
    let mut check = Check::default();
    for k in 0..o.batches {
        let r = k * per..(k + 1) * per;
        let c1 = refmm::compare(
            &g,
            &hidden[r.clone()],
            &refmm::rows(&g, &host[r.clone()], &w1h, &[], &rows),
        );
        let c2 = refmm::compare(
            &g,
            &results[r.clone()],
            &refmm::rows(&g, &hidden[r.clone()], &w2h, &[], &rows),
        );
        for (what, c) in [("x @ w1", c1), ("h @ w2", c2)] {
            check.add_counts(
                &format!("batch {k} {what}"),
                c.checked,
                c.outside,
                c.worst_at,
            );
        }
    }
    check.unwritten = hidden
        .iter()
        .chain(results)
        .filter(|v| v.to_bits() == POISON_F32)
        .count();
    let metrics = timeline.metrics();
    Ok(Report {
        name: "multistage".into(),
        workload: format!(
            "seed 002: {} batches of {}x{} f32, H2D -> matmul by {}x{} -> matmul by {}x{} on three streams, rings of {DEPTH}",
            o.batches, o.rows, o.size, o.size, o.size, o.size, o.size
        ),
        serial_ms: serial,
        overlapped_ms: overlapped,
        graph_ms,
        runs: None,
        rows: Vec::new(),
        table: Vec::new(),
        notes: vec![format!(
            "streams busy at once on average: {:.2}; copy hidden under compute {:.1}%",
            metrics.concurrency,
            100.0 * metrics.copy_hidden_fraction
        )],
        metrics,
        timeline,
        check,
    })
}
