//! Step 4: step 3 with its results leaving through shared memory and the TMA (sm_90a).
//!
//! Writing the accumulators straight to global memory takes each consumer thread 64 scattered
//! 4-byte stores, half-filling every 32-byte sector they touch, while its tensor cores wait.
//! Here each consumer warpgroup converts its 64 x 256 results into a staging area of shared
//! memory (four boxes of 64 rows of 128 bytes, 128-byte swizzled, so that the eight rows a warp
//! writes at once fall in distinct banks) and one thread hands the boxes to the TMA, which
//! writes whole lines (clipped to `C`) while the warpgroup goes on to its next tile; f32 results
//! (TF32's) take two such passes of half a tile. The staging area costs a stage of the ring
//! (three instead of four). With `beta` not 0 the old `C` must be read, and the results go out
//! as in step 3; so they do when `C`'s rows do not end on 16 bytes (`n` not a multiple of 8
//! 16-bit elements or 4 f32), because the TMA writes a row's last 16 bytes whole, which would
//! reach past `C` into the row's padding.

use super::step2_wgmma::{store, Wgmma, BN};
use super::step3_persistent::{hgemm_persistent, Epilogue};
use super::{Bf16, Tf32, F16};
use streamline_abi::hgemm::{
    HgemmParams, HGEMM_4_TMA_STORE_BF16, HGEMM_4_TMA_STORE_F16, HGEMM_4_TMA_STORE_TF32,
    TMA_STORE_STAGES,
};
use streamline_device::kernel;
use streamline_device::thread::sync_named;
use streamline_device::tma::{fence_shared, store_2d, wait_read};

/// Bytes of staging for both consumer warpgroups, tiles `bn` wide: 64 x `bn` 16-bit elements
/// each (64 x `bn / 2` f32, half a tile, per pass).
pub(super) const fn staging_bytes(bn: u32) -> u32 {
    2 * 64 * bn * 2
}

/// Writes this thread's accumulators of the 64 x `BN` tile at (`row0`, `col0`) times `alpha`
/// into the staging area at `staging`, then (thread 0 of the warpgroup) has the TMA store it
/// through the map of `C` (the third of `p.maps`), in boxes of 64 rows of 128 bytes (64
/// 16-bit columns, or 32 f32): `BN / 64` boxes per pass, one pass (two for f32).
///
/// # Safety
/// All 128 threads of consumer warpgroup `consumer` call it, at every tile; `staging` is its
/// own half of [`staging_bytes`] of the block's shared memory, 1024-byte aligned; sm_90a.
#[inline(always)]
unsafe fn store_staged<T: Wgmma, const BN: u32>(
    p: &HgemmParams<T::Elem>,
    d: &[f32; 128],
    staging: u32,
    row0: u32,
    col0: u32,
    consumer: u32,
    t: u32,
) {
    let (w, l) = (t / 32, t % 32);
    let barrier = 1 + consumer;
    let size = core::mem::size_of::<T::Elem>() as u32;
    let box_cols = 128 / size;
    let pass_boxes = BN / 64;
    let pass_cols = pass_boxes * box_cols;
    for pass in 0..BN / pass_cols {
        // SAFETY: the whole warpgroup (128 threads, barrier ids 1 and 2 for the two
        // warpgroups). The previous pass's (or tile's) stores have read the staging area once
        // its leader's wait returns.
        unsafe {
            if t == 0 {
                wait_read::<0>();
            }
            sync_named(barrier, 128);
        }
        for j in 0..pass_cols / 8 {
            let col = 8 * j + 2 * (l % 4);
            let (bx, byte) = (col / box_cols, (col % box_cols) * size);
            let jj = j + pass * pass_cols / 8;
            for half in 0..2u32 {
                let r = 16 * w + l / 4 + 8 * half;
                let i = (4 * jj + 2 * half) as usize;
                // 128-byte swizzle: the 16-byte unit `byte / 16` of row `r` moves to
                // `byte / 16 ^ r % 8`.
                let at = staging + bx * 8192 + r * 128 + (((byte / 16) ^ (r % 8)) << 4) + byte % 16;
                // SAFETY: two elements inside this warpgroup's staging area (aligned: `col`
                // is even), which no copy reads now (above).
                unsafe { T::stage2(at, p.alpha * d[i], p.alpha * d[i + 1]) };
            }
        }
        // SAFETY: every thread fences its writes for the TMA, then the warpgroup meets; the
        // leader stores the pass's boxes (the map clips them to `C`) and commits them as one
        // group.
        unsafe {
            fence_shared();
            sync_named(barrier, 128);
            if t == 0 {
                let map_c = p.maps.wrapping_add(2).addr();
                for bx in 0..pass_boxes {
                    store_2d(
                        map_c,
                        staging + bx * 8192,
                        (col0 + pass * pass_cols + box_cols * bx) as i32,
                        row0 as i32,
                    );
                }
                streamline_device::tma::commit();
            }
        }
    }
}

