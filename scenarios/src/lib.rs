//! The seeds' stream scenarios as runnable, measured, checked programs (`streamline pipeline`),
//! kept apart from the library because they bring what a kernel crate does not need: command-line
//! options, image decoding and the CPU references they check against.
//!
//! Each scenario builds a [`PipelineSpec`](streamline::engine::PipelineSpec), runs it with every
//! lane on one stream (serial) and with one stream per lane (overlapped), optionally replays it
//! as a CUDA graph, records one overlapped run's timeline, and checks a sample of the output
//! against the CPU reference.
//!
//! A compute stage is any closure that queues kernels on the stream it is handed: the heavy
//! kernel, our matmul (`multistage`, `copy-overlap`) or the image augmentation and a small
//! training step (`augment-train`).

pub mod augment_train;
pub mod branches;
pub mod copy_overlap;
pub mod encoder_decoder;
pub mod folder;
mod gpus;
pub mod heavy_split;
pub mod multistage;
pub mod prefetch;

use rand::{rngs::StdRng, Rng, SeedableRng};
use std::ops::Range;
use streamline::engine::pipeline::StageCall;
use streamline::engine::timeline::OverlapMetrics;
use streamline::engine::{Plan, Recorder, StreamPool, Timeline};
use streamline::error::{DriverContext, Error, Result};
use streamline::timing::median;
use streamline::Gpu;
use streamline_testing::reference::heavy::Comparison;
use streamline_testing::reference::train::Bounded;

/// Options every scenario takes.
#[derive(Clone, Debug)]
pub struct Common {
    /// Timed repetitions (median reported).
    pub reps: usize,
    /// Also replay the overlapped schedule as a CUDA graph.
    pub graph: bool,
    /// Seed of the random inputs.
    pub seed: u64,
    /// Elements compared with the reference.
    pub sample: usize,
}

impl Default for Common {
    fn default() -> Self {
        Common {
            reps: 10,
            graph: false,
            seed: 1,
            sample: 4096,
        }
    }
}

/// The columns of [`Training::throughput_cells`].
pub const THROUGHPUT_COLUMNS: [&str; 4] = [
    "serial steps/s",
    "pipelined steps/s",
    "speed-up",
    "graph steps/s",
];

/// The options of the scenarios that train seed 003's MLP (`augment-train`,
/// `encoder-decoder`): the batch sizes swept, the model's widths, the steps of a timed run and
/// the learning rate.
#[derive(Clone, Debug, clap::Args)]
pub struct Training {
    /// Batch sizes of the sweep.
    #[arg(long, value_delimiter = ',', default_values_t = Training::default().batches)]
    pub batches: Vec<usize>,
    /// Hidden units of the MLP.
    #[arg(long, default_value_t = Training::default().hidden)]
    pub hidden: usize,
    /// Classes (outputs) of the MLP.
    #[arg(long, default_value_t = Training::default().classes)]
    pub classes: usize,
    /// Training steps per timed run (encoder-decoder takes an even number).
    #[arg(long, default_value_t = Training::default().steps)]
    pub steps: usize,
    /// Learning rate.
    #[arg(long, default_value_t = Training::default().lr)]
    pub lr: f32,
}

impl Default for Training {
    fn default() -> Self {
        Training {
            batches: vec![8, 32, 64, 128],
            hidden: 1024,
            classes: 10,
            steps: 16,
            lr: 1e-4,
        }
    }
}

impl Training {
    /// The batch size whose run the report details (32 when swept, else the first) and the
    /// smallest one (where the outputs are checked against the reference).
    pub fn headline_and_smallest(&self) -> (usize, usize) {
        let headline = if self.batches.contains(&32) {
            32
        } else {
            self.batches.first().copied().unwrap_or(1)
        };
        let smallest = self.batches.iter().copied().min().unwrap_or(headline);
        (headline, smallest)
    }

    /// Steps per second of a timed run of `ms` milliseconds.
    pub fn per_second(&self, ms: f64) -> f64 {
        self.steps as f64 / (ms / 1e3)
    }

