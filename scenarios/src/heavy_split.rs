//! Seed 000: the heavy computation over N elements in one launch on one stream, against the
//! array split into K parts on K streams, for a sweep of sizes: where does splitting start to
//! pay, if ever?

use super::{median_ms, recorded, sample_indices, Check, Common, Report, Row};
use streamline::engine::{DeviceBuffer, OpKind, PipelineSpec, Plan, StreamPool};
use streamline::error::{Error, Result};
use streamline::ops::heavy::heavy;
use streamline::Gpu;
use streamline_testing::data::{randn_f32, POISON_F32};
use streamline_testing::reference::heavy::compare_f32;

/// Options of `heavy-split`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Sizes to sweep (elements).
    #[arg(long, value_delimiter = ',', value_parser = super::parse_count, default_values_t = Options::default().sizes)]
    pub sizes: Vec<usize>,
    /// Streams (and parts) of the split run.
    #[arg(long, default_value_t = Options::default().streams)]
    pub streams: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sizes: vec![10_000, 100_000, 1_000_000, 10_000_000, 100_000_000],
            streams: 2,
        }
    }
}

/// The split as a pipeline: part `k` on lane `k`, independent of the others.
pub fn spec(k: usize) -> PipelineSpec {
    let mut s = PipelineSpec::new(1);
    for i in 0..k {
        s = s
            .lane(&format!("part {i}"))
            .persistent(&format!("x{i}"))
            .persistent(&format!("y{i}"));
    }
    for i in 0..k {
        s = s.stage(
            &format!("heavy {i}"),
            OpKind::Compute,
            &format!("part {i}"),
            &[&format!("x{i}")],
            &[&format!("y{i}")],
        );
    }
    s
}

struct Size {
    n: usize,
    x: Vec<f32>,
    whole_x: DeviceBuffer<f32>,
    whole_y: DeviceBuffer<f32>,
    parts: Vec<(DeviceBuffer<f32>, DeviceBuffer<f32>)>,
}

fn prepare(pool: &StreamPool, n: usize, k: usize, seed: u64) -> Result<Size> {
    let x = randn_f32(n, seed);
    let poison = vec![f32::from_bits(POISON_F32); n];
    let bounds: Vec<usize> = (0..=k).map(|i| i * n / k).collect();
    let mut parts = Vec::with_capacity(k);
    for i in 0..k {
        let r = bounds[i]..bounds[i + 1];
        parts.push((
            DeviceBuffer::from_slice(pool, i, &x[r.clone()])?,
            DeviceBuffer::from_slice(pool, i, &poison[r])?,
        ));
    }
    Ok(Size {
        n,
        whole_x: DeviceBuffer::from_slice(pool, 0, &x)?,
        whole_y: DeviceBuffer::from_slice(pool, 0, &poison)?,
        x,
        parts,
    })
}

fn run_parts(
    gpu: &Gpu,
    pool: &StreamPool,
    plan: &Plan,
    lanes: &[usize],
    sz: &mut Size,
    rec: Option<&mut streamline::engine::Recorder>,
) -> Result<()> {
    plan.run(pool, lanes, 0..1, rec, |c| {
        let (x, y) = &mut sz.parts[c.stage];
        heavy(gpu, c.stream, x, y)
    })
}

