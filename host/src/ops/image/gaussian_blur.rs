//! `gaussian_blur`: its sigmas and the checks of kernel sizes and sigmas.

use super::{check_len, tile_grid, PerImage, Shape, BLOCK};
use crate::error::{Error, Result};
use crate::runtime::{Gpu, LaunchConfig};
use crate::spec::image::{check_kernel_size, check_sigma};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline_abi::image::{
    blur_fast, blur_output_tile, blur_shared_bytes, FastDiv, GaussianBlurParams, GAUSSIAN_BLUR,
    GAUSSIAN_BLUR_FAST,
};
use streamline_device::DevPtr;

/// Sigma of `gaussian_blur`.
pub enum Sigma<'a> {
    /// `(sigma_x, sigma_y)` for every image.
    Global(f32, f32),
    /// Pairs `[sigma_x, sigma_y]` per image (`2 * n` values).
    PerImage(&'a PerImage),
}

/// `gaussian_blur(x, [kx, ky], [sigma_x, sigma_y])` with reflect padding.
#[allow(clippy::too_many_arguments)]
pub fn gaussian_blur(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    x: &impl DevicePtr<f32>,
    (kx, ky): (usize, usize),
    sigma: Sigma,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    shape.check("x")?;
    check_len("x", x.len(), shape)?;
    check_len("y", y.len(), shape)?;
    check_kernel_size("kernel_size", kx, shape.w, "width")?;
    check_kernel_size("kernel_size", ky, shape.h, "height")?;
    let (sp, sx, sy) = match &sigma {
        Sigma::Global(sx, sy) => {
            check_sigma("sigma", *sx)?;
            check_sigma("sigma", *sy)?;
            (None, *sx, *sy)
        }
        Sigma::PerImage(s) => {
            if s.host.len() != 2 * shape.n {
                return Err(Error::arg(
                    "sigma",
                    format!(
                        "has {} values; needs a pair per image ({})",
                        s.host.len(),
                        2 * shape.n
                    ),
                ));
            }
            for v in &s.host {
                check_sigma("sigma", *v)?;
            }
            // A graph that captures this launch keeps the sigmas alive after their owner goes.
            crate::engine::params::keep_in_capture(stream, Box::new(s.dev.clone()))?;
            (Some(&s.dev), 0.0, 0.0)
        }
    };
    let tile = blur_output_tile(kx as u32, ky as u32, shape.w as u32);
    let (grid, tiles, tiles_x) = tile_grid("x", (shape.h, shape.w), tile, shape.n * shape.c)?;
    let kernel = if blur_fast(kx as u32, ky as u32) {
        GAUSSIAN_BLUR_FAST
    } else {
        GAUSSIAN_BLUR
    };
    let mut launch = gpu.kernels()?.prepare(stream, kernel);
    let xp = launch.read(x);
    let sigmas = sp.map_or(DevPtr::NULL, |d| launch.read(&**d));
    let yp = launch.write(y);
    let p = GaussianBlurParams {
        x: xp,
        y: yp,
        sigmas,
        batch: shape.n as u32,
        channels: shape.c as u32,
        height: shape.h as u32,
        width: shape.w as u32,
        kx: kx as u32,
        ky: ky as u32,
        sigma_x: sx,
        sigma_y: sy,
        tiles,
        tiles_x,
        planes: FastDiv::new(shape.c as u32),
    };
    let smem = blur_shared_bytes(kx as u32, ky as u32, shape.w as u32);
    // SAFETY: lengths checked; kernel sizes odd, within MAX_KERNEL_SIZE and smaller than twice
    // the image; sigmas a pair per image or 0; the shared memory is what the kernel uses for
    // these sizes, and the fast kernel runs only for the sizes of its path.
    unsafe { launch.run(LaunchConfig::new(grid, BLOCK).with_shared(smem), p) }
}
