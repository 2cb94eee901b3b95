//! Step 2: warp-specialised `wgmma` fed by the TMA (sm_90a).
//!
//! A block computes a 128 x 256 tile of `C` with three warpgroups. The producer (warpgroup 0,
//! one thread) asks the TMA for each 64-deep stage of `A` (128 x 64, one box) and `B` (64 x 256,
//! four boxes of 64 columns), into a ring of [`WGMMA_STAGES`] shared-memory stages, and an
//! `mbarrier` per stage tells the consumers when its bytes have landed. Each consumer
//! warpgroup multiplies its 64 rows of the stage's `A` by the whole stage of `B` with four
//! `m64n256k16` products (`B` read MN-major, as it lies in a row-major matrix), keeps one stage
//! of products in flight, and hands the stage before back to the producer through a second
//! `mbarrier`. The producer gives up registers (`setmaxnreg`) so that each consumer thread can
//! hold its 128 accumulators.
//!
//! The TMA zero-fills what lies past the matrices' edges, so any `m`, `n`, `k` runs the same
//! loop; the epilogue writes only the elements inside `C`.

use super::{store_pair, Bf16, Output, Tf32, F16};
use core::arch::nvptx;
use streamline_abi::hgemm::{
    grouped_tile, HgemmParams, HGEMM_2_WGMMA, HGEMM_2_WGMMA_BF16, HGEMM_2_WGMMA_F16,
    WGMMA_STAGES as STAGES,
};
use streamline_device::barrier::MBarrier;
use streamline_device::kernel;
use streamline_device::mem::shared_addr;
use streamline_device::shared::dynamic_shared;
use streamline_device::thread::sync_block;
use streamline_device::tma::{acquire_map, load_2d};
use streamline_device::wgmma::{
    claim_registers, commit_group, descriptor, fence, mma_m64n128k16_bf16, mma_m64n128k16_f16,
    mma_m64n128k8_tf32, mma_m64n256k16_bf16, mma_m64n256k16_f16, mma_m64n256k8_tf32,
    release_registers, wait_group, Swizzle,
};

pub(super) const BM: u32 = HGEMM_2_WGMMA.bm;
/// Columns of `C` per tile in steps 2 to 4; step 5's tiles are half as wide.
pub(super) const BN: u32 = HGEMM_2_WGMMA.bn;
/// Bytes of `K` per row of a stage: 64 16-bit elements, 32 f32.
const ROW_BYTES: u32 = 128;
/// Bytes of a stage of `A`: 128 rows of 128 bytes.
pub(super) const A_BYTES: u32 = BM * ROW_BYTES;
/// Bytes of one box of an MN-major `B`: 64 rows (`k`) of 64 16-bit columns, 128 bytes each.
pub(super) const B_BOX: u32 = HGEMM_2_WGMMA.bk * 64 * 2;
/// Bytes of a stage of `B` for tiles `bn` wide: `bn / 64` boxes side by side in `n`
/// (MN-major), or one of `bn` rows of 128 bytes (K-major).
pub(super) const fn b_bytes(bn: u32) -> u32 {
    B_BOX * (bn / 64)
}

/// The ring of stages at the start of dynamic shared memory (1024-byte aligned, as the 128-byte
/// swizzle needs): `STAGES` stages of `A`, then `STAGES` of `B` for tiles `BN` wide, then
/// `gap` bytes (step 4's staging area), then each stage's `full` and `empty` barriers.
#[derive(Clone, Copy)]
pub(super) struct Ring<const STAGES: u32, const BN: u32> {
    /// Shared address of the first stage of `A`.
    pub(super) a: u32,
    /// Shared address of the first stage of `B`.
    pub(super) b: u32,
    bars: u32,
}

impl<const STAGES: u32, const BN: u32> Ring<STAGES, BN> {
    /// Bytes of one stage of `B`.
    pub(super) const B_BYTES: u32 = b_bytes(BN);

    #[inline(always)]
    pub(super) fn new(gap: u32) -> Self {
        let a = (shared_addr(dynamic_shared::<f32>()) + 1023) & !1023;
        let b = a + STAGES * A_BYTES;
        Ring {
            a,
            b,
            bars: b + STAGES * Self::B_BYTES + gap,
        }
    }

