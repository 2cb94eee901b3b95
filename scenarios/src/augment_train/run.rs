//! The run: the timed runs of each batch size (serial, pipelined, replayed graph windows, the
//! GPU stages alone) and the report they make.

use crate::{median_ms, per_step_us, recorded, Check, Common, Report, MIB, THROUGHPUT_COLUMNS};
use streamline::engine::{LoaderStats, Plan, StreamPool};
use streamline::error::{Error, Result};
use streamline::Gpu;

use super::check::verify;
use super::feed::{queue, Setup};
use super::report::bottleneck;
use super::*;

/// The timed runs of one batch size: median ms of `steps` steps serial, pipelined and (when
/// asked) pipelined from the graph windows, with the loader's figures of the last pipelined
/// eager run, and
/// pipelined with the GPU stages alone (the copies read the slots as the loader last left
/// them, no loader in the loop).
pub(super) struct Timed {
    pub(super) serial: f64,
    pub(super) piped: f64,
    pub(super) graph: Option<f64>,
    pub(super) gpu_alone: f64,
    pub(super) loader: LoaderStats,
    /// Host time per step the queueing thread spent in each stage's calls, pipelined (µs).
    pub(super) host_us: Vec<f64>,
    /// Host time per step the thread decoding ahead spent decoding, pipelined (µs).
    pub(super) ahead_us: f64,
    /// Of that, per step: reading headers, waiting for its stream, in nvJPEG's calls (µs).
    pub(super) ahead_parts: [f64; 3],
}

