//! `to_float`: uint8 to f32.

use super::{check_len, Layout, Shape};
use crate::error::Result;
use crate::runtime::{Gpu, LaunchConfig};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline_abi::image::{
    ToFloatParams, ToFloatRelayoutParams, ELEMENTWISE_BLOCK, TO_FLOAT, TO_FLOAT_RELAYOUT,
};

/// `ToDtype(float32)`: `y = f32(x)`, or with `scale` `y = f32(x) * f32(1/255)`.
pub fn to_float(
    gpu: &Gpu,
    stream: &CudaStream,
    x: &impl DevicePtr<u8>,
    y: &mut impl DevicePtrMut<f32>,
    scale: bool,
) -> Result<()> {
    crate::ops::check_same_len(x.len(), y.len())?;
    if x.len() == 0 {
        return Ok(());
    }
    let n = x.len() as u64;
    let mut launch = gpu.kernels()?.prepare(stream, TO_FLOAT);
    let xp = launch.read(x);
    let yp = launch.write(y);
    let p = ToFloatParams {
        x: xp,
        y: yp,
        n,
        scale: to_float_scale(scale),
        pad: 0,
    };
    let per_block = (ELEMENTWISE_BLOCK, 16 * ELEMENTWISE_BLOCK as u64);
    // SAFETY: `x` holds `n` bytes and `y` `n` f32 (lengths checked), distinct allocations (one
    // borrowed shared, one exclusively); the kernel strides over all of them.
    unsafe { launch.run(crate::LaunchConfig::strided(n, per_block, 1 << 20), p) }
}

/// `ToDtype(float32)` of a batch of `shape` stored in layout `from` into layout `to`: uint8
/// NHWC from an image decoder to the f32 NCHW a model takes in one pass, or back. With equal
/// layouts it is [`to_float`].
pub fn to_float_relayout(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    (x, from): (&impl DevicePtr<u8>, Layout),
    (y, to): (&mut impl DevicePtrMut<f32>, Layout),
    scale: bool,
) -> Result<()> {
    shape.check("x")?;
    check_len("x", x.len(), shape)?;
    check_len("y", y.len(), shape)?;
    if from == to {
        return to_float(gpu, stream, x, y, scale);
    }
    let plane = (shape.h * shape.w) as u32;
    let blocks = plane.div_ceil(ELEMENTWISE_BLOCK).clamp(1, 1 << 16);
    // One row of blocks per image, up to the grid's limit; the kernel strides over the rest.
    let images = shape.n.min(65535) as u32;
    let mut launch = gpu.kernels()?.prepare(stream, TO_FLOAT_RELAYOUT);
    let xp = launch.read(x);
    let yp = launch.write(y);
    let p = ToFloatRelayoutParams {
        x: xp,
        y: yp,
        images: shape.n as u32,
        channels: shape.c as u32,
        plane,
        scale: to_float_scale(scale),
        to_nchw: (to == Layout::Nchw) as u32,
        pad: 0,
    };
    // SAFETY: `shape` was checked (an image at most `2^32 - 1` values), `x` holds its bytes and
    // `y` as many f32 (lengths checked), distinct allocations; the kernel strides over every
    // pixel of every image whatever the grid.
    unsafe {
        launch.run(
            LaunchConfig::new((blocks, images, 1), (ELEMENTWISE_BLOCK, 1, 1)),
            p,
        )
    }
}

/// The multiplier of `to_float`: 1, or `f32(1/255)` as torchvision's `mul_(1 / 255)` applies.
pub fn to_float_scale(scale: bool) -> f32 {
    if scale {
        (1.0f64 / 255.0) as f32
    } else {
        1.0
    }
}
