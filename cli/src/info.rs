//! `streamline info`.

use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use streamline::runtime::{device_count, driver_version, Gpu, KERNELS, SOURCE_HASH};

#[derive(Args)]
pub struct InfoArgs {
    /// Write the embedded kernels into DIR instead: for each architecture
    /// `DIR/ARCH/gpu_kernels.manifest.json` with its machine code (`gpu_kernels.cubin`) and,
    /// where embedded (the highest portable architecture's), its PTX (`gpu_kernels.ptx`), as
    /// `--ptx` and `streamline_builder` read them. Needs no GPU.
    #[arg(long, value_name = "DIR")]
    write_kernels: Option<PathBuf>,
}

pub fn run(device: usize, ptx: Option<&Path>, args: InfoArgs) -> Result<()> {
    if let Some(dir) = &args.write_kernels {
        return write_kernels(dir);
    }
    println!(
        "embedded kernels: {} (kernel sources {})",
        KERNELS.contents(),
        &SOURCE_HASH[..12]
    );
    let (major, minor) = driver_version()?;
    println!("CUDA driver: {major}.{minor}");
    let count = device_count()?;
    println!("devices: {count}");
    if device >= count {
        return Err(streamline::Error::NoDevice {
            ordinal: device,
            reason: format!("--device must be in 0..{count} on this machine"),
        }
        .into());
    }
    for ordinal in 0..count {
        let gpu = Gpu::new(ordinal, if ordinal == device { ptx } else { None })?;
        let i = gpu.info();
        println!(
            "[{ordinal}] {}: compute capability {}.{}, {} SMs, {:.1} GiB, {} copy engines, L2 {:.0} MiB, {:.0} MHz",
            i.name,
            i.compute_capability.0,
            i.compute_capability.1,
            i.multiprocessors,
            i.memory_bytes as f64 / (1u64 << 30) as f64,
            i.copy_engines,
            i.l2_bytes as f64 / (1u64 << 20) as f64,
            i.clock_khz as f64 / 1000.0
        );
        println!("    kernels from {}:", gpu.image()?.origin);
        println!(
            "    {:<20} {:>5} {:>8} {:>8}",
            "kernel", "regs", "smem B", "local B"
        );
        for (name, f) in gpu.kernels()?.functions() {
            println!(
                "    {:<20} {:>5} {:>8} {:>8}",
                name,
                f.num_regs().unwrap_or(-1),
                f.shared_size_bytes().unwrap_or(-1),
                f.local_size_bytes().unwrap_or(-1)
            );
        }
    }
    Ok(())
}

/// Writes every embedded architecture's code and manifest under `dir`.
fn write_kernels(dir: &Path) -> Result<()> {
    for a in KERNELS.archs {
        let image = KERNELS.arch_image(a.arch)?;
        let d = dir.join(a.arch);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        let write = |name: &str, bytes: &[u8]| {
            let path = d.join(name);
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
            println!("wrote {} ({} bytes)", path.display(), bytes.len());
            anyhow::Ok(())
        };
        let manifest = serde_json::to_string_pretty(&image.manifest)?;
        write("gpu_kernels.manifest.json", manifest.as_bytes())?;
        if let Some(cubin) = &image.cubin {
            write("gpu_kernels.cubin", cubin)?;
        }
        if let Some(ptx) = &image.ptx {
            write("gpu_kernels.ptx", ptx.as_bytes())?;
        }
    }
    Ok(())
}
