//! Split-K: step 5's (or step 8's) loop over one slice of `K` per grid layer into planes of
//! partial products, and their sum in slice order.

use super::step5_pipelined::pipelined_in;
use super::*;

/// Split-K: the blocks of grid `z` multiply slice `z` of `K` (`k_slice` deep, the last one what
/// remains) with step 5's loop (8 x `TN` outputs per thread: `TN` 16 is step 8's) and write it,
/// unscaled, to plane `z` of the partial products.
///
/// # Safety
/// The host validated the product, made `slices = ceil(k / k_slice)` with `k_slice` a multiple
/// of `BK`, launched `slices` grid layers, allocated `slices * m * n` floats of partials and two
/// stages of shared memory.
#[inline(always)]
unsafe fn split_k<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const LA: usize,
    const LB: usize,
    const TN: usize,
>(
    s: SplitKParams,
) {
    // SAFETY: reading a special register has no side effects.
    let z = unsafe { nvptx::_block_idx_z() } as u64;
    let g = s.gemm;
    let k0 = z * s.k_slice as u64;
    let plane = g.m as u64 * g.n as u64;
    let p = GemmParams {
        a: g.a + 4 * k0,
        b: g.b + 4 * k0 * g.ldb as u64,
        c: s.partials + 4 * z * plane,
        k: (g.k as u64 - k0).min(s.k_slice as u64) as u32,
        ldc: g.n,
        alpha: 1.0,
        beta: 0.0,
        ..g
    };
    // SAFETY: slice `z` starts inside K (`z < slices`), so `A` from column `k0` and `B` from
    // row `k0` hold an `m x k` and a `k x n` matrix with the same strides; plane `z` holds
    // `m x n` floats at stride `n`. 16-byte alignment is re-derived from these addresses.
    unsafe { pipelined_in::<BM, BN, BK, LA, LB, false, TN, true>(p) }
}

kernel! {
    #[declared(SGEMM_SPLITK_128X128.spec)]
    /// Split-K with 128 x 128 tiles.
    ///
    /// # Safety
    /// See [`split_k`]; 256 threads.
    pub unsafe fn sgemm_splitk_128x128(p: SplitKParams) {
        type T = Tile<128, 128, 8>;
        // SAFETY: forwarded.
        unsafe { split_k::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }, 8>(p) }
    }
}

kernel! {
    #[declared(SGEMM_SPLITK_WIDE_128X128.spec)]
    /// Split-K with step 8's 128 x 128 tiles (8 x 16 outputs per thread).
    ///
    /// # Safety
    /// See [`split_k`]; 128 threads.
    pub unsafe fn sgemm_splitk_wide_128x128(p: SplitKParams) {
        type T = Tile<128, 128, 8, 16>;
        // SAFETY: forwarded.
        unsafe { split_k::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }, 16>(p) }
    }
}

kernel! {
    #[declared(SGEMM_SPLITK_64X64.spec)]
    /// Split-K with 64 x 64 tiles.
    ///
    /// # Safety
    /// See [`split_k`]; 64 threads.
    pub unsafe fn sgemm_splitk_64x64(p: SplitKParams) {
        type T = Tile<64, 64, 8>;
        // SAFETY: forwarded.
        unsafe { split_k::<64, 64, 8, { T::LOADS_A }, { T::LOADS_B }, 8>(p) }
    }
}

kernel! {
    #[declared(SGEMM_SPLITK_32X128.spec)]
    /// Split-K with 32 x 128 tiles (at most 32 rows: no row of the tile wasted).
    ///
    /// # Safety
    /// See [`split_k`]; 64 threads.
    pub unsafe fn sgemm_splitk_32x128(p: SplitKParams) {
        type T = Tile<32, 128, 8>;
        // SAFETY: forwarded.
        unsafe { split_k::<32, 128, 8, { T::LOADS_A }, { T::LOADS_B }, 8>(p) }
    }
}

kernel! {
    #[declared(SGEMM_SPLITK_REDUCE)]
    /// `C = alpha * sum_z P_z + beta * C`, adding the planes in order `z = 0, 1, ...` for every
    /// element (a fixed order: the result does not depend on how blocks were scheduled).
    ///
    /// # Safety
    /// `p.partials` must hold `slices * m * n` floats written by a split-K kernel and `p.c` an
    /// `m x n` matrix with row stride `ldc`.
    pub unsafe fn sgemm_splitk_reduce(p: SplitKReduceParams) {
        let (m, n) = (p.m as u64, p.n as u64);
        let plane = m * n;
        let parts = p.partials as *const f32;
        let c = p.c as *mut f32;
        for i in streamline_device::thread::grid_stride(plane) {
            let i = i as u64;
            // SAFETY: `i < m * n` and every plane holds `m * n` floats; the element of `C`
            // at row `i / n`, column `i % n` is inside it by the host's validation.
            unsafe {
                let mut sum = ldg(parts.add(i as usize));
                for z in 1..p.slices as u64 {
                    sum += ldg(parts.add((z * plane + i) as usize));
                }
                epilogue(c.add(((i / n) * p.ldc as u64 + i % n) as usize), sum, p.alpha, p.beta);
            }
        }
    }
}
