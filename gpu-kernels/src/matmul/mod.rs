//! FP32 `C = alpha * A @ B + beta * C` (row-major, leading dimensions), as a progression.
//!
//! Each numbered step is a complete kernel that handles every shape (edges are predicated in the
//! kernel, never padded in the user's data) and keeps the change that made it faster readable
//! next to the step before, one file per step, so that any two can be compared side by side.
//! `streamline matmul --kernel all --vs-cublas` times them all; BENCHMARKS.md has the table.
//!
//! 1. [`step1_naive`]: one thread per output, operands from global memory.
//! 2. [`step2_tiled`]: operands staged through shared memory, 32 x 32 tiles.
//! 3. [`step3_blocked`]: register blocking, 8 x 8 outputs per thread, 128 x 128 block tile.
//! 4. [`step4_vectorized`]: 16-byte loads and stores, transposed and padded `A` tile so that
//!    every shared access is conflict-free.
//! 5. [`step5_pipelined`]: two shared stages; the next tile's global loads are in flight
//!    while the current one is multiplied, one barrier per tile. Three tile sizes, chosen per
//!    shape by the host.
//! 6. [`step6_async`]: a 16-deep `K` tile copied global-to-shared by `cp.async` into
//!    three stages, so no registers hold tiles in transit.
//! 7. [`step7_swizzled`]: step 5's 128 x 128 kernel with its blocks walking bands of
//!    block rows column by column, so the blocks resident together share operand panels in L2.
//! 8. [`step8_wide`]: step 5 with 8 x 16 outputs per thread, so each `k` feeds 128 fused
//!    multiply-adds from six shared loads instead of 64 from four, with half the threads (and
//!    the barrier's waiters) per tile. The shape rule's kernel for large products.
//!
//! Split-K, for products whose output tiles cannot fill the GPU (a batch of 32 rows times a deep
//! `K`, [`splitk`]): `sgemm_splitk_128x128`, `sgemm_splitk_64x64` and `sgemm_splitk_32x128` run step
//! 5's loop, `sgemm_splitk_wide_128x128` step 8's, over one slice of `K` per grid `z`, each slice
//! into its own plane of partial products, and `sgemm_splitk_reduce` adds the planes in slice
//! order and applies `alpha` and `beta`. No atomics: the same inputs give the same bits on every
//! run. Products with few outputs and a moderate `K` split it inside each block instead, in one
//! launch ([`dot`]: `sgemm_dot_1x16`). The `sgemm_splitk_wide_sgd_*` kernels ([`sgd`]) are
//! `sgemm_splitk_wide_128x128` with an SGD step owed to `B` applied as each vector of it is
//! read: a training step's next forward product updates the weights it multiplies.
//!
//! Accumulation is a chain of fused multiply-adds over `k` in increasing order for every
//! output, so all steps return the same results for the same shape, up to the sign of a zero;
//! split-K chains each slice and then adds the slices in order, `k / slices + slices` roundings
//! per output instead of `k`; `sgemm_dot_1x16` chains every 256th `k` per thread, then adds the
//! chains in a fixed tree. The host's error bound is `gamma_k * sum_k |a_ik| |b_kj|`
//! (`testing/src/reference/matmul.rs`), which covers every order.

use core::arch::nvptx;
use core::intrinsics::{fmaf32, gpu::gpu_launch_sized_workgroup_mem};
use out::Out;
use streamline_abi::matmul::{
    splitk_reduce_by_quads, splitk_row_stride, GemmParams, GemmParamsTo, SplitKParams,
    SplitKReduceParams, A_PAD, SGEMM_DOT_1X16, SGEMM_SPLITK_128X128, SGEMM_SPLITK_32X128,
    SGEMM_SPLITK_64X64, SGEMM_SPLITK_REDUCE, SGEMM_SPLITK_WIDE_128X128,
};
use streamline_abi::matmul::{
    SGEMM_1_NAIVE, SGEMM_2_TILED, SGEMM_3_BLOCKED, SGEMM_4_VECTORIZED, SGEMM_5_PIPELINED_128X128,
    SGEMM_5_PIPELINED_128X64, SGEMM_5_PIPELINED_64X64, SGEMM_6_ASYNC_128X128,
    SGEMM_7_SWIZZLED_128X128, SGEMM_8_WIDE_128X128, SGEMM_8_WIDE_128X128_BF16,
};
use streamline_device::kernel;
use streamline_device::mem::{ld_stream16, ldg, ldg4};