pub(super) fn time(
    gpu: &Gpu,
    pool: &StreamPool,
    plan: &Plan,
    su: &mut Setup,
    extra: &mut Option<&mut (dyn Transform + '_)>,
    o: &Options,
    common: &Common,
) -> Result<Timed> {
    let mut loader = LoaderStats::default();
    let decode = su.decode.is_some();
    let serial = median_ms(pool, &[0], common.reps, || {
        su.run(
            gpu,
            pool,
            plan,
            &lane_streams(decode, false),
            None,
            extra,
            o.train.steps,
        )
        .map(|_| ())
    })?;
    let lanes = lane_streams(decode, true);
    let piped = median_ms(pool, &lanes, common.reps, || {
        loader = su.run(gpu, pool, plan, &lanes, None, extra, o.train.steps)?;
        Ok(())
    })?;
    let per_step = 1e6 / o.train.steps as f64;
    let host_us = su.host.iter().map(|d| d.as_secs_f64() * per_step).collect();
    let ahead_us = su.ahead_host.as_secs_f64() * per_step;
    let p = su.ahead_parts;
    let ahead_parts = [p.headers, p.waiting, p.decoding].map(|d| d.as_secs_f64() * per_step);
    su.hosted = false;
    let gpu_alone = median_ms(pool, &lanes, common.reps, || {
        queue(plan, pool, &lanes, o.train.steps, decode, None, |c| {
            su.stage(gpu, extra, c)
        })
    });
    su.hosted = true;
    let gpu_alone = gpu_alone?;
    // nvJPEG's host calls cannot be captured: decoding on the GPU runs eagerly.
    let graph = if common.graph && !decode {
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
        host_us,
        ahead_us,
        ahead_parts,
    })
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
    let (gpu_decode, decode_line) = super::decode::choose(gpu, o)?;
    if o.gpus > 1 {
        if extra.is_some() {
            return Err(Error::arg(
                "gpus",
                "a transform of one's own runs on one GPU: leave --gpus at 1",
            ));
        }
        return super::parallel::run_parallel(gpu, common, o);
    }
    let extra_name = extra.as_ref().map(|t| t.name().to_string());
    let plan = spec(extra_name.as_deref(), gpu_decode).plan()?;
    let extra = &mut extra;
    // Decoding on the GPU, the decode and transform lanes feed the model: their short kernels
    // go ahead of the training step's (the pool clamps the priority to the device's range).
    use streamline::engine::pool::StreamSpec;
    let mut streams = vec![StreamSpec::new("transform"), StreamSpec::new("model")];
    if gpu_decode {
        streams[0] = streams[0].clone().priority(i32::MIN);
        streams.push(StreamSpec::new("decode").priority(i32::MIN));
        streams.push(StreamSpec::new("decode ahead").priority(i32::MIN));
    }
    let pool = StreamPool::new(gpu, &streams)?;
    let lanes = lane_streams(gpu_decode, true);
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
    let mut skipped = std::collections::BTreeSet::new();
    let mut engine: Option<String> = None;
    let mut soak = None;
    for (i, &batch) in o.train.batches.iter().enumerate() {
        let seed = common.seed + 100 * i as u64;
        let mut su = Setup::new(
            &pool,
            o,
            batch,
            seed,
            extra.as_deref_mut(),
            gpu_decode.then_some(gpu),
        )?;
        if batch == headline && timeline.is_none() {
            // Recorded first, so that an interrupted long run still has its trace. The loader
            // fills its slots once; the recorded run then copies them as they are, so that
            // each stage's interval is its device time, with no wait for a batch inside it.
            let fill = 2 * su.window;
            su.run(gpu, &pool, &plan, &lanes, None, extra, fill)?;
            su.hosted = false;
            let t = recorded(&pool, 3 * recorded_steps, |rec| {
                queue(
                    &plan,
                    &pool,
                    &lanes,
                    recorded_steps,
                    gpu_decode,
                    Some(rec),
                    |c| su.stage(gpu, extra, c),
                )
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
            if o.soak > 0 {
                su.sample_every = o.soak.div_ceil(10);
                let ms = crate::timed(&pool, &lanes, || {
                    su.run(gpu, &pool, &plan, &lanes, None, extra, o.soak)
                        .map(|_| ())
                })?;
                soak = Some((ms, std::mem::take(&mut su.footprints)));
                su.sample_every = o.train.steps.div_ceil(10);
            }
        }
        if batch == smallest && check.compared == 0 {
            let steps = o.train.steps.clamp(2, 4 * su.window);
            check = verify(gpu, &pool, &plan, &mut su, extra, common, steps)?;
        }
        skipped.extend(su.source.skipped());
        if let Some(d) = &su.decode {
            engine.get_or_insert_with(|| d.engine.clone());
        }
        pool.synchronize()?;
    }
    let head = head.expect("the headline batch is one of the batches");
    let timeline = timeline.unwrap_or_default();
    let metrics = timeline.metrics();
    let stage_us = |name: &str| per_step_us(&timeline, name, recorded_steps);
    let first = first_stage(gpu_decode);
    let (aug_us, step_us, copy_us) = (stage_us("augment"), stage_us("train step"), stage_us(first));
    // The extra transform, where there is one, runs on the transform stream too; decoding on
    // the GPU runs on a stream of its own.
    let extra_us = extra_name.as_deref().map_or(0.0, stage_us);
    let extra_note = extra_name
        .as_deref()
        .map_or(String::new(), |n| format!(", {n} {extra_us:.1} µs"));
    let (streams, first_note, of): (Vec<(&str, &str, f64)>, _, _) = if gpu_decode {
        (
            vec![
                ("decode", "decoding", copy_us),
                ("transform", "augmentation", aug_us + extra_us),
                ("model", "training step", step_us),
            ],
            format!("decode {copy_us:.1} µs (decode stream), "),
            "the longest of the three",
        )
    } else {
        (
            vec![
                (
                    "transform",
                    "copy and augmentation",
                    copy_us + aug_us + extra_us,
                ),
                ("model", "training step", step_us),
            ],
            format!("{first} {copy_us:.1} µs, "),
            "the longer of transform and model",
        )
    };
    let longest = streams.iter().map(|s| s.2).fold(0.0, f64::max);
    let mut notes = vec![
        format!(
            "batch {headline}, per step: {first_note}augment {aug_us:.1} µs{extra_note} (transform stream), train step {step_us:.1} µs (model stream); the pipelined step can only approach {of} ({longest:.1} µs)"
        ),
        format!(
            "copy hidden under compute {:.1}%; longest stream busy {:.1}% of the span; pipelining gains most where neither stage fills the GPU alone and the two are of similar length (seed 003)",
            100.0 * metrics.copy_hidden_fraction,
            100.0 * metrics.longest_track_fraction
        ),
        bottleneck(&head, &o.train, &streams, o.workers),
        host_note(&plan, &head.host_us, head.ahead_us, head.ahead_parts),
        format!("checked at batch {smallest}: the last step's augmented batch against the CPU transform and the updated weights against the f64 step"),
    ];
    if let Some(change) = memory_change(&memory) {
        notes.push(format!(
            "memory over the last timed run at batch {headline} ({} samples, one per tenth of its {} steps): {change}",
            memory.len(),
            o.train.steps,
        ));
    }
    if let Some((ms, f)) = &soak {
        notes.push(format!(
            "soak at batch {headline}: {} steps pipelined at {:.1} steps/s; memory ({} samples, one per tenth): {}",
            o.soak,
            o.soak as f64 / (ms / 1e3),
            f.len(),
            memory_change(f).unwrap_or_default(),
        ));
    }
    if !decode_line.is_empty() {
        notes.push(match &engine {
            Some(e) => format!(
                "{decode_line}, by {e}; no graph column: nvJPEG's host calls cannot be captured"
            ),
            None => decode_line,
        });
    }
    notes.extend(skipped_note(&skipped));
    let slots = 2 * window(o.workers);
    let source = match &o.input {
        Some(d) if gpu_decode => format!(
            "read from the files of {} by {} threads and decoded on the GPU (files that are not JPEGs on those threads), each at its own size (the crop scales it),",
            d.display(),
            o.workers
        ),
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
        runs: None,
        rows: Vec::new(),
        table,
        metrics,
        timeline,
        check,
        notes,
    })
}

/// How memory changed between the first and last of `samples`: host RSS and device memory in
/// use, each with its change in percent, then device memory at every sample, so that growth
/// that stops after the first samples (buffers sized by the largest input seen) reads apart
/// from growth that goes on.
fn memory_change(samples: &[crate::Footprint]) -> Option<String> {
    let (first, last) = (samples.first()?, samples.last()?);
    let pct = |a: u64, b: u64| 100.0 * (b as f64 / a.max(1) as f64 - 1.0);
    let each: Vec<String> = samples
        .iter()
        .map(|f| format!("{:.0}", f.device_used as f64 / MIB))
        .collect();
    Some(format!(
        "host RSS {:.1} MiB at the first, {:.1} MiB at the last ({:+.2}%); device memory in use {:.1} MiB, then {:.1} MiB ({:+.2}%; each sample in MiB: {})",
        first.host_rss as f64 / MIB,
        last.host_rss as f64 / MIB,
        pct(first.host_rss, last.host_rss),
        first.device_used as f64 / MIB,
        last.device_used as f64 / MIB,
        pct(first.device_used, last.device_used),
        each.join(", "),
    ))
}

/// The report's line on the thread that queues every stage: its time per step in each stage's
/// calls, whose sum bounds the pipelined step from below as the streams' device times do; and
/// where a thread decodes ahead, that thread's time per step in decoding, and where the
/// decoder's calls spent it.
fn host_note(plan: &Plan, host_us: &[f64], ahead_us: f64, split: [f64; 3]) -> String {
    let parts = per_stage(plan, host_us, |us| format!("{us:.1} µs"));
    let ahead = if ahead_us > 0.0 {
        format!(
            "; the thread decoding ahead of it, {ahead_us:.1} µs per step in decoding ({:.1} \
             reading headers, {:.1} waiting for its stream before the hardware decoders, {:.1} \
             in nvJPEG's calls)",
            split[0], split[1], split[2]
        )
    } else {
        String::new()
    };
    format!(
        "the host thread queueing the stages, per step (pipelined): {parts}; {:.1} µs in all{ahead}",
        host_us.iter().sum::<f64>()
    )
}

/// Each stage's name with its value in `values` (in the plan's order), as `show` writes it.
pub(super) fn per_stage(plan: &Plan, values: &[f64], show: impl Fn(f64) -> String) -> String {
    let parts: Vec<String> = plan
        .spec()
        .stages
        .iter()
        .zip(values)
        .map(|(s, &v)| format!("{} {}", s.name, show(v)))
        .collect();
    parts.join(", ")
}
