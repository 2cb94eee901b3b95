//! Seed 003's encoder-decoder split over two GPUs (pipeline-parallel): the frozen encoder on
//! GPU 0, the trainable decoder on GPU 1, every batch's features copied from one to the other
//! (peer to peer, over NVLink or PCIe, where the two can reach each other's memory) into a
//! ring of slots on each side. Each GPU is driven by a host thread of its own; the arrival
//! slots pass between the two threads, so that neither host waits for a device: the buffers'
//! tracking orders each copy after the encoding it reads and after the decoder step that last
//! read its slot, and each decoder step after its copy.
//!
//! The report sets the two GPUs against the one-GPU pipeline (the encoder and the decoder on
//! two streams of one GPU), timed in the same command, with the time each stage takes alone:
//! two GPUs can at best take the longer stage per step, so the speed-up reaches 2x only where
//! the stages are balanced. The check: the last batch's features as the decoder received them
//! against the f64 encoder, and the decoder's weights after the last step against the f64 step
//! on those features.

use super::{check_last, reset, spec, Options, Setup, DATA, DEPTH};
use crate::gpus::{open_peers, report_against_one, together, wall_ms, Job};
use crate::{per_step_us, recorded, Check, Common, Report};
use cudarc::driver::CudaStream;
use std::sync::mpsc;
use std::time::Instant;
use streamline::engine::memory::peer;
use streamline::engine::pool::StreamSpec;
use streamline::engine::{DeviceBuffer, OpKind, Recorder, StreamPool, Timeline};
use streamline::error::{Error, Result};
use streamline::ops::matmul::{sgemm, Gemm, Kernel};
use streamline::ops::train::relu;
use streamline::Gpu;

/// One GPU of the two and its pool (two lanes).
struct Side<'g> {
    gpu: &'g Gpu,
    pool: StreamPool,
}

/// Runs `steps` of the split pipeline over batches `range`, each GPU's work queued by a thread
/// of its own, and waits for both.
///
/// `arrivals` (on the decoder's GPU) circulate between the threads, each slot with its index:
/// the encoder's thread takes a free one, queues the copy of its features into it and passes
/// it on; the decoder's thread queues its step on it and gives it back. Step `i` uses slot
/// `i % DEPTH`. A thread that stops early (an error) drops its ends of the ring; the other
/// then stops as well, and the first one's error is the run's.
fn split_steps(
    enc: &Side,
    dec: &Side,
    su: &mut Setup,
    arrivals: &mut Vec<DeviceBuffer<f32>>,
    o: &Options,
    range: std::ops::Range<usize>,
    recorders: Option<(&mut Recorder, &mut Recorder)>,
) -> Result<()> {
    let Setup {
        batch,
        x,
        we,
        pre,
        feat,
        t,
        decoder,
        ..
    } = su;
    let batch = *batch;
    let (give, free) = mpsc::channel();
    let (pass, filled) = mpsc::channel::<(usize, DeviceBuffer<f32>)>();
    let mut slots: Vec<_> = arrivals.drain(..).enumerate().collect();
    slots.rotate_left(range.start % DEPTH);
    for slot in slots {
        // The receiver is alive: it is `free`, below.
        let _ = give.send(slot);
    }
    let steps = range.clone();
    let (mut enc_rec, mut dec_rec) = recorders.unzip();
    let encode = move || -> Result<()> {
        let (s, send) = (enc.pool.stream(0)?, enc.pool.stream(1)?);
        let land = dec.pool.stream(0)?;
        for i in steps {
            let (k, slot) = (i % DATA, i % DEPTH);
            let g = Gemm::dense(batch, o.features, o.inputs);
            timed(&mut enc_rec, (0, s), ("encode", OpKind::Compute), i, || {
                sgemm(enc.gpu, s, Kernel::Auto, &g, &x[k], we, &mut pre[slot])?;
                relu(enc.gpu, s, &pre[slot], &mut feat[slot])
            })?;
            let Ok((n, mut arrival)) = free.recv() else {
                return Ok(());
            };
            // The send stream follows the encoding now (as the copy would), so that a recorded
            // copy's time is the copy's, not the wait for its features.
            enc.pool.wait_stream(1, 0)?;
            timed(&mut enc_rec, (1, send), ("copy", OpKind::D2D), i, || {
                peer(send, &feat[slot], land, &mut arrival)
            })?;
            if pass.send((n, arrival)).is_err() {
                return Ok(());
            }
        }
        // Every slot back, once the decoder's thread has queued its last step.
        let mut back: Vec<_> = (0..DEPTH).map_while(|_| free.recv().ok()).collect();
        back.sort_by_key(|(n, _)| *n);
        arrivals.extend(back.into_iter().map(|(_, b)| b));
        enc.pool.synchronize()
    };
    let train = move || -> Result<()> {
        let s = dec.pool.stream(1)?;
        for i in range {
            let Ok((n, arrival)) = filled.recv() else {
                return Ok(());
            };
            timed(
                &mut dec_rec,
                (1, s),
                ("train step", OpKind::Compute),
                i,
                || decoder.step(dec.gpu, s, &arrival, &t[i % DATA]),
            )?;
            if give.send((n, arrival)).is_err() {
                return Ok(());
            }
        }
        dec.pool.synchronize()
    };
    together(&[], vec![Box::new(encode) as Job, Box::new(train) as Job])
}

