//! Seed 000's heavy elementwise computation: `y = x^2 + x^3 * sin(x) * cos(x) + tan(x)`.

use crate::error::Result;
use crate::runtime::{Gpu, LaunchConfig};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};
use half::{bf16, f16};
use streamline_abi::heavy::{HeavyParams, HEAVY_BF16, HEAVY_BLOCK, HEAVY_F16, HEAVY_F32};
use streamline_abi::{Kernel, VectorSplit};

/// Element types the heavy kernel exists for (named by their `Element::NAME`).
pub trait HeavyElement: DeviceRepr + streamline_device::element::Element {
    /// The kernel for this type.
    const KERNEL: Kernel<HeavyParams<Self>>;
}

impl HeavyElement for f32 {
    const KERNEL: Kernel<HeavyParams<f32>> = HEAVY_F32;
}

impl HeavyElement for f16 {
    const KERNEL: Kernel<HeavyParams<f16>> = HEAVY_F16;
}

impl HeavyElement for bf16 {
    const KERNEL: Kernel<HeavyParams<bf16>> = HEAVY_BF16;
}

/// Launch configuration for `n` elements at these addresses: one 16-byte vector (or one
/// scalar of the unaligned head/tail) per thread; the kernel strides over the rest if the grid
/// is capped.
pub fn launch_config(x_addr: u64, y_addr: u64, n: u64, elem: u64) -> (u32, u32) {
    let split = VectorSplit::new(x_addr, y_addr, n, elem);
    let work = split.vectors.max(split.scalars());
    let blocks = work.div_ceil(HEAVY_BLOCK as u64).clamp(1, i32::MAX as u64) as u32;
    (blocks, HEAVY_BLOCK)
}

/// Computes `y[i] = x[i]^2 + x[i]^3 * sin(x[i]) * cos(x[i]) + tan(x[i])` on `stream`, for slices
/// or views of any length and alignment. f16 is computed in f32 and rounded once.
///
/// `x` and `y` must have the same length; `y` is written in full.
pub fn heavy<T: HeavyElement>(
    gpu: &Gpu,
    stream: &CudaStream,
    x: &impl DevicePtr<T>,
    y: &mut impl DevicePtrMut<T>,
) -> Result<()> {
    super::check_same_len(x.len(), y.len())?;
    if x.len() == 0 {
        return Ok(());
    }
    let n = x.len() as u64;
    let elem = std::mem::size_of::<T>() as u64;
    let mut launch = gpu.kernels()?.prepare(stream, T::KERNEL);
    let xp = launch.read(x);
    let yp = launch.write(y);
    let (grid, block) = launch_config(xp.addr(), yp.addr(), n, elem);
    let params = HeavyParams { x: xp, y: yp, n };
    // SAFETY: `x` and `y` are live device allocations of `n` elements of `T` (lengths checked
    // above), they are distinct (one is borrowed shared, the other exclusively), and the launch
    // is ordered after earlier writes and recorded for later users.
    unsafe { launch.run(LaunchConfig::new((grid, 1, 1), (block, 1, 1)), params) }
}
