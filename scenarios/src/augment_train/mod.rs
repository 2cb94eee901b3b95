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
//!
//! The module follows a run: `feed` (where batches come from and what one batch size runs
//! on), `decode` and `ahead` (decoding the files on the GPU, and on a host thread of its own
//! ahead of the queue), `model` (the MLP the model stream trains), `run` (the timed runs and
//! the report), `check` (the last step against the CPU references), `report` (which stage
//! bounds the throughput) and `parallel` (the same on several GPUs, data-parallel over NCCL).
//!
//! [`Augment`]: streamline::ops::image::Augment
//! [`Loader`]: streamline::engine::Loader

mod ahead;
mod check;
mod decode;
mod exchange;
mod feed;
mod model;
mod parallel;
mod report;
mod run;
mod source;

pub use decode::Decode;
pub(crate) use model::Model;
pub use model::{GradDtype, Updates};
pub use run::{run, run_with};

pub use exchange::Exchange;

use crate::folder::OnBadImage;
use crate::Training;
use cudarc::driver::CudaStream;

use std::path::PathBuf;
use std::sync::Arc;
use streamline::engine::{DeviceBuffer, OpKind, PipelineSpec, StreamPool};
use streamline::error::{Error, Result};
use streamline::ops::image::Shape;

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
    /// What a batch does with an image of `--input` that does not decode: stop the run with
    /// an error naming it, or leave it out (the next image takes its place; the report lists
    /// the files left out).
    #[arg(long, value_enum, default_value_t = OnBadImage::Fail)]
    pub on_bad_image: OnBadImage,
    /// Where the images of `--input` are decoded: on the GPU (nvJPEG: the loader's threads
    /// only read the files, and each image keeps its size until the augmentation's crop), on
    /// the CPU (the loader's threads decode each image and scale it to cover the square), or
    /// the GPU where nvJPEG loads and every file is a JPEG.
    #[arg(long, value_enum, default_value_t = Decode::Auto)]
    pub decode: Decode,
    /// Host threads filling the batches (decoding the images), per GPU.
    #[arg(long, default_value_t = Options::default().workers)]
    pub workers: usize,
    /// GPUs training data-parallel (devices 0..N), each on its own batch of the batch size:
    /// gradients averaged as `--exchange` says. With more than one, the report sets N GPUs
    /// against one.
    #[arg(long, default_value_t = Options::default().gpus)]
    pub gpus: usize,
    /// Buckets of the first layer's gradient exchanged as each is computed (with --gpus):
    /// unset, 2 where it travels by peer copies and 4 by the all-reduce, the counts that did
    /// best for each on two H200s.
    #[arg(long)]
    pub buckets: Option<usize>,
    /// The type the first layer's gradient travels between GPUs in (with --gpus): bf16 halves
    /// the bytes, within a written bound of the f32 step.
    #[arg(long, value_enum, default_value_t = GradDtype::F32)]
    pub grad_dtype: GradDtype,
    /// How the gradients travel between GPUs (with --gpus): NCCL's all-reduce, whose kernels
    /// share the GPUs' SMs with the step, or, on two GPUs, copies by the copy engines, which
    /// take no SM, each GPU averaging its own gradient and the other's in its update (the same
    /// bytes as a ring all-reduce on two). Auto: peer copies where two GPUs reach each
    /// other's memory directly and no SMs are kept for NCCL (`--comm-sms`), else the
    /// all-reduce.
    #[arg(long, value_enum, default_value_t = Exchange::Auto)]
    pub exchange: Exchange,
    /// Where a data-parallel step applies the first layer's gradient (with --gpus): `beside`,
    /// on an update stream, each bucket's as soon as its gradient has arrived, beside the
    /// model stream's products; `in-order`, on the model stream, each bucket's just before the
    /// next step's forward product that reads it, so that no update shares the SMs with a
    /// product while the exchange still runs under them; `in-forward`, inside that product,
    /// which updates each weight as it reads it, so that the update costs no pass of its own
    /// over the weights (where the product runs split-K with 128 x 128 tiles, the automatic
    /// plan's for batches of 65 to 128, and, by peer copies, with f32 gradients; otherwise as
    /// `in-order`).
    #[arg(long, value_enum, default_value_t = Updates::Beside)]
    pub updates: Updates,
    /// After the timed runs, one more pipelined run of this many steps at the headline batch,
    /// its host and device memory sampled every tenth of it: whether a long run stays flat.
    #[arg(long, default_value_t = 0)]
    pub soak: usize,
    /// The kernel of the first layer's forward product (`auto`, or as `streamline matmul
    /// --kernel` names them, e.g. `splitk_128x128:128`). Its split-K blocks last as long as
    /// their slice of `K`, and another stream's kernels (the JPEG decoder's) wait for SMs
    /// until blocks end.
    #[arg(long, default_value = "auto", value_parser = streamline::ops::matmul::Kernel::parse)]
    pub forward_kernel: streamline::ops::matmul::Kernel,
    /// SMs kept for the JPEG decoder when decoding on the GPU (at least this many: the driver
    /// splits them in groups), so that its kernels do not queue behind the training step's
    /// blocks, which run on the others; 0 shares every SM. Unset, 8 where the driver can split
    /// the SMs (else every SM is shared); given, a split the driver refuses is an error.
    /// Opening the device with them is the caller's part ([`side_sms`]).
    #[arg(long)]
    pub decoder_sms: Option<u32>,
    /// SMs of each GPU kept free of the step's kernels in a data-parallel run (at least this
    /// many: the driver splits them in groups): the step's kernels run on the others (a green
    /// context) and the all-reduces on a stream of the primary context, so that NCCL's blocks
    /// always find SMs free (they may use the step's too); 0 shares every SM.
    #[arg(long, default_value_t = 0)]
    pub comm_sms: u32,
}