    /// The table cells of the three ways a run was timed (milliseconds of the whole run each):
    /// [`THROUGHPUT_COLUMNS`].
    pub fn throughput_cells(&self, serial: f64, piped: f64, graph: Option<f64>) -> [String; 4] {
        [
            format!("{:.1}", self.per_second(serial)),
            format!("{:.1}", self.per_second(piped)),
            format!("{:.2}x", serial / piped),
            graph.map_or("-".into(), |g| format!("{:.1}", self.per_second(g))),
        ]
    }

    /// Checks the batch sizes (at least one, each in `1..=max_batch`) and the learning rate;
    /// the widths and steps are each scenario's own to check.
    pub fn check(&self, max_batch: usize) -> Result<()> {
        if self.batches.is_empty() || self.batches.iter().any(|&b| !(1..=max_batch).contains(&b)) {
            return Err(Error::arg(
                "batches",
                format!(
                    "needs 1.. batch sizes, each in 1..={max_batch}, got {:?}",
                    self.batches
                ),
            ));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(Error::arg(
                "lr",
                format!("must be finite and > 0, got {}", self.lr),
            ));
        }
        Ok(())
    }
}

/// One timed configuration of a scenario.
#[derive(Clone, Debug)]
pub struct Row {
    /// What ran (e.g. `2 streams`).
    pub label: String,
    /// Median milliseconds.
    pub ms: f64,
}

/// What a scenario measured and checked.
#[derive(Clone, Debug)]
pub struct Report {
    /// Scenario name.
    pub name: String,
    /// One line describing the workload.
    pub workload: String,
    /// Median ms with every lane on one stream.
    pub serial_ms: f64,
    /// Median ms with one stream per lane.
    pub overlapped_ms: f64,
    /// Median ms of the graph replay of the overlapped schedule, when asked for.
    pub graph_ms: Option<f64>,
    /// What the serial and overlapped times are, where not every lane on one stream against
    /// one stream per lane.
    pub runs: Option<[String; 2]>,
    /// Further timed configurations (sweeps).
    pub rows: Vec<Row>,
    /// A table of its own (first row the header), when the scenario has one (e.g. seed 003's
    /// steps per second over batch sizes).
    pub table: Vec<Vec<String>>,
    /// Overlap metrics of the recorded overlapped run.
    pub metrics: OverlapMetrics,
    /// The recorded overlapped run.
    pub timeline: Timeline,
    /// The check of the output against the CPU reference.
    pub check: Check,
    /// Findings to print (break-even, which stage is longest, ...).
    pub notes: Vec<String>,
}

impl Report {
    /// Serial over overlapped time.
    pub fn speedup(&self) -> f64 {
        self.serial_ms / self.overlapped_ms
    }
}

/// Outcome of comparing sampled outputs with the reference.
#[derive(Clone, Debug, Default)]
pub struct Check {
    /// Elements compared.
    pub compared: usize,
    /// Elements outside the reference's error bound.
    pub failures: usize,
    /// Elements still holding the poison value.
    pub unwritten: usize,
    /// First failure: (where, input, got, want).
    pub first_failure: Option<(String, f64, f64, f64)>,
}

impl Check {
    /// Whether everything compared passed.
    pub fn passed(&self) -> bool {
        self.failures == 0 && self.unwritten == 0 && self.compared > 0
    }

    /// Adds counts of a comparison made elsewhere; `worst_at` locates its worst element.
    pub fn add_counts(
        &mut self,
        what: &str,
        compared: usize,
        failures: usize,
        worst_at: (usize, usize),
    ) {
        self.compared += compared;
        self.failures += failures;
        if failures > 0 && self.first_failure.is_none() {
            self.first_failure = Some((
                format!("{what} at {worst_at:?}"),
                f64::NAN,
                f64::NAN,
                f64::NAN,
            ));
        }
    }

