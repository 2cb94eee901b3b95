//! Products with too few outputs to fill the GPU and a `K` too short to be worth a second
//! launch: `K` split across the threads of one block instead of across blocks.

use super::*;
use streamline_device::warp::{shfl_xor, FULL_MASK};

/// Columns of `C` per block.
const COLS: usize = 16;
/// Threads per block; each takes every `THREADS`-th `k`.
const THREADS: usize = 256;
/// Depths of `K` whose loads one thread has in flight at once.
const UNROLL: usize = 4;

/// Columns `c0..c0 + COLS` of row `kk` of `B`, zero past `cols`: four 16-byte loads when
/// all sixteen are inside and `vec` allows them.
///
/// # Safety
/// `row` must point at column `c0` of a row of `B`, with `cols` columns from there inside it.
#[inline(always)]
unsafe fn b_row(row: *const f32, cols: usize, vec: bool) -> [f32; COLS] {
    let mut v = [0.0f32; COLS];
    // SAFETY: every column read is below `cols`; 16-byte aligned where `vec` (aligned base and
    // stride, and `c0` a multiple of 16).
    unsafe {
        if cols == COLS && vec {
            for q in 0..COLS / 4 {
                let x = ldg4(row.add(4 * q));
                v[4 * q..4 * q + 4].copy_from_slice(&x);
            }
        } else if cols == COLS {
            for (j, x) in v.iter_mut().enumerate() {
                *x = ldg(row.add(j));
            }
        } else {
            for (j, x) in v.iter_mut().enumerate() {
                if j < cols {
                    *x = ldg(row.add(j));
                }
            }
        }
    }
    v
}

kernel! {
    #[declared(SGEMM_DOT_1X16.spec)]
    /// Sixteen outputs of one row of `C` per block (grid `ceil(n / 16) x m`), each a dot
    /// product whose `K` is split across the block's 256 threads: thread `t` chains the depths
    /// `t, t + 256, ...`, the warps add their lanes by a butterfly of shuffles, and the first
    /// sixteen threads add the eight warps' sums in warp order. The order of every addition is
    /// fixed by thread indices, so the same inputs give the same bits on every run; the whole
    /// product is one launch with no scratch memory, which is what small products (a batch of
    /// 32 rows through a 10-way classifier) spend most of their time on.
    ///
    /// # Safety
    /// The host validated the matrices; 256 threads and `8 * 16` floats of shared memory.
    pub unsafe fn sgemm_dot_1x16(p: GemmParams) {
        let (bx, r, tid, _) = ids();
        let (n, k, ldb) = (p.n as usize, p.k as usize, p.ldb as usize);
        let c0 = bx * COLS;
        let cols = (n - c0).min(COLS);
        let vec = p.b.addr() % 16 == 0 && ldb % 4 == 0;
        // SAFETY: `r < m` (one block row per row of C), so row `r` of A is inside it.
        let a = unsafe { p.a.as_ptr().add(r * p.lda as usize) };
        // SAFETY: `c0 < n`, so column `c0` of B's first row is inside it.
        let b = unsafe { p.b.as_ptr().add(c0) };
        let mut acc = [0.0f32; COLS];
        let mut kk = tid;
        while kk + (UNROLL - 1) * THREADS < k {
            // SAFETY: every depth `kk + u THREADS` is below `k`: inside A's row and B.
            unsafe {
                let mut av = [0.0f32; UNROLL];
                let mut bv = [[0.0f32; COLS]; UNROLL];
                for u in 0..UNROLL {
                    let d = kk + u * THREADS;
                    av[u] = ldg(a.add(d));
                    bv[u] = b_row(b.add(d * ldb), cols, vec);
                }
                for u in 0..UNROLL {
                    for j in 0..COLS {
                        acc[j] = fmaf32(av[u], bv[u][j], acc[j]);
                    }
                }
            }
            kk += UNROLL * THREADS;
        }
        while kk < k {
            // SAFETY: `kk < k`: inside A's row and B.
            unsafe {
                let av = ldg(a.add(kk));
                let bv = b_row(b.add(kk * ldb), cols, vec);
                for j in 0..COLS {
                    acc[j] = fmaf32(av, bv[j], acc[j]);
                }
            }
            kk += THREADS;
        }
        let mut stride = 16u32;
        while stride > 0 {
            for v in acc.iter_mut() {
                // SAFETY: every lane of the warp runs this loop together (the loops above
                // rejoined); both lanes of a pair add the same two values in the same order.
                *v += f32::from_bits(unsafe { shfl_xor(FULL_MASK, v.to_bits(), stride) });
            }
            stride /= 2;
        }
        let sums = gpu_launch_sized_workgroup_mem::<F4>() as *mut f32;
        let (warp, lane) = (tid / 32, tid % 32);
        if lane == 0 {
            for (j, &v) in acc.iter().enumerate() {
                // SAFETY: `warp < 8`, `j < 16`: inside the launch's 8 x 16 floats.
                unsafe { *sums.add(warp * COLS + j) = v };
            }
        }
        barrier();
        if tid < cols {
            // SAFETY: the warps' sums were written before the barrier; `c0 + tid < n` and
            // `r < m`, so the element is inside C.
            unsafe {
                let mut sum = *sums.add(tid);
                for w in 1..THREADS / 32 {
                    sum += *sums.add(w * COLS + tid);
                }
                let c = p.c.as_mut_ptr().add(r * p.ldc as usize + c0 + tid);
                epilogue(c, sum, p.alpha, p.beta);
            }
        }
    }
}
