//! Step 5: step 4 with tiles of 128 x 128 (sm_90a).
//!
//! A product of few output tiles leaves most multiprocessors idle with step 4's 128 x 256
//! tiles (1024 x 1024 makes 32 of them for 132 multiprocessors), and a product whose tiles
//! make a wave and a half leaves half the second wave idle. Halving the tiles' width doubles
//! their count: each consumer warpgroup multiplies 64 x 128 (`m64n128k16`, `m64n128k8` for
//! TF32), a stage of `B` is two boxes instead of four, and the smaller stages let the ring hold
//! [`NARROW_STAGES`] of them. Each tile reads `A` for half the columns, so where step 4's tiles
//! fill the multiprocessors evenly it stays the better choice; the host picks between them
//! (`streamline::ops::hgemm`).

use super::step3_persistent::hgemm_persistent;
use super::step4_tma_store::Staged;
use super::{Bf16, Tf32, F16};
use streamline_abi::hgemm::{
    HgemmParams, HGEMM_5_NARROW, HGEMM_5_NARROW_BF16, HGEMM_5_NARROW_F16, HGEMM_5_NARROW_TF32,
    NARROW_STAGES,
};
use streamline_device::kernel;

/// Columns of `C` per tile.
const BN: u32 = HGEMM_5_NARROW.bn;

kernel! {
    #[declared(HGEMM_5_NARROW_BF16)]
    /// Step 5 (see the module) for bf16.
    ///
    /// # Safety
    /// As for `hgemm_4_tma_store_bf16`, with the tensor map of `B` (MN-major) in boxes of
    /// 64 x 64 as there; launched with `HGEMM_5_NARROW.shared_bytes` of dynamic shared memory.
    pub unsafe fn hgemm_5_narrow_bf16(p: HgemmParams<streamline_device::bf16>) {
        // SAFETY: forwarded.
        unsafe { hgemm_persistent::<Bf16, NARROW_STAGES, BN, Staged>(p) }
    }
}

kernel! {
    #[declared(HGEMM_5_NARROW_F16)]
    /// Step 5 (see the module) for f16.
    ///
    /// # Safety
    /// As for [`hgemm_5_narrow_bf16`].
    pub unsafe fn hgemm_5_narrow_f16(p: HgemmParams<streamline_device::f16>) {
        // SAFETY: forwarded.
        unsafe { hgemm_persistent::<F16, NARROW_STAGES, BN, Staged>(p) }
    }
}

kernel! {
    #[declared(HGEMM_5_NARROW_TF32)]
    /// Step 5 (see the module) for f32 multiplied as TF32, `B` K-major as for
    /// `hgemm_4_tma_store_tf32`, its tensor map in boxes of 32 x 128 (a 128-byte row of `K`
    /// per column of the tile).
    ///
    /// # Safety
    /// As for `hgemm_4_tma_store_tf32`, with that map of `B`; launched with
    /// `HGEMM_5_NARROW.shared_bytes` of dynamic shared memory.
    pub unsafe fn hgemm_5_narrow_tf32(p: HgemmParams<f32>) {
        // SAFETY: forwarded.
        unsafe { hgemm_persistent::<Tf32, NARROW_STAGES, BN, Staged>(p) }
    }
}