/// Buckets of `W1`'s gradient where `--buckets` is not given: by peer copies, and by the
/// all-reduce.
pub const PEER_COPY_BUCKETS: usize = 2;
pub const ALL_REDUCE_BUCKETS: usize = 4;

/// SMs kept for the decoder where `--decoder-sms` is not given.
pub const DECODER_SMS: u32 = 8;

/// The SMs to keep for the decoder when the device is opened for `o`
/// ([`streamline::Gpu::with_side_sms`]), and whether a refused split is an error (else every
/// SM is shared): where `o` may decode on the GPU (a folder given with JPEG files in it,
/// `--decode` not `cpu`, one GPU), else none.
pub fn side_sms(o: &Options) -> Option<(u32, bool)> {
    let dir = o.input.as_ref()?;
    if o.decode == Decode::Cpu || o.gpus != 1 {
        return None;
    }
    if o.decode == Decode::Auto {
        // A folder with no JPEG decodes on the CPU: no SM is kept idle for it.
        let f = crate::folder::ImageFolder::open(dir, o.size).ok()?;
        if f.not_jpeg() == f.len() {
            return None;
        }
    }
    match o.decoder_sms {
        None => Some((DECODER_SMS, false)),
        Some(0) => None,
        Some(n) => Some((n, true)),
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            train: Training::default(),
            size: 256,
            input: None,
            on_bad_image: OnBadImage::Fail,
            decode: Decode::Auto,
            workers: std::thread::available_parallelism().map_or(4, |n| n.get().min(8)),
            gpus: 1,
            buckets: None,
            grad_dtype: GradDtype::F32,
            exchange: Exchange::Auto,
            updates: Updates::Beside,
            soak: 0,
            forward_kernel: streamline::ops::matmul::Kernel::Auto,
            decoder_sms: None,
            comm_sms: 0,
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
/// The pool stream of the thread decoding ahead (see [`ahead`]), after the three lanes'.
const AHEAD_STREAM: usize = 3;

/// Steps one graph window replays with `workers` loader threads: a multiple of the ring depth
/// such that the two windows' page-locked slots (`2 window`, so that the loader fills one
/// window's batches while the other's replay copies them) leave every thread a slot to fill
/// besides the ring's copies in flight.
fn window(workers: usize) -> usize {
    DEPTH * (workers + DEPTH).div_ceil(2 * DEPTH)
}

/// The name of the transform lane's first stage: the copy of a decoded batch, or the GPU's
/// decoding of its files.
fn first_stage(decode: bool) -> &'static str {
    if decode {
        "decode"
    } else {
        "h2d"
    }
}

/// The pool's stream of each lane of [`spec`]: one stream per lane pipelined, every lane on
/// the first serial. Decoding on the GPU has a lane of its own (the pool's third stream), so
/// that the decoding of a batch waits only for its ring slot, not for the augmentation of the
/// batch before.
fn lane_streams(decode: bool, piped: bool) -> Vec<usize> {
    let lanes = if decode { 3 } else { 2 };
    (0..lanes).map(|i| if piped { i } else { 0 }).collect()
}

/// The report's line on the images left out with `--on-bad-image skip`, if any were.
fn skipped_note(skipped: &std::collections::BTreeSet<PathBuf>) -> Option<String> {
    let names: Vec<String> = skipped
        .iter()
        .take(20)
        .map(|p| p.display().to_string())
        .collect();
    (!skipped.is_empty()).then(|| {
        format!(
            "{} images of the folder did not decode and were left out (--on-bad-image skip): {}{}",
            skipped.len(),
            names.join(", "),
            if skipped.len() > 20 { ", ..." } else { "" }
        )
    })
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    o.train.check(1024)?;
    crate::within("size", o.size, 8..=512)?;
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
    crate::within("gpus", o.gpus, 1..=64)?;
    crate::within("soak", o.soak, 0..=1 << 40)?;
    if o.soak > 0 && o.gpus > 1 {
        return Err(Error::arg("soak", "runs on one GPU: leave --gpus at 1"));
    }
    if let Some(b) = o.buckets {
        crate::within("buckets", b, 1..=64)?;
    }
    if o.gpus == 1 && o.comm_sms > 0 {
        return Err(Error::arg(
            "comm-sms",
            "keeps SMs for the all-reduces of a data-parallel run: give --gpus 2 or more, or leave it at 0",
        ));
    }
    if o.gpus == 1 && o.grad_dtype != GradDtype::F32 {
        return Err(Error::arg(
            "grad-dtype",
            "says how gradients travel between GPUs: give --gpus 2 or more, or leave it at f32",
        ));
    }
    if o.gpus == 1 && o.exchange != Exchange::Auto {
        return Err(Error::arg(
            "exchange",
            "says how gradients travel between GPUs: give --gpus 2 or more, or leave it at auto",
        ));
    }
    if o.gpus == 1 && o.updates != Updates::Beside {
        return Err(Error::arg(
            "updates",
            "says where a data-parallel step applies its gradients: give --gpus 2 or more, or leave it at beside",
        ));
    }
    if o.exchange == Exchange::PeerCopies && o.gpus > 2 {
        return Err(Error::arg(
            "exchange",
            format!("peer-copies serves two GPUs (on {} each would send {} times the bytes of an all-reduce): give --gpus 2, or --exchange all-reduce", o.gpus, o.gpus - 1),
        ));
    }
    if o.exchange == Exchange::PeerCopies && o.comm_sms > 0 {
        return Err(Error::arg(
            "comm-sms",
            "keeps SMs for NCCL's all-reduces, and peer copies use none: leave it at 0, or give --exchange all-reduce",
        ));
    }
    crate::within("workers", o.workers, 1..=256)?;
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

/// Transform lane: copy the uint8 batch and its targets (or, with `decode`, a lane of its own
/// decodes its files on the GPU in a stage named `decode`), augment (then the extra transform
/// named `extra`, if any); model lane: one step.
pub fn spec(extra: Option<&str>, decode: bool) -> PipelineSpec {
    let spec = PipelineSpec::new(DEPTH).lane("transform").lane("model");
    let (spec, first_lane) = if decode {
        (spec.lane("decode"), "decode")
    } else {
        (spec, "transform")
    };
    let spec = spec
        .persistent("dataset")
        .ring("images")
        .ring("targets")
        .ring("x")
        .persistent("model")
        .stage(
            first_stage(decode),
            OpKind::H2D,
            first_lane,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decoder_gets_sms_of_its_own_only_where_it_may_decode_on_the_gpu() {
        let with = |f: &dyn Fn(&mut Options)| {
            let mut o = Options {
                input: Some(PathBuf::from("no-such-folder")),
                decode: Decode::Gpu,
                ..Options::default()
            };
            f(&mut o);
            side_sms(&o)
        };
        assert_eq!(with(&|_| {}), Some((DECODER_SMS, false)));
        assert_eq!(with(&|o| o.decoder_sms = Some(16)), Some((16, true)));
        assert_eq!(with(&|o| o.decoder_sms = Some(0)), None);
        assert_eq!(with(&|o| o.decode = Decode::Cpu), None);
        assert_eq!(with(&|o| o.gpus = 2), None);
        assert_eq!(with(&|o| o.input = None), None);
        // Auto: a folder that does not open, or holds no JPEG, decodes on the CPU.
        assert_eq!(with(&|o| o.decode = Decode::Auto), None);
    }

    /// `--exchange` asks for more than one GPU, peer copies for two and no SMs kept for NCCL;
    /// each refusal names the argument.
    #[test]
    fn an_exchange_that_cannot_serve_the_run_is_refused_by_name() {
        let check = |f: &dyn Fn(&mut Options)| {
            let mut o = Options::default();
            f(&mut o);
            validate(&o).err().map(|e| e.to_string())
        };
        assert_eq!(check(&|_| {}), None);
        let e = check(&|o| o.exchange = Exchange::AllReduce).unwrap();
        assert!(e.contains("exchange") && e.contains("--gpus 2"), "{e}");
        for updates in [Updates::InOrder, Updates::InForward] {
            let e = check(&|o| o.updates = updates).unwrap();
            assert!(e.contains("updates") && e.contains("--gpus 2"), "{e}");
            assert_eq!(
                check(&|o| {
                    o.gpus = 2;
                    o.updates = updates;
                }),
                None
            );
        }
        for gpus in [2, 3] {
            let r = check(&|o| {
                o.gpus = gpus;
                o.exchange = Exchange::PeerCopies;
            });
            match gpus {
                2 => assert_eq!(r, None),
                _ => {
                    let e = r.unwrap();
                    assert!(
                        e.contains("serves two GPUs") && e.contains("2 times"),
                        "{e}"
                    );
                }
            }
        }
        let e = check(&|o| {
            o.gpus = 2;
            o.exchange = Exchange::PeerCopies;
            o.comm_sms = 8;
        })
        .unwrap();
        assert!(
            e.contains("comm-sms") && e.contains("peer copies use none"),
            "{e}"
        );
        assert_eq!(
            check(&|o| {
                o.gpus = 2;
                o.exchange = Exchange::AllReduce;
                o.comm_sms = 8;
            }),
            None
        );
    }

    #[test]
    fn decoding_on_the_gpu_has_a_lane_and_a_stream_of_its_own() {
        for decode in [false, true] {
            let spec = spec(Some("extra"), decode);
            let lanes = lane_streams(decode, true);
            assert_eq!(lanes.len(), spec.lanes.len());
            assert!(lane_streams(decode, false).iter().all(|&s| s == 0));
            let first = &spec.stages[0];
            assert_eq!(first.name, first_stage(decode));
            let lane = &spec.lanes[first.lane];
            assert_eq!(lane, if decode { "decode" } else { "transform" });
            // Each lane on its own stream, the decode lane on the pool's third.
            assert_eq!(lanes[first.lane], if decode { 2 } else { 0 });
            spec.plan().unwrap();
        }
    }
}
