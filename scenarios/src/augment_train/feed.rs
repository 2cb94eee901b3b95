//! The feed: everything one batch size runs on (the loader's page-locked slots, filled from a
//! [`Source`], device rings, the augmentation and its draws, the model), and the queueing of
//! its steps.

use crate::Footprint;
use cudarc::driver::CudaStream;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use streamline::engine::memory::h2d;
use streamline::engine::pipeline::StageCall;
use streamline::engine::{
    DeviceBuffer, Loader, LoaderStats, PinnedBuffer, Plan, Recorder, SteadyGraphs, StreamPool,
    Streamed,
};
use streamline::error::{DriverContext, Result};
use streamline::ops::image::{Augment, AugmentConfig, AugmentDraw, Layout, Shape};
use streamline::Gpu;
use streamline_testing::data::fan_in_weights;
use streamline_testing::reference::train::Mlp;

use super::ahead::{Ahead, Work};
use super::decode::GpuDecode;
use super::model::Reduce;
pub(super) use super::source::{Shard, Slot, Source};
use super::*;

/// Everything one batch size runs on.
pub(super) struct Setup {
    pub(super) batch: usize,
    /// Steps of a graph window; the loader has twice as many slots.
    pub(super) window: usize,
    pub(super) source: Arc<Source>,
    /// Shared with the thread that decodes ahead, which takes the batches while it runs.
    loader: Arc<Mutex<Loader<Slot>>>,
    /// Whether the copy stage takes its batch from the loader (not while capturing).
    pub(super) hosted: bool,
    /// Footprints sampled over the run (every `sample_every` steps; 0: none).
    pub(super) sample_every: usize,
    pub(super) footprints: Vec<Footprint>,
    /// Host time the queueing thread spent in each stage's calls since the last `run`.
    pub(super) host: Vec<std::time::Duration>,
    /// The loader's figures of the last [`Setup::run`] (how long the copy stage waited for
    /// its batches, among them).
    pub(super) last_loader: LoaderStats,
    /// Host time the thread decoding ahead spent decoding since the last `run`.
    pub(super) ahead_host: std::time::Duration,
    /// Where the decoder's calls on that thread spent it.
    pub(super) ahead_parts: streamline::jpeg::HostTimes,
    /// The thread decoding ahead, while a run has one.
    ahead: Option<Ahead>,
    pub(super) augments: Vec<Augment>,
    pub(super) ring_u8: Vec<DeviceBuffer<u8>>,
    pub(super) ring_t: Vec<DeviceBuffer<f32>>,
    pub(super) ring_x: Vec<DeviceBuffer<f32>>,
    /// The extra transform's outputs (empty without one).
    pub(super) ring_x2: Vec<DeviceBuffer<f32>>,
    pub(super) model: Model,
    /// A data-parallel run's communicator and the streams its all-reduces and updates run on.
    pub(super) reduce: Option<Reduce>,
    /// Decoding on the GPU (`--decode gpu`): the decoder, the extents' ring and the ragged
    /// augmentation that replaces `augments`.
    pub(super) decode: Option<GpuDecode>,
    pub(super) w1: Vec<f32>,
    pub(super) w2: Vec<f32>,
}

