//! Step 1: one thread per output, operands read straight from global memory.

use super::*;

kernel! {
    #[declared(SGEMM_1_NAIVE.spec)]
    /// Step 1: one thread per output, operands read straight from global memory.
    ///
    /// Every product reads `2k` floats; neighbouring threads share a row of `A` (broadcast) and read
    /// consecutive columns of `B` (coalesced), so it runs at the speed of the L1/L2 caches.
    ///
    /// # Safety
    /// The addresses in `p` must hold matrices of the declared shapes and strides.
    pub unsafe fn sgemm_1_naive(p: GemmParams) {
        let (bx, by, tx, ty) = ids();
        let col = bx * 16 + tx;
        let row = by * 16 + ty;
        if row >= p.m as usize || col >= p.n as usize {
            return;
        }
        let (a, b, c) = (p.a.as_ptr(), p.b.as_ptr(), p.c.as_mut_ptr());
        let mut acc = 0.0f32;
        for kk in 0..p.k as usize {
            // SAFETY: `row < m`, `kk < k`, `col < n`: inside A and B.
            unsafe {
                acc = fmaf32(
                    *a.add(row * p.lda as usize + kk),
                    *b.add(kk * p.ldb as usize + col),
                    acc,
                );
            }
        }
        // SAFETY: `row < m`, `col < n`: inside C.
        unsafe { epilogue(c.add(row * p.ldc as usize + col), acc, p.alpha, p.beta) }
    }
}
