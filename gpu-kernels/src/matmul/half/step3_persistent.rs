//! Step 3: step 2 made persistent (sm_90a).
//!
//! One block per multiprocessor walks the output tiles (block `b` takes tiles `b`, `b + grid`,
//! ... in step 2's grouped order), its producer running ahead across tile boundaries: while
//! the consumers write one tile's results, the first stages of the next are already loading,
//! and no block pays a launch and a pipeline fill per tile. The stage ring's round counts run
//! over the whole walk, so the barriers' phases carry from tile to tile.
//!
//! The walk is generic over the ring's depth, the tiles' width and the epilogue, which steps 4
//! and 5 change.
//!
//! Split-K: when the output tiles are too few to fill the GPU, the host cuts `K` into
//! `p.slices` slices and the blocks walk (tile, slice) pairs, each writing its unscaled
//! product into the slice's f32 plane; `hgemm_splitk_reduce_*` then adds the planes in order.

use super::step2_wgmma::{acquire_maps, multiply_stage, store, Ring, Wgmma, A_BYTES, BM, BN};
use super::{Bf16, Tf32, F16};
use core::arch::nvptx;
use streamline_abi::hgemm::{
    grouped_tile, HgemmParams, HGEMM_3_PERSISTENT_BF16, HGEMM_3_PERSISTENT_F16,
    HGEMM_3_PERSISTENT_TF32, WGMMA_STAGES,
};
use streamline_device::kernel;
use streamline_device::wgmma::{
    claim_registers, commit_group, fence, release_registers, wait_group,
};

/// How a consumer warpgroup writes a tile's results, for tiles `BN` wide.
pub(super) trait Epilogue<T: Wgmma, const BN: u32> {
    /// Shared memory it needs after the stages, bytes (half per consumer warpgroup).
    const BYTES: u32;
    /// Writes consumer warpgroup `consumer`'s results of the 64 x `BN` tile at (`row0`,
    /// `col0`), from thread `t` of it.
    ///
    /// # Safety
    /// All 128 threads of the warpgroup call it, at every tile; `staging` is its half of the
    /// `BYTES` after the stages, 1024-byte aligned; sm_90a.
    unsafe fn store(
        p: &HgemmParams<T::Elem>,
        d: &[f32; 128],
        staging: u32,
        row0: u32,
        col0: u32,
        consumer: u32,
        t: u32,
    );
    /// What a consumer's leader does before the block exits.
    ///
    /// # Safety
    /// Once per consumer leader, after its last [`Epilogue::store`]; sm_90a.
    unsafe fn finish();
}

/// Step 3's epilogue: every thread writes its accumulators straight to `C`.
pub(super) struct Direct;

impl<T: Wgmma, const BN: u32> Epilogue<T, BN> for Direct {
    const BYTES: u32 = 0;
    #[inline(always)]
    unsafe fn store(
        p: &HgemmParams<T::Elem>,
        d: &[f32; 128],
        _staging: u32,
        row0: u32,
        col0: u32,
        _consumer: u32,
        t: u32,
    ) {
        store::<T, BN>(p, d, row0, col0, t);
    }
    #[inline(always)]
    unsafe fn finish() {}
}

/// The persistent walk over tiles of 128 x `BN` with a ring of `STAGES` stages and the
/// epilogue `E` (its shared memory after the stages).
#[inline(always)]
pub(super) unsafe fn hgemm_persistent<
    T: Wgmma,
    const STAGES: u32,
    const BN: u32,
    E: Epilogue<T, BN>,
