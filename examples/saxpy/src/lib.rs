//! The host side of the saxpy example: the embedded kernels, a safe launcher and the CPU
//! reference.

use saxpy_kernels::SaxpyParams;
use streamline::cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline::{EmbeddedModule, LaunchConfig, Module, Result};
use streamline_testing::Tolerance;

/// The PTX `build.rs` built from `kernels/`.
pub static KERNELS: EmbeddedModule = streamline::include_kernels!("saxpy_kernels");

/// `y = a x + y` on `stream`. The launch waits for earlier writers of `x` and `y` on other
/// streams of the engine, and later users of `y` wait for it.
pub fn saxpy(
    module: &Module,
    stream: &CudaStream,
    a: f32,
    x: &impl DevicePtr<f32>,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    streamline::ops::check_same_len(x.len(), y.len())?;
    if x.len() == 0 {
        return Ok(());
    }
    let n = x.len() as u64;
    let mut launch = module.prepare(stream, saxpy_kernels::saxpy);
    let params = SaxpyParams {
        x: launch.read(x),
        y: launch.write(y),
        n,
        a,
        pad: 0,
    };
    // SAFETY: `x` and `y` hold `n` f32 each (checked above) and are distinct buffers (one
    // borrowed shared, the other exclusively); the kernel touches indices below `n` only.
    unsafe { launch.run(LaunchConfig::for_elements(n, 256)?, params) }
}

/// The exact `a x + y` of each element, in f64.
///
/// Error analysis: `a * x` of two f32 is exact in f64 (48 significant bits), and adding `y`
/// rounds once at 2^-53 relative. The kernel's fused multiply-add rounds the exact value once
/// to f32, so the two agree after rounding the reference to f32 except where the f64 rounding
/// moves a value across an f32 rounding boundary: at most 1 ulp apart.
pub fn reference(a: f32, x: &[f32], y: &[f32]) -> Vec<f64> {
    x.iter()
        .zip(y)
        .map(|(&x, &y)| a as f64 * x as f64 + y as f64)
        .collect()
}

/// The bound from the error analysis of [`reference`](fn@reference).
pub const TOLERANCE: Tolerance = Tolerance::Ulps(1);
