//! The run: the timed runs of each batch size (serial, pipelined, replayed graph windows, the
//! GPU stages alone) and the report they make.

use crate::{median_ms, per_step_us, recorded, Check, Common, Report, MIB, THROUGHPUT_COLUMNS};
use streamline::engine::{LoaderStats, Plan, StreamPool};
use streamline::error::{Error, Result};
use streamline::Gpu;

use super::check::verify;
use super::feed::Setup;
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
    // nvJPEG's host calls cannot be captured: decoding on the GPU runs eagerly.
    let graph = if common.graph && su.decode.is_none() {
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
    // Decoding on the GPU, the transform lane is the longer one: its short kernels go ahead
    // of the training step's (the pool clamps the priority to the device's range).
    let transform_priority = if gpu_decode { i32::MIN } else { 0 };
    let pool = StreamPool::new(
        gpu,
        &[
            streamline::engine::pool::StreamSpec::new("transform").priority(transform_priority),
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
    let mut skipped = std::collections::BTreeSet::new();
    let mut engine: Option<String> = None;
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
    // The extra transform, where there is one, runs on the transform stream too.
    let extra_us = extra_name.as_deref().map_or(0.0, stage_us);
    let transform_us = copy_us + aug_us + extra_us;
    let mut notes = vec![
        format!(
            "batch {headline}, per step: {first} {copy_us:.1} µs, augment {aug_us:.1} µs{} (transform stream), train step {step_us:.1} µs (model stream); the pipelined step can only approach the longer of transform and model ({:.1} µs)",
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
            "read from the JPEGs of {} by {} threads and decoded on the GPU, each at its own size (the crop scales it),",
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
