//! `streamline info`.

use anyhow::Result;
use std::path::Path;
use streamline::runtime::{device_count, driver_version, Gpu, KERNELS, SOURCE_HASH};

pub fn run(device: usize, ptx: Option<&Path>) -> Result<()> {
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