/// Runs `work` (queued on `stream`) as operation `name` of step `i` on track `track`, under
/// `rec` where the run is recorded.
fn timed(
    rec: &mut Option<&mut Recorder>,
    (track, stream): (usize, &CudaStream),
    (name, kind): (&str, OpKind),
    i: usize,
    work: impl FnOnce() -> Result<()>,
) -> Result<()> {
    match rec {
        Some(r) => r.op(track, stream, name, kind, Some(i), work),
        None => work(),
    }
}

/// One run of the split pipeline recorded on both GPUs, as one timeline: each GPU's recording
/// begins while both are idle, GPU 1's shifted by the host time between the two beginnings.
fn record(
    (enc, dec): (&Side, &Side),
    su: &mut Setup,
    arrivals: &mut Vec<DeviceBuffer<f32>>,
    o: &Options,
) -> Result<Timeline> {
    let steps = o.train.steps;
    let mut er = Recorder::for_pool(&enc.pool, 2 * steps)?;
    let mut dr = Recorder::for_pool(&dec.pool, steps)?;
    enc.pool.synchronize()?;
    dec.pool.synchronize()?;
    let t0 = Instant::now();
    er.begin(enc.pool.stream(0)?)?;
    dr.begin(dec.pool.stream(1)?)?;
    let offset_us = t0.elapsed().as_secs_f64() * 1e6;
    split_steps(
        enc,
        dec,
        su,
        arrivals,
        o,
        0..steps,
        Some((&mut er, &mut dr)),
    )?;
    Ok(Timeline::of_devices(vec![
        (format!("GPU {}", enc.gpu.info().ordinal), er.finish()?, 0.0),
        (
            format!("GPU {}", dec.gpu.info().ordinal),
            dr.finish()?,
            offset_us,
        ),
    ]))
}

/// A ring of `DEPTH` feature buffers on the decoder's GPU, where the features arrive.
fn arrivals(dec: &Side, su: &Setup, o: &Options) -> Result<Vec<DeviceBuffer<f32>>> {
    (0..DEPTH)
        .map(|_| DeviceBuffer::zeros(&dec.pool, 0, su.batch * o.features))
        .collect()
}