>(
    p: HgemmParams<T::Elem>,
) {
    // SAFETY: special registers, defined inside a kernel.
    let (tid, block, grid) = unsafe {
        (
            nvptx::_thread_idx_x(),
            nvptx::_block_idx_x(),
            nvptx::_grid_dim_x(),
        )
    };
    let (tiles_m, tiles_n) = (p.m.div_ceil(BM), p.n.div_ceil(BN));
    let units = tiles_m * tiles_n * p.slices;
    let k_tiles = p.k.div_ceil(T::BK);
    // The `K` tiles of work unit `u`, and its output tile.
    let unit = |u: u32| {
        let slice = u % p.slices;
        let first = slice * p.slice_tiles;
        let end = if slice + 1 == p.slices {
            k_tiles
        } else {
            first + p.slice_tiles
        };
        (
            grouped_tile(u / p.slices, tiles_m, tiles_n),
            slice,
            first,
            end,
        )
    };
    let ring = Ring::<STAGES, BN>::new(E::BYTES);
    let (a_stages, b_stages, staging) = (ring.a, ring.b, ring.gap());
    let (full, empty) = (|s| ring.full(s), |s| ring.empty(s));
    // SAFETY: every thread, first; `shared_bytes` holds the ring and the staging area.
    unsafe { ring.init(tid) };

    let warpgroup = tid / 128;
    if warpgroup == 0 {
        // SAFETY: the whole warpgroup, as in step 2.
        unsafe { release_registers::<40>() };
        if tid == 0 {
            // SAFETY: the host wrote both maps before the launch.
            let maps = unsafe { acquire_maps(&p) };
            // `it` counts stages over the whole walk: stage `it % STAGES`, round
            // `it / STAGES`.
            let mut it = 0u32;
            let mut u = block;
            while u < units {
                let ((tile_m, tile_n), _, first, end) = unit(u);
                let (m0, n0) = ((tile_m * BM) as i32, (tile_n * BN) as i32);
                for t in first..end {
                    let s = it % STAGES;
                    if it >= STAGES {
                        // SAFETY: the consumers release every round of every stage.
                        unsafe { empty(s).wait((it / STAGES + 1) & 1) };
                    }
                    // SAFETY: the producer thread; the stage is free (above), the maps acquired.
                    unsafe { ring.load::<T>(s, maps, (t * T::BK) as i32, m0, n0) };
                    it += 1;
                }
                u += grid;
            }
        }
        return;
    }

    // SAFETY: the whole warpgroup, as in step 2.
    unsafe { claim_registers::<232>() };
    let consumer = warpgroup - 1;
    let leader = tid % 128 == 0;
    let mut it = 0u32;
    let mut u = block;
    while u < units {
        let ((tile_m, tile_n), slice, first, end) = unit(u);
        let mut d = [0f32; 128];
        for t in first..end {
            let s = it % STAGES;
            // SAFETY: the producer's arrival and the TMA's bytes complete this round.
            unsafe { full(s).wait((it / STAGES) & 1) };
            // SAFETY: the whole warpgroup, in step.
            unsafe { fence() };
            let a = a_stages + s * A_BYTES + consumer * 64 * 128;
            let b = b_stages + s * Ring::<STAGES, BN>::B_BYTES;
            // SAFETY: see `multiply_stage`.
            unsafe { multiply_stage::<T, BN>(&mut d, a, b, t > first) };
            // SAFETY: the whole warpgroup; the previous stage's products are done.
            unsafe {
                commit_group();
                wait_group::<1>();
                if t > first && leader {
                    empty((it - 1) % STAGES).arrive();
                }
            }
            it += 1;
        }
        // SAFETY: the whole warpgroup; then the tile's last stage is done too and goes back.
        unsafe {
            wait_group::<0>();
            if leader {
                empty((it - 1) % STAGES).arrive();
            }
        }
        let (row0, col0) = (tile_m * BM + consumer * 64, tile_n * BN);
        if p.slices > 1 {
            store_partial::<_, BN>(&p, &d, slice, row0, col0, tid % 128);
        } else {
            // SAFETY: the whole consumer warpgroup, at every tile; its staging half is
            // reserved after the stages.
            unsafe {
                E::store(
                    &p,
                    &d,
                    staging + consumer * E::BYTES / 2,
                    row0,
                    col0,
                    consumer,
                    tid % 128,
                )
            };
        }
        u += grid;
    }
    if leader {
        // SAFETY: once per consumer leader, after its last store.
        unsafe { E::finish() };
    }
}

/// Writes this thread's accumulators of the 64 x `BN` tile at (`row0`, `col0`), unscaled, into
/// plane `slice` of the split-K partials (row stride `n`), inside `C`'s bounds only.
#[inline(always)]
fn store_partial<E: streamline_device::element::Element, const BN: u32>(
    p: &HgemmParams<E>,
    d: &[f32; 128],
    slice: u32,
    row0: u32,
    col0: u32,
    t: u32,
) {
    let (w, l) = (t / 32, t % 32);
    let plane = p
        .partials
        .as_mut_ptr()
        .wrapping_add(slice as usize * p.m as usize * p.n as usize);
    for j in 0..BN / 8 {
        let col = col0 + 8 * j + 2 * (l % 4);
        for half in 0..2u32 {
            let row = row0 + 16 * w + l / 4 + 8 * half;
            if row >= p.m || col >= p.n {
                continue;
            }
            let i = (4 * j + 2 * half) as usize;
            let at = plane.wrapping_add(row as usize * p.n as usize + col as usize);
            // SAFETY: `row < m` and `col < n`: inside plane `slice` of the `slices * m * n`
            // floats at `partials` (the kernel's contract), `col + 1` only when below `n`; with
            // `n` even the pair starts on 8 bytes (`col` is even), one store for both.
            unsafe {
                if col + 1 < p.n && p.n % 2 == 0 {
                    *(at as *mut [f32; 2]) = [d[i], d[i + 1]];
                } else {
                    *at = d[i];
                    if col + 1 < p.n {
                        *at.add(1) = d[i + 1];
                    }
                }
            }
        }
    }
}

kernel! {
    #[declared(HGEMM_3_PERSISTENT_BF16)]
    /// Step 3 (see the module) for bf16.
    ///
    /// # Safety
    /// As for `hgemm_2_wgmma_bf16`; any grid size (the blocks share the tiles).
    pub unsafe fn hgemm_3_persistent_bf16(p: HgemmParams<streamline_device::bf16>) {
        // SAFETY: forwarded.
        unsafe { hgemm_persistent::<Bf16, WGMMA_STAGES, BN, Direct>(p) }
    }
}

kernel! {
    #[declared(HGEMM_3_PERSISTENT_F16)]
    /// Step 3 (see the module) for f16.
    ///
    /// # Safety
    /// As for [`hgemm_3_persistent_bf16`].
    pub unsafe fn hgemm_3_persistent_f16(p: HgemmParams<streamline_device::f16>) {
        // SAFETY: forwarded.
        unsafe { hgemm_persistent::<F16, WGMMA_STAGES, BN, Direct>(p) }
    }
}

kernel! {
    #[declared(HGEMM_3_PERSISTENT_TF32)]
    /// Step 3 (see the module) for f32 multiplied as TF32, `B` K-major: `p.b` addresses `B`
    /// transposed (`n x k`, row stride `ldb`) and the second tensor map describes it.
    ///
    /// # Safety
    /// As for [`hgemm_3_persistent_bf16`], with f32 matrices and `B` transposed.
    pub unsafe fn hgemm_3_persistent_tf32(p: HgemmParams<f32>) {
        // SAFETY: forwarded.
        unsafe { hgemm_persistent::<Tf32, WGMMA_STAGES, BN, Direct>(p) }
    }
}
