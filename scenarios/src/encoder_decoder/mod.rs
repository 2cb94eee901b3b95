//! Seed 003's first scenario: a frozen encoder (forward only: `features = relu(x We)`) computes
//! the features of batch N+1 on one stream while a trainable decoder (the two-layer MLP of
//! `augment-train`: forward, backward, SGD) trains on the features of batch N on another. The
//! features live in a ring of two released by events: batch N+2's encoding waits only for the
//! decoder step that read its slot (what the seed does with `record_stream`).
//!
//! The seed's rule, measured over batch sizes: pipelining pays when neither stage fills the
//! GPU and the two cost about the same.
//!
//! With `--gpus 2` the two stages run on two GPUs instead (`split.rs`).

mod split;

use super::augment_train::Model;
use super::{
    check_mlp_weights, median_ms, per_step_us, recorded, sample_indices, Check, Common, Report,
    Training, THROUGHPUT_COLUMNS,
};
use streamline::engine::pipeline::StageCall;
use streamline::engine::{DeviceBuffer, OpKind, PipelineSpec, Plan, StreamPool};
use streamline::error::{Error, Result};
use streamline::ops::matmul::{sgemm, Gemm, Kernel};
use streamline::ops::train::relu;
use streamline::Gpu;
use streamline_testing::data::{fan_in_weights, randn_f32};
use streamline_testing::reference::matmul::gamma;
use streamline_testing::reference::train::{mlp_step, Mlp};

/// Options of `encoder-decoder`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    #[command(flatten)]
    pub train: Training,
    /// Inputs per row (the encoder's input width).
    #[arg(long, default_value_t = Options::default().inputs)]
    pub inputs: usize,
    /// Features per row (the encoder's output, the decoder's input).
    #[arg(long, default_value_t = Options::default().features)]
    pub features: usize,
    /// GPUs: 1 runs both stages on one GPU, 2 the encoder on device 0 and the decoder on
    /// device 1, the features copied from one to the other.
    #[arg(long, default_value_t = Options::default().gpus)]
    pub gpus: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            train: Training::default(),
            inputs: 4096,
            features: 1024,
            gpus: 1,
        }
    }
}

const DEPTH: usize = 2;
/// Distinct batches on the device, cycled through.
const DATA: usize = 4;

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    o.train.check(4096)?;
    for (arg, v) in [
        ("inputs", o.inputs),
        ("features", o.features),
        ("hidden", o.train.hidden),
        ("classes", o.train.classes),
    ] {
        crate::within(arg, v, 1..=16384)?;
    }
    crate::within("gpus", o.gpus, 1..=2)?;
    if o.train.steps < 2 || !o.train.steps.is_multiple_of(2) || o.train.steps > 10_000 {
        return Err(Error::arg(
            "steps",
            format!("must be even, 2..=10000, got {}", o.train.steps),
        ));
    }
    Ok(())
}

/// Encoder lane: features of a batch into the ring; decoder lane: one training step on them.
pub fn spec() -> PipelineSpec {
    PipelineSpec::new(DEPTH)
        .lane("encoder")
        .lane("decoder")
        .persistent("inputs")
        .persistent("targets")
        .ring("features")
        .persistent("decoder")
        .stage(
            "encode",
            OpKind::Compute,
            "encoder",
            &["inputs"],
            &["features"],
        )
        .stage(
            "train step",
            OpKind::Compute,
            "decoder",
            &["features", "targets"],
            &["decoder"],
        )
}

/// Everything one batch size runs on.
struct Setup {
    batch: usize,
    host_x: Vec<f32>,
    host_t: Vec<f32>,
    we_host: Vec<f32>,
    w1: Vec<f32>,
    w2: Vec<f32>,
    x: Vec<DeviceBuffer<f32>>,
    t: Vec<DeviceBuffer<f32>>,
    we: DeviceBuffer<f32>,
    /// Per ring slot: the encoder's pre-activation and the features.
    pre: Vec<DeviceBuffer<f32>>,
    feat: Vec<DeviceBuffer<f32>>,
    decoder: Model,
}

