//! Step 6: `cp.async` copies from global to shared memory into three stages of 16-deep tiles.

use super::*;

/// Step 6: the block tile of step 5 (128 x 128, 8 x 8 outputs per thread), a deeper `K` tile
/// (16), and operands copied from global to shared memory by `cp.async` into three stages:
/// no staging registers, two tiles in flight while a third is multiplied, one barrier per tile.
/// `A` stays row-major in shared memory (`cp.async` cannot transpose); its 16-byte chunks are
/// XOR-swizzled by row so that the four rows a warp reads at once fall into distinct banks.
mod step6 {
    use super::*;
    use streamline_device::mem::{
        copy_async16, copy_async4x1, copy_commit, copy_wait_groups, shared_addr,
    };

    pub const BM: usize = 128;
    pub const BN: usize = 128;
    pub const BK: usize = 16;
    pub const STAGES: usize = 3;
    pub const THREADS: usize = 256;
    /// Floats of one stage: the `A` tile (`BM x BK`) then the `B` tile (`BK x BN`).
    const STAGE: usize = BM * BK + BK * BN;

    /// Offset in floats of `A`'s 16-byte chunk `c` (of four) of tile row `r`.
    #[inline(always)]
    fn a_at(r: usize, c: usize) -> usize {
        r * BK + ((c ^ ((r >> 2) & 3)) << 2)
    }

    /// Starts the copies of the tiles at depth `k0` into stage `stage` and commits them.
    ///
    /// # Safety
    /// The frame's matrices must be valid; stage `stage` must not be read until a barrier
    /// after the matching wait.
    #[inline(always)]
    pub unsafe fn issue(f: &Frame, k0: usize, stage: usize) {
        let base = shared_addr(f.smem) + (stage * STAGE * 4) as u32;
        for j in 0..2 {
            // A: 512 chunks of 4 floats, 4 per row.
            let e = f.tid + j * THREADS;
            let (r, c) = (e / 4, e % 4);
            let (row, col) = (f.row0 + r, k0 + 4 * c);
            let count = if row < f.m && col < f.k {
                (f.k - col).min(4)
            } else {
                0
            };
            let src = if count > 0 {
                f.a.wrapping_add(row * f.lda + col)
            } else {
                f.a
            };
            let dst = base + (a_at(r, c) * 4) as u32;
            // SAFETY: `count` floats from `src` lie inside A (row < m, col + count <= k), and
            // `src` is A's base when none are read; 16-byte aligned when `vec_ab` (aligned
            // base and lda, col a multiple of 4); `dst` is this thread's own chunk.
            unsafe {
                if f.vec_ab {
                    copy_async16(dst, src, 4 * count as u32);
                } else {
                    copy_async4x1(dst, src, count as u32);
                }
            }
            // B: 512 chunks, 32 per row of K.
            let (kr, cq) = (e / (BN / 4), (e % (BN / 4)) * 4);
            let (krow, col) = (k0 + kr, f.col0 + cq);
            let count = if krow < f.k && col < f.n {
                (f.n - col).min(4)
            } else {
                0
            };
            let src = if count > 0 {
                f.b.wrapping_add(krow * f.ldb + col)
            } else {
                f.b
            };
            let dst = base + ((BM * BK + kr * BN + cq) * 4) as u32;
            // SAFETY: as for A.
            unsafe {
                if f.vec_ab {
                    copy_async16(dst, src, 4 * count as u32);
                } else {
                    copy_async4x1(dst, src, count as u32);
                }
            }
        }
        // SAFETY: sm_80+ (the kernel is built for sm_80 and sm_90 only).
        unsafe { copy_commit() };
    }

    /// The main loop over `K`: `STAGES - 1` tiles in flight while one is multiplied.
    ///
    /// # Safety
    /// The host validated the matrices and provides `STAGES` stages of shared memory.
    #[inline(always)]
    pub unsafe fn run(p: &GemmParams) {
        let f = Frame::new::<BM, BN>(p);
        let mut acc = [[0.0f32; 8]; 8];
        let tiles = f.k.div_ceil(BK);
        // SAFETY (whole body): stage `s` is refilled only after the barrier that follows every
        // thread's last read of it (the multiply of the tile before), and read only after the
        // barrier that follows every thread's wait for its copies.
        unsafe {
            for s in 0..STAGES - 1 {
                if s < tiles {
                    issue(&f, s * BK, s);
                } else {
                    copy_commit();
                }
            }
            for t in 0..tiles {
                copy_wait_groups::<{ (STAGES - 2) as u32 }>();
                barrier();
                let next = t + STAGES - 1;
                if next < tiles {
                    issue(&f, next * BK, next % STAGES);
                } else {
                    copy_commit();
                }
                multiply(&f, t % STAGES, &mut acc);
            }
            Tile::<BM, BN, BK, 8>::write_c(p, &f, &acc);
        }
    }

    /// Multiplies stage `stage` into the accumulators.
    ///
    /// # Safety
    /// The stage's copies must have landed and been published by a barrier.
    #[inline(always)]
    pub unsafe fn multiply(f: &Frame, stage: usize, acc: &mut [[f32; 8]; 8]) {
        let (ty, tx) = Tile::<BM, BN, BK, 8>::position(f.tid);
        // SAFETY: every offset below lies inside the stage; chunks are 16-byte aligned.
        unsafe {
            let sa = f.smem.add(stage * STAGE);
            let sb = sa.add(BM * BK);
            for c in 0..BK / 4 {
                let mut a = [ZERO4; 8];
                for (i, ai) in a.iter_mut().enumerate() {
                    let r = (i / 4) * (BM / 2) + ty * 4 + i % 4;
                    *ai = *(sa.add(a_at(r, c)) as *const F4);
                }
                for kk in 0..4 {
                    let k = 4 * c + kk;
                    let b_lo = *(sb.add(k * BN + tx * 4) as *const F4);
                    let b_hi = *(sb.add(k * BN + BN / 2 + tx * 4) as *const F4);
                    for i in 0..8 {
                        let ai = a[i].0[kk];
                        for j in 0..8 {
                            let bj = if j < 4 { b_lo.0[j] } else { b_hi.0[j - 4] };
                            acc[i][j] = fmaf32(ai, bj, acc[i][j]);
                        }
                    }
                }
            }
        }
    }
}

kernel! {
    #[declared(SGEMM_6_ASYNC_128X128.spec)]
    /// Step 6 (see [`step6`]): 128 x 128 x 16 tiles copied by `cp.async` into three stages.
    /// Holding a chunk of `A` for all eight rows takes it past 128 registers, so one block
    /// runs per SM (8 warps) where step 5 runs two; it is slower than step 5 for that
    /// (BENCHMARKS.md), and versions holding fewer `A` values spill at 128.
    ///
    /// # Safety
    /// As for [`sgemm_1_naive`]; launched with 256 threads and three stages of shared memory.
    pub unsafe fn sgemm_6_async_128x128(p: GemmParams) {
        // SAFETY: forwarded.
        unsafe { step6::run(&p) }
    }
}
