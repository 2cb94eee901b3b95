//! The `streamline` command line: the kernels, benchmarks and stream scenarios run from a shell.

mod bench;
mod collective;
mod decode;
mod heavy;
mod img;
mod info;
mod matmul;
mod matmul_half;
mod matmul_owed;
mod pipeline;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use streamline_scenarios::parse_count;

/// Custom Rust GPU kernels over CUDA streams.
#[derive(Parser)]
#[command(name = "streamline", version, about)]
struct Cli {
    /// CUDA device ordinal.
    #[arg(long, global = true, default_value_t = 0)]
    device: usize,
    /// Load this PTX (`DIR/NAME.ptx`, with its `NAME.manifest.json` beside it, as `cargo xtask
    /// build-kernels` writes them) instead of the embedded one.
    #[arg(long, global = true)]
    ptx: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Driver, devices, embedded PTX architectures and per-kernel resources.
    Info(info::InfoArgs),
    /// Seed 000: the heavy computation on one stream vs split over K streams.
    Heavy(heavy::HeavyArgs),
    /// Matmul (C = alpha A B + beta C) in f32, bf16 or f16, optionally against cuBLAS and the
    /// CPU reference.
    Matmul(matmul::MatmulArgs),
    /// Benchmarks against the hardware's ceilings, as a table and JSON lines.
    Bench(bench::BenchArgs),
    /// One image operation on a `.npy` array (NCHW), written as `.npy`.
    Op(img::OpArgs),
    /// Seed 003's augmentation on PNG/JPEG images (or a synthetic one): PNGs and a contact sheet.
    Augment(img::AugmentArgs),
    /// NCCL collectives between GPUs through the engine: bus bandwidth and latency per
    /// message size, checked against the CPU.
    Collective(collective::CollectiveArgs),
    /// The seeds' stream scenarios: serial vs overlapped, overlap metrics, trace and timeline.
    Pipeline(pipeline::PipelineArgs),
    /// JPEG files decoded on the GPU (nvJPEG: the hardware decoders and the CUDA decoder at
    /// once): images per second over a folder, checked against the CPU's decoder.
    Decode(decode::DecodeArgs),
}

fn main() {
    restore_sigpipe();
    // Streams that share a hardware queue wait for each other's work (see `CONNECTIONS_VAR`);
    // asked for before the driver starts and before any other thread exists, where unset.
    if std::env::var_os(streamline::runtime::CONNECTIONS_VAR).is_none() {
        std::env::set_var(
            streamline::runtime::CONNECTIONS_VAR,
            streamline::runtime::CONNECTIONS.to_string(),
        );
    }
    let args = Cli::parse();
    if let Err(e) = run(args) {
        // One clear line, no backtrace.
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// Lets a closed pipe end the process quietly, as it ends other command-line tools
/// (`streamline info | head`): Rust starts programs with SIGPIPE ignored, so a write to a closed
/// stdout fails and `println!` panics.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any other thread exists, and SIG_DFL is a
    // valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Info(a) => info::run(cli.device, cli.ptx.as_deref(), a),
        Command::Heavy(a) => heavy::run(cli.device, cli.ptx.as_deref(), a),
        Command::Matmul(a) => matmul::run(cli.device, cli.ptx.as_deref(), a),
        Command::Bench(a) => bench::run(cli.device, cli.ptx.as_deref(), a),
        Command::Op(a) => img::run_op(cli.device, cli.ptx.as_deref(), a),
        Command::Augment(a) => img::run_augment(cli.device, cli.ptx.as_deref(), a),
        Command::Pipeline(a) => pipeline::run(cli.device, cli.ptx.as_deref(), a),
        Command::Collective(a) => collective::run(cli.device, a),
        Command::Decode(a) => decode::run(cli.device, cli.ptx.as_deref(), a),
    }
}