/// Four floats that move as one 16-byte access.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct F4([f32; 4]);

const ZERO4: F4 = F4([0.0; 4]);

/// What a product does to each vector of `B` between reading it and staging it in shared
/// memory: nothing ([`AsIs`]), or an SGD step owed to weights, written back as it is multiplied
/// ([`sgd::Sgd`]).
trait StageB {
    /// What is read beside each vector of `B` (with it, so that its loads are in flight
    /// together).
    type Held: Copy;
    /// `Held` where nothing is read.
    const EMPTY: Self::Held;
    /// Whether `B` is written: then it is read through the coherent global path, not the
    /// read-only one.
    const WRITES_B: bool;

    /// What goes with `B`'s vector at element offset `off`, of which the first `valid` (0 to 4)
    /// lie inside `B`; with one access if `vec`.
    ///
    /// # Safety
    /// The first `valid` elements at `off` lie inside `B`; with `vec`, `valid` is 4 and `off`
    /// a multiple of 4 of a 16-byte aligned `B`.
    unsafe fn held(&self, off: usize, valid: usize, vec: bool) -> Self::Held;

    /// The vector `v` of `B` at `off` as it is staged, after writing it back where it changed
    /// (the first `valid` elements; `valid` 0 for one read outside `B`).
    ///
    /// # Safety
    /// As for [`StageB::held`], `held` what it returned for this vector.
    unsafe fn stage(&self, v: F4, held: Self::Held, off: usize, valid: usize, vec: bool) -> F4;

    /// The same for `B` starting `rows` rows of `ld` elements further.
    fn from_row(self, rows: usize, ld: usize) -> Self;
}

/// `B` multiplied as it is.
#[derive(Clone, Copy)]
struct AsIs;

impl StageB for AsIs {
    type Held = ();
    const EMPTY: () = ();
    const WRITES_B: bool = false;

    #[inline(always)]
    unsafe fn held(&self, _: usize, _: usize, _: bool) {}

    #[inline(always)]
    unsafe fn stage(&self, v: F4, _: (), _: usize, _: usize, _: bool) -> F4 {
        v
    }

    #[inline(always)]
    fn from_row(self, _: usize, _: usize) -> AsIs {
        AsIs
    }
}

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

/// `alpha * acc + beta * old`, without reading `old` when `beta == 0`, rounded to `C`'s type.
///
/// # Safety
/// `c` must be valid for reads and writes.
#[inline(always)]
unsafe fn epilogue<O: Out>(c: *mut O, acc: f32, alpha: f32, beta: f32) {
    // SAFETY: forwarded from the caller; `c` is read only when `beta != 0`.
    unsafe { *c = O::from_acc(out::scaled(acc, || (*c).to_acc(), alpha, beta)) }
}

pub mod dot;
pub mod half;
mod out;
pub mod sgd;
pub mod splitk;
pub mod step1_naive;
pub mod step2_tiled;
pub mod step3_blocked;
pub mod step4_vectorized;
pub mod step5_pipelined;
pub mod step6_async;
pub mod step7_swizzled;
pub mod step8_wide;

/// The tile geometry shared by steps 4, 5 and 8: a `BM x BN` block tile `BK` deep, 8 x `TN`
/// outputs per thread in 4 x 4 quadrants (rows `ty*4..` and `BM/2 + ty*4..`, columns `tx*4..`
/// plus each multiple of `4 BN / TN`), so that the 16-byte shared loads of a warp read
/// contiguous 256-byte runs (conflict-free) and the stores to `C` are 16-byte and coalesced.
/// `TN` is 8 (steps 4 and 5) or 16 (step 8).
struct Tile<const BM: usize, const BN: usize, const BK: usize, const TN: usize = 8>;

