//! Step 7: step 5's 128 x 128 kernel with its blocks in a swizzled order for L2 reuse.

use super::step5_pipelined::pipelined_in;
use super::*;

kernel! {
    #[declared(SGEMM_7_SWIZZLED_128X128.spec)]
    /// Step 7: step 5's 128 x 128 kernel with the blocks' tiles in [`swizzled`] order, for L2
    /// reuse of the operand panels.
    ///
    /// # Safety
    /// See [`pipelined`]; 256 threads.
    pub unsafe fn sgemm_7_swizzled_128x128(p: GemmParams) {
        type T = Tile<128, 128, 8>;
        // SAFETY: forwarded.
        unsafe {
            pipelined_in::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }, true, 8, true>(p, AsIs)
        }
    }
}
