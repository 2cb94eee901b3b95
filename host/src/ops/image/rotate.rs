//! `rotate`: per-image rotation.

use super::{check_len, column_grid, PerImage, Shape, BLOCK};
use crate::error::{Error, Result};
use crate::runtime::Gpu;
use crate::spec::image::Interp;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline_abi::image::{RotateParams, ROTATE_BILINEAR, ROTATE_NEAREST};

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
    // A full multiprocessor of threads per row (measured on an H200).
    let (grid, rows) = column_grid(gpu, "x", (shape.h, shape.w), shape.n, 2048)?;
    let (xp, _r) = x.device_ptr(stream);
    let (ap, _a) = angles.dev.device_ptr(stream);
    let (yp, _w) = y.device_ptr_mut(stream);
    let p = RotateParams {
        x: xp,
        y: yp,
        angles: ap,
        batch: shape.n as u32,
        channels: shape.c as u32,
        height: shape.h as u32,
        width: shape.w as u32,
        fill: fill.unwrap_or(0.0),
        has_fill: fill.is_some() as u32,
        rows,
        pad: 0,
    };
    let kernel = match mode {
        Interp::Nearest => ROTATE_NEAREST,
        Interp::Bilinear => ROTATE_BILINEAR,
    };
    // SAFETY: lengths checked against `shape`; one angle per image; the grid covers every
    // output pixel.
    unsafe { gpu.launch(stream, kernel, grid, BLOCK, p) }
}