/// Runs `encoder-decoder --gpus 2` on devices 0 and 1 (`gpu` is device 0).
pub(super) fn run(gpu: &Gpu, common: &Common, o: &Options) -> Result<Report> {
    let other = open_peers(gpu, 2)?.remove(0);
    let direct = gpu.enable_peer_access(&other)?;
    let lanes = |a: &str, b: &str| [StreamSpec::new(a), StreamSpec::new(b)];
    let enc = Side {
        gpu,
        pool: StreamPool::new(gpu, &lanes("encoder", "send"))?,
    };
    let dec = Side {
        gpu: &other,
        pool: StreamPool::new(&other, &lanes("receive", "decoder"))?,
    };
    let plan = spec().plan()?;
    let one = StreamPool::named(gpu, &plan.spec().lanes)?;
    let steps = o.train.steps;
    let (headline, smallest) = o.train.headline_and_smallest();
    let mut table = vec![[
        "batch",
        "encoder µs",
        "decoder µs",
        "one GPU steps/s",
        "two GPUs steps/s",
        "speed-up",
        "bound by the longer stage",
    ]
    .map(String::from)
    .to_vec()];
    let (mut head, mut check, mut balance) = ((0.0, 0.0), Check::default(), (0.0, 0.0));
    let mut timeline = Timeline::default();
    for (i, &batch) in o.train.batches.iter().enumerate() {
        let seed = common.seed + 100 * i as u64;
        // One GPU, the two stages on two streams: the baseline of this command, timed on the
        // host as the two GPUs are, and each stage's own time from a serial recorded run
        // (nothing overlaps it there).
        let (piped, enc_us, dec_us) = {
            let mut su = Setup::new(&one, &one, o, batch, seed)?;
            let piped = wall_ms(common.reps, || {
                plan.run(&one, &[0, 1], 0..steps, None, |c| su.stage(gpu, o, c))?;
                one.synchronize()
            })? / steps as f64;
            let alone = recorded(&one, 2 * steps, |rec| {
                plan.run(&one, &[0, 0], 0..steps, Some(rec), |c| su.stage(gpu, o, c))
            })?;
            one.synchronize()?;
            (
                piped,
                per_step_us(&alone, "encode", steps),
                per_step_us(&alone, "train step", steps),
            )
        };
        let mut su = Setup::new(&enc.pool, &dec.pool, o, batch, seed)?;
        let mut received = arrivals(&dec, &su, o)?;
        let two = wall_ms(common.reps, || {
            split_steps(&enc, &dec, &mut su, &mut received, o, 0..steps, None)
        })? / steps as f64;
        // The best two GPUs can do: the longer stage per step.
        let bound = enc_us.max(dec_us) / 1e3;
        table.push(vec![
            batch.to_string(),
            format!("{enc_us:.1}"),
            format!("{dec_us:.1}"),
            format!("{:.1}", 1e3 / piped),
            format!("{:.1}", 1e3 / two),
            format!("{:.2}x", piped / two),
            format!("{:.0}%", 100.0 * bound / two),
        ]);
        if batch == headline {
            head = (piped, two);
            balance = (enc_us, dec_us);
            timeline = record((&enc, &dec), &mut su, &mut received, o)?;
        }
        if batch == smallest && check.compared == 0 {
            check = verify(&enc, &dec, &mut su, &mut received, o, common)?;
        }
    }
    let (piped, two) = head;
    let (e, d) = balance;
    let notes = vec![
        format!(
            "batch {headline}: one GPU {piped:.3} ms per step (both stages on two streams), two GPUs {two:.3} ms: {:.2}x; the stages take {e:.0} and {d:.0} µs alone, so two GPUs can at best take {:.0} µs per step ({:.2}x the one-GPU pipeline): the speed-up nears 2x only where the stages are balanced and each fills its GPU",
            piped / two,
            e.max(d),
            piped * 1e3 / e.max(d)
        ),
        format!("checked at batch {smallest}: the features of the last batch as the decoder's GPU received them against the f64 encoder, and the decoder's weights after the last step against the f64 step on those features"),
    ];
    let mut report = report_against_one(
        "encoder-decoder",
        format!(
            "seed 003 over two GPUs ({}): the frozen encoder relu(x We) ({} -> {}) on device 0, the decoder MLP ({} -> {} -> {}, ReLU, MSE, SGD) training on device 1, every batch's features copied from one to the other ({}) into a ring of {DEPTH} on each side; {steps} steps per run; one GPU with both stages on two streams timed in the same command",
            gpu.info().name,
            o.inputs,
            o.features,
            o.features,
            o.train.hidden,
            o.train.classes,
            if direct {
                "peer to peer"
            } else {
                "staged through host memory by the driver: the two cannot reach each other's memory"
            },
        ),
        (piped, two),
        [
            "one GPU, encoder and decoder on two streams",
            "two GPUs, encoder on one, decoder on the other",
        ],
        table,
        check,
        notes,
    );
    report.metrics = timeline.metrics();
    report.timeline = timeline;
    Ok(report)
}

/// Runs the split pipeline from the initial weights and checks its last step.
fn verify(
    enc: &Side,
    dec: &Side,
    su: &mut Setup,
    received: &mut Vec<DeviceBuffer<f32>>,
    o: &Options,
    common: &Common,
) -> Result<Check> {
    let s = dec.pool.stream(1)?;
    reset(su, s)?;
    let last = o.train.steps - 1;
    split_steps(enc, dec, su, received, o, 0..last, None)?;
    let w1 = su.decoder.w1_to_vec(s)?;
    let w2 = su.decoder.w2.to_vec(s)?;
    split_steps(enc, dec, su, received, o, last..o.train.steps, None)?;
    let w1n = su.decoder.w1_to_vec(s)?;
    let w2n = su.decoder.w2.to_vec(s)?;
    let feat = received
        .get(last % DEPTH)
        .ok_or_else(|| Error::Interrupted("the ring of arrivals came back short".into()))?
        .to_vec(s)?;
    Ok(check_last(su, o, common, &feat, (&w1, &w2), (&w1n, &w2n)))
}