impl<const BM: usize, const BN: usize, const BK: usize, const TN: usize> Tile<BM, BN, BK, TN> {
    const THREADS: usize = {
        assert!(TN == 8 || TN == 16, "8 x 8 or 8 x 16 outputs per thread");
        BM * BN / (8 * TN)
    };
    /// Columns between a thread's column quadrants.
    const QN: usize = 4 * BN / TN;
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
    fn at<const BM: usize, const BN: usize>(p: &GemmParamsTo<impl Out>, swizzle: bool) -> Frame {
        let (bx, by, tid, _) = ids();
        let (bx, by) = if swizzle { swizzled(bx, by) } else { (bx, by) };
        Frame {
            a: p.a.as_ptr(),
            b: p.b.as_ptr(),
            m: p.m as usize,
            n: p.n as usize,
            k: p.k as usize,
            lda: p.lda as usize,
            ldb: p.ldb as usize,
            vec_ab: (p.a.addr() | p.b.addr()) % 16 == 0 && p.lda % 4 == 0 && p.ldb % 4 == 0,
            row0: by * BM,
            col0: bx * BN,
            tid,
            smem: gpu_launch_sized_workgroup_mem::<F4>() as *mut f32,
        }
    }
}

/// Elements `(r, c..c + 4)` of a `rows x cols` matrix with row stride `ld`, zero outside it;
/// one 16-byte load when the four are inside and `vec` says the address is 16-byte aligned.
/// Loads go through the read-only (non-coherent) global path where `nc` (an operand no thread
/// writes while the product runs), the coherent one otherwise.
///
/// # Safety
/// `base` must hold the matrix in global memory.
#[inline(always)]
unsafe fn load4(
    base: *const f32,
    ld: usize,
    (rows, cols): (usize, usize),
    (r, c): (usize, usize),
    vec: bool,
    nc: bool,
) -> F4 {
    if r >= rows {
        return ZERO4;
    }
    // SAFETY: `r < rows`, and each column read is below `cols`.
    unsafe {
        let p = base.add(r * ld + c);
        if vec && c + 4 <= cols {
            return read4(p, nc);
        }
        let mut v = ZERO4;
        for j in 0..4 {
            if c + j < cols {
                v.0[j] = if nc { ldg(p.add(j)) } else { *p.add(j) };
            }
        }
        v
    }
}

/// Four floats at `p` in one 16-byte load: through the read-only path where `nc`, otherwise
/// through the coherent one marked evict-first (weights a product updates: the product reads
/// each once, and the next read is the next step's).
///
/// # Safety
/// `p` must be 16-byte aligned and address four floats of global memory, unwritten while the
/// kernel runs where `nc`.
#[inline(always)]
unsafe fn read4(p: *const f32, nc: bool) -> F4 {
    // SAFETY: forwarded.
    unsafe {
        if nc {
            F4(ldg4(p))
        } else {
            F4(ld_stream16(p as *const [u32; 4]).map(f32::from_bits))
        }
    }
}

/// Global loads of the `A` and `B` tiles starting at depth `k0`, held in registers, with what
/// `U` read beside each vector of `B`.
struct Staged<const LA: usize, const LB: usize, U: StageB> {
    a: [F4; LA],
    b: [F4; LB],
    held: [U::Held; LB],
    k0: usize,
}

impl<const LA: usize, const LB: usize, U: StageB> Staged<LA, LB, U> {
    /// Nothing read (after the last tile).
    const NONE: Self = Staged {
        a: [ZERO4; LA],
        b: [ZERO4; LB],
        held: [U::EMPTY; LB],
        k0: 0,
    };
}

impl<const BM: usize, const BN: usize, const BK: usize, const TN: usize> Tile<BM, BN, BK, TN> {
    /// This thread's place `(ty, tx)` in the `BM/8 x BN/TN` grid of 8 x `TN` sub-tiles. The lanes
    /// of a warp form a 4 x 8 patch, so one 16-byte shared load of the warp touches 4 distinct
    /// `A` vectors (64 bytes) and 8 distinct `B` vectors (128 bytes): one wavefront each,
    /// where a 2 x 16 patch would need three.
    #[inline(always)]
    fn position(tid: usize) -> (usize, usize) {
        let (warp, lane) = (tid / 32, tid % 32);
        let warps_x = BN / TN / 8;
        (
            (warp / warps_x) * 4 + lane / 8,
            (warp % warps_x) * 8 + lane % 8,
        )
    }

