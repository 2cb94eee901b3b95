//! `streamline collective`: NCCL collectives on engine buffers and streams, timed per message
//! size as latency, algorithm bandwidth and bus bandwidth (the figures nccl-tests and
//! `torch.distributed` benchmarks report), and checked element by element against the CPU.
//!
//! One process drives `--gpus N` devices, or, with `--world-size`, each process drives one
//! (`--rank`, `--rendezvous`; rank `r` drives device `r` modulo the devices of its host).

use anyhow::{bail, Context, Result};
use cudarc::driver::CudaEvent;
use std::time::Duration;
use streamline::engine::memory::h2d;
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::multi::{Batch, Comm, ReduceOp, Rendezvous};
use streamline::timing::median;
use streamline::Gpu;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Op {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
}

#[derive(clap::Args, Debug)]
pub struct CollectiveArgs {
    /// GPUs this process drives (devices 0..N).
    #[arg(long, default_value_t = 2)]
    gpus: usize,
    /// Processes in the run, one GPU each (with --rank and --rendezvous); rank r drives
    /// device r modulo the devices of its host.
    #[arg(long)]
    world_size: Option<usize>,
    /// This process's rank, in 0..world-size.
    #[arg(long)]
    rank: Option<usize>,
    /// Where the processes meet: tcp://HOST:PORT or file://PATH.
    #[arg(long)]
    rendezvous: Option<String>,
    /// The collective.
    #[arg(long, value_enum, default_value = "all-reduce")]
    op: Op,
    /// Message sizes in bytes (K, M, G suffixes), comma-separated: the buffer each rank
    /// reduces (all-reduce, broadcast), gathers into (all-gather) or scatters from
    /// (reduce-scatter), in f32 (for the last two, a whole number per rank; the table shows the
    /// bytes as run).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes, default_value = "64K,1M,16M,256M,1G")]
    bytes: Vec<usize>,
    /// Collectives per timed repetition (1..=100000).
    #[arg(long, default_value_t = 20)]
    iters: u32,
    /// Timed repetitions (1..=10000); the median is reported.
    #[arg(long, default_value_t = 10)]
    repeat: u32,
    /// Check every element of each size's result against the CPU first.
    #[arg(long)]
    check: bool,
    /// Seconds any wait on NCCL may take before the run stops with an error (1..=86400).
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Also print one JSON line per size.
    #[arg(long)]
    json: bool,
}