    /// Shared address of the `gap` after the stages.
    #[inline(always)]
    pub(super) fn gap(self) -> u32 {
        self.b + STAGES * Self::B_BYTES
    }

    /// Stage `s`'s barrier that its bytes have landed (one arrival, the producer's).
    #[inline(always)]
    pub(super) fn full(self, s: u32) -> MBarrier {
        MBarrier(self.bars + 8 * s)
    }

    /// Stage `s`'s barrier that its products are done (one arrival per consumer warpgroup).
    #[inline(always)]
    pub(super) fn empty(self, s: u32) -> MBarrier {
        MBarrier(self.bars + 8 * (STAGES + s))
    }

    /// Thread 0 initialises the barriers; then the block synchronises.
    ///
    /// # Safety
    /// Every thread of the block calls it once, first; the block's shared memory holds the
    /// ring and its barriers (the launch's `shared_bytes`).
    #[inline(always)]
    pub(super) unsafe fn init(self, tid: u32) {
        if tid == 0 {
            for s in 0..STAGES {
                // SAFETY: 16 bytes per stage reserved after the stages (`shared_bytes`), used
                // by no one before the barrier below.
                unsafe {
                    self.full(s).init(1);
                    self.empty(s).init(2);
                }
            }
            // SAFETY: sm_90a kernel.
            unsafe { MBarrier::fence_init() };
        }
        // SAFETY: every thread reaches this one barrier (the contract).
        unsafe { sync_block() };
    }

    /// The producer's request for the `K` tile at `k0` of output tile (`m0`, `n0`) into stage
    /// `s`: one box of `A` and `BN / 64` of an MN-major `B` (one of a K-major `B`) through the
    /// tensor maps `maps`, counted on the stage's `full` barrier.
    ///
    /// # Safety
    /// The producer thread only, with the stage free (its `empty` barrier's last round done)
    /// and `maps` acquired ([`acquire_maps`]).
    #[inline(always)]
    pub(super) unsafe fn load<T: Wgmma>(
        self,
        s: u32,
        (map_a, map_b): (u64, u64),
        k0: i32,
        m0: i32,
        n0: i32,
    ) {
        let full = self.full(s);
        // SAFETY: the stage is free (the contract); its barrier expects exactly the boxes'
        // bytes, out-of-bounds parts included; the stages are 1024-aligned.
        unsafe {
            full.arrive_expect_tx(A_BYTES + Self::B_BYTES);
            load_2d(self.a + s * A_BYTES, map_a, k0, m0, full.0);
            if T::B_K_MAJOR {
                load_2d(self.b + s * Self::B_BYTES, map_b, k0, n0, full.0);
            } else {
                for j in 0..BN / 64 {
                    let dst = self.b + s * Self::B_BYTES + j * B_BOX;
                    load_2d(dst, map_b, n0 + 64 * j as i32, k0, full.0);
                }
            }
        }
    }
}

/// The tensor maps of `A` and `B`, acquired for the TMA.
///
/// # Safety
/// `p.maps` addresses the maps the host wrote before the launch (the contract of `maps`).
#[inline(always)]
pub(super) unsafe fn acquire_maps<E: streamline_device::element::Element>(
    p: &HgemmParams<E>,
) -> (u64, u64) {
    let (map_a, map_b) = (p.maps.addr(), p.maps.wrapping_add(1).addr());
    // SAFETY: the maps are the host's (the contract).
    unsafe {
        acquire_map(map_a);
        acquire_map(map_b);
    }
    (map_a, map_b)
}

/// Multiplies the stage's 64-row slice of `A` (at shared address `a`) by its `B` (at `b`, `BN`
/// columns) into `d` (its first `BN / 2` accumulators): four `k`-steps of 32 bytes (16 16-bit
/// elements, 8 f32).
#[inline(always)]
pub(super) unsafe fn multiply_stage<T: Wgmma, const BN: u32>(
    d: &mut [f32; 128],
    a: u32,
    b: u32,
    accumulate: bool,
) {
    for kk in 0..ROW_BYTES / 32 {
        // K-major: a step is 32 bytes along each 128-byte swizzled row; 8-row groups 1024
        // bytes apart.
        let da = descriptor(a + 32 * kk, 16, 1024, Swizzle::B128);
        let db = if T::B_K_MAJOR {
            descriptor(b + 32 * kk, 16, 1024, Swizzle::B128)
        } else {
            // MN-major: a step of 16 rows is 2048 bytes; 64-column groups (boxes) `B_BOX`
            // apart, 8-row groups 1024 bytes apart.
            descriptor(b + 2048 * kk, B_BOX, 1024, Swizzle::B128)
        };
        // SAFETY: the whole warpgroup is here, after `fence`; the stage's bytes have landed
        // (its full barrier) and stay until this group completes (the empty barrier is
        // arrived on only after `wait_group` says so).
        unsafe { T::wgmma_k_step::<BN>(d, da, db, accumulate || kk > 0) };
    }
}

