//! Several GPUs: every collective through NCCL against the CPU over awkward counts, random
//! device subsets and stream assignments, ranks in their own threads meeting through a
//! rendezvous, and buffers and streams of the wrong device refused (`collectives`); the faults:
//! a rank that never joins or never takes part ends in a clear error within the deadline,
//! never a hang (`faults`); copies between devices and reads in place ordered with the
//! buffers' accesses (`between_devices`); seed 003's scenarios over two GPUs against their
//! references (`scenarios`). Skipped, with one line, without two GPUs or NCCL.

mod between_devices;
mod collectives;
mod faults;
mod scenarios;

use std::sync::OnceLock;
use streamline::engine::StreamPool;
use streamline::Gpu;

/// Held by each test: they share the devices' pools, and collectives of two groups queued in
/// opposite orders on the same streams would wait on each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every device of the machine with a pool of three streams each, when there are two or more
/// and NCCL loads; else `None` after one line saying why.
fn devices() -> Option<&'static [(Gpu, StreamPool)]> {
    static ALL: OnceLock<Result<Vec<(Gpu, StreamPool)>, String>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        let n = streamline::runtime::device_count().map_err(|e| e.to_string())?;
        if n < 2 {
            return Err(format!(
                "{n} CUDA device(s) here, the multi-GPU tests need 2"
            ));
        }
        streamline::multi::version().map_err(|e| e.to_string())?;
        (0..n)
            .map(|d| {
                let g = Gpu::new(d, None).map_err(|e| e.to_string())?;
                let p = StreamPool::named(&g, &["a", "b", "c"]).map_err(|e| e.to_string())?;
                Ok((g, p))
            })
            .collect()
    });
    match all {
        Ok(v) => Some(v),
        Err(e) => {
            eprintln!("skipping multi-GPU test: {e}");
            None
        }
    }
}

/// Rank `r`'s element `i`: a small whole number, so that sums over the ranks are exact in f32
/// in any order (and the mean rounds once per rank: see `close`).
fn input(r: usize, i: usize) -> f32 {
    ((i * 7 + r * 13) % 61) as f32 - 30.0
}
