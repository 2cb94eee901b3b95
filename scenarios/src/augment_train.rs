//! Seed 003, part 2: augmentation on the GPU pipelined with training. uint8 batches (and their
//! targets) are copied from page-locked memory and augmented (our fused [`Augment`]: crop,
//! resize, rotation, blur, normalisation) on a transform stream while the model stream trains
//! on the previous batch: one SGD step of a two-layer MLP (`relu(x W1) W2`, mean squared error
//! against one-hot targets), forward and backward built from our matmul and the training-step
//! kernels. Device buffers form rings of three, so batch N+1 is augmented while batch N
//! trains, each slot reused only once the step that read it is done.
//!
//! The batches stream from a [`Loader`]: host threads decode the PNG/JPEG images of a folder
//! (or copy generated batches) into page-locked slots ahead of the copies, so host memory is
//! the slots and a run can last any number of steps; with a graph, the steady state replays
//! two captured windows in turn. The report says which stage bounds the throughput: the
//! loader's threads, the transform stream or the model stream.
//!
//! The seed's table: steps per second over batch sizes, serial (both lanes on one stream),
//! pipelined (one stream each) and pipelined replayed as a CUDA graph.

use super::{
    check_mlp_weights, median_ms, per_step_us, recorded, sample_indices, Check, Common, Footprint,
    Report, Training, MIB, THROUGHPUT_COLUMNS,
};
use crate::folder::ImageFolder;
use cudarc::driver::CudaStream;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::Arc;
use streamline::engine::memory::h2d;
use streamline::engine::pipeline::StageCall;
use streamline::engine::{
    DeviceBuffer, Loader, LoaderStats, OpKind, PinnedBuffer, PipelineSpec, Plan, SteadyGraphs,
    StreamPool, Streamed,
};
use streamline::error::{DriverContext, Error, Result};
use streamline::ops::image::{Augment, AugmentConfig, AugmentDraw, Layout, Shape};
use streamline::ops::matmul::{sgemm, Gemm, Kernel};
use streamline::ops::train::{mse_grad, relu, relu_backward, sgd, transpose};
use streamline::Gpu;
use streamline_testing::data::fan_in_weights;
use streamline_testing::reference::image as refimg;
use streamline_testing::reference::train::{mlp_step, Mlp};

/// Options of `augment-train`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    #[command(flatten)]
    pub train: Training,
    /// Side of the square images (3 channels); the crop is half of it, resized back to it.
    #[arg(long, default_value_t = Options::default().size)]
    pub size: usize,
    /// A folder of PNG/JPEG images to decode the batches from (class subfolders give the
    /// labels); generated batches without one.
    #[arg(long, value_name = "DIR")]
    pub input: Option<PathBuf>,
    /// Host threads filling the batches (decoding the images).
    #[arg(long, default_value_t = Options::default().workers)]
    pub workers: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            train: Training::default(),
            size: 256,
            input: None,
            workers: std::thread::available_parallelism().map_or(4, |n| n.get().min(8)),
        }
    }
}

/// Ring depth of the device buffers: three, so that the copy of batch N+2, the augmentation
/// of N+1 and the step on N are all in flight, also across the ends of a graph window.
const DEPTH: usize = 3;
/// Distinct generated batches, and distinct per-image draws of the augmentation, cycled
/// through (a divisor of every window's slot count, so a replayed window meets the draws it
/// was captured with).
const DATA: usize = 3;
const CHANNELS: usize = 3;