    /// Loads the tiles at depth `k0` into registers. `A`'s tile is read as 4 consecutive `k`
    /// of one row per load, `B`'s as 4 consecutive columns of one `k`.
    ///
    /// # Safety
    /// The frame's matrices must be valid, and `u`'s laid out as `B`.
    #[inline(always)]
    unsafe fn fetch<const LA: usize, const LB: usize, U: StageB>(
        f: &Frame,
        u: &U,
        k0: usize,
    ) -> Staged<LA, LB, U> {
        Self::fetch_by(
            f,
            k0,
            |of_a, base, ld, dims, rc| {
                // SAFETY: forwarded; load4 guards the bounds.
                unsafe { load4(base, ld, dims, rc, f.vec_ab, of_a || !U::WRITES_B) }
            },
            |(r, c)| {
                if r >= f.k {
                    return U::EMPTY;
                }
                let valid = f.n.saturating_sub(c).min(4);
                // SAFETY: row `r` and the first `valid` columns from `c` lie inside `B`.
                unsafe { u.held(r * f.ldb + c, valid, f.vec_ab && valid == 4) }
            },
        )
    }

    /// [`Self::fetch`] for a tile whose depths lie inside `K`, with 16-byte access allowed: no
    /// bounds checks, one 16-byte load per vector. With `CLAMP`, rows of `A` past `m` read row
    /// `m - 1` and column vectors of `B` past `n` read the last one, so an edge block runs the
    /// same loop as the blocks inside; what it computes from them lands in outputs that are
    /// never written.
    ///
    /// # Safety
    /// The frame's matrices must be valid, `f.vec_ab` true and depths `k0..k0 + BK` inside `K`;
    /// with `CLAMP`, either columns `col0..col0 + BN` inside `B` or `n` a multiple of 4;
    /// without, rows `row0..row0 + BM` and columns `col0..col0 + BN` inside the matrices.
    #[inline(always)]
    unsafe fn fetch_inside<const LA: usize, const LB: usize, const CLAMP: bool, U: StageB>(
        f: &Frame,
        u: &U,
        k0: usize,
    ) -> Staged<LA, LB, U> {
        let (last_row, last_vec) = (f.m - 1, f.n.saturating_sub(4));
        Self::fetch_by(
            f,
            k0,
            |of_a, base, ld, _, (r, c)| {
                let (r, c) = if !CLAMP {
                    (r, c)
                } else if of_a {
                    (r.min(last_row), c)
                } else {
                    (r, c.min(last_vec))
                };
                // A `B` that is written while it is read: a vector past `n` reads A's first
                // vector instead of `B`'s last, which its own thread may be writing (either
                // feeds only columns past `n`, which are never written).
                let p = if U::WRITES_B && !of_a && c > last_vec {
                    f.a
                } else {
                    // SAFETY: as below.
                    unsafe { base.add(r * ld + c) }
                };
                // SAFETY: the row is below `m` (A) or a depth inside `K` (B); the depths of A
                // and the column vectors of B lie inside by the caller's guarantee (clamped, a
                // vector past `n` reads the last whole one, `n - 4`, since `n` is a multiple of
                // 4 where the tile crosses `n`); 16-byte aligned since the base and `ld` are
                // and the column is a multiple of 4 (A's base too, where it stands in).
                unsafe { read4(p, of_a || !U::WRITES_B) }
            },
            |(r, c)| {
                let c = if CLAMP { c.min(last_vec) } else { c };
                // SAFETY: the vector read of `B` just above, inside and aligned.
                unsafe { u.held(r * f.ldb + c, 4, true) }
            },
        )
    }

