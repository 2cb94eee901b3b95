//! The report's verdict: which stage bounds the throughput.

use crate::Training;

use super::run::Timed;

/// Names the stage that bounds the throughput: the loader's threads (their capacity were
/// they never kept waiting), the GPU stages alone (measured), and within them the stream that
/// takes longest per step (`streams`: each one's name, what it runs, and its device time per
/// step in the recorded run).
pub(super) fn bottleneck(
    t: &Timed,
    train: &Training,
    streams: &[(&str, &str, f64)],
    workers: usize,
) -> String {
    let l = &t.loader;
    let longest = streams
        .iter()
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .map_or(String::new(), |(name, what, _)| {
            format!(" (the {name} stream: {what})")
        });
    let gpu = format!("the GPU stages{longest}");
    let per_step: Vec<String> = streams
        .iter()
        .map(|(name, _, us)| format!("the {name} stream {us:.1} µs"))
        .collect();
    let mut stages = [
        (format!("the loader ({workers} threads)"), l.capacity()),
        (gpu, train.per_second(t.gpu_alone)),
    ];
    stages.sort_by(|a, b| a.1.total_cmp(&b.1));
    let wall = l.wall.as_secs_f64().max(1e-9);
    format!(
        "bottleneck: {} at {:.1} steps/s; next {} at {:.1} ({:.2}x); achieved {:.1} steps/s pipelined; the loader's threads were busy {:.1}% of the run, and the pipeline waited {:.1}% of it for a slot whose earlier copy the device had not yet run; device time per step: {}",
        stages[0].0,
        stages[0].1,
        stages[1].0,
        stages[1].1,
        stages[1].1 / stages[0].1,
        train.per_second(t.piped),
        100.0 * l.utilization(),
        100.0 * l.slot_wait.as_secs_f64() / wall,
        per_step.join(", "),
    )
}