impl Setup {
    /// The buffers of batch size `batch`: the encoder's on lane 0 of `enc`, the decoder's on
    /// lane 1 of `dec` (the same pool on one GPU).
    fn new(
        enc: &StreamPool,
        dec: &StreamPool,
        o: &Options,
        batch: usize,
        seed: u64,
    ) -> Result<Setup> {
        let host_x = randn_f32(DATA * batch * o.inputs, seed);
        let mut host_t = vec![0.0f32; DATA * batch * o.train.classes];
        for (r, row) in host_t.chunks_mut(o.train.classes).enumerate() {
            row[(r * 7 + seed as usize) % o.train.classes] = 1.0;
        }
        let we_host = fan_in_weights(o.inputs * o.features, o.inputs, seed + 1);
        let w1 = fan_in_weights(o.features * o.train.hidden, o.features, seed + 2);
        let w2 = fan_in_weights(o.train.hidden * o.train.classes, o.train.hidden, seed + 3);
        let (bi, bt) = (batch * o.inputs, batch * o.train.classes);
        let m = Mlp {
            batch,
            inputs: o.features,
            hidden: o.train.hidden,
            outputs: o.train.classes,
            lr: o.train.lr,
        };
        let ring = |n: usize| -> Result<Vec<DeviceBuffer<f32>>> {
            (0..DEPTH).map(|_| DeviceBuffer::zeros(enc, 0, n)).collect()
        };
        Ok(Setup {
            batch,
            x: (0..DATA)
                .map(|k| DeviceBuffer::from_slice(enc, 0, &host_x[k * bi..(k + 1) * bi]))
                .collect::<Result<_>>()?,
            t: (0..DATA)
                .map(|k| DeviceBuffer::from_slice(dec, 1, &host_t[k * bt..(k + 1) * bt]))
                .collect::<Result<_>>()?,
            we: DeviceBuffer::from_slice(enc, 0, &we_host)?,
            pre: ring(batch * o.features)?,
            feat: ring(batch * o.features)?,
            decoder: Model::new(dec, 1, m, &w1, &w2)?,
            host_x,
            host_t,
            we_host,
            w1,
            w2,
        })
    }

    fn stage(&mut self, gpu: &Gpu, o: &Options, c: &StageCall) -> Result<()> {
        let (k, s) = (c.iteration % DATA, c.slot);
        match c.stage {
            0 => {
                let g = Gemm::dense(self.batch, o.features, o.inputs);
                sgemm(
                    gpu,
                    c.stream,
                    Kernel::Auto,
                    &g,
                    &self.x[k],
                    &self.we,
                    &mut self.pre[s],
                )?;
                relu(gpu, c.stream, &self.pre[s], &mut self.feat[s])
            }
            _ => self.decoder.step(gpu, c.stream, &self.feat[s], &self.t[k]),
        }
    }
}

/// Checks the last step of a pipelined run from the initial weights: the encoder's features of
/// the last batch against the f64 reference (`relu(x We)`, bound `gamma_{k+2} sum |x||w|`,
/// elements within their bound of zero skipped, where the ReLU may go either way), and the
/// decoder's weights after the step against the f64 step on the features the GPU computed.
fn verify(
    gpu: &Gpu,
    pool: &StreamPool,
    plan: &Plan,
    su: &mut Setup,
    o: &Options,
    common: &Common,
) -> Result<Check> {
    let lanes = [0, 1];
    let dec = pool.stream(1)?;
    reset(su, dec)?;
    let last = o.train.steps - 1;
    plan.run(pool, &lanes, 0..last, None, |c| su.stage(gpu, o, c))?;
    let w1 = su.decoder.w1_to_vec(dec)?;
    let w2 = su.decoder.w2.to_vec(dec)?;
    plan.run(pool, &lanes, last..o.train.steps, None, |c| {
        su.stage(gpu, o, c)
    })?;
    let w1n = su.decoder.w1_to_vec(dec)?;
    let w2n = su.decoder.w2.to_vec(dec)?;
    let feat = su.feat[last % DEPTH].to_vec(dec)?;
    Ok(check_last(su, o, common, &feat, (&w1, &w2), (&w1n, &w2n)))
}

/// Puts the decoder's initial weights back, on `s`.
fn reset(su: &mut Setup, s: &std::sync::Arc<cudarc::driver::CudaStream>) -> Result<()> {
    su.decoder.load_w1(s, &su.w1)?;
    streamline::engine::memory::h2d(s, &su.w2[..], &mut su.decoder.w2)
}

/// The check of the last step of a run from the initial weights: `feat`, the features the
/// decoder trained on, against the f64 encoder of the last batch, and the decoder's weights
/// `after` the step against the f64 step from the weights `before` it on those features.
fn check_last(
    su: &Setup,
    o: &Options,
    common: &Common,
    feat: &[f32],
    (w1, w2): (&[f32], &[f32]),
    (w1n, w2n): (&[f32], &[f32]),
) -> Check {
    let last = o.train.steps - 1;
    let (b, d, f) = (su.batch, o.inputs, o.features);
    let k = last % DATA;
    let x = &su.host_x[k * b * d..(k + 1) * b * d];
    let mut check = Check::default();
    let (mut bad, mut at) = (0, (0, 0));
    let g = gamma(d + 2);
    for r in 0..b {
        for j in 0..f {
            let (mut v, mut mag) = (0.0f64, 0.0f64);
            for i in 0..d {
                let p = x[r * d + i] as f64 * su.we_host[i * f + j] as f64;
                v += p;
                mag += p.abs();
            }
            let bound = g * mag;
            if v.abs() <= bound {
                continue;
            }
            if ((feat[r * f + j] as f64) - v.max(0.0)).abs() > bound {
                if bad == 0 {
                    at = (r, j);
                }
                bad += 1;
            }
        }
    }
    check.add_counts("encoder features", b * f, bad, at);
    let m = su.decoder.m;
    let nt = b * o.train.classes;
    let t = &su.host_t[k * nt..(k + 1) * nt];
    let rows = sample_indices(m.inputs, (common.sample / m.hidden).max(2), common.seed);
    let want = mlp_step(&m, feat, t, w1, w2, &rows);
    check_mlp_weights(&mut check, "decoder ", (w1n, w2n), m.hidden, &want);
    check
}

