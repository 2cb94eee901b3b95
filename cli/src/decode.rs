//! `streamline decode`: JPEG files decoded on the GPU through nvJPEG, timed over a folder and
//! checked against the CPU's decoder.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use streamline::jpeg::{Backend, JpegDecoder};
use streamline::Gpu;
use streamline_scenarios::folder::ImageFolder;

#[derive(Args)]
pub struct DecodeArgs {
    /// Folder of JPEG files: class subfolders (as `pipeline augment-train --input` reads) or
    /// the files directly in it.
    #[arg(long)]
    input: PathBuf,
    /// Images per batch.
    #[arg(long, default_value_t = 128)]
    batch: usize,
    /// Which of nvJPEG's decoders take the images.
    #[arg(long, value_enum, default_value_t = Backend::Hardware)]
    backend: Backend,
    /// Of the images the hardware decoders can take, the share they decode (default 1); the
    /// CUDA decoder takes the rest at the same time.
    #[arg(long)]
    hardware_share: Option<f64>,
    /// SMs kept for the decoder (at least this many: the driver splits them in groups), as
    /// `pipeline augment-train --decoder-sms` keeps them; 0, the default, decodes on every SM.
    #[arg(long, default_value_t = 0)]
    decoder_sms: u32,
    /// Timed passes over the folder, after one untimed pass.
    #[arg(long, default_value_t = 3)]
    passes: usize,
    /// Compare every decoded image with the CPU's decoder (the `image` crate) and report the
    /// differences, in RGB and in luma (which the decoders' chroma upsampling, free in JPEG,
    /// leaves alone); fails where the mean luma difference exceeds 1 level.
    #[arg(long)]
    check: bool,
    /// Print one JSON line instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(device: usize, ptx: Option<&std::path::Path>, args: DecodeArgs) -> Result<()> {
    anyhow::ensure!(
        (1..=4096).contains(&args.batch),
        "--batch {}: must be 1..=4096",
        args.batch
    );
    anyhow::ensure!(args.passes >= 1, "--passes must be at least 1");
    let files: Vec<PathBuf> = ImageFolder::open(&args.input, 256)?
        .files()
        .iter()
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jpg" | "jpeg"))
        })
        .cloned()
        .collect();
    anyhow::ensure!(!files.is_empty(), "{}: no JPEG files", args.input.display());
    let bytes: Vec<Vec<u8>> = files
        .iter()
        .map(|p| std::fs::read(p).with_context(|| format!("reading {}", p.display())))
        .collect::<Result<_>>()?;
    let gpu = match args.decoder_sms {
        0 => Gpu::new(device, ptx)?,
        n => Gpu::with_side_sms(device, ptx, n).with_context(|| format!("--decoder-sms {n}"))?,
    };
    let mut dec = JpegDecoder::new(&gpu, args.backend)?;
    if let Some(s) = args.hardware_share {
        dec.set_hardware_share(s)?;
    }
    let stream = gpu.new_stream()?;
    let batches: Vec<Vec<&[u8]>> = bytes
        .chunks(args.batch)
        .map(|c| c.iter().map(|b| b.as_slice()).collect())
        .collect();
    let names: Vec<&PathBuf> = files.iter().collect();
    // One untimed pass: nvJPEG's buffers grow to the largest batch.
    let mut on_hardware = 0;
    let mut pixels = 0usize;
    for (k, b) in batches.iter().enumerate() {
        let d = dec
            .decode(&stream, b)
            .with_context(|| format!("batch from {}", names[k * args.batch].display()))?;
        on_hardware += d.layout.on_hardware;
        pixels += d.layout.sizes.iter().map(|(h, w)| h * w).sum::<usize>();
    }
    stream.synchronize()?;
    let before = dec.host_times();
    let mut times = Vec::with_capacity(args.passes);
    let mut in_calls = std::time::Duration::ZERO;
    for _ in 0..args.passes {
        let t = Instant::now();
        for b in &batches {
            // Each batch's buffer is freed in stream order when dropped.
            let c = Instant::now();
            dec.decode(&stream, b)?;
            in_calls += c.elapsed();
        }
        stream.synchronize()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let secs = times[times.len() / 2];
    // The host's time inside the decoder's calls, per batch, over every timed pass.
    let per_batch =
        |d: std::time::Duration| 1e6 * d.as_secs_f64() / (args.passes * batches.len()) as f64;
    let host_us = per_batch(in_calls);
    let parts = dec.host_times() - before;
    let (headers_us, waiting_us, nvjpeg_us) = (
        per_batch(parts.headers),
        per_batch(parts.waiting),
        per_batch(parts.decoding),
    );
    let rate = files.len() as f64 / secs;
    let check = if args.check {
        Some(compare(&mut dec, &stream, &batches, &names, args.batch)?)
    } else {
        None
    };
    if args.json {
        let mut line = format!(
            "{{\"case\": \"streamline_decode_{}_b{}\", \"gpu\": \"{}\", \"images\": {}, \"images_per_s\": {:.1}, \"megapixels_per_s\": {:.1}, \"host_us_per_batch\": {:.1}, \"headers_us\": {:.1}, \"waiting_us\": {:.1}, \"nvjpeg_us\": {:.1}, \"on_hardware\": {}, \"decoder_sms\": {}, \"library\": \"{}\"",
            format!("{:?}", args.backend).to_lowercase(),
            args.batch,
            gpu.info().name,
            files.len(),
            rate,
            pixels as f64 / secs / 1e6,
            host_us,
            headers_us,
            waiting_us,
            nvjpeg_us,
            on_hardware,
            gpu.split().map_or(0, |s| s.side_sms),
            dec.library()
        );
        if let Some(c) = &check {
            line += &format!(
                ", \"mean_abs_diff_cpu\": {:.3}, \"mean_abs_luma_diff_cpu\": {:.3}, \"max_abs_diff_cpu\": {}, \"worst\": \"{}\"",
                c.rgb, c.luma, c.max, c.worst
            );
        }
        println!("{line}}}");
    } else {
        println!(
            "{} JPEG files in batches of {} on {}{} ({:?}; {} of them on the hardware decoders{}): {:.1} images/s, {:.1} Mpixel/s (median of {} passes); the host's time in the decoder's calls {:.1} µs per batch ({:.1} reading headers, {:.1} waiting for the stream, {:.1} in nvJPEG's calls)",
            files.len(),
            args.batch,
            gpu.info().name,
            gpu.split()
                .map(|s| format!(" ({} SMs kept for the decoder)", s.side_sms))
                .unwrap_or_default(),
            args.backend,
            on_hardware,
            dec.no_hardware
                .as_ref()
                .map(|w| format!("; no hardware decoders: {w}"))
                .unwrap_or_default(),
            rate,
            pixels as f64 / secs / 1e6,
            args.passes,
            host_us,
            headers_us,
            waiting_us,
            nvjpeg_us
        );
        if let Some(c) = &check {
            println!(
                "against the CPU decoder: mean |difference| {:.3} levels in RGB, {:.3} in luma; largest {} ({})",
                c.rgb, c.luma, c.max, c.worst
            );
        }
    }
    if let Some(c) = check {
        anyhow::ensure!(
            c.luma <= 1.0,
            "the GPU's decode differs from the CPU's by {:.3} levels of luma on average (most in {})",
            c.luma,
            c.worst
        );
    }
    Ok(())
}

