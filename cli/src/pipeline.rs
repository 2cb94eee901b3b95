//! `streamline pipeline <scenario>`: the seeds' stream scenarios, timed serial vs overlapped,
//! with overlap metrics, a trace and a Gantt chart, checked against the CPU reference.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use streamline::engine::{interrupt, Timeline};
use streamline::Gpu;
use streamline_scenarios::{
    augment_train, branches, copy_overlap, encoder_decoder, heavy_split, multistage, prefetch,
    Common, Report,
};

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
        #[command(flatten)]
        o: heavy_split::Options,
    },
    /// Seed 001: two branches on two streams joined by events.
    Branches {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        o: branches::Options,
    },
    /// Seed 002: H2D -> matmul -> matmul on three streams with event dependencies.
    Multistage {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        o: multistage::Options,
    },
    /// Seed 004: matmul loop, D2H and H2D on three streams; pinned vs pageable host memory.
    CopyOverlap {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        o: copy_overlap::Options,
    },
    /// Seed 003: augmentation of batch N+1 on a transform stream while an MLP trains on batch
    /// N, the batches generated or decoded from disk by loader threads.
    AugmentTrain {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        o: augment_train::Options,
    },
    /// Seed 003: a frozen encoder computes batch N+1's features on one stream while a decoder
    /// MLP trains on batch N's on another (features in a ring released by events).
    EncoderDecoder {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        o: encoder_decoder::Options,
    },
    /// Seeds 001/002: H2D of batch N+1 while batch N computes, double-buffered, the batches
    /// streamed from a producer through page-locked slots.
    Prefetch {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        o: prefetch::Options,
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

/// A scenario with its options bound, waiting for the device.
type Runner = Box<dyn FnOnce(&Gpu, &Common) -> streamline::Result<Report>>;

/// Checks `o` with `validate` (before the device is opened) and binds it to `run`.
fn bind<O: 'static>(
    o: O,
    validate: fn(&O) -> streamline::Result<()>,
    run: fn(&Gpu, &Common, &O) -> streamline::Result<Report>,
) -> Result<Runner> {
    validate(&o)?;
    Ok(Box::new(move |g, c| run(g, c, &o)))
}

pub fn run(device: usize, ptx: Option<&Path>, a: PipelineArgs) -> Result<()> {
    // Decoding JPEGs on the GPU, the decoder gets SMs of its own.
    let side = match &a.scenario {
        Scenario::AugmentTrain { o, .. } => augment_train::side_sms(o),
        _ => None,
    };
    // Validate everything the scenario does not need the device for before opening it.
    let (args, go): (CommonArgs, Runner) = match a.scenario {
        Scenario::HeavySplit { common, o } => (common, bind(o, |_| Ok(()), heavy_split::run)?),
        Scenario::Branches { common, o } => (common, bind(o, |_| Ok(()), branches::run)?),
        Scenario::Multistage { common, o } => {
            (common, bind(o, multistage::validate, multistage::run)?)
        }
        Scenario::CopyOverlap { common, o } => {
            (common, bind(o, copy_overlap::validate, copy_overlap::run)?)
        }
        Scenario::AugmentTrain { common, o } => (
            common,
            bind(o, augment_train::validate, augment_train::run)?,
        ),
        Scenario::EncoderDecoder { common, o } => (
            common,
            bind(o, encoder_decoder::validate, encoder_decoder::run)?,
        ),
        Scenario::Prefetch { common, o } => (common, bind(o, prefetch::validate, prefetch::run)?),
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
    let gpu = match side {
        None => Gpu::new(device, ptx)?,
        Some((n, strict)) => match Gpu::with_side_sms(device, ptx, n) {
            Ok(g) => g,
            // Where the driver cannot split the SMs and `--decoder-sms` was not given, every SM
            // is shared (the report says so); given, the error says why and how to go without.
            Err(_) if !strict => Gpu::new(device, ptx)?,
            Err(e) => bail!("--decoder-sms {n}: {e} (0 shares every SM with the decoder)"),
        },
    };
    // Ctrl-C stops the run at its next iteration: the work already queued finishes, everything
    // is freed, and the error says how far it got (a second Ctrl-C kills the process).
    install_ctrl_c()?;
    let r = match go(&gpu, &c) {
        Ok(r) => r,
        Err(streamline::Error::Interrupted(why)) => {
            // Write what was recorded before the interruption, then stop with one line.
            let wrote = match streamline_scenarios::take_last_recorded() {
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
    let [first, second] = r.runs.clone().unwrap_or_else(|| {
        [
            "serial (every lane on one stream)".into(),
            "overlapped (one stream per lane)".into(),
        ]
    });
    println!("{:<40} {:>10.4} {:>9}", first, r.serial_ms, "1.00x");
    println!(
        "{:<40} {:>10.4} {:>8.2}x",
        second,
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
    if m.tracks.is_empty() {
        print_notes(r);
        return;
    }
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
    print_notes(r);
}

/// The report's findings and its check.
fn print_notes(r: &Report) {
    for n in &r.notes {
        println!("- {n}");
    }
    println!(
        "check: {} sampled elements against the CPU reference, {} outside the bound, {} unwritten",
        r.check.compared, r.check.failures, r.check.unwritten
    );
}

/// Makes Ctrl-C (SIGINT) [`request`](interrupt::request) a stop instead of killing the
/// process; a second Ctrl-C kills it as usual.
fn install_ctrl_c() -> Result<()> {
    ctrlc::set_handler(|| {
        if interrupt::requested() {
            std::process::exit(130);
        }
        interrupt::request();
    })
    .context("cannot install the Ctrl-C handler")
}