/// `64K`, `1M`, `1G` or a plain number of bytes.
fn parse_bytes(s: &str) -> std::result::Result<usize, String> {
    let (num, mul) = match s.trim().to_ascii_uppercase() {
        t if t.ends_with('K') => (t[..t.len() - 1].to_string(), 1usize << 10),
        t if t.ends_with('M') => (t[..t.len() - 1].to_string(), 1 << 20),
        t if t.ends_with('G') => (t[..t.len() - 1].to_string(), 1 << 30),
        t => (t, 1),
    };
    let n: usize = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size like 64K, 1M or 1G"))?;
    n.checked_mul(mul)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// One GPU's part of the run.
struct Member {
    gpu: Gpu,
    pool: StreamPool,
    comm: Comm,
}

pub fn run(device: usize, a: CollectiveArgs) -> Result<()> {
    if !(1..=100_000).contains(&a.iters) {
        bail!("--iters must be in 1..=100000, got {}", a.iters);
    }
    if !(1..=10_000).contains(&a.repeat) {
        bail!("--repeat must be in 1..=10000, got {}", a.repeat);
    }
    if !(1..=86_400).contains(&a.timeout) {
        bail!("--timeout must be in 1..=86400 seconds, got {}", a.timeout);
    }
    let timeout = Duration::from_secs(a.timeout);
    let members = match a.world_size {
        None => {
            if a.rank.is_some() || a.rendezvous.is_some() {
                bail!("--rank and --rendezvous go with --world-size (one GPU per process)");
            }
            if device != 0 {
                bail!("--device does not apply with --gpus: the process drives devices 0..N");
            }
            let devices = streamline::runtime::device_count()?;
            if !(1..=devices).contains(&a.gpus) {
                bail!(
                    "--gpus must be in 1..={devices} (the devices here), got {}",
                    a.gpus
                );
            }
            let gpus = (0..a.gpus)
                .map(|d| Gpu::new(d, None))
                .collect::<Result<Vec<_>, _>>()?;
            let comms = Comm::local(&gpus.iter().collect::<Vec<_>>(), timeout)?;
            gpus.into_iter()
                .zip(comms)
                .map(|(gpu, comm)| {
                    let pool = StreamPool::named(&gpu, &["comm"])?;
                    Ok(Member { gpu, pool, comm })
                })
                .collect::<Result<Vec<_>>>()?
        }
        Some(world) => {
            let rank = a.rank.context("--world-size needs --rank")?;
            streamline::multi::rendezvous::check_rank(rank, world)?;
            let rdv: Rendezvous = a
                .rendezvous
                .as_deref()
                .context("--world-size needs --rendezvous tcp://HOST:PORT or file://PATH")?
                .parse()?;
            let devices = streamline::runtime::device_count()?;
            if device != 0 {
                bail!("--device does not apply with --world-size: rank r drives device r modulo the devices here");
            }
            let d = rank % devices.max(1);
            let gpu = Gpu::new(d, None)?;
            let comm = Comm::join(&gpu, rank, world, &rdv, timeout)?;
            let pool = StreamPool::named(&gpu, &["comm"])?;
            vec![Member { gpu, pool, comm }]
        }
    };
    let world = members[0].comm.world_size();
    let lead = members[0].comm.rank() == 0;
    if lead {
        println!(
            "{:?} over {world} GPUs ({}), NCCL {} from {}; f32, {} collectives per repetition, median of {}",
            a.op,
            members[0].gpu.info().name,
            streamline::multi::version().map(|(x, y, z)| format!("{x}.{y}.{z}"))?,
            streamline::multi::origin()?,
            a.iters,
            a.repeat
        );
        println!(
            "{:>12} {:>12} {:>14} {:>14} {:>8}",
            "bytes", "time µs", "algbw GB/s", "busbw GB/s", "check"
        );
    }
    for &asked in &a.bytes {
        let (send_n, recv_n) = lengths(a.op, asked / 4, world).with_context(|| {
            format!("--bytes {asked}: must hold at least one f32 per rank ({world} ranks)")
        })?;
        // The message as run: whole f32, and for all-gather and reduce-scatter a whole number
        // of them per rank.
        let bytes = 4 * send_n.max(recv_n);
        let mut bufs = members
            .iter()
            .map(|m| {
                Ok((
                    DeviceBuffer::<f32>::zeros(&m.pool, 0, send_n)?,
                    DeviceBuffer::<f32>::zeros(&m.pool, 0, recv_n)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let checked = if a.check {
            check(a.op, &members, &mut bufs)?
        } else {
            "-".into()
        };
        for _ in 0..3 {
            queue(a.op, &members, &mut bufs)?;
        }
        for m in &members {
            m.comm.synchronize(m.pool.stream(0)?)?;
        }
        let mut samples = Vec::new();
        for _ in 0..a.repeat {
            let events = |m: &Member| -> Result<CudaEvent> {
                let e = m.pool.timing_event()?;
                e.record(m.pool.stream(0)?).context("cuEventRecord")?;
                Ok(e)
            };
            let starts = members.iter().map(events).collect::<Result<Vec<_>>>()?;
            for _ in 0..a.iters {
                queue(a.op, &members, &mut bufs)?;
            }
            let ends = members.iter().map(events).collect::<Result<Vec<_>>>()?;
            let mut worst = 0f64;
            for (m, (s, e)) in members.iter().zip(starts.iter().zip(&ends)) {
                m.comm.synchronize(m.pool.stream(0)?)?;
                worst = worst.max(s.elapsed_ms(e).context("cuEventElapsedTime")? as f64);
            }
            samples.push(worst * 1e3 / a.iters as f64);
        }
        let us = median(&samples);
        let algbw = bytes as f64 / (us * 1e-6) / 1e9;
        let busbw = algbw * bus_factor(a.op, world);
        if lead {
            println!("{bytes:>12} {us:>12.1} {algbw:>14.2} {busbw:>14.2} {checked:>8}");
            if a.json {
                println!(
                    "{}",
                    serde_json::json!({"peer": "streamline", "op": format!("{:?}", a.op), "world": world, "bytes": bytes, "us": us, "algbw_gbs": algbw, "busbw_gbs": busbw})
                );
            }
        }
    }
    Ok(())
}

/// Elements of each rank's send and receive buffers for a message of at most `elems` f32 (for
/// all-gather and reduce-scatter, the largest multiple of the world size).
fn lengths(op: Op, elems: usize, world: usize) -> Option<(usize, usize)> {
    let part = elems / world;
    match op {
        _ if elems == 0 => None,
        Op::AllReduce | Op::Broadcast => Some((elems, elems)),
        Op::AllGather => (part > 0).then_some((part, part * world)),
        Op::ReduceScatter => (part > 0).then_some((part * world, part)),
    }
}

/// The bus bandwidth's factor over the algorithm bandwidth (as nccl-tests define it).
fn bus_factor(op: Op, world: usize) -> f64 {
    let n = world as f64;
    match op {
        Op::AllReduce => 2.0 * (n - 1.0) / n,
        Op::AllGather | Op::ReduceScatter => (n - 1.0) / n,
        Op::Broadcast => 1.0,
    }
}

/// Queues one collective on every GPU this process drives, as one batch.
fn queue(
    op: Op,
    members: &[Member],
    bufs: &mut [(DeviceBuffer<f32>, DeviceBuffer<f32>)],
) -> Result<()> {
    let mut batch = Batch::new();
    for (m, (send, recv)) in members.iter().zip(bufs.iter_mut()) {
        let s = m.pool.stream(0)?;
        match op {
            Op::AllReduce => batch.all_reduce_in_place(&m.comm, s, recv, ReduceOp::Sum)?,
            Op::AllGather => batch.all_gather(&m.comm, s, &*send, recv)?,
            Op::ReduceScatter => batch.reduce_scatter(&m.comm, s, &*send, recv, ReduceOp::Sum)?,
            Op::Broadcast => batch.broadcast(&m.comm, s, recv, 0)?,
        }
    }
    batch.run()?;
    Ok(())
}

/// Rank `r`'s input element `i`: a small whole number, so that sums over any number of ranks
/// in any order are exact in f32.
fn input(r: usize, i: usize) -> f32 {
    ((i * 7 + r * 13) % 61) as f32
}

/// Fills the inputs, poisons the outputs, runs the collective once and compares every element
/// this process can see with the CPU's result.
fn check(
    op: Op,
    members: &[Member],
    bufs: &mut [(DeviceBuffer<f32>, DeviceBuffer<f32>)],
) -> Result<String> {
    let world = members[0].comm.world_size();
    for (m, (send, recv)) in members.iter().zip(bufs.iter_mut()) {
        let r = m.comm.rank();
        let s = m.pool.stream(0)?;
        let mine: Vec<f32> = (0..send.len()).map(|i| input(r, i)).collect();
        h2d(s, &mine[..], send)?;
        let init: Vec<f32> = match op {
            // In place: the input is the receive buffer.
            Op::AllReduce | Op::Broadcast => (0..recv.len()).map(|i| input(r, i)).collect(),
            _ => vec![f32::NAN; recv.len()],
        };
        h2d(s, &init[..], recv)?;
    }
    queue(op, members, bufs)?;
    let mut wrong = 0usize;
    for (m, (_, recv)) in members.iter().zip(bufs.iter()) {
        m.comm.synchronize(m.pool.stream(0)?)?;
        let got = recv.to_vec(m.pool.stream(0)?)?;
        let r = m.comm.rank();
        let n = recv.len();
        for (i, g) in got.iter().enumerate() {
            let want = match op {
                Op::AllReduce => (0..world).map(|k| input(k, i) as f64).sum::<f64>(),
                Op::Broadcast => input(0, i) as f64,
                // Rank k's part sits at k * (n / world).
                Op::AllGather => input(i / (n / world), i % (n / world)) as f64,
                Op::ReduceScatter => (0..world).map(|k| input(k, r * n + i) as f64).sum::<f64>(),
            };
            if *g as f64 != want {
                wrong += 1;
            }
        }
    }
    if wrong > 0 {
        bail!("{wrong} elements differ from the CPU's result");
    }
    Ok("exact".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_whole_f32_and_whole_parts_per_rank() {
        assert_eq!(lengths(Op::AllReduce, 6 / 4, 2), Some((1, 1)));
        assert_eq!(lengths(Op::AllReduce, 0, 2), None);
        assert_eq!(lengths(Op::AllGather, 16384, 3), Some((5461, 16383)));
        assert_eq!(lengths(Op::ReduceScatter, 16384, 3), Some((16383, 5461)));
        assert_eq!(lengths(Op::AllGather, 2, 3), None);
        assert_eq!(parse_bytes("64K"), Ok(65536));
        assert_eq!(parse_bytes("1g"), Ok(1 << 30));
        assert!(parse_bytes("x").is_err());
        assert_eq!(bus_factor(Op::AllReduce, 4), 1.5);
    }
}