    /// [`Self::fetch_inside`] where 16-byte access is not allowed (a base or a leading
    /// dimension that is not 16-byte aligned): four 4-byte loads per vector, still without
    /// bounds checks.
    ///
    /// # Safety
    /// As for [`Self::fetch_inside`], without its alignment condition.
    #[inline(always)]
    unsafe fn fetch_inside_unaligned<const LA: usize, const LB: usize, U: StageB>(
        f: &Frame,
        u: &U,
        k0: usize,
    ) -> Staged<LA, LB, U> {
        Self::fetch_by(
            f,
            k0,
            |of_a, base, ld, _, (r, c)| {
                let nc = of_a || !U::WRITES_B;
                // SAFETY: the four elements lie inside the matrix by the caller's guarantee.
                unsafe {
                    let p = base.add(r * ld + c);
                    if nc {
                        F4([ldg(p), ldg(p.add(1)), ldg(p.add(2)), ldg(p.add(3))])
                    } else {
                        F4([*p, *p.add(1), *p.add(2), *p.add(3)])
                    }
                }
            },
            |(r, c)| {
                // SAFETY: the four elements lie inside `B` by the caller's guarantee.
                unsafe { u.held(r * f.ldb + c, 4, false) }
            },
        )
    }

    /// The tiles at depth `k0`, each vector read by `load(of_a, matrix, ld, (rows, cols), (row,
    /// col))` at its first element: this thread's share of `A`'s (4 consecutive `k` of a row,
    /// `of_a` true) and `B`'s (4 consecutive columns of a `k`), and beside each of `B`'s what
    /// `held((row, col))` reads.
    #[inline(always)]
    fn fetch_by<const LA: usize, const LB: usize, U: StageB>(
        f: &Frame,
        k0: usize,
        load: impl Fn(bool, *const f32, usize, (usize, usize), (usize, usize)) -> F4,
        held: impl Fn((usize, usize)) -> U::Held,
    ) -> Staged<LA, LB, U> {
        let mut s = Staged::NONE;
        s.k0 = k0;
        for i in 0..LA {
            let e = f.tid + i * Self::THREADS;
            let (r, kq) = (e / (BK / 4), (e % (BK / 4)) * 4);
            s.a[i] = load(true, f.a, f.lda, (f.m, f.k), (f.row0 + r, k0 + kq));
        }
        for i in 0..LB {
            let e = f.tid + i * Self::THREADS;
            let (kr, cq) = (e / (BN / 4), (e % (BN / 4)) * 4);
            let at = (k0 + kr, f.col0 + cq);
            s.b[i] = load(false, f.b, f.ldb, (f.k, f.n), at);
            if U::WRITES_B {
                s.held[i] = held(at);
            }
        }
        s
    }