    /// Adds a comparison of `n` elements made by [`streamline_testing::reference::heavy`].
    pub fn add(&mut self, what: &str, c: &Comparison, unwritten: usize) {
        self.compared += c.count;
        self.failures += c.failures;
        self.unwritten += unwritten;
        if self.first_failure.is_none() {
            if let Some((i, x, got, want)) = c.first_failure {
                self.first_failure = Some((format!("{what}[{i}]"), x, got, want));
            }
        }
    }
}

/// Mean time per step of the operations named `name` in `t`, over `steps` steps, in µs.
pub(crate) fn per_step_us(t: &Timeline, name: &str, steps: usize) -> f64 {
    t.intervals
        .iter()
        .filter(|iv| iv.name == name)
        .map(|iv| iv.duration_us())
        .sum::<f64>()
        / steps as f64
}

/// Adds to `check` the weights after one MLP step, `w2` whole and the rows of `w1` (of
/// `hidden` values each) that `want` lists, against [`mlp_step`]'s values and bounds;
/// elements with an infinite bound (a ReLU decision that could go either way) are skipped.
///
/// [`mlp_step`]: streamline_testing::reference::train::mlp_step
pub(crate) fn check_mlp_weights(
    check: &mut Check,
    prefix: &str,
    (w1, w2): (&[f32], &[f32]),
    hidden: usize,
    (w2_want, w1_want): &(Vec<Bounded>, Vec<(usize, Vec<Bounded>)>),
) {
    let mut cmp = |what: String, got: &[f32], want: &[Bounded], row: usize| {
        let (mut bad, mut at) = (0, (row, 0));
        for (j, (g, w)) in got.iter().zip(want).enumerate() {
            if w.bound.is_finite() && ((*g as f64) - w.value).abs() > w.bound {
                if bad == 0 {
                    at = (row, j);
                }
                bad += 1;
            }
        }
        check.add_counts(&what, want.len(), bad, at);
    };
    cmp(format!("{prefix}W2 after the step"), w2, w2_want, 0);
    for (r, want) in w1_want {
        cmp(
            format!("{prefix}W1 after the step"),
            &w1[r * hidden..(r + 1) * hidden],
            want,
            *r,
        );
    }
}

/// Bytes in a MiB.
pub const MIB: f64 = (1u64 << 20) as f64;

/// Memory in use by this process: host resident set and device memory (all of the device's
/// in-use memory, as the driver reports it).
#[derive(Clone, Copy, Debug)]
pub struct Footprint {
    /// Resident host memory in bytes (0 where `/proc/self/status` cannot be read).
    pub host_rss: u64,
    /// Device memory in use in bytes (total minus free).
    pub device_used: u64,
}

impl Footprint {
    /// The footprint now.
    pub fn now(gpu: &Gpu) -> Result<Footprint> {
        let kib = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .unwrap_or(0);
        let (free, total) = gpu.context().mem_get_info().op("cuMemGetInfo")?;
        Ok(Footprint {
            host_rss: kib * 1024,
            device_used: (total - free) as u64,
        })
    }
}

