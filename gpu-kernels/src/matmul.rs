//! FP32 `C = alpha * A @ B + beta * C` (row-major, leading dimensions), as a progression.
//!
//! Each numbered step is a complete kernel that handles every shape (edges are predicated in the
//! kernel, never padded in the user's data) and keeps the change that made it faster readable
//! next to the step before. Times are medians for 4096 x 4096 x 4096 on an NVIDIA H200
//! (`streamline matmul --m 4096 --n 4096 --k 4096 --kernel all --vs-cublas`), as a fraction of
//! cuBLAS SGEMM measured in the same run (2.69 ms); BENCHMARKS.md has the table.
//!
//! 1. [`sgemm_1_naive`]: one thread per output, operands from global memory.
//! 2. [`sgemm_2_tiled`]: operands staged through shared memory, 32 x 32 tiles.
//! 3. [`sgemm_3_blocked`]: register blocking, 8 x 8 outputs per thread, 128 x 128 block tile.
//! 4. [`sgemm_4_vectorized`]: 16-byte loads and stores, transposed and padded `A` tile so that
//!    every shared access is conflict-free.
//! 5. `sgemm_5_pipelined_*`: two shared stages; the next tile's global loads are in flight
//!    while the current one is multiplied, one barrier per tile. Three tile sizes, chosen per
//!    shape by the host.
//! 6. [`sgemm_6_async_128x128`]: a 16-deep `K` tile copied global-to-shared by `cp.async` into
//!    three stages, so no registers hold tiles in transit.
//! 7. [`sgemm_7_swizzled_128x128`]: step 5's 128 x 128 kernel with its blocks walking bands of
//!    block rows column by column, so the blocks resident together share operand panels in L2.
//!
//! Split-K, for products whose output tiles cannot fill the GPU (a batch of 32 rows times a deep
//! `K`): [`sgemm_splitk_128x128`], [`sgemm_splitk_64x64`] and [`sgemm_splitk_32x128`] run step
//! 5's loop over one slice of `K` per grid `z`, each slice into its own plane of partial
//! products, and [`sgemm_splitk_reduce`] adds the planes in slice order and applies `alpha` and
//! `beta`. No atomics: the same inputs give the same bits on every run.
//!
//! Accumulation is a chain of fused multiply-adds over `k` in increasing order for every
//! output, so all steps return the same results for the same shape, up to the sign of a zero;
//! split-K chains each slice and then adds the slices in order, `k / slices + slices` roundings
//! per output instead of `k`. The host's error bound is `gamma_k * sum_k |a_ik| |b_kj|`
//! (`host/src/reference/matmul.rs`), which covers both.

use core::arch::nvptx;
use core::intrinsics::{fmaf32, gpu::gpu_launch_sized_workgroup_mem};
use streamline_abi::matmul::{
    GemmParams, SplitKParams, SplitKReduceParams, A_PAD, SGEMM_SPLITK_128X128, SGEMM_SPLITK_32X128,
    SGEMM_SPLITK_64X64, SGEMM_SPLITK_REDUCE,
};
use streamline_abi::matmul::{
    SGEMM_1_NAIVE, SGEMM_2_TILED, SGEMM_3_BLOCKED, SGEMM_4_VECTORIZED, SGEMM_5_PIPELINED_128X128,
    SGEMM_5_PIPELINED_128X64, SGEMM_5_PIPELINED_64X64, SGEMM_6_ASYNC_128X128,
    SGEMM_7_SWIZZLED_128X128,
};
use streamline_device::kernel;
use streamline_device::mem::{ldg, ldg4};

/// Four floats that move as one 16-byte access.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct F4([f32; 4]);

const ZERO4: F4 = F4([0.0; 4]);

/// Block and thread coordinates of this thread.
#[inline(always)]
fn ids() -> (usize, usize, usize, usize) {
    // SAFETY: reading special registers has no side effects.
    unsafe {
        (
            nvptx::_block_idx_x() as usize,
            nvptx::_block_idx_y() as usize,
            nvptx::_thread_idx_x() as usize,
            nvptx::_thread_idx_y() as usize,
        )
    }
}

#[inline(always)]
fn barrier() {
    // SAFETY: every call site is reached by all threads of the block (no divergent barrier).
    unsafe { nvptx::_syncthreads() }
}

