//! Seed 001: a model with two independent branches on two streams, joined by events on the
//! main stream (`torch.cuda.current_stream().wait_stream(branch)`), run for several
//! iterations. Both branches read the same input, which the next iteration overwrites: the
//! overwrite must wait for *both* readers.

use super::{recorded, sample_indices, time_three_ways, Check, Common, Report, OVERLAPPED_LANES};
use streamline::engine::memory::{d2d, h2d};
use streamline::engine::{DeviceBuffer, OpKind, PinnedBuffer, PipelineSpec, StreamPool};
use streamline::error::{Error, Result};
use streamline::ops::heavy::heavy;
use streamline::ops::spin::spin_copy;
use streamline::Gpu;
use streamline_testing::data::{randn_f32, POISON_F32};
use streamline_testing::reference::heavy::compare_f32;

/// Options of `branches`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Elements per input.
    #[arg(long, value_parser = super::parse_count, default_value_t = Options::default().n)]
    pub n: usize,
    /// Iterations per timed run (each uploads a new input).
    #[arg(long, default_value_t = Options::default().iterations)]
    pub iterations: usize,
    /// Distinct inputs cycled through (kept in page-locked host memory).
    #[arg(skip = Options::default().inputs)]
    pub inputs: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            n: 1 << 20,
            iterations: 8,
            inputs: 4,
        }
    }
}

/// Load on the main stream, two branches on their own streams, join on the main stream.
pub fn spec() -> PipelineSpec {
    PipelineSpec::new(1)
        .lane("main")
        .lane("left")
        .lane("right")
        .persistent("inputs")
        .persistent("x")
        .persistent("a")
        .persistent("b")
        .persistent("out")
        .stage("load", OpKind::H2D, "main", &["inputs"], &["x"])
        .stage("left: heavy", OpKind::Compute, "left", &["x"], &["a"])
        .stage(
            "right: copy, heavy",
            OpKind::Compute,
            "right",
            &["x"],
            &["b"],
        )
        .stage("join", OpKind::D2D, "main", &["a", "b"], &["out"])
}

struct Buffers {
    inputs: PinnedBuffer<f32>,
    x: DeviceBuffer<f32>,
    a: DeviceBuffer<f32>,
    t: DeviceBuffer<f32>,
    b: DeviceBuffer<f32>,
    out: DeviceBuffer<f32>,
}

fn stage(
    gpu: &Gpu,
    bufs: &mut Buffers,
    n: usize,
    inputs: usize,
    c: &streamline::engine::pipeline::StageCall,
) -> Result<()> {
    match c.stage {
        0 => {
            let k = c.iteration % inputs;
            let src = bufs.inputs.view(k * n..(k + 1) * n)?;
            h2d(c.stream, &src, &mut bufs.x)
        }
        1 => heavy(gpu, c.stream, &bufs.x, &mut bufs.a),
        2 => {
            spin_copy(gpu, c.stream, &bufs.x, &mut bufs.t, 0)?;
            heavy(gpu, c.stream, &bufs.t, &mut bufs.b)
        }
        _ => {
            d2d(c.stream, &bufs.a, &mut bufs.out.view_mut(0..n)?)?;
            d2d(c.stream, &bufs.b, &mut bufs.out.view_mut(n..2 * n)?)
        }
    }
}

/// Runs the scenario.
pub fn run(gpu: &Gpu, common: &Common, o: &Options) -> Result<Report> {
    if !(1..=1 << 28).contains(&o.n) {
        return Err(Error::arg("n", format!("must be in 1..=2^28, got {}", o.n)));
    }
    if !(1..=1000).contains(&o.iterations) || !(1..=64).contains(&o.inputs) {
        return Err(Error::arg(
            "iterations",
            "iterations must be in 1..=1000 and inputs in 1..=64",
        ));
    }
    let plan = spec().plan()?;
    let pool = StreamPool::named(gpu, &plan.spec().lanes)?;
    let host = randn_f32(o.n * o.inputs, common.seed);
    let poison = vec![f32::from_bits(POISON_F32); 2 * o.n];
    let mut bufs = Buffers {
        inputs: PinnedBuffer::from_slice(&pool, &host)?,
        x: DeviceBuffer::zeros(&pool, 0, o.n)?,
        a: DeviceBuffer::zeros(&pool, 1, o.n)?,
        t: DeviceBuffer::zeros(&pool, 2, o.n)?,
        b: DeviceBuffer::zeros(&pool, 2, o.n)?,
        out: DeviceBuffer::from_slice(&pool, 0, &poison)?,
    };
    let (serial, overlapped, graph_ms) =
        time_three_ways(&pool, &plan, common, 0..o.iterations, |c| {
            stage(gpu, &mut bufs, o.n, o.inputs, c)
        })?;
    // Recorded run; then the output holds the last iteration's branches.
    bufs.out.fill_zeros(pool.stream(0)?)?;
    let timeline = recorded(&pool, 4 * o.iterations, |rec| {
        plan.run(&pool, &OVERLAPPED_LANES, 0..o.iterations, Some(rec), |c| {
            stage(gpu, &mut bufs, o.n, o.inputs, c)
        })
    })?;
    let out = bufs.out.to_vec(pool.stream(0)?)?;
    let last = (o.iterations - 1) % o.inputs;
    let x = &host[last * o.n..(last + 1) * o.n];
    let idx = sample_indices(o.n, common.sample, common.seed);
    let xs: Vec<f32> = idx.iter().map(|&i| x[i]).collect();
    let mut check = Check::default();
    for (what, off) in [("left", 0), ("right", o.n)] {
        let ys: Vec<f32> = idx.iter().map(|&i| out[off + i]).collect();
        check.add(what, &compare_f32(&xs, &ys), 0);
    }
    let metrics = timeline.metrics();
    Ok(Report {
        name: "branches".into(),
        workload: format!(
            "seed 001: per iteration load {} f32 (pinned H2D), left = heavy(x), right = heavy(copy(x)), join both into one output; {} iterations",
            o.n, o.iterations
        ),
        serial_ms: serial,
        overlapped_ms: overlapped,
        graph_ms,
        runs: None,
        rows: Vec::new(),
        table: Vec::new(),
        notes: vec![format!(
            "streams busy at once on average: {:.2} (1 = no overlap)",
            metrics.concurrency
        )],
        metrics,
        timeline,
        check,
    })
}
