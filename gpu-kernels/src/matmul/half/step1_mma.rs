//! Step 1: warp-level tensor-core products (`mma.sync`) from `ldmatrix` fragments.
//!
//! A block of eight warps computes a 128 x 128 tile of `C`, each warp 64 x 32 of it (2 x 4
//! warps): per 16-deep step, four `ldmatrix` of `A` (16 x 16 each), two transposing `ldmatrix`
//! of the row-major `B` (16 x 16 each) and sixteen `m16n8k16` products into 64 f32 per thread.
//! `cp.async` fills a ring of [`MMA_STAGES`] shared-memory stages of 32-deep tiles, the next
//! ones in flight while the current one is multiplied. Shared rows are XOR-swizzled in 16-byte
//! units so that the eight rows an `ldmatrix` reads fall in distinct banks.
//!
//! Edges: a 16-byte unit past `m`, `n` or `k` is zero-filled by the copy (partly, where it
//! straddles the edge), so the loop is the same for every shape; the epilogue writes only
//! inside `C`.

use super::{store_pair, Bf16, Operand, F16};
use core::arch::nvptx;
use streamline_abi::hgemm::{
    grouped_tile, HgemmParams, HGEMM_1_MMA, HGEMM_1_MMA_BF16, HGEMM_1_MMA_F16, MMA_STAGES as STAGES,
};
use streamline_device::kernel;
use streamline_device::mem::{copy_async16, copy_commit, copy_wait_groups, shared_addr};
use streamline_device::mma::{ldmatrix_x4, ldmatrix_x4_trans};
use streamline_device::shared::dynamic_shared;
use streamline_device::thread::sync_block;

const BM: u32 = HGEMM_1_MMA.bm;
const BN: u32 = HGEMM_1_MMA.bn;
const BK: u32 = HGEMM_1_MMA.bk;
/// Bytes of a stage of `A`: 128 rows of 64 bytes.
const A_BYTES: u32 = BM * BK * 2;
/// Bytes of a stage of `B`: 32 rows of 256 bytes.
const B_BYTES: u32 = BK * BN * 2;

/// Byte offset of 16-byte unit `u` (0..4) of row `r` in a stage of `A`.
#[inline(always)]
const fn a_at(r: u32, u: u32) -> u32 {
    r * 64 + ((u ^ ((r >> 1) & 3)) << 4)
}

/// Byte offset of 16-byte unit `u` (0..16) of row `r` in a stage of `B`.
#[inline(always)]
const fn b_at(r: u32, u: u32) -> u32 {
    r * 256 + ((u ^ (r & 7)) << 4)
}

/// Starts the copies of `K` tile `t` into stage `s`: two 16-byte units of `A` and two of `B`
/// per thread.
#[inline(always)]
unsafe fn load_stage<E: streamline_device::element::Element>(
    p: &HgemmParams<E>,
    base: u32,
    s: u32,
    t: u32,
    m0: u32,
    n0: u32,
    tid: u32,
) {
    let k0 = t * BK;
    let a_dst = base + s * A_BYTES;
    let b_dst = base + STAGES * A_BYTES + s * B_BYTES;
    for i in 0..2 {
        let unit = tid + 256 * i;
        // A: 128 rows x 4 units.
        let (r, u) = (unit / 4, unit % 4);
        let (row, col) = (m0 + r, k0 + 8 * u);
        let bytes = if row < p.m && col < p.k {
            2 * (p.k - col).min(8)
        } else {
            0
        };
        let src = if bytes > 0 {
            p.a.as_ptr()
                .wrapping_add(row as usize * p.lda as usize + col as usize)
        } else {
            p.a.as_ptr()
        };
        // SAFETY: `bytes` of `src` lie inside `A` (row < m, columns below k) and `src` is
        // 16-byte aligned (`col` a multiple of 8, `lda` too, `a` 16-byte aligned); the
        // destination unit belongs to stage `s`, which no one reads until its wait.
        unsafe { copy_async16(a_dst + a_at(r, u), src as *const f32, bytes) };
        // B: 32 rows x 16 units.
        let (r, u) = (unit / 16, unit % 16);
        let (row, col) = (k0 + r, n0 + 8 * u);
        let bytes = if row < p.k && col < p.n {
            2 * (p.n - col).min(8)
        } else {
            0
        };
        let src = if bytes > 0 {
            p.b.as_ptr()
                .wrapping_add(row as usize * p.ldb as usize + col as usize)
        } else {
            p.b.as_ptr()
        };
        // SAFETY: as for `A`, with `ldb`.
        unsafe { copy_async16(b_dst + b_at(r, u), src as *const f32, bytes) };
    }
}