/// `alpha * acc + beta * old`, without reading `old` when `beta == 0`.
///
/// # Safety
/// `c` must be valid for reads and writes.
#[inline(always)]
unsafe fn epilogue(c: *mut f32, acc: f32, alpha: f32, beta: f32) {
    // SAFETY: forwarded from the caller.
    unsafe {
        let v = if beta == 0.0 {
            alpha * acc
        } else {
            fmaf32(beta, *c, alpha * acc)
        };
        *c = v;
    }
}

kernel! {
    #[declared(SGEMM_1_NAIVE.spec)]
    /// Step 1: one thread per output, operands read straight from global memory.
    ///
    /// Every product reads `2k` floats; neighbouring threads share a row of `A` (broadcast) and read
    /// consecutive columns of `B` (coalesced), so it runs at the speed of the L1/L2 caches.
    /// Measured: 25.5 ms (10.5% of cuBLAS).
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
        let (a, b, c) = (p.a as *const f32, p.b as *const f32, p.c as *mut f32);
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

kernel! {
    #[declared(SGEMM_2_TILED.spec)]
    /// Step 2: 32 x 32 tiles of `A` and `B` staged through shared memory; each float loaded from
    /// global memory is used 32 times. One output per thread (1024 threads per block).
    /// Measured: 17.2 ms (15.6% of cuBLAS): every multiply-add still needs two shared loads.
    ///
    /// # Safety
    /// As for [`sgemm_1_naive`]; launched with `32 x 32` threads and 8 KiB of shared memory.
    pub unsafe fn sgemm_2_tiled(p: GemmParams) {
        const T: usize = 32;
        let (bx, by, tx, ty) = ids();
        let row = by * T + ty;
        let col = bx * T + tx;
        let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
        let (a, b, c) = (p.a as *const f32, p.b as *const f32, p.c as *mut f32);
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

kernel! {
    #[declared(SGEMM_3_BLOCKED.spec)]
    /// Step 3: register blocking. A block of 256 threads computes a 128 x 128 tile of `C`, each
    /// thread an 8 x 8 sub-tile kept in registers, so one shared load now feeds 8 multiply-adds.
    /// `A`'s tile is stored transposed (`k`-major) so a thread's 8 rows are contiguous.
    /// Measured: 7.76 ms (34.6% of cuBLAS). Scalar loads, and the 8-float stride between
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
        let (a, b) = (p.a as *const f32, p.b as *const f32);
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
        let c = p.c as *mut f32;
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

/// The tile geometry shared by steps 4 and 5: a `BM x BN` block tile `BK` deep, 8 x 8 outputs
/// per thread split into four 4 x 4 quadrants (rows `ty*4..` and `BM/2 + ty*4..`, columns
/// `tx*4..` and `BN/2 + tx*4..`), so that the 16-byte shared loads of a warp read contiguous
/// 256-byte runs (conflict-free) and the stores to `C` are 16-byte and coalesced.
struct Tile<const BM: usize, const BN: usize, const BK: usize>;

impl<const BM: usize, const BN: usize, const BK: usize> Tile<BM, BN, BK> {
    const THREADS: usize = BM * BN / 64;
    /// Row stride of the transposed `A` tile: padded so that the two column halves a warp
    /// stores (`k` and `k + 4`) land 16 banks apart.
    const SA: usize = BM + A_PAD as usize;
    /// Floats per shared stage.
    const STAGE: usize = BK * (Self::SA + BN);
    /// 16-byte global loads per thread for one `A` tile and one `B` tile.
    const LOADS_A: usize = BM * BK / 4 / Self::THREADS;
    const LOADS_B: usize = BN * BK / 4 / Self::THREADS;
}

/// Where this thread's values live.
struct Frame {
    a: *const f32,
    b: *const f32,
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    /// A and B may be read with 16-byte loads (16-byte aligned bases and strides).
    vec_ab: bool,
    row0: usize,
    col0: usize,
    tid: usize,
    smem: *mut f32,
}

/// Rows of blocks one group of the swizzled order walks down before moving right.
const SWIZZLE_ROWS: usize = 8;

/// The block `(x, y)` that launch position `(bx, by)` computes in step 7's order: the grid is
/// cut into bands of [`SWIZZLE_ROWS`] block rows, and positions run down a band's columns one
/// after another, so the blocks resident at once share a few panels of `A` (their band) and of
/// `B` (their columns) in L2 instead of streaming every panel of `B` per row of blocks.
#[inline(always)]
fn swizzled(bx: usize, by: usize) -> (usize, usize) {
    // SAFETY: reading special registers has no side effects.
    let (gx, gy) = unsafe { (nvptx::_grid_dim_x() as usize, nvptx::_grid_dim_y() as usize) };
    let pid = by * gx + bx;
    let band = SWIZZLE_ROWS * gx;
    let first = (pid / band) * SWIZZLE_ROWS;
    let rows = (gy - first).min(SWIZZLE_ROWS);
    let within = pid % band;
    (within / rows, first + within % rows)
}

impl Frame {
    fn new<const BM: usize, const BN: usize>(p: &GemmParams) -> Frame {
        Self::at::<BM, BN>(p, false)
    }

    /// [`Frame::new`], with the block's tile taken in [`swizzled`] order when `swizzle`.
    fn at<const BM: usize, const BN: usize>(p: &GemmParams, swizzle: bool) -> Frame {
        let (bx, by, tid, _) = ids();
        let (bx, by) = if swizzle { swizzled(bx, by) } else { (bx, by) };
        Frame {
            a: p.a as *const f32,
            b: p.b as *const f32,
            m: p.m as usize,
            n: p.n as usize,
            k: p.k as usize,
            lda: p.lda as usize,
            ldb: p.ldb as usize,
            vec_ab: (p.a | p.b) % 16 == 0 && p.lda % 4 == 0 && p.ldb % 4 == 0,
            row0: by * BM,
            col0: bx * BN,
            tid,
            smem: gpu_launch_sized_workgroup_mem::<F4>() as *mut f32,
        }
    }
}

/// Elements `(r, c..c + 4)` of a `rows x cols` matrix with row stride `ld`, zero outside it;
/// one 16-byte load when the four are inside and `vec` says the address is 16-byte aligned.
/// Loads go through the read-only (non-coherent) global path: `A` and `B` are never written
/// while a product runs.
///
/// # Safety
/// `base` must hold the matrix in global memory.
#[inline(always)]
unsafe fn load4(
    base: *const f32,
    ld: usize,
    rows: usize,
    cols: usize,
    r: usize,
    c: usize,
    vec: bool,
) -> F4 {
    if r >= rows {
        return ZERO4;
    }
    // SAFETY: `r < rows`, and each column read is below `cols`.
    unsafe {
        let p = base.add(r * ld + c);
        if vec && c + 4 <= cols {
            return F4(ldg4(p));
        }
        let mut v = ZERO4;
        for j in 0..4 {
            if c + j < cols {
                v.0[j] = ldg(p.add(j));
            }
        }
        v
    }
}

/// Global loads of the `A` and `B` tiles starting at depth `k0`, held in registers.
struct Staged<const LA: usize, const LB: usize> {
    a: [F4; LA],
    b: [F4; LB],
}

impl<const BM: usize, const BN: usize, const BK: usize> Tile<BM, BN, BK> {
    /// This thread's place `(ty, tx)` in the `BM/8 x BN/8` grid of 8 x 8 sub-tiles. The lanes
    /// of a warp form a 4 x 8 patch, so one 16-byte shared load of the warp touches 4 distinct
    /// `A` vectors (64 bytes) and 8 distinct `B` vectors (128 bytes): one wavefront each,
    /// where a 2 x 16 patch would need three.
    #[inline(always)]
    fn position(tid: usize) -> (usize, usize) {
        let (warp, lane) = (tid / 32, tid % 32);
        let warps_x = BN / 8 / 8;
        (
            (warp / warps_x) * 4 + lane / 8,
            (warp % warps_x) * 8 + lane % 8,
        )
    }

    /// Loads the tiles at depth `k0` into registers. `A`'s tile is read as 4 consecutive `k`
    /// of one row per load, `B`'s as 4 consecutive columns of one `k`.
    ///
    /// # Safety
    /// The frame's matrices must be valid.
    #[inline(always)]
    unsafe fn fetch<const LA: usize, const LB: usize>(f: &Frame, k0: usize) -> Staged<LA, LB> {
        let mut s = Staged {
            a: [ZERO4; LA],
            b: [ZERO4; LB],
        };
        for i in 0..LA {
            let e = f.tid + i * Self::THREADS;
            let (r, kq) = (e / (BK / 4), (e % (BK / 4)) * 4);
            // SAFETY: forwarded; load4 guards the bounds.
            s.a[i] = unsafe { load4(f.a, f.lda, f.m, f.k, f.row0 + r, k0 + kq, f.vec_ab) };
        }
        for i in 0..LB {
            let e = f.tid + i * Self::THREADS;
            let (kr, cq) = (e / (BN / 4), (e % (BN / 4)) * 4);
            // SAFETY: as above.
            s.b[i] = unsafe { load4(f.b, f.ldb, f.k, f.n, k0 + kr, f.col0 + cq, f.vec_ab) };
        }
        s
    }

    /// [`Self::fetch`] for a tile that lies wholly inside `A` and `B` with 16-byte access
    /// allowed: no bounds checks, one 16-byte load per vector.
    ///
    /// # Safety
    /// The frame's matrices must be valid, `f.vec_ab` true, and rows `row0..row0 + BM` of `A`,
    /// columns `col0..col0 + BN` of `B` and depths `k0..k0 + BK` inside the matrices.
    #[inline(always)]
    unsafe fn fetch_inside<const LA: usize, const LB: usize>(
        f: &Frame,
        k0: usize,
    ) -> Staged<LA, LB> {
        let mut s = Staged {
            a: [ZERO4; LA],
            b: [ZERO4; LB],
        };
        for i in 0..LA {
            let e = f.tid + i * Self::THREADS;
            let (r, kq) = (e / (BK / 4), (e % (BK / 4)) * 4);
            // SAFETY: inside A by the caller's guarantee; 16-byte aligned since the base and
            // `lda` are and `k0 + kq` is a multiple of 4.
            s.a[i] = F4(unsafe { ldg4(f.a.add((f.row0 + r) * f.lda + k0 + kq)) });
        }
        for i in 0..LB {
            let e = f.tid + i * Self::THREADS;
            let (kr, cq) = (e / (BN / 4), (e % (BN / 4)) * 4);
            // SAFETY: as above, for B.
            s.b[i] = F4(unsafe { ldg4(f.b.add((k0 + kr) * f.ldb + f.col0 + cq)) });
        }
        s
    }

    /// Writes staged tiles into shared stage `stage`: `A` transposed (`sa[k][row]`), `B` as is.
    ///
    /// # Safety
    /// The launch must provide `stage + 1` stages of shared memory.
    #[inline(always)]
    unsafe fn store<const LA: usize, const LB: usize>(f: &Frame, s: &Staged<LA, LB>, stage: usize) {
        // SAFETY: every index below is inside stage `stage` (e < BM * BK / 4 and e < BK * BN / 4).
        unsafe {
            let sa = f.smem.add(stage * Self::STAGE);
            let sb = sa.add(BK * Self::SA);
            for i in 0..LA {
                let e = f.tid + i * Self::THREADS;
                let (r, kq) = (e / (BK / 4), (e % (BK / 4)) * 4);
                for j in 0..4 {
                    *sa.add((kq + j) * Self::SA + r) = s.a[i].0[j];
                }
            }
            for i in 0..LB {
                let e = f.tid + i * Self::THREADS;
                *(sb.add(e * 4) as *mut F4) = s.b[i];
            }
        }
    }

    /// Multiplies the tiles in shared stage `stage` into this thread's 8 x 8 accumulators.
    ///
    /// # Safety
    /// The stage must have been stored and published by a barrier.
    #[inline(always)]
    unsafe fn multiply(f: &Frame, stage: usize, acc: &mut [[f32; 8]; 8]) {
        let (ty, tx) = Self::position(f.tid);
        // SAFETY: the offsets stay inside the stage; rows of both tiles are 16-byte aligned
        // (SA and BN are multiples of 4 and the base is aligned to 16).
        unsafe {
            let sa = f.smem.add(stage * Self::STAGE);
            let sb = sa.add(BK * Self::SA);
            for kk in 0..BK {
                let a_lo = *(sa.add(kk * Self::SA + ty * 4) as *const F4);
                let a_hi = *(sa.add(kk * Self::SA + BM / 2 + ty * 4) as *const F4);
                let b_lo = *(sb.add(kk * BN + tx * 4) as *const F4);
                let b_hi = *(sb.add(kk * BN + BN / 2 + tx * 4) as *const F4);
                for i in 0..8 {
                    let ai = if i < 4 { a_lo.0[i] } else { a_hi.0[i - 4] };
                    for j in 0..8 {
                        let bj = if j < 4 { b_lo.0[j] } else { b_hi.0[j - 4] };
                        acc[i][j] = fmaf32(ai, bj, acc[i][j]);
                    }
                }
            }
        }
    }

    /// Writes `alpha * acc + beta * C` for this thread's four 4 x 4 quadrants, 16 bytes at a
    /// time where `C` allows it.
    ///
    /// # Safety
    /// `p.c` must hold `C`.
    #[inline(always)]
    unsafe fn write_c(p: &GemmParams, f: &Frame, acc: &[[f32; 8]; 8]) {
        let (ty, tx) = Self::position(f.tid);
        let c = p.c as *mut f32;
        let ldc = p.ldc as usize;
        let vec_c = p.c % 16 == 0 && ldc % 4 == 0;
        for i in 0..8 {
            let r = f.row0 + (i / 4) * (BM / 2) + ty * 4 + i % 4;
            if r >= f.m {
                continue;
            }
            for h in 0..2 {
                let c0 = f.col0 + h * (BN / 2) + tx * 4;
                let v = &acc[i][h * 4..h * 4 + 4];
                // SAFETY: `r < m`; every column written is below `n`.
                unsafe {
                    let q = c.add(r * ldc + c0);
                    if vec_c && c0 + 4 <= f.n {
                        let mut out = F4([0.0; 4]);
                        let old = if p.beta == 0.0 {
                            ZERO4
                        } else {
                            *(q as *const F4)
                        };
                        for j in 0..4 {
                            out.0[j] = if p.beta == 0.0 {
                                p.alpha * v[j]
                            } else {
                                fmaf32(p.beta, old.0[j], p.alpha * v[j])
                            };
                        }
                        *(q as *mut F4) = out;
                    } else {
                        for (j, &x) in v.iter().enumerate() {
                            if c0 + j < f.n {
                                epilogue(q.add(j), x, p.alpha, p.beta);
                            }
                        }
                    }
                }
            }
        }
    }
}

kernel! {
    #[declared(SGEMM_4_VECTORIZED.spec)]
    /// Step 4: step 3 with 16-byte accesses everywhere they are aligned: one 16-byte global load
    /// per operand and thread per tile, 16-byte shared loads in a layout where a warp reads
    /// contiguous runs (no bank conflicts), a transposed `A` tile padded by 4 floats per row so its
    /// scalar stores are conflict-free too, and 16-byte stores of `C`.
    /// Measured: 3.63 ms (74.0% of cuBLAS). Each tile still waits for its own global loads.
    ///
    /// # Safety
    /// As for [`sgemm_1_naive`]; launched with 256 threads and the tiling's shared memory.
    pub unsafe fn sgemm_4_vectorized(p: GemmParams) {
        type T = Tile<128, 128, 8>;
        let f = Frame::new::<128, 128>(&p);
        let mut acc = [[0.0f32; 8]; 8];
        let mut k0 = 0;
        while k0 < f.k {
            // SAFETY: the host validated the matrices; one stage of shared memory is provided and
            // the barriers separate its writes from its reads.
            unsafe {
                let s = T::fetch::<{ T::LOADS_A }, { T::LOADS_B }>(&f, k0);
                T::store(&f, &s, 0);
                barrier();
                T::multiply(&f, 0, &mut acc);
                barrier();
            }
            k0 += 8;
        }
        // SAFETY: the host validated C.
        unsafe { T::write_c(&p, &f, &acc) }
    }
}

/// Step 5: step 4 with two shared stages. While the block multiplies stage `s`, each thread's
/// global loads for the next tile are already in flight into registers; they are written to
/// the other stage afterwards, and one barrier per tile separates the two. Generic over the
/// block tile so the host can pick more, smaller blocks for shapes that would leave SMs idle.
///
/// # Safety
/// The host validated the matrices and provides two stages of shared memory.
#[inline(always)]
unsafe fn pipelined<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const LA: usize,
    const LB: usize,
>(
    p: GemmParams,
) {
    // SAFETY: forwarded.
    unsafe { pipelined_in::<BM, BN, BK, LA, LB, false>(p) }
}

/// [`pipelined`], with the blocks' tiles in [`swizzled`] order when `SWIZZLE` (step 7).
///
/// # Safety
/// As for [`pipelined`].
#[inline(always)]
unsafe fn pipelined_in<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const LA: usize,
    const LB: usize,
    const SWIZZLE: bool,
>(
    p: GemmParams,
) {
    let f = Frame::at::<BM, BN>(&p, SWIZZLE);
    let mut acc = [[0.0f32; 8]; 8];
    let tiles = f.k.div_ceil(BK);
    // Blocks wholly inside A, B and C (all but the edge blocks) skip every bounds check.
    let inside = f.vec_ab && f.row0 + BM <= f.m && f.col0 + BN <= f.n;
    // SAFETY: stage 0 is written before the first barrier and read after it.
    unsafe {
        let s = Tile::<BM, BN, BK>::fetch::<LA, LB>(&f, 0);
        Tile::<BM, BN, BK>::store(&f, &s, 0);
    }
    barrier();
    for t in 0..tiles {
        let stage = t % 2;
        let more = t + 1 < tiles;
        // SAFETY: stage `stage` was published by the last barrier; stage `1 - stage` was last
        // read before that barrier, so writing it now races with no reader.
        unsafe {
            let k0 = (t + 1) * BK;
            let next = if more && inside && k0 + BK <= f.k {
                Tile::<BM, BN, BK>::fetch_inside::<LA, LB>(&f, k0)
            } else if more {
                Tile::<BM, BN, BK>::fetch::<LA, LB>(&f, k0)
            } else {
                Staged {
                    a: [ZERO4; LA],
                    b: [ZERO4; LB],
                }
            };
            Tile::<BM, BN, BK>::multiply(&f, stage, &mut acc);
            if more {
                Tile::<BM, BN, BK>::store(&f, &next, 1 - stage);
            }
        }
        barrier();
    }
    // SAFETY: the host validated C.
    unsafe { Tile::<BM, BN, BK>::write_c(&p, &f, &acc) }
}

kernel! {
    #[declared(SGEMM_5_PIPELINED_128X128.spec)]
    /// Step 5 with 128 x 128 tiles (large products).
    /// Measured: 3.18 ms (84.4% of cuBLAS); 25.25 ms at 8192 (85.0%).
    ///
    /// # Safety
    /// See [`pipelined`]; 256 threads.
    pub unsafe fn sgemm_5_pipelined_128x128(p: GemmParams) {
        type T = Tile<128, 128, 8>;
        // SAFETY: forwarded.
        unsafe { pipelined::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }>(p) }
    }
}

kernel! {
    #[declared(SGEMM_5_PIPELINED_128X64.spec)]
    /// Step 5 with 128 x 64 tiles (medium products).
    ///
    /// # Safety
    /// See [`pipelined`]; 128 threads.
    pub unsafe fn sgemm_5_pipelined_128x64(p: GemmParams) {
        type T = Tile<128, 64, 8>;
        // SAFETY: forwarded.
        unsafe { pipelined::<128, 64, 8, { T::LOADS_A }, { T::LOADS_B }>(p) }
    }
}

kernel! {
    #[declared(SGEMM_5_PIPELINED_64X64.spec)]
    /// Step 5 with 64 x 64 tiles (small and skinny products).
    ///
    /// # Safety
    /// See [`pipelined`]; 64 threads.
    pub unsafe fn sgemm_5_pipelined_64x64(p: GemmParams) {
        type T = Tile<64, 64, 8>;
        // SAFETY: forwarded.
        unsafe { pipelined::<64, 64, 8, { T::LOADS_A }, { T::LOADS_B }>(p) }
    }
}

/// Split-K: the blocks of grid `z` multiply slice `z` of `K` (`k_slice` deep, the last one what
/// remains) with step 5's loop and write it, unscaled, to plane `z` of the partial products.
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
    unsafe { pipelined::<BM, BN, BK, LA, LB>(p) }
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
        unsafe { split_k::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }>(p) }
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
        unsafe { split_k::<64, 64, 8, { T::LOADS_A }, { T::LOADS_B }>(p) }
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
        unsafe { split_k::<32, 128, 8, { T::LOADS_A }, { T::LOADS_B }>(p) }
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
            Tile::<BM, BN, BK>::write_c(p, &f, &acc);
        }
    }

    /// Multiplies stage `stage` into the accumulators.
    ///
    /// # Safety
    /// The stage's copies must have landed and been published by a barrier.
    #[inline(always)]
    pub unsafe fn multiply(f: &Frame, stage: usize, acc: &mut [[f32; 8]; 8]) {
        let (ty, tx) = Tile::<BM, BN, BK>::position(f.tid);
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

kernel! {
    #[declared(SGEMM_7_SWIZZLED_128X128.spec)]
    /// Step 7: step 5's 128 x 128 kernel with the blocks' tiles in [`swizzled`] order, for L2
    /// reuse of the operand panels.
    ///
    /// # Safety
    /// See [`pipelined`]; 256 threads.
    pub unsafe fn sgemm_7_swizzled_128x128(p: GemmParams) {
        type T = Tile<128, 128, 8>;
        // SAFETY: forwarded.
        unsafe { pipelined_in::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }, true>(p) }
    }
}
