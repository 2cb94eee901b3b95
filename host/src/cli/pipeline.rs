//! `streamline pipeline <scenario>`: the seeds' stream scenarios, timed serial vs overlapped,
//! with overlap metrics, a trace and a Gantt chart, checked against the CPU reference.

use super::parse_count;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use streamline::engine::Timeline;
use streamline::scenarios::{
    augment_train, branches, copy_overlap, encoder_decoder, heavy_split, multistage, prefetch,
    Common, Report,
};
use streamline::Gpu;

#[derive(clap::Args, Debug)]
pub struct PipelineArgs {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Write the overlapped run as a Chrome/Perfetto trace (JSON) to this file.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write the overlapped run as an SVG Gantt chart to this file.
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// Also capture the overlapped schedule into a CUDA graph and time its replays.
    #[arg(long)]
    graph: bool,
    /// Timed repetitions (1..=1000); the median is reported.
    #[arg(long, default_value_t = Common::default().reps)]
    reps: usize,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = Common::default().seed)]
    seed: u64,
    /// Output elements compared with the CPU reference (1..=2^24).
    #[arg(long, default_value_t = Common::default().sample)]
    sample: usize,
}

#[derive(clap::Subcommand, Debug)]
enum Scenario {
    /// Seed 000: heavy computation in one launch vs split over K streams, over a size sweep.
    HeavySplit {
        #[command(flatten)]
        common: CommonArgs,
        /// Sizes to sweep, comma-separated (`1e4,1e6,1e8` accepted).
        #[arg(long, value_delimiter = ',', value_parser = parse_count, default_values_t = heavy_split::Options::default().sizes.iter().map(|&n| n as u64).collect::<Vec<_>>())]
        sizes: Vec<u64>,
        /// Streams (parts) of the split run (1..=16).
        #[arg(long, default_value_t = heavy_split::Options::default().streams)]
        streams: usize,
    },
    /// Seed 001: two branches on two streams joined by events.
    Branches {
        #[command(flatten)]
        common: CommonArgs,
        /// Elements per input.
        #[arg(long, value_parser = parse_count, default_value_t = branches::Options::default().n as u64)]
        n: u64,
        /// Iterations per run.
        #[arg(long, default_value_t = branches::Options::default().iterations)]
        iterations: usize,
    },
    /// Seed 002: H2D -> matmul -> matmul on three streams with event dependencies.
    Multistage {
        #[command(flatten)]
        common: CommonArgs,
        /// Rows per batch.
        #[arg(long, default_value_t = multistage::Options::default().rows)]
        rows: usize,
        /// Batch columns and weight matrix size.
        #[arg(long, default_value_t = multistage::Options::default().size)]
        size: usize,
        /// Batches per run (even).
        #[arg(long, default_value_t = multistage::Options::default().batches)]
        batches: usize,
    },
    /// Seed 004: matmul loop, D2H and H2D on three streams; pinned vs pageable host memory.
    CopyOverlap {
        #[command(flatten)]
        common: CommonArgs,
        /// Side of the square matrices.
        #[arg(long, default_value_t = copy_overlap::Options::default().size)]
        size: usize,
        /// Products queued on the compute stream.
        #[arg(long, default_value_t = copy_overlap::Options::default().matmuls)]
        matmuls: usize,
        /// Matrices copied in each direction.
        #[arg(long, default_value_t = copy_overlap::Options::default().copies)]
        copies: usize,
    },
    /// Seed 003: augmentation of batch N+1 on a transform stream while an MLP trains on batch N.
    AugmentTrain {
        #[command(flatten)]
        common: CommonArgs,
        /// Batch sizes of the sweep, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = augment_train::Options::default().batches)]
        batches: Vec<usize>,
        /// Side of the square images (3 channels).
        #[arg(long, default_value_t = augment_train::Options::default().size)]
        size: usize,
        /// Hidden units of the MLP.
        #[arg(long, default_value_t = augment_train::Options::default().hidden)]
        hidden: usize,
        /// Classes (outputs) of the MLP.
        #[arg(long, default_value_t = augment_train::Options::default().classes)]
        classes: usize,
        /// Training steps per timed run (any number: the batches stream from the loader).
        #[arg(long, default_value_t = augment_train::Options::default().steps)]
        steps: usize,
        /// Decode the batches from the PNG/JPEG images of DIR (class subfolders give the
        /// labels) on the loader's threads, instead of generating them.
        #[arg(long, value_name = "DIR")]
        input: Option<std::path::PathBuf>,
        /// Loader threads (default: the CPU's, at most 8).
        #[arg(long)]
        workers: Option<usize>,
    },
    /// Seed 003: a frozen encoder computes batch N+1's features on one stream while a decoder
    /// MLP trains on batch N's on another (features in a ring released by events).
    EncoderDecoder {
        #[command(flatten)]
        common: CommonArgs,
        /// Batch sizes of the sweep, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = encoder_decoder::Options::default().batches)]
        batches: Vec<usize>,
        /// Inputs per row (the encoder's input width).
        #[arg(long, default_value_t = encoder_decoder::Options::default().inputs)]
        inputs: usize,
        /// Features per row (the encoder's output).
        #[arg(long, default_value_t = encoder_decoder::Options::default().features)]
        features: usize,
        /// Hidden units of the decoder.
        #[arg(long, default_value_t = encoder_decoder::Options::default().hidden)]
        hidden: usize,
        /// Classes (outputs) of the decoder.
        #[arg(long, default_value_t = encoder_decoder::Options::default().classes)]
        classes: usize,
        /// Training steps per timed run (even).
        #[arg(long, default_value_t = encoder_decoder::Options::default().steps)]
        steps: usize,
    },
    /// Seeds 001/002: H2D of batch N+1 while batch N computes, double-buffered.
    Prefetch {
        #[command(flatten)]
        common: CommonArgs,
        /// f32 elements per batch.
        #[arg(long, value_parser = parse_count, default_value_t = prefetch::Options::default().batch as u64)]
        batch: u64,
        /// Batches streamed per run (any number), from a producer through page-locked slots:
        /// memory stays that of the ring.
        #[arg(long, default_value_t = prefetch::Options::default().batches)]
        batches: usize,
        /// Ring depth: 2 double buffering, 3 triple.
        #[arg(long, default_value_t = prefetch::Options::default().depth)]
        depth: usize,
        /// Heavy passes per batch (the compute stage's length).
        #[arg(long, default_value_t = prefetch::Options::default().compute_reps)]
        compute_reps: usize,
    },
}

