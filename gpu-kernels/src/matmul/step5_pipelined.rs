//! Step 5: step 4 with two shared stages, the next tile's global loads in flight while the
//! current one is multiplied; three block tiles, chosen per shape by the host.

use super::*;

/// Step 5: step 4 with two shared stages. While the block multiplies stage `s`, each thread's
/// global loads for the next tile are already in flight into registers; they are written to
/// the other stage afterwards, and one barrier per tile separates the two. Generic over the
/// block tile so the host can pick more, smaller blocks for shapes that would leave SMs idle.
/// `EDGES`: see [`pipelined_in`].
///
/// # Safety
/// The host validated the matrices and provides two stages of shared memory.
#[inline(always)]
pub(super) unsafe fn pipelined<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const LA: usize,
    const LB: usize,
    const EDGES: bool,
>(
    p: GemmParams,
) {
    // SAFETY: forwarded.
    unsafe { pipelined_in::<BM, BN, BK, LA, LB, false, 8, EDGES>(p, AsIs) }
}

/// [`pipelined`], with the blocks' tiles in [`swizzled`] order when `SWIZZLE` (step 7) and
/// 8 x `TN` outputs per thread (16 in step 8), `B`'s vectors staged by `u` (as they are, or
/// updated and written back: see [`StageB`]). With `EDGES`, edge blocks run the branch-free
/// loop too, their fetches clamped to the last row and column vector (see
/// [`Tile::fetch_inside`]); step 5's 128 x 128 kernel goes without, since at its 128-register
/// bound the clamps cost it a spill in the loop (BENCHMARKS.md has the measurement).
///
/// # Safety
/// As for [`pipelined`]; `u`'s matrices laid out as `B`, and, where `u` writes `B`, no element
/// of `B` read by another block.
#[inline(always)]
pub(super) unsafe fn pipelined_in<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const LA: usize,
    const LB: usize,
    const SWIZZLE: bool,
    const TN: usize,
    const EDGES: bool,
>(
    p: GemmParamsTo<impl Out>,
    u: impl StageB,
) {
    let f = Frame::at::<BM, BN>(&p, SWIZZLE);
    let mut acc = [[0.0f32; TN]; 8];
    let tiles = f.k.div_ceil(BK);
    // Blocks wholly inside A, B and C (all but the edge blocks) skip every bounds check; with
    // 8 x 8 outputs per thread only where 16-byte loads are allowed (the registers of step 5's
    // two-block bound have no room for a second unchecked path).
    let inside = (f.vec_ab || TN > 8) && f.row0 + BM <= f.m && f.col0 + BN <= f.n;
    // SAFETY: stage 0 is written before the first barrier and read after it.
    unsafe {
        let s = Tile::<BM, BN, BK, TN>::fetch::<LA, LB, _>(&f, &u, 0);
        Tile::<BM, BN, BK, TN>::store(&f, &u, &s, 0);
    }
    barrier();
    // Tiles whose next tile lies wholly inside K are, where the rows are 16-byte aligned,
    // fetched without a check: those run first, in a loop of their own free of branches, so
    // that the assembler schedules the next tile's loads among the shared loads and
    // multiply-adds of the current one (the loads of four 4-byte values of unaligned rows
    // measured slower that way, and stay in the loop below). With `EDGES`, edge blocks run it
    // too where their fetches can be clamped to the last row and column vector.
    let clamped = f.vec_ab
        && if EDGES {
            f.col0 + BN <= f.n || f.n % 4 == 0
        } else {
            inside
        };
    let unchecked = if clamped {
        (f.k / BK).saturating_sub(1).min(tiles)
    } else {
        0
    };
    for t in 0..unchecked {
        // SAFETY: stage `t % 2` was published by the last barrier; stage `1 - t % 2` was last
        // read before that barrier, so writing it now races with no reader; the next tile's
        // depths lie inside K (`(t + 2) BK <= k`), its columns inside B or `n` is a multiple
        // of 4 (`clamped`), and its rows are 16-byte aligned.
        unsafe {
            let k0 = (t + 1) * BK;
            let next = Tile::<BM, BN, BK, TN>::fetch_inside::<LA, LB, EDGES, _>(&f, &u, k0);
            Tile::<BM, BN, BK, TN>::multiply(&f, t % 2, &mut acc);
            Tile::<BM, BN, BK, TN>::store(&f, &u, &next, 1 - t % 2);
        }
        barrier();
    }
    for t in unchecked..tiles {
        let stage = t % 2;
        let more = t + 1 < tiles;
        // SAFETY: as above; the fetches check the bounds except where the tile lies inside.
        unsafe {
            let k0 = (t + 1) * BK;
            // Blocks with aligned rows reach the first branch no more (the loop above fetched
            // their tiles), but without it the assembler schedules the loop above worse.
            let next = if more && inside && k0 + BK <= f.k {
                if TN == 8 || f.vec_ab {
                    Tile::<BM, BN, BK, TN>::fetch_inside::<LA, LB, EDGES, _>(&f, &u, k0)
                } else {
                    Tile::<BM, BN, BK, TN>::fetch_inside_unaligned::<LA, LB, _>(&f, &u, k0)
                }
            } else if more {
                Tile::<BM, BN, BK, TN>::fetch::<LA, LB, _>(&f, &u, k0)
            } else {
                Staged::NONE
            };
            Tile::<BM, BN, BK, TN>::multiply(&f, stage, &mut acc);
            if more {
                Tile::<BM, BN, BK, TN>::store(&f, &u, &next, 1 - stage);
            }
        }
        barrier();
    }
    // SAFETY: the host validated C.
    unsafe { Tile::<BM, BN, BK, TN>::write_c(&p, &f, &acc) }
}

kernel! {
    #[declared(SGEMM_5_PIPELINED_128X128.spec)]
    /// Step 5 with 128 x 128 tiles (large products).
    ///
    /// # Safety
    /// See [`pipelined`]; 256 threads.
    pub unsafe fn sgemm_5_pipelined_128x128(p: GemmParams) {
        type T = Tile<128, 128, 8>;
        // SAFETY: forwarded.
        unsafe { pipelined::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }, false>(p) }
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
        unsafe { pipelined::<128, 64, 8, { T::LOADS_A }, { T::LOADS_B }, true>(p) }
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
        unsafe { pipelined::<64, 64, 8, { T::LOADS_A }, { T::LOADS_B }, true>(p) }
    }
}