#[inline(always)]
unsafe fn hgemm_wgmma<T: Wgmma>(p: HgemmParams<T::Elem>) {
    // SAFETY: special registers, defined inside a kernel.
    let (tid, block) = unsafe { (nvptx::_thread_idx_x(), nvptx::_block_idx_x()) };
    let (tile_m, tile_n) = grouped_tile(block, p.m.div_ceil(BM), p.n.div_ceil(BN));
    let ring = Ring::<STAGES, BN>::new(0);
    let (a_stages, b_stages) = (ring.a, ring.b);
    let (full, empty) = (|s| ring.full(s), |s| ring.empty(s));
    // SAFETY: every thread, first; `shared_bytes` holds the ring.
    unsafe { ring.init(tid) };

    let k_tiles = p.k.div_ceil(T::BK);
    let warpgroup = tid / 128;
    if warpgroup == 0 {
        // SAFETY: the whole warpgroup; it keeps only a loop counter and addresses.
        unsafe { release_registers::<40>() };
        if tid == 0 {
            // SAFETY: the host wrote both maps before the launch (the contract of `maps`).
            let maps = unsafe { acquire_maps(&p) };
            let (m0, n0) = ((tile_m * BM) as i32, (tile_n * BN) as i32);
            for t in 0..k_tiles {
                let s = t % STAGES;
                if t >= STAGES {
                    // SAFETY: initialised; the consumers release round `t / STAGES - 1` of
                    // this stage once its products are done.
                    unsafe { empty(s).wait((t / STAGES + 1) & 1) };
                }
                // SAFETY: the producer thread; the stage is free (above), the maps acquired.
                unsafe { ring.load::<T>(s, maps, (t * T::BK) as i32, m0, n0) };
            }
        }
        return;
    }

    // SAFETY: the whole warpgroup; the producer released what this claims (2 x 128 x 232 +
    // 128 x 40 registers fit in 64 Ki).
    unsafe { claim_registers::<232>() };
    let consumer = warpgroup - 1;
    let mut d = [0f32; 128];
    for t in 0..k_tiles {
        let s = t % STAGES;
        // SAFETY: the producer's arrival and the TMA's bytes complete round `t / STAGES`.
        unsafe { full(s).wait((t / STAGES) & 1) };
        // SAFETY: the whole warpgroup, in step.
        unsafe { fence() };
        let a = a_stages + s * A_BYTES + consumer * 64 * 128;
        let b = b_stages + s * Ring::<STAGES, BN>::B_BYTES;
        // SAFETY: see `multiply_stage`.
        unsafe { multiply_stage::<T, BN>(&mut d, a, b, t > 0) };
        // SAFETY: the whole warpgroup; then the group before this one is done, so its stage
        // goes back to the producer (one arrival per consumer warpgroup).
        unsafe {
            commit_group();
            wait_group::<1>();
            if t > 0 && tid % 128 == 0 {
                empty((t - 1) % STAGES).arrive();
            }
        }
    }
    // SAFETY: the whole warpgroup; every product is in `d` after this.
    unsafe { wait_group::<0>() };
    store::<T, BN>(&p, &d, tile_m * BM + consumer * 64, tile_n * BN, tid % 128);
}