/// Step 4's epilogue: through the staging area and the TMA where `beta` is 0 and `C`'s rows
/// end on 16 bytes, else as step 3.
pub(super) struct Staged;

impl<T: Wgmma, const BN: u32> Epilogue<T, BN> for Staged {
    const BYTES: u32 = staging_bytes(BN);
    #[inline(always)]
    unsafe fn store(
        p: &HgemmParams<T::Elem>,
        d: &[f32; 128],
        staging: u32,
        row0: u32,
        col0: u32,
        consumer: u32,
        t: u32,
    ) {
        if p.beta == 0.0 && (p.n as usize * core::mem::size_of::<T::Elem>()) % 16 == 0 {
            // SAFETY: forwarded (the contract of `Epilogue::store`).
            unsafe { store_staged::<T, BN>(p, d, staging, row0, col0, consumer, t) };
        } else {
            store::<T, BN>(p, d, row0, col0, t);
        }
    }
    #[inline(always)]
    unsafe fn finish() {
        // SAFETY: sm_90a; the block's last stores are done before it exits.
        unsafe { streamline_device::tma::wait_all::<0>() };
    }
}

kernel! {
    #[declared(HGEMM_4_TMA_STORE_BF16)]
    /// Step 4 (see the module) for bf16.
    ///
    /// # Safety
    /// As for `hgemm_3_persistent_bf16`, with `maps` also holding the tensor map of `C`
    /// (third, boxes of 64 x 64, 128-byte swizzle).
    pub unsafe fn hgemm_4_tma_store_bf16(p: HgemmParams<streamline_device::bf16>) {
        // SAFETY: forwarded.
        unsafe { hgemm_persistent::<Bf16, TMA_STORE_STAGES, BN, Staged>(p) }
    }
}

kernel! {
    #[declared(HGEMM_4_TMA_STORE_F16)]
    /// Step 4 (see the module) for f16.
    ///
    /// # Safety
    /// As for [`hgemm_4_tma_store_bf16`].
    pub unsafe fn hgemm_4_tma_store_f16(p: HgemmParams<streamline_device::f16>) {
        // SAFETY: forwarded.
        unsafe { hgemm_persistent::<F16, TMA_STORE_STAGES, BN, Staged>(p) }
    }
}

kernel! {
    #[declared(HGEMM_4_TMA_STORE_TF32)]
    /// Step 4 (see the module) for f32 multiplied as TF32, `B` K-major (as for
    /// `hgemm_3_persistent_tf32`), the results leaving in two passes of half a tile.
    ///
    /// # Safety
    /// As for `hgemm_3_persistent_tf32`, with `maps` also holding the tensor map of `C`
    /// (third, boxes of 32 x 64, 128-byte swizzle).
    pub unsafe fn hgemm_4_tma_store_tf32(p: HgemmParams<f32>) {
        // SAFETY: forwarded.
        unsafe { hgemm_persistent::<Tf32, TMA_STORE_STAGES, BN, Staged>(p) }
    }
}
