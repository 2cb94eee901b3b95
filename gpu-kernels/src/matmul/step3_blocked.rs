//! Step 3: register blocking, 8 x 8 outputs per thread from a 128 x 128 block tile.

use super::*;

kernel! {
    #[declared(SGEMM_3_BLOCKED.spec)]
    /// Step 3: register blocking. A block of 256 threads computes a 128 x 128 tile of `C`, each
    /// thread an 8 x 8 sub-tile kept in registers, so one shared load now feeds 8 multiply-adds.
    /// `A`'s tile is stored transposed (`k`-major) so a thread's 8 rows are contiguous.
    /// Scalar loads, and the 8-float stride between
    /// neighbouring threads' rows and columns, cause shared-memory bank conflicts; the global
    /// loads of each tile are waited for before any multiply-add, with two barriers per tile.
    ///
    /// # Safety
    /// As for [`sgemm_1_naive`]; launched with 256 threads and the tiling's shared memory.
    pub unsafe fn sgemm_3_blocked(p: GemmParams) {
        const BM: usize = 128;
        const BN: usize = 128;
        const BK: usize = 8;
        const THREADS: usize = 256;
        let (bx, by, tid, _) = ids();
        let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
        let (a, b) = (p.a.as_ptr(), p.b.as_ptr());
        let row0 = by * BM;
        let col0 = bx * BN;
        let (ty, tx) = (tid / (BN / 8), tid % (BN / 8));
        let sa = gpu_launch_sized_workgroup_mem::<F4>() as *mut f32;
        // SAFETY: the launch provides BK * (BM + BN) floats.
        let sb = unsafe { sa.add(BK * BM) };
        let mut acc = [[0.0f32; 8]; 8];
        let mut k0 = 0;
        while k0 < k {
            for i in 0..BM * BK / THREADS {
                let e = tid + i * THREADS;
                let (r, kk) = (e / BK, e % BK);
                let (gr, gk) = (row0 + r, k0 + kk);
                // SAFETY: guarded global read; `kk * BM + r < BK * BM`.
                unsafe {
                    *sa.add(kk * BM + r) = if gr < m && gk < k {
                        *a.add(gr * p.lda as usize + gk)
                    } else {
                        0.0
                    };
                }
            }
            for i in 0..BN * BK / THREADS {
                let e = tid + i * THREADS;
                let (kk, cc) = (e / BN, e % BN);
                let (gk, gc) = (k0 + kk, col0 + cc);
                // SAFETY: guarded global read; `e < BK * BN`.
                unsafe {
                    *sb.add(e) = if gk < k && gc < n {
                        *b.add(gk * p.ldb as usize + gc)
                    } else {
                        0.0
                    };
                }
            }
            barrier();
            for kk in 0..BK {
                let mut fa = [0.0f32; 8];
                let mut fb = [0.0f32; 8];
                for i in 0..8 {
                    // SAFETY: indices below BK * BM and BK * BN.
                    unsafe {
                        fa[i] = *sa.add(kk * BM + ty * 8 + i);
                        fb[i] = *sb.add(kk * BN + tx * 8 + i);
                    }
                }
                for i in 0..8 {
                    for j in 0..8 {
                        acc[i][j] = fmaf32(fa[i], fb[j], acc[i][j]);
                    }
                }
            }
            barrier();
            k0 += BK;
        }
        let c = p.c.as_mut_ptr();
        for (i, acc_row) in acc.iter().enumerate() {
            let gr = row0 + ty * 8 + i;
            for (j, &v) in acc_row.iter().enumerate() {
                let gc = col0 + tx * 8 + j;
                if gr < m && gc < n {
                    // SAFETY: inside C.
                    unsafe { epilogue(c.add(gr * p.ldc as usize + gc), v, p.alpha, p.beta) }
                }
            }
        }
    }
}
