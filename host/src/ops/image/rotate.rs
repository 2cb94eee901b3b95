//! `rotate`: per-image rotation.

use super::{check_len, column_grid, layout_bits, PerImage, Shape, BLOCK};
use crate::error::{Error, Result};
use crate::runtime::{Gpu, LaunchConfig};
use crate::spec::image::{Interp, Layout};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline_abi::image::{
    rotate_staged_nhwc_shared_bytes, rotate_staged_shared_bytes, RotateParams, ROTATE_BILINEAR,
    ROTATE_BILINEAR_RELAYOUT, ROTATE_BILINEAR_STAGED, ROTATE_BILINEAR_STAGED_RELAYOUT,
    ROTATE_NEAREST, ROTATE_NEAREST_RELAYOUT, ROTATE_NHWC_IN, ROTATE_NHWC_OUT,
    ROTATE_STAGED_MAX_CHANNELS, ROTATE_STAGED_TILE,
};

/// `rotate`: image `i` rotated by `angles[i]` degrees counter-clockwise about its centre,
/// `expand=False`; outside the input, `fill` (torchvision's masked fill) or 0 with `None`.
#[allow(clippy::too_many_arguments)]
pub fn rotate(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    x: &impl DevicePtr<f32>,
    angles: &PerImage,
    mode: Interp,
    fill: Option<f32>,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    let nchw = Layout::Nchw;
    rotate_relayout(gpu, stream, shape, (x, nchw), angles, mode, fill, (y, nchw))
}

/// [`rotate`] of a batch of `shape` stored in layout `from` into layout `to`: NHWC, as image
/// decoders and CV-CUDA lay images out, or NCHW (what a model takes), in any pair, in one pass
/// with no separate permute. NCHW in and out is the fastest pair (see BENCHMARKS.md).
#[allow(clippy::too_many_arguments)]
pub fn rotate_relayout(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    (x, from): (&impl DevicePtr<f32>, Layout),
    angles: &PerImage,
    mode: Interp,
    fill: Option<f32>,
    (y, to): (&mut impl DevicePtrMut<f32>, Layout),
) -> Result<()> {
    shape.check("x")?;
    check_len("x", x.len(), shape)?;
    check_len("y", y.len(), shape)?;
    if angles.host.len() != shape.n {
        return Err(Error::arg(
            "angles",
            format!(
                "has {} values; needs one per image ({})",
                angles.host.len(),
                shape.n
            ),
        ));
    }
    if let Some(f) = fill.filter(|f| !f.is_finite()) {
        return Err(Error::arg("fill", format!("{f}: must be finite")));
    }
    let layout = layout_bits((from, to), (ROTATE_NHWC_IN, ROTATE_NHWC_OUT));
    // A graph that captures this launch keeps the angles alive after their owner goes.
    crate::engine::params::keep_in_capture(stream, Box::new(angles.dev.clone()))?;
    let mut launch = gpu.kernels()?.prepare(stream, ROTATE_BILINEAR_STAGED);
    let xp = launch.read(x);
    let ap = launch.read(&*angles.dev);
    let yp = launch.write(y);
    let mut p = RotateParams {
        x: xp,
        y: yp,
        angles: ap,
        batch: shape.n as u32,
        channels: shape.c as u32,
        height: shape.h as u32,
        width: shape.w as u32,
        fill: fill.unwrap_or(0.0),
        has_fill: fill.is_some() as u32,
        rows: 1,
        layout,
    };
    // Bilinear rotation stages its input in any layouts; nearest rotation reads a third as many
    // values and is faster gathering them (in NHWC too: see BENCHMARKS.md).
    if mode == Interp::Bilinear && staged(shape, xp.addr()) {
        let tile = ROTATE_STAGED_TILE as usize;
        let grid = (
            shape.w.div_ceil(tile) as u32,
            shape.h.div_ceil(tile) as u32,
            shape.n as u32,
        );
        let c = shape.c as u32;
        let kernel = if layout == 0 {
            ROTATE_BILINEAR_STAGED
        } else {
            ROTATE_BILINEAR_STAGED_RELAYOUT
        };
        let smem = if layout & ROTATE_NHWC_IN != 0 {
            rotate_staged_nhwc_shared_bytes(c)
        } else {
            rotate_staged_shared_bytes(c)
        };
        let cfg = LaunchConfig::new(grid, BLOCK).with_shared(smem);
        // SAFETY: lengths checked against `shape`; one angle per image; `staged` checked the
        // input's alignment, width, channels and the grid's limits; the grid covers every
        // output tile with the shared memory the kernel needs for the input's layout.
        return unsafe { launch.instead(kernel).run(cfg, p) };
    }
    let kernel = match (mode, layout) {
        (Interp::Nearest, 0) => ROTATE_NEAREST,
        (Interp::Bilinear, 0) => ROTATE_BILINEAR,
        (Interp::Nearest, _) => ROTATE_NEAREST_RELAYOUT,
        (Interp::Bilinear, _) => ROTATE_BILINEAR_RELAYOUT,
    };
    // A full multiprocessor of threads per row (measured on an H200).
    let (grid, rows) = column_grid(gpu, "x", (shape.h, shape.w), shape.n, 2048)?;
    p.rows = rows;
    // SAFETY: lengths checked against `shape`; one angle per image; the grid covers every
    // output pixel; `kernel` reads the layouts `layout` names.
    unsafe {
        launch
            .instead(kernel)
            .run(LaunchConfig::new(grid, BLOCK), p)
    }
}

/// Whether a bilinear rotation of `shape` whose input starts at device address `x` takes the
/// staged kernels, in any layouts. Their 16-byte copies need every input row
/// to start 16-byte aligned (the input aligned, the width a multiple of 4), its window holds at
/// most `ROTATE_STAGED_MAX_CHANNELS` channels, and its grid has one block per tile and image.
fn staged(shape: Shape, x: u64) -> bool {
    const MAX_GRID_YZ: usize = 65_535;
    x.is_multiple_of(16)
        && shape.w.is_multiple_of(4)
        && shape.c <= ROTATE_STAGED_MAX_CHANNELS as usize
        && shape.h.div_ceil(ROTATE_STAGED_TILE as usize) <= MAX_GRID_YZ
        && shape.n <= MAX_GRID_YZ
}