/// Runs the sweep. The report's serial/overlapped times are those of the largest size
/// (K parts on one stream vs on K streams); `rows` hold every size's one-launch, K-on-one and
/// K-on-K times.
pub fn run(gpu: &Gpu, common: &Common, o: &Options) -> Result<Report> {
    let k = o.streams;
    crate::within("streams", k, 1..=16)?;
    if o.sizes.is_empty() || o.sizes.iter().any(|&n| n < k || n > 1 << 30) {
        return Err(Error::arg(
            "sizes",
            format!("each size must be in {k}..=2^30 (at least one element per stream)"),
        ));
    }
    let plan = spec(k).plan()?;
    let pool = StreamPool::named(gpu, &plan.spec().lanes)?;
    let split: Vec<usize> = (0..k).collect();
    let one = vec![0; k];
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut last = None;
    let mut break_even = None;
    for (si, &n) in o.sizes.iter().enumerate() {
        let mut sz = prepare(&pool, n, k, common.seed + si as u64)?;
        let s0 = pool.stream(0)?.clone();
        let whole = median_ms(&pool, &[0], common.reps, || {
            heavy(gpu, &s0, &sz.whole_x, &mut sz.whole_y)
        })?;
        let serial = median_ms(&pool, &[0], common.reps, || {
            run_parts(gpu, &pool, &plan, &one, &mut sz, None)
        })?;
        let overlapped = median_ms(&pool, &split, common.reps, || {
            run_parts(gpu, &pool, &plan, &split, &mut sz, None)
        })?;
        let graph = if common.graph {
            let g = plan.capture(&pool, &split, 0, 0..1, |c| {
                let (x, y) = &mut sz.parts[c.stage];
                heavy(gpu, c.stream, x, y)
            })?;
            g.upload()?;
            Some(median_ms(&pool, &split, common.reps, || g.launch())?)
        } else {
            None
        };
        rows.push(Row {
            label: format!("n={n} one launch"),
            ms: whole,
        });
        rows.push(Row {
            label: format!("n={n} {k} parts, 1 stream"),
            ms: serial,
        });
        rows.push(Row {
            label: format!("n={n} {k} parts, {k} streams"),
            ms: overlapped,
        });
        if let Some(g) = graph {
            rows.push(Row {
                label: format!("n={n} {k} parts, {k} streams, graph"),
                ms: g,
            });
        }
        if break_even.is_none() && overlapped < whole * 0.98 {
            break_even = Some(n);
        }
        last = Some((sz, serial, overlapped, graph));
    }
    let Some((mut sz, serial, overlapped, graph)) = last else {
        return Err(Error::arg("sizes", "empty"));
    };
    notes.push(match break_even {
        Some(n) => format!(
            "splitting over {k} streams first beat one launch (by more than 2%) at n = {n}"
        ),
        None => format!(
            "splitting over {k} streams never beat one launch by more than 2%: one launch already fills the GPU, and small arrays are dominated by launch latency"
        ),
    });

    // One recorded run of the split, then the check of both outputs.
    let timeline = recorded(&pool, 4 * k, |rec| {
        run_parts(gpu, &pool, &plan, &split, &mut sz, Some(rec))
    })?;
    let s0 = pool.stream(0)?;
    let whole_y = sz.whole_y.to_vec(s0)?;
    let mut y_split = Vec::with_capacity(sz.n);
    for (i, (_, y)) in sz.parts.iter().enumerate() {
        y_split.extend(y.to_vec(pool.stream(i)?)?);
    }
    let idx = sample_indices(sz.n, common.sample, common.seed);
    let xs: Vec<f32> = idx.iter().map(|&i| sz.x[i]).collect();
    let mut check = Check::default();
    for (what, y) in [("one launch", &whole_y), ("split", &y_split)] {
        let ys: Vec<f32> = idx.iter().map(|&i| y[i]).collect();
        let unwritten = y.iter().filter(|v| v.to_bits() == POISON_F32).count();
        check.add(what, &compare_f32(&xs, &ys), unwritten);
    }
    Ok(Report {
        name: "heavy-split".into(),
        workload: format!(
            "seed 000: y = x^2 + x^3 sin x cos x + tan x, f32, sizes {:?}, {k} streams",
            o.sizes
        ),
        serial_ms: serial,
        overlapped_ms: overlapped,
        graph_ms: graph,
        runs: None,
        rows,
        table: Vec::new(),
        metrics: timeline.metrics(),
        timeline,
        check,
        notes,
    })
}