#[inline(always)]
unsafe fn hgemm_mma<T: Operand>(p: HgemmParams<T::Elem>) {
    // SAFETY: special registers, defined inside a kernel.
    let (tid, block) = unsafe { (nvptx::_thread_idx_x(), nvptx::_block_idx_x()) };
    let (tile_m, tile_n) = grouped_tile(block, p.m.div_ceil(BM), p.n.div_ceil(BN));
    let (m0, n0) = (tile_m * BM, tile_n * BN);
    let base = shared_addr(dynamic_shared::<f32>());
    let (warp, lane) = (tid / 32, tid % 32);
    let (wm, wn) = (warp / 4, warp % 4);
    let k_tiles = p.k.div_ceil(BK);

    for t in 0..STAGES - 1 {
        if t < k_tiles {
            // SAFETY: stage `t` is untouched so far.
            unsafe { load_stage(&p, base, t, t, m0, n0, tid) };
        }
        // SAFETY: sm_80; an empty group where there was nothing to load.
        unsafe { copy_commit() };
    }

    let mut acc = [[[0f32; 4]; 4]; 4];
    for t in 0..k_tiles {
        // SAFETY: sm_80; then every thread's copies of tile `t` have landed, and after the
        // barrier every thread sees them and has finished tile `t - 1`, whose stage the load
        // below reuses.
        unsafe {
            copy_wait_groups::<{ STAGES - 2 }>();
            sync_block();
        }
        let next = t + STAGES - 1;
        if next < k_tiles {
            // SAFETY: stage `next % STAGES` held tile `t - 1`, done by every thread.
            unsafe { load_stage(&p, base, next % STAGES, next, m0, n0, tid) };
        }
        // SAFETY: sm_80.
        unsafe { copy_commit() };

        let s = t % STAGES;
        let a_stage = base + s * A_BYTES;
        let b_stage = base + STAGES * A_BYTES + s * B_BYTES;
        for kk in 0..BK / 16 {
            let mut a = [[0u32; 4]; 4];
            for (mi, frag) in a.iter_mut().enumerate() {
                let r = wm * 64 + 16 * mi as u32 + lane % 16;
                // SAFETY: the whole warp, converged; a landed 16-byte unit of the stage.
                *frag = unsafe { ldmatrix_x4(a_stage + a_at(r, 2 * kk + lane / 16)) };
            }
            let mut b = [[0u32; 2]; 4];
            for pair in 0..2u32 {
                let r = 16 * kk + lane % 16;
                let u = (wn * 32) / 8 + 2 * pair + lane / 16;
                // SAFETY: as above.
                let q = unsafe { ldmatrix_x4_trans(b_stage + b_at(r, u)) };
                b[2 * pair as usize] = [q[0], q[1]];
                b[2 * pair as usize + 1] = [q[2], q[3]];
            }
            for mi in 0..4 {
                for ni in 0..4 {
                    // SAFETY: the whole warp, converged.
                    acc[mi][ni] = unsafe { T::mma(acc[mi][ni], a[mi], b[ni]) };
                }
            }
        }
    }
    // SAFETY: sm_80; no copy is left in flight when the block exits.
    unsafe { copy_wait_groups::<0>() };

    let (g, q) = (lane / 4, lane % 4);
    for mi in 0..4u32 {
        for ni in 0..4u32 {
            let d = acc[mi as usize][ni as usize];
            let row = m0 + wm * 64 + 16 * mi + g;
            let col = n0 + wn * 32 + 8 * ni + 2 * q;
            store_pair::<T>(&p, row, col, d[0], d[1]);
            store_pair::<T>(&p, row + 8, col, d[2], d[3]);
        }
    }
}

kernel! {
    #[declared(HGEMM_1_MMA_BF16)]
    /// Step 1 (see the module) for bf16.
    ///
    /// # Safety
    /// As for every `hgemm_*` kernel (`HgemmParams`); launched with 256 threads and
    /// `HGEMM_1_MMA.shared_bytes` of dynamic shared memory.
    pub unsafe fn hgemm_1_mma_bf16(p: HgemmParams<streamline_device::bf16>) {
        // SAFETY: forwarded.
        unsafe { hgemm_mma::<Bf16>(p) }
    }
}

kernel! {
    #[declared(HGEMM_1_MMA_F16)]
    /// Step 1 (see the module) for f16.
    ///
    /// # Safety
    /// As for [`hgemm_1_mma_bf16`].
    pub unsafe fn hgemm_1_mma_f16(p: HgemmParams<streamline_device::f16>) {
        // SAFETY: forwarded.
        unsafe { hgemm_mma::<F16>(p) }
    }
}
