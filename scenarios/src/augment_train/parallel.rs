//! Seed 003 data-parallel: N GPUs each train on their own batch of the batch size (part of a
//! global batch N times as large), every GPU with its own stream pool (transform, model,
//! communication, update and receive streams), feed and model, driven by a host thread of its
//! own. The gradients are averaged over the GPUs from the communication stream, by NCCL's
//! all-reduce or, on two GPUs, by peer copies averaged in the update ([`super::exchange`]),
//! `dL/dW2` while `dL/dW1` is computed and `dL/dW1` bucket by bucket as each is computed (in
//! f32, or rounded to bf16 to halve the bytes); each bucket of `W1` is updated on the update
//! stream as soon as its gradient has arrived (or, `--updates in-order`, on the model stream
//! just before the next step's product that reads it; `in-forward`, inside that product), and
//! the next step's forward takes the buckets in the same order, so that it starts while later
//! buckets travel. Every GPU applies
//! the same update; the next batch's augmentation runs meanwhile.
//!
//! The report sets N GPUs against one GPU with the same batch, timed in the same command, both
//! the one-GPU pipeline and the data-parallel step on a world of one GPU (the same step with
//! nothing to exchange, so the difference is the communication's): steps/s, images/s, the
//! scaling efficiency, and how much of the gradients' exchange the step hides. The N
//! GPUs also run side by side with nothing to exchange (each a world of one), which sets
//! apart what running N at once costs besides the communication (the host's threads, memory
//! and links, shared); one step's moments on GPU 0's streams show where the time goes, and a
//! recorded run shows every GPU's stages in one timeline. The
//! check: the weights bit-identical on every GPU, and the last step against the f64 reference
//! of one SGD step on the global batch (what one GPU would compute from all N parts), within
//! the bound of the type the gradient travelled in.
//!
//! With `--comm-sms`, each GPU is opened a second time with some SMs kept free of the step's
//! kernels (a green context), while its communicator queues NCCL's kernels on a stream of the
//! primary context ([`Comm::with_kernel_stream`]); the one-GPU pipeline keeps every SM.

use crate::gpus::{open_peers, report_against_one, together, wall_ms, Job};
use crate::{check_mlp_weights, sample_indices, Check, Common, Report};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use streamline::engine::pool::StreamSpec;
use streamline::engine::{Plan, Recorder, StreamPool, Timeline};
use streamline::error::{Error, Result};
use streamline::multi::{Batch, Comm, DEFAULT_TIMEOUT};
use streamline::Gpu;
use streamline_testing::reference::train::{self as reference, mlp_step_exchanged, Mlp};

use super::exchange::{peers_pair, Exchange};
use super::feed::{Setup, Shard};
use super::model::{bucket_spans, GradDtype, Reduce, StepTrace, Updates};
use super::*;

/// One GPU's part of the run.
struct Member<'g> {
    gpu: &'g Gpu,
    pool: Arc<StreamPool>,
    comm: Arc<Comm>,
}

/// The pool of one GPU: transform, model, communication, update and receive streams (the
/// last where the other GPU's copies land).
fn pool(gpu: &Gpu) -> Result<StreamPool> {
    StreamPool::new(
        gpu,
        &[
            StreamSpec::new("transform"),
            StreamSpec::new("model"),
            StreamSpec::new("comm"),
            StreamSpec::new("update"),
            StreamSpec::new("receive"),
        ],
    )
}

/// The pool lane the other GPU's copies land on.
const RECEIVE: usize = 4;

impl Member<'_> {
    /// Where this GPU's part of a data-parallel step reduces and applies its gradients.
    fn reduce(&self, updates: Updates) -> Result<Reduce> {
        Ok(Reduce {
            comm: self.comm.clone(),
            stream: self.pool.stream(2)?.clone(),
            update: self.pool.stream(3)?.clone(),
            peers: None,
            updates,
        })
    }

    /// Queues the updates of `su`'s last step still owed, then waits until this GPU's queued
    /// work is done: its collectives (checked for NCCL's errors and its timeout), then every
    /// stream of its pool.
    fn settle(&self, su: &mut Setup) -> Result<()> {
        let model = self.pool.stream(1)?;
        su.model.pay_owed(self.gpu, model, su.reduce.as_ref())?;
        self.comm.synchronize(self.pool.stream(2)?)?;
        self.pool.synchronize()
    }

    /// A setup of batch `batch` for shard `index` of `count`, its step reducing over `comm`.
    fn setup(
        &self,
        o: &Options,
        batch: usize,
        seed: u64,
        index: usize,
        count: usize,
    ) -> Result<Setup> {
        let shard = Shard {
            index,
            count,
            exchange: true,
        };
        let mut su = Setup::for_shard(&self.pool, o, batch, seed, None, shard, None)?;
        su.reduce = Some(self.reduce(o.updates)?);
        Ok(su)
    }
}

