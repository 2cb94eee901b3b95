//! Seed 000's heavy elementwise computation, `y = x^2 + x^3 * sin(x) * cos(x) + tan(x)`.

use crate::{declare, params, DevPtr, DevPtrMut};
use streamline_device::element::{bf16, f16, Element};

params! {
    /// Parameters of the heavy kernels over elements `T` (f32, f16 or bf16): read `n` elements
    /// at `x`, write `n` elements at `y`. The two ranges must not overlap unless they are the
    /// same.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct HeavyParams<T: Element> {
        /// Device address of the input.
        pub x: DevPtr<T>,
        /// Device address of the output.
        pub y: DevPtrMut<T>,
        /// Number of elements.
        pub n: u64,
    }
}

// SAFETY: two 8-byte addresses and a u64 whatever `T` is: no padding, and every bit pattern
// (zeros included) is a valid value.
#[cfg(feature = "bytemuck")]
unsafe impl<T: Element> bytemuck::Zeroable for HeavyParams<T> {}
// SAFETY: as above.
#[cfg(feature = "bytemuck")]
unsafe impl<T: Element> bytemuck::Pod for HeavyParams<T> {}

declare! {
    /// f32 in, f32 out.
    pub const HEAVY_F32: Kernel<HeavyParams<f32>> = Kernel::new("heavy_f32");
    /// f16 in memory, f32 arithmetic, one rounding to f16 at the end.
    pub const HEAVY_F16: Kernel<HeavyParams<f16>> = Kernel::new("heavy_f16");
    /// bf16 in memory, f32 arithmetic, one rounding to bf16 at the end.
    pub const HEAVY_BF16: Kernel<HeavyParams<bf16>> = Kernel::new("heavy_bf16");
}

/// Threads per block of the heavy kernels.
pub const HEAVY_BLOCK: u32 = 256;