impl Setup {
    pub(super) fn new(
        pool: &StreamPool,
        o: &Options,
        batch: usize,
        seed: u64,
        extra: Option<&mut (dyn Transform + '_)>,
        decode_on: Option<&Gpu>,
    ) -> Result<Setup> {
        Setup::for_shard(pool, o, batch, seed, extra, Shard::WHOLE, decode_on)
    }

    /// What one GPU of a data-parallel run trains on: part `shard` of each global batch (with
    /// the same initial weights on every GPU), the gradients in [`Options::buckets`] buckets;
    /// the folder's JPEGs decoded on `decode_on` where given.
    pub(super) fn for_shard(
        pool: &StreamPool,
        o: &Options,
        batch: usize,
        seed: u64,
        extra: Option<&mut (dyn Transform + '_)>,
        shard: Shard,
        decode_on: Option<&Gpu>,
    ) -> Result<Setup> {
        let shape = Shape::new(batch, CHANNELS, o.size, o.size);
        let cfg = config(o.size);
        let per = shape.len();
        let source = Arc::new(Source::new(o, batch, seed, shard, decode_on.is_some())?);
        // A slot holds a batch of decoded images, or of the largest files; the device ring a
        // batch of decoded images, or of the largest ones the GPU decodes.
        let (slot_bytes, ring_bytes) = match source.files() {
            Some(f) => {
                let l = f.largest()?;
                (batch * l.slot(), batch * l.image)
            }
            None => (per, per),
        };
        let window = window(o.workers);
        let slots = (0..2 * window)
            .map(|_| {
                Ok(Slot {
                    images: PinnedBuffer::zeros(pool, slot_bytes)?,
                    targets: PinnedBuffer::zeros(pool, batch * o.train.classes)?,
                    entries: Vec::with_capacity(batch),
                    headers: None,
                })
            })
            .collect::<Result<Vec<Slot>>>()?;
        let decode = match decode_on {
            Some(g) => Some(GpuDecode::new(
                g,
                pool,
                batch,
                (ring_bytes, batch * o.train.classes),
                &cfg,
                shard.seed(seed) + 10,
            )?),
            None => None,
        };
        // One header reader per loader thread: the thread that decodes then only decodes.
        let readers = match &decode {
            Some(d) => {
                let files = lock(&d.files);
                (0..o.workers)
                    .map(|_| files.header_reader())
                    .collect::<Result<Vec<_>>>()?
            }
            None => Vec::new(),
        };
        let readers = Mutex::new(readers);
        let fill_source = source.clone();
        let loader = Loader::new(slots, o.workers, move |i, slot: &mut Slot| {
            fill_source.fill_slot(i, batch, slot, &readers)
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
                let draw = AugmentDraw::random(
                    &cfg,
                    batch,
                    o.size,
                    o.size,
                    shard.seed(seed) + 10 + k as u64,
                );
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
            loader: Arc::new(Mutex::new(loader)),
            hosted: true,
            sample_every: 0,
            footprints: Vec::new(),
            host: Vec::new(),
            last_loader: Default::default(),
            ahead_host: Default::default(),
            ahead_parts: Default::default(),
            ahead: None,
            ring_u8: (0..DEPTH)
                .map(|_| DeviceBuffer::zeros(pool, 0, ring_bytes))
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
            model: {
                let mut model = if shard.exchange {
                    Model::with_buckets(
                        pool,
                        1,
                        m,
                        (&w1, &w2),
                        o.buckets.unwrap_or(ALL_REDUCE_BUCKETS),
                        o.grad_dtype,
                    )?
                } else {
                    Model::new(pool, 1, m, &w1, &w2)?
                };
                model.forward = o.forward_kernel;
                model
            },
            augments,
            reduce: None,
            decode,
            w1,
            w2,
        })
    }

    pub(super) fn stage(
        &mut self,
        gpu: &Gpu,
        extra: &mut Option<&mut (dyn Transform + '_)>,
        c: &StageCall,
    ) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self.queue_stage(gpu, extra, c);
        if self.host.len() <= c.stage {
            self.host.resize(c.stage + 1, Default::default());
        }
        self.host[c.stage] += t.elapsed();
        r
    }

    /// Queues stage call `c` (see [`Setup::stage`]).
    fn queue_stage(
        &mut self,
        gpu: &Gpu,
        extra: &mut Option<&mut (dyn Transform + '_)>,
        c: &StageCall,
    ) -> Result<()> {
        let s = c.slot;
        self.queue_stage_at(gpu, extra, c, s)?;
        if let (Some(t), 0 | 1) = (&mut self.model.trace, c.stage) {
            let what = ["copied", "augmented"][c.stage];
            t.around(c.stream, format!("{what} {}", c.iteration))?;
        }
        Ok(())
    }

    fn queue_stage_at(
        &mut self,
        gpu: &Gpu,
        extra: &mut Option<&mut (dyn Transform + '_)>,
        c: &StageCall,
        s: usize,
    ) -> Result<()> {
        match (c.stage, extra) {
            (2, Some(t)) => t.run(c.stream, &self.ring_x[s], &mut self.ring_x2[s]),
            (2, None) | (3, Some(_)) => {
                // The extra transform's output where there is one.
                let x = self.ring_x2.get(s).unwrap_or(&self.ring_x[s]);
                self.model
                    .step_with(gpu, c.stream, x, &self.ring_t[s], self.reduce.as_ref())
            }
            (0, _) => self.copy(gpu, c.iteration, s, c.stream),
            _ => match &self.decode {
                Some(d) => d.augment.run_ragged(
                    gpu,
                    c.stream,
                    &self.ring_u8[s],
                    &d.slots[s].dev,
                    &mut self.ring_x[s],
                ),
                None => self.augments[c.iteration % DATA].run_fused(
                    gpu,
                    c.stream,
                    &self.ring_u8[s],
                    &mut self.ring_x[s],
                ),
            },
        }
    }

    /// The copy of batch `i` from its page-locked slot into device slot `s` (with `--decode
    /// gpu`, the decoding of its files): taken from the loader and handed back once queued,
    /// or (while capturing, or timing the GPU alone) the slot batch `i` would use.
    pub(super) fn copy(
        &mut self,
        gpu: &Gpu,
        i: usize,
        s: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        if self.hosted {
            self.sample(gpu, i)?;
        }
        if let (Some(a), Some(d)) = (&mut self.ahead, &mut self.decode) {
            let slot = (&mut self.ring_u8[s], &mut self.ring_t[s], &mut d.slots[s]);
            return a.swap_in(i, stream, slot);
        }
        let mut loader = lock(&self.loader);
        let slot = if self.hosted {
            loader.get(i)?
        } else {
            loader.slot(i % (2 * self.window))?
        };
        match (&mut self.decode, self.source.files()) {
            (Some(d), Some(f)) => {
                lock(&d.files).decode(f, stream, slot, &mut d.slots[s], &mut self.ring_u8[s])?
            }
            _ => h2d(
                stream,
                &slot.images.view(0..slot.images.len())?,
                &mut self.ring_u8[s],
            )?,
        }
        h2d(
            stream,
            &slot.targets.view(0..slot.targets.len())?,
            &mut self.ring_t[s],
        )?;
        if self.hosted {
            loader.release(i)?;
        }
        Ok(())
    }

    /// The loader (not to be called while a thread decodes ahead: it holds the loader).
    pub(super) fn loader(&self) -> MutexGuard<'_, Loader<Slot>> {
        lock(&self.loader)
    }

    /// Runs `f`, which queues batches `range` of the loader's run, with a thread decoding
    /// ahead (see [`super::ahead`]) where the GPU decodes the batches from the loader and the
    /// lanes run on streams of their own; serial, a batch's decoding is queued in its turn.
    pub(super) fn with_ahead<R>(
        &mut self,
        pool: &StreamPool,
        lanes: &[usize],
        range: Range<usize>,
        f: impl FnOnce(&mut Setup) -> Result<R>,
    ) -> Result<R> {
        let piped = lanes.first() != lanes.last();
        let Some(d) = self.decode.as_mut().filter(|_| self.hosted && piped) else {
            return f(self);
        };
        let work = Work {
            files: d.files.clone(),
            loader: self.loader.clone(),
            source: self.source.clone(),
            stream: pool.stream(AHEAD_STREAM)?.clone(),
        };
        let spares = std::mem::take(&mut d.spares);
        let before = lock(&d.files).host_times();
        self.ahead = Some(Ahead::start(work, spares, range)?);
        let r = f(self);
        let ended = match self.ahead.take() {
            Some(a) => a.finish(),
            None => Ok(Default::default()),
        };
        let ended = ended.map(|(spares, busy)| {
            if let Some(d) = self.decode.as_mut() {
                d.spares = spares;
                self.ahead_parts = self.ahead_parts + (lock(&d.files).host_times() - before);
            }
            self.ahead_host += busy;
        });
        let r = r?;
        ended?;
        Ok(r)
    }

    /// Records the memory footprint before step `i` when it is due.
    pub(super) fn sample(&mut self, gpu: &Gpu, i: usize) -> Result<()> {
        if self.sample_every > 0 && i.is_multiple_of(self.sample_every) {
            self.footprints.push(Footprint::now(gpu)?);
        }
        Ok(())
    }

    /// Streams `steps` steps with the lanes on `lanes`: eagerly, or through `graphs` (the
    /// first and last steps eager), the loader's batches of a window taken before its replay
    /// and handed back right after.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run(
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
        self.host.clear();
        self.ahead_host = Default::default();
        self.ahead_parts = Default::default();
        self.loader().start(steps)?;
        let skewed = self.decode.is_some();
        match graphs {
            None => self.with_ahead(pool, lanes, 0..steps, |su| {
                queue(plan, pool, lanes, steps, skewed, None, |c| {
                    su.stage(gpu, extra, c)
                })
            })?,
            Some(g) => {
                let k = g.skew()[0];
                g.stream(plan, pool, steps, |h| match h {
                    Streamed::Call(c) => self.stage(gpu, extra, c),
                    Streamed::Before(w) => {
                        for i in w.start - k..w.end - k {
                            self.sample(gpu, i)?;
                            self.loader().get(i)?;
                        }
                        Ok(())
                    }
                    Streamed::After(w) => {
                        for i in w.start - k..w.end - k {
                            self.loader().release(i)?;
                        }
                        Ok(())
                    }
                })?
            }
        }
        self.loader().finish()
    }

    /// Puts the initial weights back (on the model lane).
    pub(super) fn reset(&mut self, pool: &StreamPool) -> Result<()> {
        let s = pool.stream(1)?;
        self.model.load_w1(s, &self.w1)?;
        h2d(s, &self.w2[..], &mut self.model.w2)
    }
}

/// Locks `m`, taking the data even if a thread panicked while holding it (the loader and the
/// decoder are left consistent between calls).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Queues `steps` iterations of `plan`, in iteration order, or `skewed` as [`Plan::skew`]
/// gives it (each step queues a batch's first stage before the later stages of the batches
/// before it). Decoding on the GPU is skewed: nvJPEG's call returns about when its batch is
/// decoded, and queued first, a batch's decoding no longer waits behind the augmentation and
/// training step of the batch before it (the results history has both ways measured).
pub(super) fn queue(
    plan: &Plan,
    pool: &StreamPool,
    lanes: &[usize],
    steps: usize,
    skewed: bool,
    recorder: Option<&mut Recorder>,
    stage: impl FnMut(&StageCall) -> Result<()>,
) -> Result<()> {
    if !skewed {
        return plan.run(pool, lanes, 0..steps, recorder, stage);
    }
    let skew = plan.skew();
    let ahead = skew.iter().copied().max().unwrap_or(0);
    plan.run_steps(
        pool,
        lanes,
        0..steps,
        0..steps + ahead,
        &skew,
        recorder,
        stage,
    )
}

/// Seed 003's transform for `size` images, converting with scaling to `[0, 1]` so that the
/// MLP sees inputs of unit scale.
pub(super) fn config(size: usize) -> AugmentConfig {
    AugmentConfig {
        scale: true,
        ..AugmentConfig::seed003(size, CHANNELS)
    }
}