    /// Writes staged tiles into shared stage `stage`: `A` transposed (`sa[k][row]`), `B` as
    /// `u` stages it.
    ///
    /// # Safety
    /// The launch must provide `stage + 1` stages of shared memory; `s` was fetched with `u`.
    #[inline(always)]
    unsafe fn store<const LA: usize, const LB: usize, U: StageB>(
        f: &Frame,
        u: &U,
        s: &Staged<LA, LB, U>,
        stage: usize,
    ) {
        // SAFETY: every index below is inside stage `stage` (e < BM * BK / 4 and e < BK * BN / 4);
        // `u` stages the vectors its `held` read beside, at the same offsets.
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
                let v = if U::WRITES_B {
                    let (kr, cq) = (e / (BN / 4), (e % (BN / 4)) * 4);
                    let (r, c) = (s.k0 + kr, f.col0 + cq);
                    // Only what lies inside `B` is written back (not a clamped vector's copy
                    // of the last one, nor the zeros read past an edge).
                    let valid = if r < f.k {
                        f.n.saturating_sub(c).min(4)
                    } else {
                        0
                    };
                    u.stage(s.b[i], s.held[i], r * f.ldb + c, valid, f.vec_ab)
                } else {
                    s.b[i]
                };
                *(sb.add(e * 4) as *mut F4) = v;
            }
        }
    }

    /// Multiplies the tiles in shared stage `stage` into this thread's 8 x `TN` accumulators.
    ///
    /// # Safety
    /// The stage must have been stored and published by a barrier.
    #[inline(always)]
    unsafe fn multiply(f: &Frame, stage: usize, acc: &mut [[f32; TN]; 8]) {
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
                let b_hi = *(sb.add(kk * BN + Self::QN + tx * 4) as *const F4);
                if TN == 8 {
                    for i in 0..8 {
                        let ai = if i < 4 { a_lo.0[i] } else { a_hi.0[i - 4] };
                        for j in 0..8 {
                            let bj = if j < 4 { b_lo.0[j] } else { b_hi.0[j - 4] };
                            acc[i][j] = fmaf32(ai, bj, acc[i][j]);
                        }
                    }
                } else {
                    let b2 = *(sb.add(kk * BN + 2 * Self::QN + tx * 4) as *const F4);
                    let b3 = *(sb.add(kk * BN + 3 * Self::QN + tx * 4) as *const F4);
                    let b = [b_lo, b_hi, b2, b3];
                    for i in 0..8 {
                        let ai = if i < 4 { a_lo.0[i] } else { a_hi.0[i - 4] };
                        for j in 0..TN {
                            acc[i][j] = fmaf32(ai, b[j / 4].0[j % 4], acc[i][j]);
                        }
                    }
                }
            }
        }
    }

    /// Writes `alpha * acc + beta * C` for this thread's 4 x 4 quadrants, rounded to `C`'s
    /// type, four elements per store where `C` allows it. With `beta` nonzero, the old values
    /// of a row (two with 8 x 16 outputs) are all read before any of them is written, so their
    /// loads are in flight together instead of each waiting for the store before it (more at
    /// once spill under the two-block register bound of step 5's and step 7's 128 x 128
    /// kernels).
    ///
    /// # Safety
    /// `p.c` must hold `C`.
    #[inline(always)]
    unsafe fn write_c<O: Out>(p: &GemmParamsTo<O>, f: &Frame, acc: &[[f32; TN]; 8]) {
        let (ty, tx) = Self::position(f.tid);
        let c = p.c.as_mut_ptr();
        let ldc = p.ldc as usize;
        let vec_c = p.c.addr() % (4 * size_of::<O>() as u64) == 0 && ldc % 4 == 0;
        let row = |i: usize| f.row0 + (i / 4) * (BM / 2) + ty * 4 + i % 4;
        let col = |h: usize| f.col0 + h * Self::QN + tx * 4;
        // Where the vector `h` of row `i` of this thread's takes one access: its offset in `C`.
        let whole = |i: usize, h: usize| {
            let (r, c0) = (row(i), col(h));
            (r < f.m && vec_c && c0 + 4 <= f.n).then_some(r * ldc + c0)
        };
        // Writes row `i` of this thread's, the old values of its whole vectors in `old`.
        let put = |i: usize, old: [[f32; 4]; 4]| {
            let r = row(i);
            if r >= f.m {
                return;
            }
            for h in 0..TN / 4 {
                let c0 = col(h);
                let v = &acc[i][h * 4..h * 4 + 4];
                // SAFETY: `r < m`; every column written is below `n`; a whole vector starts on
                // a multiple of four elements of an aligned row.
                unsafe {
                    let q = c.add(r * ldc + c0);
                    if whole(i, h).is_some() {
                        O::write4(q, v, old[h], p.alpha, p.beta);
                    } else {
                        for (j, &x) in v.iter().enumerate() {
                            if c0 + j < f.n {
                                epilogue(q.add(j), x, p.alpha, p.beta);
                            }
                        }
                    }
                }
            }
        };
        if p.beta == 0.0 {
            for i in 0..8 {
                put(i, [[0.0; 4]; 4]);
            }
            return;
        }
        // Rows read at once: two rows of four vectors (8 x 16 outputs), one row of two (8 x 8);
        // rows of `C` do not overlap (`ldc >= n`, validated by the host), so reading the next
        // row before writing this one reads its old values.
        let rows = TN / 8;
        for i in (0..8).step_by(rows) {
            let mut old = [[[0.0f32; 4]; 4]; 2];
            for g in 0..rows {
                for h in 0..TN / 4 {
                    if let Some(e) = whole(i + g, h) {
                        // SAFETY: a whole vector inside `C` (`whole`), aligned.
                        old[g][h] = unsafe { O::read4(c.add(e)) };
                    }
                }
            }
            for g in 0..rows {
                put(i + g, old[g]);
            }
        }
    }
}