/// Steps one graph window replays with `workers` loader threads: a multiple of the ring depth
/// such that the two windows' page-locked slots (`2 window`, so that the loader fills one
/// window's batches while the other's replay copies them) leave every thread a slot to fill
/// besides the ring's copies in flight.
fn window(workers: usize) -> usize {
    DEPTH * (workers + DEPTH).div_ceil(2 * DEPTH)
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    o.train.check(1024)?;
    if !(8..=512).contains(&o.size) {
        return Err(Error::arg(
            "size",
            format!("must be in 8..=512, got {}", o.size),
        ));
    }
    if !(1..=8192).contains(&o.train.hidden) || !(1..=1024).contains(&o.train.classes) {
        return Err(Error::arg(
            "hidden",
            "hidden must be in 1..=8192 and classes in 1..=1024",
        ));
    }
    if !(1..=1 << 40).contains(&o.train.steps) {
        return Err(Error::arg(
            "steps",
            format!("must be in 1..=2^40, got {}", o.train.steps),
        ));
    }
    if !(1..=256).contains(&o.workers) {
        return Err(Error::arg(
            "workers",
            format!("must be in 1..=256, got {}", o.workers),
        ));
    }
    let inputs = CHANNELS * o.size * o.size;
    let max_b = o.train.batches.iter().max().copied().unwrap_or(1);
    // The loader's page-locked slots: two graph windows of batches.
    let pinned = (2 * window(o.workers) * max_b * inputs) as u128;
    if pinned > 1 << 34 {
        return Err(Error::arg(
            "workers",
            format!(
                "{} threads need {} page-locked slots of the largest batch ({max_b} images), {:.1} GiB; at most 16 GiB: use fewer threads or smaller batches",
                o.workers,
                2 * window(o.workers),
                pinned as f64 / (1u64 << 30) as f64
            ),
        ));
    }
    if (inputs as u128) * (o.train.hidden as u128) > 1 << 28
        || (max_b as u128) * (inputs as u128) > 1 << 28
    {
        return Err(Error::arg(
            "hidden",
            "3 * size^2 * hidden and batch * 3 * size^2 must be at most 2^28 elements",
        ));
    }
    Ok(())
}

/// A transform of one's own, run on the transform stream after the augmentation: it reads
/// the augmented batch (NCHW f32, 3 channels, values in `[0, 1]`) and writes the batch the
/// model trains on. It shows in the plan and the timeline under its [`Transform::name`].
pub trait Transform {
    /// The stage's name.
    fn name(&self) -> &str;
    /// Prepares for batches of `shape` (allocations on the pool, per-image parameters drawn
    /// from `seed`); called once per batch size, before any [`Transform::run`].
    fn prepare(&mut self, pool: &StreamPool, shape: Shape, seed: u64) -> Result<()>;
    /// Transforms `x` into `y` on `stream`, queueing work only (no host wait, so that the run
    /// can be captured as a CUDA graph).
    fn run(
        &mut self,
        stream: &Arc<CudaStream>,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
    ) -> Result<()>;
}

/// Transform lane: copy the uint8 batch and its targets, augment (then the extra transform
/// named `extra`, if any); model lane: one step.
pub fn spec(extra: Option<&str>) -> PipelineSpec {
    let spec = PipelineSpec::new(DEPTH)
        .lane("transform")
        .lane("model")
        .persistent("dataset")
        .ring("images")
        .ring("targets")
        .ring("x")
        .persistent("model")
        .stage(
            "h2d",
            OpKind::H2D,
            "transform",
            &["dataset"],
            &["images", "targets"],
        )
        .stage("augment", OpKind::Compute, "transform", &["images"], &["x"]);
    let (spec, input) = match extra {
        Some(name) => (
            spec.ring("x2")
                .stage(name, OpKind::Compute, "transform", &["x"], &["x2"]),
            "x2",
        ),
        None => (spec, "x"),
    };
    spec.stage(
        "train step",
        OpKind::Compute,
        "model",
        &[input, "targets"],
        &["model"],
    )
}

/// The MLP's weights and the intermediates of a step (also the trainable decoder of
/// `encoder-decoder`).
pub(crate) struct Model {
    pub(crate) m: Mlp,
    pub(crate) w1: DeviceBuffer<f32>,
    pub(crate) w2: DeviceBuffer<f32>,
    xt: DeviceBuffer<f32>,
    hpre: DeviceBuffer<f32>,
    a: DeviceBuffer<f32>,
    at: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    dy: DeviceBuffer<f32>,
    dw2: DeviceBuffer<f32>,
    w2t: DeviceBuffer<f32>,
    da: DeviceBuffer<f32>,
    dh: DeviceBuffer<f32>,
    dw1: DeviceBuffer<f32>,
}

impl Model {
    pub(crate) fn new(
        pool: &StreamPool,
        lane: usize,
        m: Mlp,
        w1: &[f32],
        w2: &[f32],
    ) -> Result<Model> {
        let (b, d, h, o) = (m.batch, m.inputs, m.hidden, m.outputs);
        let z = |n| DeviceBuffer::zeros(pool, lane, n);
        Ok(Model {
            m,
            w1: DeviceBuffer::from_slice(pool, lane, w1)?,
            w2: DeviceBuffer::from_slice(pool, lane, w2)?,
            xt: z(d * b)?,
            hpre: z(b * h)?,
            a: z(b * h)?,
            at: z(h * b)?,
            y: z(b * o)?,
            dy: z(b * o)?,
            dw2: z(h * o)?,
            w2t: z(o * h)?,
            da: z(b * h)?,
            dh: z(b * h)?,
            dw1: z(d * h)?,
        })
    }