/// Runs `f(member, setup)` on a thread per GPU, all starting together; the first error wins.
fn on_every_gpu(
    members: &[Member],
    setups: &mut [Setup],
    f: impl Fn(&Member, &mut Setup) -> Result<()> + Sync,
) -> Result<()> {
    let comms: Vec<&Comm> = members.iter().map(|m| &*m.comm).collect();
    let f = &f;
    let jobs = members
        .iter()
        .zip(setups.iter_mut())
        .map(|(m, su)| Box::new(move || f(m, su)) as Job)
        .collect();
    together(&comms, jobs)
}

/// `steps` steps of the pipelined run on one GPU, waited for.
fn steps_on(m: &Member, su: &mut Setup, plan: &Plan, steps: usize) -> Result<()> {
    su.last_loader = su.run(m.gpu, &m.pool, plan, &[0, 1], None, &mut None, steps)?;
    m.settle(su)
}

/// Runs seed 003 data-parallel on devices `0..o.gpus` (`gpu` is device 0).
pub fn run_parallel(gpu: &Gpu, common: &Common, o: &Options) -> Result<Report> {
    validate(o)?;
    let n = o.gpus;
    let others = open_peers(gpu, n)?;
    let gpus: Vec<&Gpu> = std::iter::once(gpu).chain(others.iter()).collect();
    // With SMs left to NCCL, each device opened again for the step, on the other SMs; the
    // communicators stay on the devices' primary contexts, their kernels on a stream there.
    let split: Vec<Gpu> = if o.comm_sms > 0 {
        gpus.iter()
            .map(|g| {
                Gpu::with_side_sms(g.info().ordinal, None, o.comm_sms)
                    .map_err(|e| Error::arg("comm-sms", e.to_string()))
            })
            .collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    let step_gpus: Vec<&Gpu> = if split.is_empty() {
        gpus.clone()
    } else {
        split.iter().collect()
    };
    // Peer copies: asked for, or where two GPUs reach each other directly and no SMs are kept
    // for NCCL.
    let direct = n == 2
        && o.exchange != Exchange::AllReduce
        && o.comm_sms == 0
        && gpus[0].enable_peer_access(gpus[1])?;
    let by_copies = match o.exchange {
        Exchange::PeerCopies => true,
        Exchange::AllReduce => false,
        Exchange::Auto => direct,
    };
    // The options with the buckets that suit the exchange, where not given.
    let o = &Options {
        buckets: Some(o.buckets.unwrap_or(if by_copies {
            PEER_COPY_BUCKETS
        } else {
            ALL_REDUCE_BUCKETS
        })),
        ..o.clone()
    };
    let comm_of = |c: Comm, plain: &Gpu| -> Result<Arc<Comm>> {
        Ok(Arc::new(if o.comm_sms > 0 {
            c.with_kernel_stream(plain.new_stream()?)?
        } else {
            c
        }))
    };
    let alone_comm =
        |plain: &Gpu| comm_of(Comm::local(&[plain], DEFAULT_TIMEOUT)?.remove(0), plain);
    let comms = Comm::local(&gpus, DEFAULT_TIMEOUT)?;
    let single = vec![Member {
        gpu: step_gpus[0],
        pool: Arc::new(pool(step_gpus[0])?),
        comm: alone_comm(gpu)?,
    }];
    let members = step_gpus
        .iter()
        .zip(comms)
        .zip(&gpus)
        .map(|((g, c), plain)| {
            Ok(Member {
                gpu: g,
                pool: Arc::new(pool(g)?),
                comm: comm_of(c, plain)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // The same GPUs and streams, each a world of one: side by side with nothing to all-reduce.
    let apart = members
        .iter()
        .zip(&gpus)
        .map(|(m, plain)| {
            Ok(Member {
                gpu: m.gpu,
                pool: m.pool.clone(),
                comm: alone_comm(plain)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // One GPU with every SM: the baseline.
    let base = pool(gpu)?;

    let plan = spec(None, false).plan()?;
    let steps = o.train.steps;
    let mut table = vec![[
        "batch per GPU",
        "GPUs",
        "steps/s",
        "images/s",
        "scaling efficiency",
        "gradient exchange alone ms",
        "exchange hidden",
    ]
    .map(String::from)
    .to_vec()];
    let mut check = Check::default();
    let mut head = (0.0, 0.0);
    let mut verified = false;
    let mut skipped = std::collections::BTreeSet::new();
    let (headline, smallest) = o.train.headline_and_smallest();
    let mut traces = [String::new(), String::new()];
    let mut host_ms = (Vec::new(), 0.0, 0.0);
    let mut timeline = Timeline::default();
    for (i, &batch) in o.train.batches.iter().enumerate() {
        let seed = common.seed + 100 * i as u64;
        // One GPU, the same batch: the baseline of this command.
        let one = {
            let mut su = Setup::new(&base, o, batch, seed, None, None)?;
            wall_ms(common.reps, || {
                su.run(gpu, &base, &plan, &[0, 1], None, &mut None, steps)?;
                base.synchronize()
            })? / steps as f64
        };
        // The data-parallel step on a world of one GPU: what the step costs without a peer.
        let alone = {
            let m = &single[0];
            let mut su = [m.setup(o, batch, seed, 0, 1)?];
            let ms = wall_ms(common.reps, || {
                on_every_gpu(&single, &mut su, |m, su| steps_on(m, su, &plan, steps))
            })? / steps as f64;
            if batch == headline {
                traces[0] = traced(&single, &mut su, &plan, steps)?;
            }
            ms
        };
        let mut setups = members
            .iter()
            .enumerate()
            .map(|(g, m)| m.setup(o, batch, seed, g, n))
            .collect::<Result<Vec<_>>>()?;
        if by_copies {
            attach_peers(&members, &mut setups, o)?;
        }
        let many = wall_ms(common.reps, || {
            on_every_gpu(&members, &mut setups, |m, su| steps_on(m, su, &plan, steps))
        })? / steps as f64;
        if batch == headline {
            // GPU 0's thread's time in the calls that queue a step's work, of the last run, per
            // stage, and in the loader waiting for batches.
            let per_step = |d: std::time::Duration| d.as_secs_f64() * 1e3 / steps as f64;
            let per_stage: Vec<f64> = setups[0].host.iter().map(|&d| per_step(d)).collect();
            let waited = per_step(setups[0].last_loader.starved);
            traces[1] = traced(&members, &mut setups, &plan, steps)?;
            timeline = record(&members, &mut setups, &plan, steps.min(64))?;
            host_ms = (per_stage, many, waited);
        }
        let comm_ms = exchange_alone(&members, &mut setups, common.reps)?;
        same_weights(&members, &setups, &mut check)?;
        if batch == smallest && !verified {
            let s = steps.clamp(2, 4 * DEPTH);
            verify(
                &members,
                &mut setups,
                &plan,
                common,
                s,
                o.grad_dtype,
                &mut check,
            )?;
            verified = true;
        }
        // Last, as the GPUs' weights part ways: the same setups, each GPU a world of one.
        for (m, su) in apart.iter().zip(setups.iter_mut()) {
            su.reduce = Some(m.reduce(o.updates)?);
        }
        let side_by_side = wall_ms(common.reps, || {
            on_every_gpu(&apart, &mut setups, |m, su| steps_on(m, su, &plan, steps))
        })? / steps as f64;
        let efficiency = one / many;
        let hidden = (1.0 - (many - one) / comm_ms).clamp(0.0, 1.0);
        let row = |g: usize, ms: f64, eff: String, (alone, hid): (String, String)| {
            vec![
                batch.to_string(),
                g.to_string(),
                format!("{:.1}", 1e3 / ms),
                format!("{:.0}", 1e3 / ms * (g * batch) as f64),
                eff,
                alone,
                hid,
            ]
        };
        let none = || ("-".to_string(), "-".to_string());
        table.push(row(1, one, "1.00".into(), none()));
        table.push(row(
            1,
            alone,
            format!("{:.3} (world of one)", one / alone),
            none(),
        ));
        table.push(row(
            n,
            side_by_side,
            format!(
                "{:.3} (side by side, nothing exchanged)",
                one / side_by_side
            ),
            none(),
        ));
        table.push(row(
            n,
            many,
            format!("{efficiency:.3}"),
            (format!("{comm_ms:.3}"), format!("{:.0}%", 100.0 * hidden)),
        ));
        if batch == headline {
            head = (one, many);
        }
        skipped.extend(setups.iter().flat_map(|su| su.source.skipped()));
    }
    let (one, many) = head;
    let mut notes = vec![
        format!(
            "batch {headline} per GPU: one GPU {one:.2} ms per step, {n} GPUs {many:.2} ms per step (of {n} batches): {:.2}x the images per second, scaling efficiency {:.3}",
            n as f64 * one / many,
            one / many
        ),
        "the last step of the smallest batch is checked against the f64 reference of one SGD step on the global batch (all GPUs' parts), and the weights bit for bit across GPUs after every batch size".into(),
    ];
    let stages = super::run::per_stage(&plan, &host_ms.0, |ms| format!("{ms:.3}"));
    notes.push(format!(
        "GPU 0's thread spent {:.2} ms per data-parallel step (of {:.2}) in the calls that queue the step's copies, kernels and exchanges (ms per stage: {}; of them {:.3} ms waiting for the loader's batch)",
        host_ms.0.iter().sum::<f64>(),
        host_ms.1,
        stages,
        host_ms.2
    ));
    if let Some(sp) = split.first().and_then(|g| g.split()) {
        notes.push(format!(
            "the data-parallel steps' kernels ran on {} of each GPU's {} SMs (a green context), keeping {} free for NCCL's kernels, queued on a stream of the device's primary context (which may also use the others); the one-GPU pipeline had every SM",
            sp.engine_sms,
            sp.engine_sms + sp.side_sms,
            sp.side_sms
        ));
    }
    for (trace, world) in traces
        .iter()
        .zip(["a world of one", "the data-parallel run"])
    {
        if !trace.is_empty() {
            notes.push(format!(
                "one step of GPU 0 in {world} at batch {headline}, ms from its start to each moment its streams reached, and when GPU 0's thread queued it (model stream: after each product; communication stream: reaching each all-reduce or copy, its earlier work done, and after it; each bucket updated, on the update stream, or, with the updates in order, on the model stream by the last step's gradient): {trace}"
            ));
        }
    }
    notes.extend(skipped_note(&skipped));
    let w1_bytes = match o.grad_dtype {
        GradDtype::F32 => 4,
        GradDtype::Bf16 => 2,
    } * CHANNELS
        * o.size
        * o.size
        * o.train.hidden;
    let gradient_bytes = w1_bytes + 4 * o.train.hidden * o.train.classes;
    let buckets = bucket_spans(
        CHANNELS * o.size * o.size,
        o.buckets.unwrap_or(ALL_REDUCE_BUCKETS),
    )
    .count();
    let mut report = report_against_one(
        "augment-train",
        format!(
            "seed 003 data-parallel on {n} GPUs ({}): each GPU augments its own batch of uint8 3x{s}x{s} on its transform stream while its model stream trains the 2-layer MLP ({} -> {} -> {}) on the previous one; the {:.0} MiB of gradients ({}) are averaged {} from a communication stream ({} buckets of W1's, each as soon as computed, and applied {}); {steps} steps per run; one GPU with the same batch timed in the same command, in the one-GPU pipeline and in the data-parallel step on a world of one (nothing to exchange)",
            gpus[0].info().name,
            CHANNELS * o.size * o.size,
            o.train.hidden,
            o.train.classes,
            gradient_bytes as f64 / (1u64 << 20) as f64,
            match o.grad_dtype {
                GradDtype::F32 => "f32",
                GradDtype::Bf16 => "W1's in bf16",
            },
            match (by_copies, direct) {
                (false, _) => "by NCCL's all-reduce",
                (true, true) => "by peer copies (the copy engines, over the GPUs' direct link), each GPU taking the mean of its own and the other's in its update",
                (true, false) => "by peer copies, staged through host memory by the driver (the two GPUs cannot reach each other's memory), each GPU taking the mean of its own and the other's in its update",
            },
            buckets,
            match o.updates {
                Updates::Beside => "on an update stream as each arrives",
                Updates::InOrder =>
                    "on the model stream, each just before the next step's product that reads it",
                Updates::InForward =>
                    "inside the next step's product that reads it, as it reads each weight, where that product can take it (else just before it)",
            },
            s = o.size
        ),
        (one * n as f64, many),
        ["one GPU, N batches one after another", "N GPUs side by side"],
        table,
        check,
        notes,
    );
    report.metrics = timeline.metrics();
    report.timeline = timeline;
    Ok(report)
}

/// One run of `steps` steps recorded on every GPU, as one timeline: each GPU's recording begins
/// while all are idle, each shifted by the host time between its beginning and GPU 0's.
fn record(members: &[Member], setups: &mut [Setup], plan: &Plan, steps: usize) -> Result<Timeline> {
    let mut recs = members
        .iter()
        .map(|m| Recorder::for_pool(&m.pool, 3 * steps))
        .collect::<Result<Vec<_>>>()?;
    for m in members {
        m.pool.synchronize()?;
    }
    let t0 = Instant::now();
    let mut offsets = Vec::with_capacity(members.len());
    for (m, rec) in members.iter().zip(recs.iter_mut()) {
        offsets.push(t0.elapsed().as_secs_f64() * 1e6);
        rec.begin(m.pool.stream(1)?)?;
    }
    let recs: Vec<Mutex<Recorder>> = recs.into_iter().map(Mutex::new).collect();
    on_every_gpu(members, setups, |m, su| {
        let mut rec = recs[m.comm.rank()]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        su.hosted = true;
        su.loader().start(steps)?;
        plan.run(&m.pool, &[0, 1], 0..steps, Some(&mut rec), |c| {
            su.stage(m.gpu, &mut None, c)
        })?;
        m.settle(su)?;
        su.loader().finish().map(|_| ())
    })?;
    let parts = recs
        .into_iter()
        .zip(members)
        .zip(offsets)
        .map(|((rec, m), offset)| {
            let rec = rec.into_inner().unwrap_or_else(|e| e.into_inner());
            Ok((
                format!("GPU {}", m.gpu.info().ordinal),
                rec.finish()?,
                offset,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Timeline::of_devices(parts))
}

/// One more run of `steps` steps with the middle one's moments recorded on GPU 0's streams,
/// as `what ms` items.
fn traced(members: &[Member], setups: &mut [Setup], plan: &Plan, steps: usize) -> Result<String> {
    setups[0].model.trace = Some(StepTrace::after(steps / 2));
    on_every_gpu(members, setups, |m, su| steps_on(m, su, plan, steps))?;
    let Some(t) = setups[0].model.trace.take() else {
        return Ok(String::new());
    };
    Ok(t.times()?
        .iter()
        .map(|(what, ms, host)| match host {
            Some(h) => format!("{what} {ms:.3} (queued {h:.3})"),
            None => format!("{what} {ms:.3}"),
        })
        .collect::<Vec<_>>()
        .join(", "))
}

/// Median ms of the gradients' exchange alone (every bucket and `dL/dW2`: all-reduces, or the
/// copies both ways), as a step queues it, with nothing else running.
fn exchange_alone(members: &[Member], setups: &mut [Setup], reps: usize) -> Result<f64> {
    let by_copies = setups
        .iter()
        .any(|su| su.reduce.as_ref().is_some_and(|r| r.peers.is_some()));
    wall_ms(reps, || {
        if by_copies {
            for (m, su) in members.iter().zip(setups.iter()) {
                if let Some(p) = su.reduce.as_ref().and_then(|r| r.peers.as_ref()) {
                    su.model.send_gradients(p, m.pool.stream(2)?)?;
                }
            }
            for su in setups.iter() {
                if let Some(p) = su.reduce.as_ref().and_then(|r| r.peers.as_ref()) {
                    su.model.drop_received(p)?;
                }
            }
            return members.iter().try_for_each(|m| m.pool.synchronize());
        }
        let mut batch = Batch::new();
        for (m, su) in members.iter().zip(setups.iter_mut()) {
            su.model
                .all_reduce_gradients(&mut batch, &m.comm, m.pool.stream(2)?)?;
        }
        batch.run()?;
        for m in members {
            m.comm.synchronize(m.pool.stream(2)?)?;
        }
        Ok(())
    })
}

/// Gives the two GPUs' setups their ends of the peer copies of their gradients.
fn attach_peers(members: &[Member], setups: &mut [Setup], o: &Options) -> Result<()> {
    let [a, b] = members else {
        return Err(Error::arg(
            "exchange",
            format!("peer copies serve two GPUs, not {}", members.len()),
        ));
    };
    let m = setups[0].model.m;
    let (pa, pb) = peers_pair(
        (&a.pool, RECEIVE, &a.comm),
        (&b.pool, RECEIVE, &b.comm),
        &m,
        o.buckets.unwrap_or(PEER_COPY_BUCKETS),
        o.grad_dtype,
    )?;
    for (su, p) in setups.iter_mut().zip([pa, pb]) {
        if let Some(r) = su.reduce.as_mut() {
            r.peers = Some(p);
        }
    }
    Ok(())
}

/// Compares every GPU's weights with GPU 0's, bit for bit.
fn same_weights(members: &[Member], setups: &[Setup], check: &mut Check) -> Result<()> {
    let read = |m: &Member, su: &Setup| -> Result<Vec<f32>> {
        let s = m.pool.stream(1)?;
        let mut w = su.model.w1_to_vec(s)?;
        w.extend(su.model.w2.to_vec(s)?);
        Ok(w)
    };
    let first = read(&members[0], &setups[0])?;
    for (m, su) in members.iter().zip(setups).skip(1) {
        let w = read(m, su)?;
        let bad = w
            .iter()
            .zip(&first)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        check.add_counts(
            &format!(
                "weights of GPU {} equal GPU 0's bit for bit",
                m.gpu.info().ordinal
            ),
            w.len(),
            bad,
            (0, 0),
        );
    }
    Ok(())
}

/// Runs `steps` steps from the initial weights and checks the last one against the f64 step
/// on the global batch.
fn verify(
    members: &[Member],
    setups: &mut [Setup],
    plan: &Plan,
    common: &Common,
    steps: usize,
    grad: GradDtype,
    check: &mut Check,
) -> Result<()> {
    let last = steps - 1;
    on_every_gpu(members, setups, |m, su| {
        su.reset(&m.pool)?;
        su.hosted = true;
        su.loader().start(steps)?;
        plan.run(&m.pool, &[0, 1], 0..last, None, |c| {
            su.stage(m.gpu, &mut None, c)
        })?;
        m.settle(su)
    })?;
    let s0 = members[0].pool.stream(1)?;
    let w1 = setups[0].model.w1_to_vec(s0)?;
    let w2 = setups[0].model.w2.to_vec(s0)?;
    on_every_gpu(members, setups, |m, su| {
        plan.run(&m.pool, &[0, 1], last..steps, None, |c| {
            su.stage(m.gpu, &mut None, c)
        })?;
        m.settle(su)?;
        su.loader().finish().map(|_| ())
    })?;
    let w1n = setups[0].model.w1_to_vec(s0)?;
    let w2n = setups[0].model.w2.to_vec(s0)?;
    // The global batch: every GPU's augmented part and its targets, in rank order.
    let mut x = Vec::new();
    let mut t = Vec::new();
    for (m, su) in members.iter().zip(setups.iter()) {
        x.extend(su.ring_x[last % DEPTH].to_vec(m.pool.stream(1)?)?);
        let shape = su.augments[0].input_shape();
        let mut nhwc = vec![0u8; shape.len()];
        let mut tt = vec![0f32; su.batch * su.model.m.outputs];
        su.source.fill(last, su.batch, &mut nhwc, &mut tt)?;
        t.extend(tt);
    }
    let m = Mlp {
        batch: setups[0].batch * members.len(),
        ..setups[0].model.m
    };
    let rows = sample_indices(m.inputs, (common.sample / m.hidden).max(2), common.seed);
    let exchange = (grad == GradDtype::Bf16).then_some(reference::Exchange {
        unit: f64::powi(2.0, -8),
        ranks: members.len(),
    });
    let want = mlp_step_exchanged(&m, &x, &t, &w1, &w2, &rows, exchange);
    check_mlp_weights(check, "global-batch ", (&w1n, &w2n), m.hidden, &want);
    Ok(())
}
