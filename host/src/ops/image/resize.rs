//! `resize`: every plane to a new size.

use super::{check_len, column_grid, resize_scale, Shape, BLOCK};
use crate::error::Result;
use crate::runtime::{Gpu, LaunchConfig};
use crate::spec::image::ResizeMode;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline_abi::image::{ResizeParams, RESIZE_BILINEAR, RESIZE_BILINEAR_AA, RESIZE_NEAREST};

/// `resize` of every plane to `out_h x out_w`.
#[allow(clippy::too_many_arguments)]
pub fn resize(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    x: &impl DevicePtr<f32>,
    (out_h, out_w): (usize, usize),
    mode: ResizeMode,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    shape.check("x")?;
    check_len("x", x.len(), shape)?;
    let out = shape.with_size(out_h, out_w);
    out.check("size")?;
    check_len("y", y.len(), out)?;
    // A full multiprocessor of threads per row, as for `rotate`.
    let (mut grid, rows) = column_grid(gpu, "size", (out_h, out_w), shape.n, 2048)?;
    // Antialiasing changes nothing when neither axis shrinks (the triangle's support stays one
    // pixel): the plain bilinear kernel computes the same values.
    // Plain bilinear computes two columns per thread (`for_column_pairs`), the others one.
    let (kernel, two_columns) = match mode {
        ResizeMode::BilinearAntialias if out_h < shape.h || out_w < shape.w => {
            (RESIZE_BILINEAR_AA, false)
        }
        ResizeMode::Bilinear | ResizeMode::BilinearAntialias => (RESIZE_BILINEAR, true),
        ResizeMode::Nearest => (RESIZE_NEAREST, false),
    };
    let mut launch = gpu.kernels()?.prepare(stream, kernel);
    let xp = launch.read(x);
    let yp = launch.write(y);
    let p = ResizeParams {
        x: xp,
        y: yp,
        batch: shape.n as u32,
        channels: shape.c as u32,
        in_h: shape.h as u32,
        in_w: shape.w as u32,
        out_h: out_h as u32,
        out_w: out_w as u32,
        scale_h: resize_scale(shape.h, out_h),
        scale_w: resize_scale(shape.w, out_w),
        rows,
        pad: 0,
    };
    if two_columns {
        // Two columns per thread: half as many blocks across.
        grid.0 = grid.0.div_ceil(2);
    }
    // SAFETY: lengths checked against the shapes; the grid covers every output pixel.
    unsafe { launch.run(LaunchConfig::new(grid, BLOCK), p) }
}
