//! Benchmark cases of the engine: host-to-device copies from pageable and page-locked memory
//! (seed 004's comparison, the anchors' `h2d_256MiB_*`), and one case per pipeline scenario.

use super::{round, Bench, Row, Timing};
use anyhow::Result;
use cudarc::driver::CudaSlice;
use serde_json::json;
use streamline::engine::memory::h2d;
use streamline::engine::{PinnedBuffer, StreamPool};
use streamline_scenarios::{
    augment_train, branches, copy_overlap, heavy_split, multistage, prefetch, Common, Report,
    Training,
};
use streamline_testing::data::randn_f32;

/// Cases this module adds, in the order they run.
pub const CASES: &[&str] = &[
    "h2d_256MiB_pageable",
    "h2d_256MiB_pinned",
    "pipeline_heavy_split_1e7_k2",
    "pipeline_branches_1Mi",
    "pipeline_prefetch_4Mi_x32",
    "pipeline_multistage_512",
    "pipeline_copy_overlap_1024",
    "pipeline_augment_train_b32",
];

/// Runs the wanted cases.
pub fn run(b: &mut Bench, wanted: &dyn Fn(&str) -> bool) -> Result<()> {
    let gpu = b.gpu;
    if wanted(CASES[0]) || wanted(CASES[1]) {
        let n = 64 << 20; // 256 MiB of f32
        let bytes = (n * 4) as f64;
        let mut dst: CudaSlice<f32> = b.stream.alloc_zeros(n)?;
        if wanted(CASES[0]) {
            b.bar.set_message(CASES[0]);
            let host = randn_f32(n, 41);
            let stream = b.stream.clone();
            let t = b.time(|_| h2d(&stream, &host, &mut dst))?;
            b.record_link(CASES[0], t, bytes, json!({"host_memory": "pageable"}));
        }
        if wanted(CASES[1]) {
            b.bar.set_message(CASES[1]);
            // The pool's buffers track accesses on the `Gpu`'s own stream, where this is timed.
            let pool = StreamPool::with_streams(gpu, 1)?;
            let host = PinnedBuffer::from_slice(&pool, &randn_f32(n, 42))?;
            let stream = b.stream.clone();
            let t = b.time(|_| h2d(&stream, &host, &mut dst))?;
            b.record_link(CASES[1], t, bytes, json!({"host_memory": "pinned"}));
        }
    }
    let common = Common {
        reps: b.reps.min(20),
        graph: true,
        ..Common::default()
    };
    let scenario = |b: &mut Bench, case: &str, r: Report| {
        let extra = json!({
            "serial_ms": round(r.serial_ms), "graph_ms": r.graph_ms.map(round),
            "speedup": round(r.speedup()),
            "copy_hidden_fraction": round(r.metrics.copy_hidden_fraction),
            "longest_stream_fraction": round(r.metrics.longest_track_fraction),
            "concurrency": round(r.metrics.concurrency),
            "check_passed": r.check.passed(),
            "rows": r.rows.iter().map(|w| (w.label.clone(), json!(round(w.ms)))).collect::<serde_json::Map<_, _>>(),
        });
        let t = Timing {
            ms: r.overlapped_ms,
            min_ms: r.overlapped_ms,
            device_ms: None,
        };
        let mut row = Row::new(case, t, common.reps, extra);
        row.min_ms = None;
        b.rows.push(row);
    };
    if wanted(CASES[2]) {
        b.bar.set_message(CASES[2]);
        let o = heavy_split::Options {
            sizes: vec![10_000_000],
            streams: 2,
        };
        let r = heavy_split::run(gpu, &common, &o)?;
        scenario(b, CASES[2], r);
    }
    if wanted(CASES[3]) {
        b.bar.set_message(CASES[3]);
        let r = branches::run(gpu, &common, &branches::Options::default())?;
        scenario(b, CASES[3], r);
    }
    if wanted(CASES[4]) {
        b.bar.set_message(CASES[4]);
        let r = prefetch::run(gpu, &common, &prefetch::Options::default())?;
        scenario(b, CASES[4], r);
    }
    if wanted(CASES[5]) {
        b.bar.set_message(CASES[5]);
        let r = multistage::run(gpu, &common, &multistage::Options::default())?;
        scenario(b, CASES[5], r);
    }
    if wanted(CASES[6]) {
        b.bar.set_message(CASES[6]);
        let r = copy_overlap::run(gpu, &common, &copy_overlap::Options::default())?;
        scenario(b, CASES[6], r);
    }
    if wanted(CASES[7]) {
        b.bar.set_message(CASES[7]);
        let o = augment_train::Options {
            train: Training {
                batches: vec![32],
                ..Default::default()
            },
            ..Default::default()
        };
        let r = augment_train::run(gpu, &common, &o)?;
        scenario(b, CASES[7], r);
    }
    Ok(())
}
