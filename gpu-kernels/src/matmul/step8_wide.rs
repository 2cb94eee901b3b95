//! Step 8: step 5 with 8 x 16 outputs per thread.

use super::step5_pipelined::pipelined_in;
use super::*;

kernel! {
    #[declared(SGEMM_8_WIDE_128X128.spec)]
    /// Step 8: step 5's 128 x 128 tile computed by 128 threads of 8 x 16 outputs each. Per `k`
    /// a thread reads two `A` and four `B` vectors from shared memory for 128 fused
    /// multiply-adds (step 5: four for 64), and a tile's barrier waits on four warps instead
    /// of eight; two blocks share an SM, with twice the independent work per warp. Blocks
    /// wholly inside the matrices skip the bounds checks also where the alignment of a base or
    /// a leading dimension rules out 16-byte loads (four 4-byte loads per vector).
    ///
    /// # Safety
    /// See [`pipelined`](super::step5_pipelined::pipelined); 128 threads.
    pub unsafe fn sgemm_8_wide_128x128(p: GemmParams) {
        type T = Tile<128, 128, 8, 16>;
        // SAFETY: forwarded.
        unsafe {
            pipelined_in::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }, false, 16, true>(p, AsIs)
        }
    }
}

kernel! {
    #[declared(SGEMM_8_WIDE_128X128_BF16)]
    /// [`sgemm_8_wide_128x128`] writing `C` in bf16, each f32 result rounded once: a product
    /// whose result is used in bf16 (a gradient averaged across GPUs in bf16) without an f32
    /// copy in memory and a pass to round it.
    ///
    /// # Safety
    /// As for [`sgemm_8_wide_128x128`], with `C` of bf16.
    pub unsafe fn sgemm_8_wide_128x128_bf16(p: GemmParamsTo<streamline_device::bf16>) {
        type T = Tile<128, 128, 8, 16>;
        // SAFETY: forwarded.
        unsafe {
            pipelined_in::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }, false, 16, true>(p, AsIs)
        }
    }
}
