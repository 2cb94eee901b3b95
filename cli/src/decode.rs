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
    #[arg(long, value_enum, default_value_t = Backend::Both)]
    backend: Backend,
    /// Of the images the hardware decoders take, the share they decode (the CUDA decoder takes
    /// the rest at the same time); default 0.75 with `--backend both`.
    #[arg(long)]
    hardware_share: Option<f64>,
    /// Timed passes over the folder, after one untimed pass.
    #[arg(long, default_value_t = 3)]
    passes: usize,
    /// Compare every decoded image with the CPU's decoder (the `image` crate) and report the
    /// differences; fails where the mean difference exceeds 2 levels.
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
    let gpu = Gpu::new(device, ptx)?;
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
    let mut times = Vec::with_capacity(args.passes);
    for _ in 0..args.passes {
        let t = Instant::now();
        for b in &batches {
            // Each batch's buffer is freed in stream order when dropped.
            dec.decode(&stream, b)?;
        }
        stream.synchronize()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let secs = times[times.len() / 2];
    let rate = files.len() as f64 / secs;
    let check = if args.check {
        Some(compare(&mut dec, &stream, &batches, &names, args.batch)?)
    } else {
        None
    };
    if args.json {
        let mut line = format!(
            "{{\"case\": \"streamline_decode_{}_b{}\", \"gpu\": \"{}\", \"images\": {}, \"images_per_s\": {:.1}, \"megapixels_per_s\": {:.1}, \"on_hardware\": {}, \"library\": \"{}\"",
            format!("{:?}", args.backend).to_lowercase(),
            args.batch,
            gpu.info().name,
            files.len(),
            rate,
            pixels as f64 / secs / 1e6,
            on_hardware,
            dec.library()
        );
        if let Some((mean, max, worst)) = &check {
            line += &format!(", \"mean_abs_diff_cpu\": {mean:.3}, \"max_abs_diff_cpu\": {max}, \"worst\": \"{worst}\"");
        }
        println!("{line}}}");
    } else {
        println!(
            "{} JPEG files in batches of {} on {} ({:?}; {} of them on the hardware decoders{}): {:.1} images/s, {:.1} Mpixel/s (median of {} passes)",
            files.len(),
            args.batch,
            gpu.info().name,
            args.backend,
            on_hardware,
            dec.no_hardware
                .as_ref()
                .map(|w| format!("; no hardware decoders: {w}"))
                .unwrap_or_default(),
            rate,
            pixels as f64 / secs / 1e6,
            args.passes
        );
        if let Some((mean, max, worst)) = &check {
            println!("against the CPU decoder: mean |difference| {mean:.3} levels, largest {max} ({worst})");
        }
    }
    if let Some((mean, _, worst)) = check {
        anyhow::ensure!(
            mean <= 2.0,
            "the GPU's decode differs from the CPU's by {mean:.3} levels on average (most in {worst})"
        );
    }
    Ok(())
}

/// Decodes every batch again, copies it back and compares it with the `image` crate's decode
/// of the same files: `(mean |difference|, largest |difference|, file of the largest)`.
fn compare(
    dec: &mut JpegDecoder,
    stream: &Arc<cudarc::driver::CudaStream>,
    batches: &[Vec<&[u8]>],
    names: &[&PathBuf],
    batch: usize,
) -> Result<(f64, u8, String)> {
    let (mut sum, mut count, mut max, mut worst) = (0u64, 0u64, 0u8, String::new());
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
            let gpu = &host[d.layout.offsets[j]..d.layout.offsets[j] + h * w * 3];
            for (a, c) in gpu.iter().zip(cpu.as_raw()) {
                let diff = a.abs_diff(*c);
                sum += diff as u64;
                if diff > max {
                    max = diff;
                    worst = name.display().to_string();
                }
            }
            count += gpu.len() as u64;
        }
    }
    Ok((sum as f64 / count.max(1) as f64, max, worst))
}
