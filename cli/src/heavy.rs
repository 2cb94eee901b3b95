//! `streamline heavy`: seed 000's experiment. The whole array in one launch on one stream,
//! against the array split into K parts launched on K streams.

use super::parse_count;
use anyhow::{bail, Context, Result};
use cudarc::driver::{sys::CUevent_flags, CudaSlice, CudaStream};
use half::{bf16, f16};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use streamline::error::DriverContext;
use streamline::ops::heavy::heavy;
use streamline::timing::{median, time_on};
use streamline::Gpu;
use streamline_testing::data::{count_unwritten, HeavyHost};

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Dtype {
    F32,
    F16,
    Bf16,
}

#[derive(clap::Args, Debug)]
pub struct HeavyArgs {
    /// Number of elements (1..=2^32; `1e8` notation accepted).
    #[arg(long, value_parser = parse_count, default_value = "10000000")]
    n: usize,
    /// Element type in memory.
    #[arg(long, value_enum, default_value = "f32")]
    dtype: Dtype,
    /// Number of streams for the split run (1..=64, at most n).
    #[arg(long, default_value_t = 2)]
    streams: u32,
    /// Timed repetitions of each mode (1..=100000); the median is reported.
    #[arg(long, default_value_t = 20)]
    repeat: u32,
    /// Compare the whole output of both modes with the CPU reference.
    #[arg(long)]
    check: bool,
    /// Seed of the random input.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn validate(a: &HeavyArgs) -> Result<()> {
    if !(1..=1usize << 32).contains(&a.n) {
        bail!("--n must be in 1..=4294967296, got {}", a.n);
    }
    if !(1..=64).contains(&a.streams) {
        bail!("--streams must be in 1..=64, got {}", a.streams);
    }
    if a.streams as usize > a.n {
        bail!("--streams ({}) must not exceed --n ({})", a.streams, a.n);
    }
    if !(1..=100_000).contains(&a.repeat) {
        bail!("--repeat must be in 1..=100000, got {}", a.repeat);
    }
    Ok(())
}

pub fn run(device: usize, ptx: Option<&Path>, a: HeavyArgs) -> Result<()> {
    validate(&a)?;
    let gpu = Gpu::new(device, ptx)?;
    match a.dtype {
        Dtype::F32 => experiment::<f32>(&gpu, &a),
        Dtype::F16 => experiment::<f16>(&gpu, &a),
        Dtype::Bf16 => experiment::<bf16>(&gpu, &a),
    }
}

struct Buffers<T> {
    x: CudaSlice<T>,
    y: CudaSlice<T>,
}

fn upload<T: HeavyHost>(stream: &Arc<CudaStream>, x: &[T]) -> Result<Buffers<T>> {
    let xs = stream
        .clone_htod(x)
        .context("allocating/copying the input")?;
    let y = stream
        .clone_htod(&vec![T::poison(); x.len()])
        .context("allocating the output")?;
    Ok(Buffers { x: xs, y })
}

/// Median event and wall times of `launch`, bracketed by events on `main`.
fn time_mode(
    main: &Arc<CudaStream>,
    repeat: u32,
    mut launch: impl FnMut() -> streamline::Result<()>,
) -> Result<(f64, f64)> {
    launch()?; // warm-up
    main.synchronize().op("cuStreamSynchronize")?;
    let (mut ev, mut wall) = (Vec::new(), Vec::new());
    for _ in 0..repeat {
        let t0 = Instant::now();
        ev.push(time_on(main, &mut launch)?);
        wall.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    Ok((median(&ev), median(&wall)))
}

fn experiment<T: HeavyHost>(gpu: &Gpu, a: &HeavyArgs) -> Result<()> {
    let n = a.n;
    let bytes = n * std::mem::size_of::<T>();
    let (free, _) = gpu.context().mem_get_info().op("cuMemGetInfo")?;
    if 4 * bytes > free {
        bail!(
            "--n {} needs {} MiB of device memory (two copies for the two modes), {} MiB are free",
            a.n,
            (4 * bytes) >> 20,
            free >> 20
        );
    }
    let host_x = T::randn(n, a.seed);
    let main = gpu.stream().clone();
    let k = a.streams as usize;
    let streams: Vec<Arc<CudaStream>> =
        (0..k).map(|_| gpu.new_stream()).collect::<Result<_, _>>()?;

    // One buffer for the single-stream run; K separate buffers for the split run, so that
    // each stream's part is tracked on its own and nothing serialises them but the hardware.
    let mut whole = upload(&main, &host_x)?;
    let bounds: Vec<usize> = (0..=k).map(|i| i * n / k).collect();
    let mut parts: Vec<Buffers<T>> = (0..k)
        .map(|i| upload(&streams[i], &host_x[bounds[i]..bounds[i + 1]]))
        .collect::<Result<_>>()?;
    for s in &streams {
        s.synchronize().op("cuStreamSynchronize")?;
    }

    let single = time_mode(&main, a.repeat, || {
        heavy(gpu, &main, &whole.x, &mut whole.y)
    })?;
    let split = time_mode(&main, a.repeat, || {
        let fork = main
            .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .op("cuEventRecord")?;
        for (s, p) in streams.iter().zip(parts.iter_mut()) {
            s.wait(&fork).op("cuStreamWaitEvent")?;
            heavy(gpu, s, &p.x, &mut p.y)?;
        }
        for s in &streams {
            main.join(s).op("cuStreamWaitEvent")?;
        }
        Ok(())
    })?;

    let moved = 2.0 * bytes as f64;
    println!(
        "heavy {}, n = {}, {} repeats, median of CUDA-event times (wall: host clock incl. launch and sync)",
        T::NAME,
        a.n,
        a.repeat
    );
    println!(
        "{:<12} {:>10} {:>10} {:>10}",
        "mode", "event ms", "wall ms", "GB/s"
    );
    for (name, (ev, wall)) in [
        ("1 stream".to_string(), single),
        (format!("{k} streams"), split),
    ] {
        println!(
            "{:<12} {:>10.4} {:>10.4} {:>10.1}",
            name,
            ev,
            wall,
            moved / ev / 1e6
        );
    }
    println!(
        "split over {k} streams vs one: {:.2}x (event time)",
        single.0 / split.0
    );

    if a.check {
        let y_whole = main.clone_dtoh(&whole.y).op("cuMemcpyDtoH")?;
        let mut y_split = Vec::with_capacity(n);
        for (s, p) in streams.iter().zip(&parts) {
            y_split.extend(s.clone_dtoh(&p.y).op("cuMemcpyDtoH")?);
        }
        let mut ok = true;
        for (name, y) in [("1 stream", &y_whole), ("split", &y_split)] {
            let unwritten = count_unwritten(y);
            let c = T::compare(&host_x, y);
            println!(
                "check {name}: {} elements, {} outside the error bound, {} unwritten, max |err| {:.3e}, max err/bound {:.3}",
                c.count, c.failures, unwritten, c.max_abs_error, c.max_error_over_bound
            );
            if let Some((i, x, got, want)) = c.first_failure {
                println!("  first failure at {i}: x = {x:e}, got {got:e}, want {want:e}");
            }
            ok &= c.failures == 0 && unwritten == 0;
        }
        if !ok {
            bail!("the GPU result does not match the CPU reference");
        }
    }
    Ok(())
}
