//! `to_float`: uint8 to f32.

use crate::error::Result;
use crate::runtime::Gpu;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline_abi::image::{ToFloatParams, ELEMENTWISE_BLOCK, TO_FLOAT};

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
    let blocks = n.div_ceil(16 * ELEMENTWISE_BLOCK as u64).clamp(1, 1 << 20) as u32;
    let (xp, _r) = x.device_ptr(stream);
    let (yp, _w) = y.device_ptr_mut(stream);
    let p = ToFloatParams {
        x: xp,
        y: yp,
        n,
        scale: to_float_scale(scale),
        pad: 0,
    };
    // SAFETY: `x` holds `n` bytes and `y` `n` f32 (lengths checked), distinct allocations (one
    // borrowed shared, one exclusively); the kernel strides over all of them.
    unsafe {
        gpu.launch(
            stream,
            TO_FLOAT,
            (blocks, 1, 1),
            (ELEMENTWISE_BLOCK, 1, 1),
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
