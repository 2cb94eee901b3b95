//! Seed 000's heavy elementwise computation, `y = x^2 + x^3 * sin(x) * cos(x) + tan(x)`.

use crate::declare;

/// Parameters of `heavy_f32` and `heavy_f16`: read `n` elements at device address `x`, write
/// `n` elements at device address `y`. The two ranges must not overlap unless `x == y`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct HeavyParams {
    /// Device address of the input.
    pub x: u64,
    /// Device address of the output.
    pub y: u64,
    /// Number of elements.
    pub n: u64,
}

declare! {
    /// f32 in, f32 out.
    pub const HEAVY_F32: Kernel<HeavyParams> = Kernel::new("heavy_f32");
    /// f16 in memory, f32 arithmetic, one rounding to f16 at the end.
    pub const HEAVY_F16: Kernel<HeavyParams> = Kernel::new("heavy_f16");
    /// bf16 in memory, f32 arithmetic, one rounding to bf16 at the end.
    pub const HEAVY_BF16: Kernel<HeavyParams> = Kernel::new("heavy_bf16");
}

/// Threads per block of the heavy kernels.
pub const HEAVY_BLOCK: u32 = 256;