    /// One SGD step on batch `x` (`batch x inputs`) with targets `t` (`batch x outputs`).
    pub(crate) fn step(
        &mut self,
        gpu: &Gpu,
        s: &cudarc::driver::CudaStream,
        x: &DeviceBuffer<f32>,
        t: &DeviceBuffer<f32>,
    ) -> Result<()> {
        let Mlp {
            batch: b,
            inputs: d,
            hidden: h,
            outputs: o,
            lr,
        } = self.m;
        let k = Kernel::Auto;
        // Forward: a = relu(x W1), y = a W2.
        sgemm(
            gpu,
            s,
            k,
            &Gemm::dense(b, h, d),
            x,
            &self.w1,
            &mut self.hpre,
        )?;
        relu(gpu, s, &self.hpre, &mut self.a)?;
        sgemm(
            gpu,
            s,
            k,
            &Gemm::dense(b, o, h),
            &self.a,
            &self.w2,
            &mut self.y,
        )?;
        // Backward of mean((y - t)^2).
        mse_grad(gpu, s, &self.y, t, 2.0 / (b * o) as f32, &mut self.dy)?;
        transpose(gpu, s, b, h, &self.a, &mut self.at)?;
        sgemm(
            gpu,
            s,
            k,
            &Gemm::dense(h, o, b),
            &self.at,
            &self.dy,
            &mut self.dw2,
        )?;
        transpose(gpu, s, h, o, &self.w2, &mut self.w2t)?;
        sgemm(
            gpu,
            s,
            k,
            &Gemm::dense(b, h, o),
            &self.dy,
            &self.w2t,
            &mut self.da,
        )?;
        relu_backward(gpu, s, &self.da, &self.hpre, &mut self.dh)?;
        transpose(gpu, s, b, d, x, &mut self.xt)?;
        sgemm(
            gpu,
            s,
            k,
            &Gemm::dense(d, h, b),
            &self.xt,
            &self.dh,
            &mut self.dw1,
        )?;
        sgd(gpu, s, &mut self.w1, &self.dw1, lr)?;
        sgd(gpu, s, &mut self.w2, &self.dw2, lr)
    }
}

/// Where the batches come from: filled on the loader's threads, the same batch for the same
/// index every time (the check rebuilds the last one).
enum Source {
    /// [`DATA`] generated batches (uint8 NHWC and one-hot targets), cycled through.
    Generated { images: Vec<u8>, targets: Vec<f32> },
    /// Decoded from a folder.
    Folder(ImageFolder),
}

impl Source {
    fn new(o: &Options, batch: usize, seed: u64) -> Result<Source> {
        if let Some(dir) = &o.input {
            let f = ImageFolder::open(dir, o.size)?;
            if f.classes().len() > o.train.classes {
                return Err(Error::arg(
                    "input",
                    format!(
                        "{} holds {} class folders, more than the model's {} classes",
                        dir.display(),
                        f.classes().len(),
                        o.train.classes
                    ),
                ));
            }
            return Ok(Source::Folder(f));
        }
        let per = batch * CHANNELS * o.size * o.size;
        let mut rng = StdRng::seed_from_u64(seed);
        let images: Vec<u8> = (0..per * DATA).map(|_| rng.gen()).collect();
        let mut targets = vec![0.0f32; batch * o.train.classes * DATA];
        for row in targets.chunks_mut(o.train.classes) {
            row[rng.gen_range(0..o.train.classes)] = 1.0;
        }
        Ok(Source::Generated { images, targets })
    }

    /// Batch `i` into `images` (NHWC) and `targets`.
    fn fill(&self, i: usize, batch: usize, images: &mut [u8], targets: &mut [f32]) -> Result<()> {
        match self {
            Source::Generated {
                images: all,
                targets: t,
            } => {
                let k = i % DATA;
                let (n, m) = (images.len(), targets.len());
                images.copy_from_slice(&all[k * n..(k + 1) * n]);
                targets.copy_from_slice(&t[k * m..(k + 1) * m]);
                Ok(())
            }
            Source::Folder(f) => f.fill_batch(i, batch, images, targets),
        }
    }
}