/// Runs the scenario.
pub fn run(gpu: &Gpu, common: &Common, o: &Options) -> Result<Report> {
    validate(o)?;
    if o.gpus == 2 {
        return split::run(gpu, common, o);
    }
    let plan = spec().plan()?;
    let pool = StreamPool::named(gpu, &plan.spec().lanes)?;
    let (headline, smallest) = o.train.headline_and_smallest();
    let mut header = ["batch", "encoder µs", "decoder µs"]
        .map(String::from)
        .to_vec();
    header.extend(THROUGHPUT_COLUMNS.map(String::from));
    let mut table = vec![header];
    let (mut head, mut timeline, mut check) = ((0.0, 0.0, None), None, Check::default());
    for (i, &batch) in o.train.batches.iter().enumerate() {
        let mut su = Setup::new(&pool, &pool, o, batch, common.seed + 100 * i as u64)?;
        let serial = median_ms(&pool, &[0], common.reps, || {
            plan.run(&pool, &[0, 0], 0..o.train.steps, None, |c| {
                su.stage(gpu, o, c)
            })
        })?;
        let piped = median_ms(&pool, &[0, 1], common.reps, || {
            plan.run(&pool, &[0, 1], 0..o.train.steps, None, |c| {
                su.stage(gpu, o, c)
            })
        })?;
        let graph = if common.graph {
            let g = plan.capture(&pool, &[0, 1], 0, 0..o.train.steps, |c| su.stage(gpu, o, c))?;
            g.upload()?;
            Some(median_ms(&pool, &[0, 1], common.reps, || g.launch())?)
        } else {
            None
        };
        // Each stage's own time, from a serial recorded run (nothing overlaps it there).
        let alone = recorded(&pool, 2 * o.train.steps, |rec| {
            plan.run(&pool, &[0, 0], 0..o.train.steps, Some(rec), |c| {
                su.stage(gpu, o, c)
            })
        })?;
        let per_step = |name: &str| per_step_us(&alone, name, o.train.steps);
        let mut row = vec![
            batch.to_string(),
            format!("{:.1}", per_step("encode")),
            format!("{:.1}", per_step("train step")),
        ];
        row.extend(o.train.throughput_cells(serial, piped, graph));
        table.push(row);
        if batch == headline && timeline.is_none() {
            head = (serial, piped, graph);
            timeline = Some(recorded(&pool, 2 * o.train.steps, |rec| {
                plan.run(&pool, &[0, 1], 0..o.train.steps, Some(rec), |c| {
                    su.stage(gpu, o, c)
                })
            })?);
        }
        if batch == smallest && check.compared == 0 {
            check = verify(gpu, &pool, &plan, &mut su, o, common)?;
        }
        pool.synchronize()?;
    }
    let timeline = timeline.unwrap_or_default();
    let metrics = timeline.metrics();
    let notes = vec![
        "the speed-up is largest where the encoder and the decoder step take about the same time and neither fills the GPU; where one dominates, the pipelined step approaches the longer one".to_string(),
        format!("checked at batch {smallest}: the encoder's features of the last batch against the f64 reference, and the decoder's weights after the last step against the f64 step on those features"),
    ];
    Ok(Report {
        name: "encoder-decoder".into(),
        workload: format!(
            "seed 003: a frozen encoder relu(x We) ({} -> {}) computes batch N+1's features on an encoder stream into a ring of {DEPTH} while a decoder MLP ({} -> {} -> {}, ReLU, MSE, SGD) trains on batch N's on a decoder stream; {} steps per run, batch {headline} in the rows below",
            o.inputs, o.features, o.features, o.train.hidden, o.train.classes, o.train.steps
        ),
        serial_ms: head.0,
        overlapped_ms: head.1,
        graph_ms: head.2,
        runs: None,
        rows: Vec::new(),
        table,
        metrics,
        timeline,
        check,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::{validate, Options};

    /// One or two GPUs; any other count is refused, naming the option and its range.
    #[test]
    fn gpus_outside_one_or_two_are_refused() {
        for gpus in [1, 2] {
            assert!(validate(&Options {
                gpus,
                ..Default::default()
            })
            .is_ok());
        }
        for gpus in [0, 3] {
            let e = validate(&Options {
                gpus,
                ..Default::default()
            })
            .unwrap_err()
            .to_string();
            assert!(e.contains("gpus") && e.contains("1..=2"), "{e}");
        }
    }
}
