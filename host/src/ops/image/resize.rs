//! `resize`: every plane to a new size.

use super::{check_len, column_grid, layout_bits, resize_scale, Shape, BLOCK};
use crate::error::Result;
use crate::runtime::{Gpu, LaunchConfig};
use crate::spec::image::{Layout, ResizeMode};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline_abi::image::{
    ResizeParams, NHWC_IN, NHWC_OUT, RESIZE_BILINEAR, RESIZE_BILINEAR_AA,
    RESIZE_BILINEAR_AA_RELAYOUT, RESIZE_BILINEAR_RELAYOUT, RESIZE_NEAREST, RESIZE_NEAREST_RELAYOUT,
};

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
    let nchw = Layout::Nchw;
    resize_relayout(
        gpu,
        stream,
        shape,
        (x, nchw),
        (out_h, out_w),
        mode,
        (y, nchw),
    )
}

/// [`resize`] of a batch of `shape` stored in layout `from` into layout `to`: NHWC (as image
/// decoders and CV-CUDA lay images out) or NCHW, in any pair, in one pass.
#[allow(clippy::too_many_arguments)]
pub fn resize_relayout(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    (x, from): (&impl DevicePtr<f32>, Layout),
    (out_h, out_w): (usize, usize),
    mode: ResizeMode,
    (y, to): (&mut impl DevicePtrMut<f32>, Layout),
) -> Result<()> {
    shape.check("x")?;
    check_len("x", x.len(), shape)?;
    let out = shape.with_size(out_h, out_w);
    out.check("size")?;
    check_len("y", y.len(), out)?;
    // Antialiasing changes nothing when neither axis shrinks (the triangle's support stays one
    // pixel): the plain bilinear kernel computes the same values.
    // Plain bilinear computes two columns per thread (`for_column_pairs`), the others one.
    let (kernels, two_columns) = match mode {
        ResizeMode::BilinearAntialias if out_h < shape.h || out_w < shape.w => {
            ((RESIZE_BILINEAR_AA, RESIZE_BILINEAR_AA_RELAYOUT), false)
        }
        ResizeMode::Bilinear | ResizeMode::BilinearAntialias => {
            ((RESIZE_BILINEAR, RESIZE_BILINEAR_RELAYOUT), true)
        }
        ResizeMode::Nearest => ((RESIZE_NEAREST, RESIZE_NEAREST_RELAYOUT), false),
    };
    let layout = layout_bits((from, to), (NHWC_IN, NHWC_OUT));
    // NHWC in and out, the kernels' columns are the rows' values (each one channel of a
    // pixel), all of them for nearest and antialiased resize, a stretch of `out_w` of them
    // for plain bilinear (whose threads take a value in each stretch).
    let columns = if layout == NHWC_IN | NHWC_OUT && !two_columns {
        out_w * shape.c
    } else {
        out_w
    };
    // A full multiprocessor of threads per row, as for `rotate`; half of one for bilinear NHWC
    // in and out, whose threads' setup (a value's taps in each stretch) costs more.
    let values = layout == NHWC_IN | NHWC_OUT && two_columns;
    let per_row = if values { 1024 } else { 2048 };
    let (mut grid, rows) = column_grid(gpu, "size", (out_h, columns), shape.n, per_row)?;
    let kernel = if layout == 0 { kernels.0 } else { kernels.1 };
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
        layout,
    };
    if two_columns {
        // Two columns per thread: half as many blocks across.
        grid.0 = grid.0.div_ceil(2);
    }
    // SAFETY: lengths checked against the shapes; the grid covers every output pixel; `kernel`
    // reads the layouts `layout` names.
    unsafe { launch.run(LaunchConfig::new(grid, BLOCK), p) }
}