fn common(a: &CommonArgs) -> Result<Common> {
    if !(1..=1000).contains(&a.reps) {
        bail!("--reps must be in 1..=1000, got {}", a.reps);
    }
    if !(1..=1 << 24).contains(&a.sample) {
        bail!("--sample must be in 1..=16777216, got {}", a.sample);
    }
    Ok(Common {
        reps: a.reps,
        graph: a.graph,
        seed: a.seed,
        sample: a.sample,
    })
}

fn usize_of(v: u64, name: &str) -> Result<usize> {
    usize::try_from(v).with_context(|| format!("--{name} {v} does not fit this machine"))
}

/// A scenario with its options bound, waiting for the device.
type Runner = Box<dyn FnOnce(&Gpu, &Common) -> streamline::Result<Report>>;

pub fn run(device: usize, ptx: Option<&Path>, a: PipelineArgs) -> Result<()> {
    // Validate everything the scenario does not need the device for before opening it.
    let (args, go): (CommonArgs, Runner) = match a.scenario {
        Scenario::HeavySplit {
            common: c,
            sizes,
            streams,
        } => {
            let o = heavy_split::Options {
                sizes: sizes
                    .iter()
                    .map(|&s| usize_of(s, "sizes"))
                    .collect::<Result<_>>()?,
                streams,
            };
            (c, Box::new(move |g, c| heavy_split::run(g, c, &o)))
        }
        Scenario::Branches {
            common: c,
            n,
            iterations,
        } => {
            let o = branches::Options {
                n: usize_of(n, "n")?,
                iterations,
                ..Default::default()
            };
            (c, Box::new(move |g, c| branches::run(g, c, &o)))
        }
        Scenario::Multistage {
            common: c,
            rows,
            size,
            batches,
        } => {
            let o = multistage::Options {
                rows,
                size,
                batches,
            };
            multistage::validate(&o)?;
            (c, Box::new(move |g, c| multistage::run(g, c, &o)))
        }
        Scenario::CopyOverlap {
            common: c,
            size,
            matmuls,
            copies,
        } => {
            let o = copy_overlap::Options {
                size,
                matmuls,
                copies,
            };
            copy_overlap::validate(&o)?;
            (c, Box::new(move |g, c| copy_overlap::run(g, c, &o)))
        }
        Scenario::AugmentTrain {
            common: c,
            batches,
            size,
            hidden,
            classes,
            steps,
            input,
            workers,
        } => {
            let d = augment_train::Options::default();
            let o = augment_train::Options {
                batches,
                size,
                hidden,
                classes,
                steps,
                input,
                workers: workers.unwrap_or(d.workers),
                ..d
            };
            augment_train::validate(&o)?;
            (c, Box::new(move |g, c| augment_train::run(g, c, &o)))
        }
        Scenario::EncoderDecoder {
            common: c,
            batches,
            inputs,
            features,
            hidden,
            classes,
            steps,
        } => {
            let o = encoder_decoder::Options {
                batches,
                inputs,
                features,
                hidden,
                classes,
                steps,
                ..encoder_decoder::Options::default()
            };
            encoder_decoder::validate(&o)?;
            (c, Box::new(move |g, c| encoder_decoder::run(g, c, &o)))
        }
        Scenario::Prefetch {
            common: c,
            batch,
            batches,
            depth,
            compute_reps,
        } => {
            let o = prefetch::Options {
                batch: usize_of(batch, "batch")?,
                batches,
                depth,
                compute_reps,
            };
            prefetch::validate(&o)?;
            (c, Box::new(move |g, c| prefetch::run(g, c, &o)))
        }
    };
    let c = common(&args)?;
    for p in [&args.trace, &args.timeline].into_iter().flatten() {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                bail!(
                    "cannot write {}: {} is not a directory",
                    p.display(),
                    dir.display()
                );
            }
        }
    }
    let gpu = Gpu::new(device, ptx)?;
    // Ctrl-C stops the run at its next iteration: the work already queued finishes, everything
    // is freed, and the error says how far it got (a second Ctrl-C kills the process).
    streamline::engine::interrupt::install_ctrl_c()?;
    let r = match go(&gpu, &c) {
        Ok(r) => r,
        Err(streamline::Error::Interrupted(why)) => {
            // Write what was recorded before the interruption, then stop with one line.
            let wrote = match streamline::scenarios::take_last_recorded() {
                Some(t) => write_timeline(&args, &t, "recorded before the interruption")?,
                None => 0,
            };
            bail!(
                "interrupted: {why}; {}",
                if wrote > 0 {
                    "the trace recorded so far is written"
                } else {
                    "nothing was recorded yet"
                }
            );
        }
        Err(e) => return Err(e.into()),
    };
    print(&r);
    write_timeline(&args, &r.timeline, &format!("{}: overlapped run", r.name))?;
    if !r.check.passed() {
        bail!(
            "the output does not match the CPU reference: {} of {} sampled elements outside the bound, {} unwritten, first failure {:?}",
            r.check.failures,
            r.check.compared,
            r.check.unwritten,
            r.check.first_failure
        );
    }
    Ok(())
}

