//! Step 4: step 3 with 16-byte loads and stores and a transposed, padded `A` tile, so that
//! every shared access is conflict-free.

use super::*;

kernel! {
    #[declared(SGEMM_4_VECTORIZED.spec)]
    /// Step 4: step 3 with 16-byte accesses everywhere they are aligned: one 16-byte global load
    /// per operand and thread per tile, 16-byte shared loads in a layout where a warp reads
    /// contiguous runs (no bank conflicts), a transposed `A` tile padded by 4 floats per row so its
    /// scalar stores are conflict-free too, and 16-byte stores of `C`.
    /// Each tile still waits for its own global loads.
    ///
    /// # Safety
    /// As for [`sgemm_1_naive`]; launched with 256 threads and the tiling's shared memory.
    pub unsafe fn sgemm_4_vectorized(p: GemmParams) {
        type T = Tile<128, 128, 8>;
        let f = Frame::new::<128, 128>(&p);
        let mut acc = [[0.0f32; 8]; 8];
        let mut k0 = 0;
        while k0 < f.k {
            // SAFETY: the host validated the matrices; one stage of shared memory is provided and
            // the barriers separate its writes from its reads.
            unsafe {
                let s = T::fetch::<{ T::LOADS_A }, { T::LOADS_B }, _>(&f, &AsIs, k0);
                T::store(&f, &AsIs, &s, 0);
                barrier();
                T::multiply(&f, 0, &mut acc);
                barrier();
            }
            k0 += 8;
        }
        // SAFETY: the host validated C.
        unsafe { T::write_c(&p, &f, &acc) }
    }
}
