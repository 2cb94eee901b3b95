//! `saxpy [N]`: loads the kernel built by `build.rs`, runs `y = 2 x + y` on N elements (default
//! 2^20) and checks every element against the CPU reference.

use anyhow::{bail, Context, Result};
use streamline::Gpu;
use streamline_testing::compare;

fn main() -> Result<()> {
    let n: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().context("N: expected an element count")?,
        None => 1 << 20,
    };
    let gpu = Gpu::new(0, None)?;
    let module = gpu.load(&saxpy::KERNELS)?;
    let stream = gpu.stream();

    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.001).collect();
    let y: Vec<f32> = (0..n).map(|i| 1.0 - (i % 7) as f32).collect();
    let xd = stream.clone_htod(&x)?;
    let mut yd = stream.clone_htod(&y)?;
    saxpy::saxpy(&module, stream, 2.0, &xd, &mut yd)?;
    let got = stream.clone_dtoh(&yd)?;

    if let Err(e) = compare(&got, &saxpy::reference(2.0, &x, &y), saxpy::TOLERANCE) {
        bail!("saxpy on {}: {e}", gpu.info().name);
    }
    println!(
        "saxpy: {n} elements on {} match the CPU reference within {:?}",
        gpu.info().name,
        saxpy::TOLERANCE
    );
    Ok(())
}