/// A page-locked slot: one batch's images and targets.
type Slot = (PinnedBuffer<u8>, PinnedBuffer<f32>);

/// Everything one batch size runs on.
struct Setup {
    batch: usize,
    /// Steps of a graph window; the loader has twice as many slots.
    window: usize,
    source: Arc<Source>,
    loader: Loader<Slot>,
    /// Whether the copy stage takes its batch from the loader (not while capturing).
    hosted: bool,
    /// Footprints sampled over the run (every `sample_every` steps; 0: none).
    sample_every: usize,
    footprints: Vec<Footprint>,
    augments: Vec<Augment>,
    ring_u8: Vec<DeviceBuffer<u8>>,
    ring_t: Vec<DeviceBuffer<f32>>,
    ring_x: Vec<DeviceBuffer<f32>>,
    /// The extra transform's outputs (empty without one).
    ring_x2: Vec<DeviceBuffer<f32>>,
    model: Model,
    w1: Vec<f32>,
    w2: Vec<f32>,
}

impl Setup {
    fn new(
        pool: &StreamPool,
        o: &Options,
        batch: usize,
        seed: u64,
        extra: Option<&mut (dyn Transform + '_)>,
    ) -> Result<Setup> {
        let shape = Shape::new(batch, CHANNELS, o.size, o.size);
        let cfg = config(o.size);
        let per = shape.len();
        let source = Arc::new(Source::new(o, batch, seed)?);
        let window = window(o.workers);
        let slots = (0..2 * window)
            .map(|_| {
                Ok((
                    PinnedBuffer::zeros(pool, per)?,
                    PinnedBuffer::zeros(pool, batch * o.train.classes)?,
                ))
            })
            .collect::<Result<Vec<Slot>>>()?;
        let fill_source = source.clone();
        let loader = Loader::new(slots, o.workers, move |i, slot: &mut Slot| {
            let (images, targets) = slot;
            fill_source.fill(i, batch, images.as_mut_slice()?, targets.as_mut_slice()?)
        })?;
        let stream = pool.stream(0)?;
        let ctx = pool.context();
        // The augmentations' parameter arrays are made without cudarc's per-slice events: a
        // captured launch that read them would otherwise wait on the upload's event, recorded
        // outside the capture, which stream capture rejects. They need no events: they are
        // written once here, the host waits for the upload below, and then only read.
        // SAFETY: the slices made in this window are written once, on `stream`, finished
        // before any use (synchronized below), and never written again.
        unsafe { ctx.disable_event_tracking() };
        let augments = (0..DATA)
            .map(|k| {
                let draw = AugmentDraw::random(&cfg, batch, o.size, o.size, seed + 10 + k as u64);
                // Decoders give HWC pixels: the fused kernel reads them in place.
                Augment::new(stream, shape, &cfg, &draw)
                    .map(|a| a.with_layouts(Layout::Nhwc, Layout::Nchw))
            })
            .collect::<Result<Vec<_>>>();
        // SAFETY: restores the tracking every other slice relies on.
        unsafe { ctx.enable_event_tracking() };
        let augments = augments?;
        stream.synchronize().op("cuStreamSynchronize")?;
        let inputs = CHANNELS * o.size * o.size;
        let m = Mlp {
            batch,
            inputs,
            hidden: o.train.hidden,
            outputs: o.train.classes,
            lr: o.train.lr,
        };
        let w1 = fan_in_weights(inputs * o.train.hidden, inputs, seed + 1);
        let w2 = fan_in_weights(o.train.hidden * o.train.classes, o.train.hidden, seed + 2);
        let ring = |n: usize, lane: usize| -> Result<Vec<DeviceBuffer<f32>>> {
            (0..DEPTH)
                .map(|_| DeviceBuffer::zeros(pool, lane, n))
                .collect()
        };
        Ok(Setup {
            batch,
            window,
            source,
            loader,
            hosted: true,
            sample_every: 0,
            footprints: Vec::new(),
            ring_u8: (0..DEPTH)
                .map(|_| DeviceBuffer::zeros(pool, 0, per))
                .collect::<Result<_>>()?,
            ring_t: ring(batch * o.train.classes, 0)?,
            ring_x: ring(batch * inputs, 0)?,
            ring_x2: match extra {
                Some(t) => {
                    t.prepare(pool, Shape::new(batch, CHANNELS, o.size, o.size), seed + 3)?;
                    ring(batch * inputs, 0)?
                }
                None => Vec::new(),
            },
            model: Model::new(pool, 1, m, &w1, &w2)?,
            augments,
            w1,
            w2,
        })
    }

    fn stage(
        &mut self,
        gpu: &Gpu,
        extra: &mut Option<&mut (dyn Transform + '_)>,
        c: &StageCall,
    ) -> Result<()> {
        let s = c.slot;
        match (c.stage, extra) {
            (2, Some(t)) => t.run(c.stream, &self.ring_x[s], &mut self.ring_x2[s]),
            (2, None) | (3, Some(_)) => {
                // The extra transform's output where there is one.
                let x = self.ring_x2.get(s).unwrap_or(&self.ring_x[s]);
                self.model.step(gpu, c.stream, x, &self.ring_t[s])
            }
            (0, _) => self.copy(gpu, c.iteration, s, c.stream),
            _ => self.augments[c.iteration % DATA].run_fused(
                gpu,
                c.stream,
                &self.ring_u8[s],
                &mut self.ring_x[s],
            ),
        }
    }

    /// The copy of batch `i` from its page-locked slot into device slot `s`: taken from the
    /// loader and handed back once queued, or (while capturing) the slot batch `i` would use.
    fn copy(&mut self, gpu: &Gpu, i: usize, s: usize, stream: &Arc<CudaStream>) -> Result<()> {
        if self.hosted {
            self.sample(gpu, i)?;
        }
        let slot = if self.hosted {
            self.loader.get(i)?
        } else {
            self.loader.slot(i % (2 * self.window))?
        };
        h2d(stream, &slot.0.view(0..slot.0.len())?, &mut self.ring_u8[s])?;
        h2d(stream, &slot.1.view(0..slot.1.len())?, &mut self.ring_t[s])?;
        if self.hosted {
            self.loader.release(i)?;
        }
        Ok(())
    }

    /// Records the memory footprint before step `i` when it is due.
    fn sample(&mut self, gpu: &Gpu, i: usize) -> Result<()> {
        if self.sample_every > 0 && i.is_multiple_of(self.sample_every) {
            self.footprints.push(Footprint::now(gpu)?);
        }
        Ok(())
    }

    /// Streams `steps` steps with the lanes on `lanes`: eagerly, or through `graphs` (the
    /// first and last steps eager), the loader's batches of a window taken before its replay
    /// and handed back right after.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        gpu: &Gpu,
        pool: &StreamPool,
        plan: &Plan,
        lanes: &[usize],
        graphs: Option<&SteadyGraphs>,
        extra: &mut Option<&mut (dyn Transform + '_)>,
        steps: usize,
    ) -> Result<LoaderStats> {
        self.hosted = true;
        self.footprints.clear();
        self.loader.start(steps)?;
        match graphs {
            None => plan.run(pool, lanes, 0..steps, None, |c| self.stage(gpu, extra, c))?,
            Some(g) => {
                let k = g.skew()[0];
                g.stream(plan, pool, steps, |h| match h {
                    Streamed::Call(c) => self.stage(gpu, extra, c),
                    Streamed::Before(w) => {
                        for i in w.start - k..w.end - k {
                            self.sample(gpu, i)?;
                            self.loader.get(i)?;
                        }
                        Ok(())
                    }
                    Streamed::After(w) => {
                        for i in w.start - k..w.end - k {
                            self.loader.release(i)?;
                        }
                        Ok(())
                    }
                })?
            }
        }
        self.loader.finish()
    }

    /// Puts the initial weights back (on the model lane).
    fn reset(&mut self, pool: &StreamPool) -> Result<()> {
        let s = pool.stream(1)?;
        h2d(s, &self.w1[..], &mut self.model.w1)?;
        h2d(s, &self.w2[..], &mut self.model.w2)
    }
}

/// Seed 003's transform for `size` images, converting with scaling to `[0, 1]` so that the
/// MLP sees inputs of unit scale.
fn config(size: usize) -> AugmentConfig {
    AugmentConfig {
        scale: true,
        ..AugmentConfig::seed003(size, CHANNELS)
    }
}

/// The timed runs of one batch size: median ms of `steps` steps serial, pipelined and (when
/// asked) pipelined from the graph windows, with the loader's figures of the last pipelined
/// eager run, and
/// pipelined with the GPU stages alone (the copies read the slots as the loader last left
/// them, no loader in the loop).
struct Timed {
    serial: f64,
    piped: f64,
    graph: Option<f64>,
    gpu_alone: f64,
    loader: LoaderStats,
}

fn time(
    gpu: &Gpu,
    pool: &StreamPool,
    plan: &Plan,
    su: &mut Setup,
    extra: &mut Option<&mut (dyn Transform + '_)>,
    o: &Options,
    common: &Common,
) -> Result<Timed> {
    let mut loader = LoaderStats::default();
    let serial = median_ms(pool, &[0], common.reps, || {
        su.run(gpu, pool, plan, &[0, 0], None, extra, o.train.steps)
            .map(|_| ())
    })?;
    let lanes = [0, 1];
    let piped = median_ms(pool, &lanes, common.reps, || {
        loader = su.run(gpu, pool, plan, &lanes, None, extra, o.train.steps)?;
        Ok(())
    })?;
    su.hosted = false;
    let gpu_alone = median_ms(pool, &lanes, common.reps, || {
        plan.run(pool, &lanes, 0..o.train.steps, None, |c| {
            su.stage(gpu, extra, c)
        })
    });
    su.hosted = true;
    let gpu_alone = gpu_alone?;
    let graph = if common.graph {
        su.hosted = false;
        let window = su.window;
        let g = plan.capture_steady(pool, &lanes, 0, window, |c| su.stage(gpu, extra, c));
        su.hosted = true;
        let g = g?;
        Some(median_ms(pool, &lanes, common.reps, || {
            su.run(gpu, pool, plan, &lanes, Some(&g), extra, o.train.steps)
                .map(|_| ())
        })?)
    } else {
        None
    };
    Ok(Timed {
        serial,
        piped,
        graph,
        gpu_alone,
        loader,
    })
}

/// Checks the last step of a pipelined run of `steps` steps: the augmented batch against the
/// CPU reference of the transform, and the updated weights (all of `W2`, sampled rows of `W1`)
/// against the f64 reference of one step from the weights before it, on the batch the GPU
/// augmented.
#[allow(clippy::too_many_arguments)]
fn verify(
    gpu: &Gpu,
    pool: &StreamPool,
    plan: &Plan,
    su: &mut Setup,
    extra: &mut Option<&mut (dyn Transform + '_)>,
    common: &Common,
    steps: usize,
) -> Result<Check> {
    let lanes = [0, 1];
    su.reset(pool)?;
    let last = steps - 1;
    su.hosted = true;
    su.loader.start(steps)?;
    plan.run(pool, &lanes, 0..last, None, |c| su.stage(gpu, extra, c))?;
    let model_s = pool.stream(1)?;
    let w1 = su.model.w1.to_vec(model_s)?;
    let w2 = su.model.w2.to_vec(model_s)?;
    plan.run(pool, &lanes, last..steps, None, |c| su.stage(gpu, extra, c))?;
    su.loader.finish()?;
    let w1n = su.model.w1.to_vec(model_s)?;
    let w2n = su.model.w2.to_vec(model_s)?;
    let x = su.ring_x[last % DEPTH].to_vec(model_s)?;
    // What the model trained on: the extra transform's output where there is one.
    let x2 = match su.ring_x2.get(last % DEPTH) {
        Some(b) => Some(b.to_vec(model_s)?),
        None => None,
    };
    let x_train = x2.as_deref().unwrap_or(&x);
    let m = su.model.m;
    let mut check = Check::default();

    // The batch the loader gave, rebuilt (NHWC), and in the reference's NCHW.
    let aug = &su.augments[last % DATA];
    let shape = aug.input_shape();
    let mut nhwc = vec![0u8; shape.len()];
    let mut t = vec![0f32; m.batch * m.outputs];
    su.source.fill(last, su.batch, &mut nhwc, &mut t)?;
    let images = refimg::relayout(&nhwc, shape, Layout::Nhwc, Layout::Nchw);

    // The transform, within the bound of its error analysis (`reference::image::
    // augment_bound`), outputs near a nearest-neighbour tie accepted within the data range.
    let cfg = aug.config();
    let vmax = 1.0; // scaled to [0, 1]
    let (delta, tol) = refimg::augment_bound(cfg);
    let draw = aug.last_draw(model_s)?;
    let (want, amb) = refimg::augment(&images, shape, cfg, &draw, delta);
    let mut bad = 0;
    let mut worst = (0, 0);
    for i in 0..want.len() {
        let ok = if amb[i] {
            x[i].is_finite() && (x[i] as f64).abs() <= vmax / 0.5 + 1.0
        } else {
            ((x[i] as f64) - want[i]).abs() <= tol
        };
        if !ok {
            if bad == 0 {
                worst = (i, 0);
            }
            bad += 1;
        }
    }
    check.add_counts("augmented batch", want.len(), bad, worst);

    // The step.
    let rows = sample_indices(m.inputs, (common.sample / m.hidden).max(2), common.seed);
    let want = mlp_step(&m, x_train, &t, &w1, &w2, &rows);
    check_mlp_weights(&mut check, "", (&w1n, &w2n), m.hidden, &want);
    Ok(check)
}

/// Runs the scenario.
pub fn run(gpu: &Gpu, common: &Common, o: &Options) -> Result<Report> {
    run_with(gpu, common, o, None)
}

/// Runs the scenario with `extra` after the augmentation on the transform stream; the model
/// then trains on its output. The check of the augmentation is unchanged; `extra` is checked
/// by its own tests.
pub fn run_with(
    gpu: &Gpu,
    common: &Common,
    o: &Options,
    mut extra: Option<&mut (dyn Transform + '_)>,
) -> Result<Report> {
    validate(o)?;
    let extra_name = extra.as_ref().map(|t| t.name().to_string());
    let plan = spec(extra_name.as_deref()).plan()?;
    let extra = &mut extra;
    let pool = StreamPool::new(
        gpu,
        &[
            streamline::engine::pool::StreamSpec::new("transform"),
            streamline::engine::pool::StreamSpec::new("model"),
        ],
    )?;
    let (headline, smallest) = o.train.headline_and_smallest();
    let mut header = vec!["batch".to_string()];
    header.extend(THROUGHPUT_COLUMNS.map(String::from));
    header.extend(
        [
            "GPU alone steps/s",
            "loader capacity batches/s",
            "loader busy",
        ]
        .map(String::from),
    );
    let mut table = vec![header];
    let mut head = None;
    let mut timeline = None;
    let mut check = Check::default();
    let mut memory = Vec::new();
    let recorded_steps = o.train.steps.min(64);
    for (i, &batch) in o.train.batches.iter().enumerate() {
        let seed = common.seed + 100 * i as u64;
        let mut su = Setup::new(&pool, o, batch, seed, extra.as_deref_mut())?;
        if batch == headline && timeline.is_none() {
            // Recorded first, so that an interrupted long run still has its trace. The loader
            // fills its slots once; the recorded run then copies them as they are, so that
            // each stage's interval is its device time, with no wait for a batch inside it.
            let fill = 2 * su.window;
            su.run(gpu, &pool, &plan, &[0, 1], None, extra, fill)?;
            su.hosted = false;
            let t = recorded(&pool, 3 * recorded_steps, |rec| {
                plan.run(&pool, &[0, 1], 0..recorded_steps, Some(rec), |c| {
                    su.stage(gpu, extra, c)
                })
            });
            su.hosted = true;
            timeline = Some(t?);
            su.sample_every = o.train.steps.div_ceil(10);
        }
        let t = time(gpu, &pool, &plan, &mut su, extra, o, common)?;
        let mut row = vec![batch.to_string()];
        row.extend(o.train.throughput_cells(t.serial, t.piped, t.graph));
        row.extend([
            format!("{:.1}", o.train.per_second(t.gpu_alone)),
            format!("{:.1}", t.loader.capacity()),
            format!("{:.1}%", 100.0 * t.loader.utilization()),
        ]);
        table.push(row);
        if batch == headline && head.is_none() {
            memory = std::mem::take(&mut su.footprints);
            head = Some(t);
        }
        if batch == smallest && check.compared == 0 {
            let steps = o.train.steps.clamp(2, 4 * su.window);
            check = verify(gpu, &pool, &plan, &mut su, extra, common, steps)?;
        }
        pool.synchronize()?;
    }
    let head = head.expect("the headline batch is one of the batches");
    let timeline = timeline.unwrap_or_default();
    let metrics = timeline.metrics();
    let stage_us = |name: &str| per_step_us(&timeline, name, recorded_steps);
    let (aug_us, step_us, copy_us) = (stage_us("augment"), stage_us("train step"), stage_us("h2d"));
    // The extra transform, where there is one, runs on the transform stream too.
    let extra_us = extra_name.as_deref().map_or(0.0, stage_us);
    let transform_us = copy_us + aug_us + extra_us;
    let mut notes = vec![
        format!(
            "batch {headline}, per step: h2d {copy_us:.1} µs, augment {aug_us:.1} µs{} (transform stream), train step {step_us:.1} µs (model stream); the pipelined step can only approach the longer of transform and model ({:.1} µs)",
            extra_name.as_deref().map_or(String::new(), |n| format!(", {n} {extra_us:.1} µs")),
            transform_us.max(step_us)
        ),
        format!(
            "copy hidden under compute {:.1}%; longest stream busy {:.1}% of the span; pipelining gains most where neither stage fills the GPU alone and the two are of similar length (seed 003)",
            100.0 * metrics.copy_hidden_fraction,
            100.0 * metrics.longest_track_fraction
        ),
        bottleneck(&head, &o.train, transform_us, step_us, o.workers),
        format!("checked at batch {smallest}: the last step's augmented batch against the CPU transform and the updated weights against the f64 step"),
    ];
    if let (Some(first), Some(last)) = (memory.first(), memory.last()) {
        notes.push(format!(
            "memory over the last timed run at batch {headline} ({} samples, one per tenth of its {} steps): host RSS {:.1} MiB at the first, {:.1} MiB at the last ({:+.2}%); device memory in use {:.1} MiB, then {:.1} MiB ({:+.2}%)",
            memory.len(),
            o.train.steps,
            first.host_rss as f64 / MIB,
            last.host_rss as f64 / MIB,
            100.0 * (last.host_rss as f64 / first.host_rss.max(1) as f64 - 1.0),
            first.device_used as f64 / MIB,
            last.device_used as f64 / MIB,
            100.0 * (last.device_used as f64 / first.device_used.max(1) as f64 - 1.0),
        ));
    }
    let slots = 2 * window(o.workers);
    let source = match &o.input {
        Some(d) => format!(
            "decoded from the images of {} by {} threads",
            d.display(),
            o.workers
        ),
        None => format!(
            "generated ({DATA} batches cycled), copied into the slots by {} threads",
            o.workers
        ),
    };
    Ok(Report {
        name: "augment-train".into(),
        workload: format!(
            "seed 003: uint8 batches of 3x{s}x{s} (HWC) {source} into {slots} page-locked slots, augmented (crop {}, resize {s}, rotation 45, blur 7, normalize) on a transform stream while a 2-layer MLP ({} -> {} -> {}, ReLU, MSE, SGD) trains on the previous batch on a model stream; {} steps per run, batch {headline} in the rows below",
            o.size / 2,
            CHANNELS * o.size * o.size,
            o.train.hidden,
            o.train.classes,
            o.train.steps,
            s = o.size
        ),
        serial_ms: head.serial,
        overlapped_ms: head.piped,
        graph_ms: head.graph,
        rows: Vec::new(),
        table,
        metrics,
        timeline,
        check,
        notes,
    })
}

/// Names the stage that bounds the throughput: the loader's threads (their capacity were
/// they never kept waiting), the GPU stages alone (measured), and within them the transform
/// stream or the model stream (their device time per step in the recorded run).
fn bottleneck(
    t: &Timed,
    train: &Training,
    transform_us: f64,
    model_us: f64,
    workers: usize,
) -> String {
    let l = &t.loader;
    let gpu = if transform_us > model_us {
        "the GPU stages (the transform stream: copy and augmentation)"
    } else {
        "the GPU stages (the model stream: training step)"
    };
    let mut stages = [
        (format!("the loader ({workers} threads)"), l.capacity()),
        (gpu.to_string(), train.per_second(t.gpu_alone)),
    ];
    stages.sort_by(|a, b| a.1.total_cmp(&b.1));
    let wall = l.wall.as_secs_f64().max(1e-9);
    format!(
        "bottleneck: {} at {:.1} steps/s; next {} at {:.1} ({:.2}x); achieved {:.1} steps/s pipelined; the loader's threads were busy {:.1}% of the run, and the pipeline waited {:.1}% of it for a slot whose earlier copy the device had not yet run; per step the transform stream takes {transform_us:.1} µs of device time and the model stream {model_us:.1} µs",
        stages[0].0,
        stages[0].1,
        stages[1].0,
        stages[1].1,
        stages[1].1 / stages[0].1,
        train.per_second(t.piped),
        100.0 * l.utilization(),
        100.0 * l.slot_wait.as_secs_f64() / wall,
    )
}