/// What a comparison with the CPU's decoder found.
struct Check {
    /// Mean |GPU - CPU| over every RGB value.
    rgb: f64,
    /// Mean |GPU - CPU| of the pixels' luma (`0.299 R + 0.587 G + 0.114 B`).
    luma: f64,
    /// The largest RGB difference, and the file it is in.
    max: u8,
    worst: String,
}

/// Decodes every batch again, copies it back and compares it with the `image` crate's decode
/// of the same files.
fn compare(
    dec: &mut JpegDecoder,
    stream: &Arc<cudarc::driver::CudaStream>,
    batches: &[Vec<&[u8]>],
    names: &[&PathBuf],
    batch: usize,
) -> Result<Check> {
    let (mut rgb, mut luma, mut values) = (0f64, 0f64, 0u64);
    let (mut max, mut worst) = (0u8, String::new());
    for (k, b) in batches.iter().enumerate() {
        let d = dec.decode(stream, b)?;
        let host = stream.clone_dtoh(&d.data)?;
        for (j, file) in b.iter().enumerate() {
            let name = names[k * batch + j];
            let cpu = image::load_from_memory_with_format(file, image::ImageFormat::Jpeg)
                .with_context(|| format!("the CPU cannot decode {}", name.display()))?
                .to_rgb8();
            let (h, w) = d.layout.sizes[j];
            anyhow::ensure!(
                (cpu.height() as usize, cpu.width() as usize) == (h, w),
                "{}: the GPU decoded {w} x {h}, the CPU {} x {}",
                name.display(),
                cpu.width(),
                cpu.height()
            );
            let at = d.layout.offsets[j];
            let gpu = &host[at..at + h * w * 3];
            for (a, c) in gpu.chunks_exact(3).zip(cpu.as_raw().chunks_exact(3)) {
                let y = |p: &[u8]| 0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64;
                luma += (y(a) - y(c)).abs();
                for (u, v) in a.iter().zip(c) {
                    let diff = u.abs_diff(*v);
                    rgb += diff as f64;
                    if diff > max {
                        max = diff;
                        worst = name.display().to_string();
                    }
                }
            }
            values += (h * w) as u64;
        }
    }
    let n = values.max(1) as f64;
    Ok(Check {
        rgb: rgb / (3.0 * n),
        luma: luma / n,
        max,
        worst,
    })
}