/// `k` distinct sorted indices below `n` (all of them when `k >= n`), deterministic in `seed`.
pub fn sample_indices(n: usize, k: usize, seed: u64) -> Vec<usize> {
    if k >= n {
        return (0..n).collect();
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut v: Vec<usize> = (0..k).map(|_| rng.gen_range(0..n)).collect();
    // Always include both ends, where off-by-one errors show.
    v.push(0);
    v.push(n - 1);
    v.sort_unstable();
    v.dedup();
    v
}

/// Milliseconds between a timing event on pool stream 0 that every stream in `used` waits
/// for before `work`, and one recorded on stream 0 after it waited for all of them.
pub fn timed(pool: &StreamPool, used: &[usize], work: impl FnOnce() -> Result<()>) -> Result<f64> {
    let start = pool.timing_event()?;
    let end = pool.timing_event()?;
    let s0 = pool.stream(0)?;
    start.record(s0).op("cuEventRecord")?;
    for &s in used {
        pool.wait_event(s, &start)?;
    }
    work()?;
    for &s in used {
        pool.wait_stream(0, s)?;
    }
    end.record(s0).op("cuEventRecord")?;
    end.synchronize().op("cuEventSynchronize")?;
    Ok(start.elapsed_ms(&end).op("cuEventElapsedTime")? as f64)
}

/// Median of `reps` timings of `work` after one untimed warm-up run.
pub fn median_ms(
    pool: &StreamPool,
    used: &[usize],
    reps: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<f64> {
    timed(pool, used, &mut work)?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        v.push(timed(pool, used, &mut work)?);
    }
    Ok(median(&v))
}

/// Lanes of a three-stage plan with one stream per stage.
pub const OVERLAPPED_LANES: [usize; 3] = [0, 1, 2];

/// Median times of a three-stage `plan` over `iterations`: every stage on one stream (serial),
/// one stream per stage (overlapped) and, with `common.graph`, the overlapped schedule replayed
/// from a CUDA graph. Returns `(serial, overlapped, graph)` in ms.
pub fn time_three_ways(
    pool: &StreamPool,
    plan: &Plan,
    common: &Common,
    iterations: Range<usize>,
    mut stage: impl FnMut(&StageCall) -> Result<()>,
) -> Result<(f64, f64, Option<f64>)> {
    let lanes = OVERLAPPED_LANES;
    let serial = median_ms(pool, &[0], common.reps, || {
        plan.run(pool, &[0, 0, 0], iterations.clone(), None, &mut stage)
    })?;
    let overlapped = median_ms(pool, &lanes, common.reps, || {
        plan.run(pool, &lanes, iterations.clone(), None, &mut stage)
    })?;
    let graph = if common.graph {
        let g = plan.capture(pool, &lanes, 0, iterations, &mut stage)?;
        g.upload()?;
        Some(median_ms(pool, &lanes, common.reps, || g.launch())?)
    } else {
        None
    };
    Ok((serial, overlapped, graph))
}

/// The timeline of the last recorded run of this process, kept for an interrupted command to
/// write what it recorded before the interruption.
static LAST_RECORDED: std::sync::Mutex<Option<Timeline>> = std::sync::Mutex::new(None);

/// Takes the timeline of the last recorded run (complete, or up to an interruption), if any.
pub fn take_last_recorded() -> Option<Timeline> {
    LAST_RECORDED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
}

/// The timeline of one run of `run`, which records its work (up to `capacity` intervals) on a
/// recorder with one track per pool stream; tracks nothing ran on are dropped. When `run` is
/// interrupted (Ctrl-C), what it recorded so far is kept for [`take_last_recorded`].
pub fn recorded(
    pool: &StreamPool,
    capacity: usize,
    run: impl FnOnce(&mut Recorder) -> Result<()>,
) -> Result<Timeline> {
    let mut rec = Recorder::for_pool(pool, capacity)?;
    let ran = run(&mut rec);
    let timeline = rec.finish().map(Timeline::without_empty_tracks);
    if let Ok(t) = &timeline {
        *LAST_RECORDED.lock().unwrap_or_else(|p| p.into_inner()) = Some(t.clone());
    }
    ran?;
    timeline
}

/// `Ok` where `value` lies in `range`; else the error naming `arg` and the range.
pub(crate) fn within(
    arg: &'static str,
    value: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<()> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(Error::arg(
        arg,
        format!(
            "must be in {}..={}, got {value}",
            range.start(),
            range.end()
        ),
    ))
}

/// Parses a count in plain or scientific notation (`100000000`, `1e8`), as the command line
/// takes sizes.
pub fn parse_count(s: &str) -> std::result::Result<usize, String> {
    if let Ok(v) = s.parse::<usize>() {
        return Ok(v);
    }
    let f: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if !(f >= 0.0 && f.fract() == 0.0 && f <= usize::MAX as f64) {
        return Err(format!("`{s}` is not a whole number >= 0"));
    }
    Ok(f as usize)
}
