//! `color-jitter`: seed 003's augmentation pipelined with training (`streamline pipeline
//! augment-train`), with a color jitter of this crate's own kernels inserted after the
//! augmentation on the transform stream. Prints steps per second over batch sizes, checks one
//! jittered batch against the CPU reference, and writes the timeline (SVG and Perfetto trace).

use anyhow::{bail, Result};
use clap::Parser;
use color_jitter::{reference, ColorJitter, Jitter};
use std::path::PathBuf;
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::ops::image::Shape;
use streamline::Gpu;
use streamline_scenarios::{augment_train, Common, Training};

#[derive(Parser)]
#[command(about = "Color jitter of one's own kernels inside seed 003's augment-train pipeline")]
struct Args {
    /// Batch sizes of the sweep.
    #[arg(long, value_delimiter = ',', default_values_t = vec![8usize, 32, 64, 128])]
    batches: Vec<usize>,
    /// Side of the square images.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Training steps per timed run (any number).
    #[arg(long, default_value_t = 16)]
    steps: usize,
    /// Timed repetitions (median reported).
    #[arg(long, default_value_t = 10)]
    reps: usize,
    /// Also replay the pipelined schedule as a CUDA graph.
    #[arg(long)]
    graph: bool,
    /// Write the pipelined run's timeline as SVG.
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// Write the pipelined run as a Chrome/Perfetto trace.
    #[arg(long)]
    trace: Option<PathBuf>,
}

const JITTER: Jitter = Jitter {
    brightness: 0.4,
    contrast: 0.4,
    saturation: 0.4,
};

fn main() -> Result<()> {
    let args = Args::parse();
    let gpu = Gpu::new(0, None)?;
    let mut jitter = ColorJitter::new(&gpu, JITTER)?;

    // One batch through the jitter alone, against the CPU reference.
    let pool = StreamPool::with_streams(&gpu, 1)?;
    let shape = Shape::new(8, 3, args.size, args.size);
    let plane = args.size * args.size;
    let x: Vec<f32> = (0..shape.len())
        .map(|i| ((i * 7919) % 1000) as f32 / 999.0)
        .collect();
    jitter.set_batch(&pool, shape, 7)?;
    let xd = DeviceBuffer::from_slice(&pool, 0, &x)?;
    let mut yd = DeviceBuffer::<f32>::zeros(&pool, 0, x.len())?;
    let s = pool.stream(0)?;
    jitter.apply(s, &xd, &mut yd)?;
    let y = yd.to_vec(s)?;
    let (want, bounds) = reference(&x, plane, jitter.factors());
    let ratios: Vec<f64> = y
        .iter()
        .zip(&want)
        .enumerate()
        .map(|(i, (g, w))| (*g as f64 - w).abs() / bounds[i / (3 * plane)])
        .collect();
    if let Some(i) = ratios.iter().position(|r| r.is_nan() || *r > 1.0) {
        bail!(
            "color jitter: output {i} is {} where the reference is {} (bound {:e})",
            y[i],
            want[i],
            bounds[i / (3 * plane)]
        );
    }
    let worst = ratios.iter().copied().fold(0.0, f64::max);
    println!(
        "color jitter: {} values match the CPU reference (worst at {:.3} of the bound)",
        y.len(),
        worst
    );

    let o = augment_train::Options {
        train: Training {
            batches: args.batches,
            steps: args.steps,
            ..Default::default()
        },
        size: args.size,
        ..Default::default()
    };
    let common = Common {
        reps: args.reps,
        graph: args.graph,
        ..Default::default()
    };
    let r = augment_train::run_with(&gpu, &common, &o, Some(&mut jitter))?;
    println!("{}", r.workload);
    for row in &r.table {
        println!("{}", row.join("\t"));
    }
    for n in &r.notes {
        println!("- {n}");
    }
    let jitter_us: Vec<f64> = r
        .timeline
        .intervals
        .iter()
        .filter(|iv| iv.name == "color jitter")
        .map(|iv| iv.duration_us())
        .collect();
    println!(
        "color jitter on the transform stream: {:.1} µs per step (mean of {} in the recorded run)",
        jitter_us.iter().sum::<f64>() / jitter_us.len().max(1) as f64,
        jitter_us.len()
    );
    if !r.check.passed() {
        bail!("the pipeline's check against the CPU reference failed");
    }
    if let Some(p) = &args.trace {
        std::fs::write(p, serde_json::to_string(&r.timeline.to_chrome_trace())?)?;
        println!("wrote trace {}", p.display());
    }
    if let Some(p) = &args.timeline {
        std::fs::write(p, r.timeline.to_svg("augment-train with color jitter"))?;
        println!("wrote timeline {}", p.display());
    }
    Ok(())
}
