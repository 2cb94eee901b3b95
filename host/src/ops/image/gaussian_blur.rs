//! `gaussian_blur`: its sigmas and the checks of kernel sizes and sigmas.

use super::{check_len, tile_grid, PerImage, Shape, BLOCK};
use crate::error::{Error, Result};
use crate::runtime::{Gpu, LaunchConfig};
use crate::spec::image::{check_kernel_size, check_sigma, Layout};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline_abi::image::{
    blur_fast, blur_fast_nhwc, blur_output_tile, blur_shared_bytes, blur_shared_bytes_nhwc,
    FastDiv, GaussianBlurParams, GAUSSIAN_BLUR, GAUSSIAN_BLUR_FAST, GAUSSIAN_BLUR_FAST_NHWC,
    GAUSSIAN_BLUR_NHWC, NHWC_IN, NHWC_OUT,
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
    gaussian_blur_in(gpu, stream, Layout::Nchw, shape, x, (kx, ky), sigma, y)
}

/// [`gaussian_blur`] of a batch stored in `layout` (NCHW, or NHWC as image decoders and CV-CUDA
/// lay images out), written in the same layout.
#[allow(clippy::too_many_arguments)]
pub fn gaussian_blur_in(
    gpu: &Gpu,
    stream: &CudaStream,
    layout: Layout,
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
    let (k, c, w) = ((kx as u32, ky as u32), shape.c as u32, shape.w as u32);
    let nhwc = layout == Layout::Nhwc;
    // The fast path takes an NHWC image as one plane of `w * c` interleaved values.
    let interleaved = nhwc && blur_fast_nhwc(k.0, k.1, c);
    let ((grid, tiles, tiles_x), planes, smem) = if interleaved {
        let (wv, tile) = (shape.w * shape.c, blur_output_tile(k.0, k.1, w * c));
        (
            tile_grid("x", (shape.h, wv), tile, shape.n)?,
            FastDiv::new(1),
            blur_shared_bytes_nhwc(k.0, k.1, w, c),
        )
    } else {
        let tile = blur_output_tile(k.0, k.1, w);
        (
            tile_grid("x", (shape.h, shape.w), tile, shape.n * shape.c)?,
            FastDiv::new(c),
            blur_shared_bytes(k.0, k.1, w),
        )
    };
    let kernel = match (blur_fast(k.0, k.1), nhwc) {
        (true, false) => GAUSSIAN_BLUR_FAST,
        (true, true) if interleaved => GAUSSIAN_BLUR_FAST_NHWC,
        (_, false) => GAUSSIAN_BLUR,
        (_, true) => GAUSSIAN_BLUR_NHWC,
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
        planes,
        layout: if nhwc { NHWC_IN | NHWC_OUT } else { 0 },
        pad: 0,
    };
    // SAFETY: lengths checked; kernel sizes odd, within MAX_KERNEL_SIZE and smaller than twice
    // the image; sigmas a pair per image or 0; the shared memory is what the kernel uses for
    // these sizes, and the fast kernel runs only for the sizes of its path.
    unsafe { launch.run(LaunchConfig::new(grid, BLOCK).with_shared(smem), p) }
}
