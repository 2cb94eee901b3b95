//! Split-K: step 5's (or step 8's) loop over one slice of `K` per grid layer into planes of
//! partial products, and their sum in slice order.

use super::step5_pipelined::pipelined_in;
use super::*;
use streamline_device::{DevPtr, DevPtrMut};

/// Split-K: the blocks of grid `z` multiply slice `z` of `K` (`k_slice` deep, the last one what
/// remains) with step 5's loop (8 x `TN` outputs per thread: `TN` 16 is step 8's), `B` staged
/// by `u`, and write it, unscaled, to plane `z` of the partial products.
///
/// # Safety
/// The host validated the product, made `slices = ceil(k / k_slice)` with `k_slice` a multiple
/// of `BK`, launched `slices` grid layers, allocated `slices` planes of `m` rows of
/// `splitk_row_stride(n)` floats of partials and two stages of shared memory; `u` as for
/// [`pipelined_in`].
#[inline(always)]
pub(super) unsafe fn split_k<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const LA: usize,
    const LB: usize,
    const TN: usize,
>(
    s: SplitKParams,
    u: impl StageB,
) {
    // SAFETY: reading a special register has no side effects.
    let z = unsafe { nvptx::_block_idx_z() } as u64;
    let g = s.gemm;
    let k0 = z * s.k_slice as u64;
    let ldp = splitk_row_stride(g.n);
    let plane = g.m as u64 * ldp as u64;
    let p = GemmParams {
        // Byte offsets of the slice's first column of `A`, row of `B` and plane.
        a: DevPtr::from_addr(g.a.addr() + 4 * k0),
        b: DevPtr::from_addr(g.b.addr() + 4 * k0 * g.ldb as u64),
        c: DevPtrMut::from_addr(s.partials.addr() + 4 * z * plane),
        k: (g.k as u64 - k0).min(s.k_slice as u64) as u32,
        ldc: ldp,
        alpha: 1.0,
        beta: 0.0,
        ..g
    };
    // SAFETY: slice `z` starts inside K (`z < slices`), so `A` from column `k0` and `B` from
    // row `k0` hold an `m x k` and a `k x n` matrix with the same strides; plane `z` holds
    // `m x n` floats at stride `ldp >= n`. 16-byte alignment is re-derived from these addresses;
    // `u`'s matrices start at the same row as `B`'s slice.
    unsafe {
        let u = u.from_row(k0 as usize, g.ldb as usize);
        pipelined_in::<BM, BN, BK, LA, LB, false, TN, true>(p, u)
    }
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
        unsafe { split_k::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }, 8>(p, AsIs) }
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
        unsafe { split_k::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }, 16>(p, AsIs) }
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
        unsafe { split_k::<64, 64, 8, { T::LOADS_A }, { T::LOADS_B }, 8>(p, AsIs) }
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
        unsafe { split_k::<32, 128, 8, { T::LOADS_A }, { T::LOADS_B }, 8>(p, AsIs) }
    }
}

kernel! {
    #[declared(SGEMM_SPLITK_REDUCE)]
    /// `C = alpha * sum_z P_z + beta * C`, adding the planes in order `z = 0, 1, ...` for every
    /// element (a fixed order: the result does not depend on how blocks were scheduled). Four
    /// consecutive elements of a row per step, by 16-byte accesses, where `n`, `ldc` and the
    /// addresses allow it; one element per step otherwise.
    ///
    /// # Safety
    /// `p.partials` must hold `slices` planes of `m` rows of `splitk_row_stride(n)` floats
    /// written by a split-K kernel and `p.c` an `m x n` matrix with row stride `ldc`.
    pub unsafe fn sgemm_splitk_reduce(p: SplitKReduceParams) {
        let (m, n) = (p.m as u64, p.n as u64);
        let ldp = splitk_row_stride(p.n) as usize;
        let plane = m as usize * ldp;
        let parts = p.partials.as_ptr();
        let c = p.c.as_mut_ptr();
        if splitk_reduce_by_quads(p.m, p.n, p.ldc, p.c.addr(), p.partials.addr()) {
            let per_row = p.n / 4;
            for q in streamline_device::thread::grid_stride(m * n / 4) {
                let q = q as u32;
                let (row, col) = ((q / per_row) as usize, (q % per_row) as usize * 4);
                let i = row * ldp + col;
                // SAFETY: `row < m`, `col + 4 <= n <= ldp`: inside every plane, 16-byte aligned
                // (`ldp` a multiple of 32, the base aligned); and four elements of C on one
                // row, 16-byte aligned (`ldc` a multiple of 4, the base aligned).
                unsafe {
                    let mut sum = ldg4(parts.add(i));
                    for z in 1..p.slices as usize {
                        let v = ldg4(parts.add(z * plane + i));
                        for j in 0..4 {
                            sum[j] += v[j];
                        }
                    }
                    let out = c.add(row * p.ldc as usize + col) as *mut F4;
                    let old = if p.beta == 0.0 { ZERO4 } else { *out };
                    let mut v = ZERO4;
                    for j in 0..4 {
                        v.0[j] = if p.beta == 0.0 {
                            p.alpha * sum[j]
                        } else {
                            fmaf32(p.beta, old.0[j], p.alpha * sum[j])
                        };
                    }
                    *out = v;
                }
            }
            return;
        }
        for e in streamline_device::thread::grid_stride(m * n) {
            let e = e as u64;
            let (row, col) = ((e / n) as usize, (e % n) as usize);
            let i = row * ldp + col;
            // SAFETY: `row < m`, `col < n <= ldp`: inside every plane; the element of `C` at
            // `(row, col)` is inside it by the host's validation.
            unsafe {
                let mut sum = ldg(parts.add(i));
                for z in 1..p.slices as usize {
                    sum += ldg(parts.add(z * plane + i));
                }
                epilogue(c.add(row * p.ldc as usize + col), sum, p.alpha, p.beta);
            }
        }
    }
}