/// Writes `t` to the trace and timeline files asked for; returns how many were written.
fn write_timeline(args: &CommonArgs, t: &Timeline, what: &str) -> Result<usize> {
    let mut wrote = 0;
    if let Some(p) = &args.trace {
        let text = serde_json::to_string(&t.to_chrome_trace())?;
        std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
        println!("wrote trace {} (open in ui.perfetto.dev)", p.display());
        wrote += 1;
    }
    if let Some(p) = &args.timeline {
        let title = format!("streamline pipeline {what}");
        std::fs::write(p, t.to_svg(&title)).with_context(|| format!("writing {}", p.display()))?;
        println!("wrote timeline {}", p.display());
        wrote += 1;
    }
    Ok(wrote)
}

fn print(r: &Report) {
    println!("pipeline {}: {}", r.name, r.workload);
    println!("{:<40} {:>10} {:>9}", "run", "median ms", "speed-up");
    println!(
        "{:<40} {:>10.4} {:>9}",
        "serial (every lane on one stream)", r.serial_ms, "1.00x"
    );
    println!(
        "{:<40} {:>10.4} {:>8.2}x",
        "overlapped (one stream per lane)",
        r.overlapped_ms,
        r.speedup()
    );
    if let Some(g) = r.graph_ms {
        println!(
            "{:<40} {:>10.4} {:>8.2}x",
            "overlapped, CUDA graph",
            g,
            r.serial_ms / g
        );
    }
    if !r.rows.is_empty() {
        println!();
        println!("{:<40} {:>10}", "sweep", "median ms");
        for row in &r.rows {
            println!("{:<40} {:>10.4}", row.label, row.ms);
        }
    }
    if let Some((head, body)) = r.table.split_first() {
        println!();
        let row = |cells: &[String]| {
            let mut line = format!("{:<8}", cells.first().map_or("", |c| c.as_str()));
            for c in &cells[1.min(cells.len())..] {
                line.push_str(&format!(" {c:>18}"));
            }
            println!("{line}");
        };
        row(head);
        for cells in body {
            row(cells);
        }
    }
    let m = &r.metrics;
    println!();
    println!(
        "recorded overlapped run: span {:.1} µs, device idle {:.1} µs, concurrency {:.2}, copy hidden under compute {:.1}%, longest stream busy {:.1}% of the span",
        m.span_us,
        m.device_idle_us,
        m.concurrency,
        100.0 * m.copy_hidden_fraction,
        100.0 * m.longest_track_fraction
    );
    println!(
        "{:<16} {:>12} {:>7} {:>6} {:>12} {:>14}",
        "stream", "busy µs", "busy", "gaps", "gaps µs", "longest gap µs"
    );
    for t in &m.tracks {
        println!(
            "{:<16} {:>12.1} {:>6.1}% {:>6} {:>12.1} {:>14.1}",
            t.name,
            t.busy_us,
            100.0 * t.busy_fraction,
            t.gaps,
            t.gap_us,
            t.longest_gap_us
        );
    }
    for n in &r.notes {
        println!("- {n}");
    }
    println!(
        "check: {} sampled elements against the CPU reference, {} outside the bound, {} unwritten",
        r.check.compared, r.check.failures, r.check.unwritten
    );
}
