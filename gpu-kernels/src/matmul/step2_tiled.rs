//! Step 2: operands staged through shared memory in 32 x 32 tiles.

use super::*;

kernel! {
    #[declared(SGEMM_2_TILED.spec)]
    /// Step 2: 32 x 32 tiles of `A` and `B` staged through shared memory; each float loaded from
    /// global memory is used 32 times. One output per thread (1024 threads per block).
    ///
    /// # Safety
    /// As for [`sgemm_1_naive`]; launched with `32 x 32` threads and 8 KiB of shared memory.
    pub unsafe fn sgemm_2_tiled(p: GemmParams) {
        const T: usize = 32;
        let (bx, by, tx, ty) = ids();
        let row = by * T + ty;
        let col = bx * T + tx;
        let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
        let (a, b, c) = (p.a.as_ptr(), p.b.as_ptr(), p.c.as_mut_ptr());
        let sa = gpu_launch_sized_workgroup_mem::<F4>() as *mut f32;
        // SAFETY: the launch provides 2 * T * T floats of shared memory.
        let sb = unsafe { sa.add(T * T) };
        let mut acc = 0.0f32;
        let mut k0 = 0;
        while k0 < k {
            // SAFETY: global reads are guarded by the bounds; shared indices are below T * T.
            unsafe {
                *sa.add(ty * T + tx) = if row < m && k0 + tx < k {
                    *a.add(row * p.lda as usize + k0 + tx)
                } else {
                    0.0
                };
                *sb.add(ty * T + tx) = if k0 + ty < k && col < n {
                    *b.add((k0 + ty) * p.ldb as usize + col)
                } else {
                    0.0
                };
            }
            barrier();
            for kk in 0..T {
                // SAFETY: shared indices are below T * T.
                unsafe { acc = fmaf32(*sa.add(ty * T + kk), *sb.add(kk * T + tx), acc) };
            }
            barrier();
            k0 += T;
        }
        if row < m && col < n {
            // SAFETY: inside C.
            unsafe { epilogue(c.add(row * p.ldc as usize + col), acc, p.alpha, p.beta) }
        }
    }
}