/// Writes this thread's accumulators of the 64 x `BN` tile at (`row0`, `col0`) (the layout of
/// `streamline_device::wgmma`'s module documentation, the same for every width).
#[inline(always)]
pub(super) fn store<T: Wgmma, const BN: u32>(
    p: &HgemmParams<T::Elem>,
    d: &[f32; 128],
    row0: u32,
    col0: u32,
    t: u32,
) {
    let (w, l) = (t / 32, t % 32);
    for j in 0..BN / 8 {
        let col = col0 + 8 * j + 2 * (l % 4);
        for half in 0..2u32 {
            let row = row0 + 16 * w + l / 4 + 8 * half;
            let i = (4 * j + 2 * half) as usize;
            store_pair::<T>(p, row, col, d[i], d[i + 1]);
        }
    }
}

/// The products of an operand type on sm_90a.
pub trait Wgmma: Output {
    /// Elements of `K` per stage: a row of 128 bytes.
    const BK: u32 = ROW_BYTES / core::mem::size_of::<Self::Elem>() as u32;
    /// Whether the stages hold `B` K-major (each of its `n` columns a 128-byte row, read from
    /// `B` transposed) rather than MN-major (as it lies in a row-major matrix).
    const B_K_MAJOR: bool;
    /// One `k`-step of 32 bytes: `wgmma.m64nBN` (`BN` 256 or 128, into the first `BN / 2` of
    /// `d`) with `A` K-major and `B` as [`Wgmma::B_K_MAJOR`] says (see
    /// `streamline_device::wgmma::mma_m64n256k16_bf16`).
    ///
    /// # Safety
    /// As for that function.
    unsafe fn wgmma_k_step<const BN: u32>(d: &mut [f32; 128], a: u64, b: u64, accumulate: bool);
}

/// The first 64 of a warpgroup thread's 128 accumulators: its part of a 64 x 128 tile.
#[inline(always)]
fn low_half(d: &mut [f32; 128]) -> &mut [f32; 64] {
    // SAFETY: the first 64 elements of `d`, with its alignment, borrowed from it.
    unsafe { &mut *d.as_mut_ptr().cast::<[f32; 64]>() }
}

/// Implements [`Wgmma::wgmma_k_step`] with the products of widths 256 and 128.
macro_rules! k_step {
    ($wide:expr, $narrow:expr) => {
        #[inline(always)]
        unsafe fn wgmma_k_step<const BN: u32>(
            d: &mut [f32; 128],
            a: u64,
            b: u64,
            accumulate: bool,
        ) {
            const { assert!(BN == 256 || BN == 128, "tiles are 256 or 128 columns wide") };
            // SAFETY: forwarded.
            unsafe {
                if BN == 256 {
                    $wide(d, a, b, accumulate)
                } else {
                    $narrow(low_half(d), a, b, accumulate)
                }
            }
        }
    };
}

impl Wgmma for Bf16 {
    const B_K_MAJOR: bool = false;
    k_step!(mma_m64n256k16_bf16::<0, 1>, mma_m64n128k16_bf16::<0, 1>);
}

impl Wgmma for F16 {
    const B_K_MAJOR: bool = false;
    k_step!(mma_m64n256k16_f16::<0, 1>, mma_m64n128k16_f16::<0, 1>);
}

impl Wgmma for Tf32 {
    const B_K_MAJOR: bool = true;
    k_step!(mma_m64n256k8_tf32, mma_m64n128k8_tf32);
}

kernel! {
    #[declared(HGEMM_2_WGMMA_BF16)]
    /// Step 2 (see the module) for bf16.
    ///
    /// # Safety
    /// As for every `hgemm_*` kernel (`HgemmParams`), with `maps` addressing the tensor maps of
    /// `A` and `B` the host encoded for this step; launched with 384 threads and
    /// `HGEMM_2_WGMMA.shared_bytes` of dynamic shared memory.
    pub unsafe fn hgemm_2_wgmma_bf16(p: HgemmParams<streamline_device::bf16>) {
        // SAFETY: forwarded.
        unsafe { hgemm_wgmma::<Bf16>(p) }
    }
}

kernel! {
    #[declared(HGEMM_2_WGMMA_F16)]
    /// Step 2 (see the module) for f16.
    ///
    /// # Safety
    /// As for [`hgemm_2_wgmma_bf16`].
    pub unsafe fn hgemm_2_wgmma_f16(p: HgemmParams<streamline_device::f16>) {
        // SAFETY: forwarded.
        unsafe { hgemm_wgmma::<F16>(p) }
    }
}
