//! Sums, maxima and minima over a warp ([`Warp::sum`], ..) or a whole block ([`Block::sum`],
//! ..), on every thread, for `f32`, [`f16`], [`bf16`], `i32` and `u32`.
//!
//! Half-precision values are reduced in f32 and rounded once at the end; integers wrap.
//! Maxima and minima of floats ignore NaN unless every value is NaN. The order of a float sum
//! is a butterfly (the same on every lane and every run), so results are deterministic.
use crate::element::{bf16, f16, Accumulator, Element};
use crate::thread::sync_block;
use crate::warp::Warp;
use core::arch::asm;

/// A value warps and blocks reduce: carried in a 4-byte accumulator ([`Accumulator`]).
pub trait Reducible: Copy {
    /// The type the reduction runs in.
    type Acc: Accumulator;
    /// This value as an accumulator (exact).
    fn widen(self) -> Self::Acc;
    /// The result rounded back to this type.
    fn narrow(acc: Self::Acc) -> Self;
}

macro_rules! reducible_element {
    ($($t:ty),*) => {$(
        impl Reducible for $t {
            type Acc = <$t as Element>::Acc;
            #[inline(always)]
            fn widen(self) -> Self::Acc {
                self.to_acc()
            }
            #[inline(always)]
            fn narrow(acc: Self::Acc) -> Self {
                <$t as Element>::from_acc(acc)
            }
        }
    )*};
}
reducible_element!(f32, f16, bf16, i32);

impl Reducible for u32 {
    type Acc = u32;
    #[inline(always)]
    fn widen(self) -> u32 {
        self
    }
    #[inline(always)]
    fn narrow(acc: u32) -> u32 {
        acc
    }
}

/// `op` over the warp's accumulators by a butterfly: every lane ends with the result.
#[inline(always)]
fn butterfly<A: Accumulator>(warp: Warp, mut a: A, op: fn(A, A) -> A) -> A {
    let mut d = 16;
    while d > 0 {
        a = op(a, warp.shfl_xor(a, d));
        d /= 2;
    }
    a
}

impl Warp {
    /// The sum of `v` over the warp, on every lane.
    #[inline(always)]
    pub fn sum<T: Reducible>(self, v: T) -> T {
        T::narrow(butterfly(self, v.widen(), T::Acc::add))
    }

    /// The largest `v` of the warp, on every lane.
    #[inline(always)]
    pub fn max<T: Reducible>(self, v: T) -> T {
        T::narrow(butterfly(self, v.widen(), T::Acc::max))
    }

    /// The smallest `v` of the warp, on every lane.
    #[inline(always)]
    pub fn min<T: Reducible>(self, v: T) -> T {
        T::narrow(butterfly(self, v.widen(), T::Acc::min))
    }
}

/// Proof that every thread of the block reaches each use of the token together (so block
/// barriers inside are met by all), and that the block is made of whole warps: what block
/// reductions need. Made once per kernel with [`Block::new`].
#[derive(Clone, Copy, Debug)]
pub struct Block {
    warp: Warp,
}

impl Block {
    /// The token of this thread's block.
    ///
    /// # Safety
    /// The block's size is a multiple of 32, and every thread of the block reaches every use
    /// of the token and its copies, converged, in the same order (no use inside a branch some
    /// threads skip, none after some threads have returned).
    #[inline(always)]
    pub unsafe fn new() -> Block {
        Block {
            // SAFETY: whole warps, each converged at every use: this function's contract.
            warp: unsafe { Warp::new() },
        }
    }

    /// The warp token of this thread, which the block's contract also proves.
    #[inline(always)]
    pub fn warp(self) -> Warp {
        self.warp
    }

    /// Waits until every thread of the block has reached this call; shared-memory writes
    /// before it are visible to every thread after it.
    #[inline(always)]
    pub fn sync(self) {
        // SAFETY: every thread of the block reaches this use of the token (its contract).
        unsafe { sync_block() }
    }

    /// The sum of `v` over the block, on every thread.
    #[inline(always)]
    pub fn sum<T: Reducible>(self, v: T) -> T {
        T::narrow(self.reduce(v.widen(), T::Acc::add, T::Acc::ZERO))
    }

    /// The largest `v` of the block, on every thread.
    #[inline(always)]
    pub fn max<T: Reducible>(self, v: T) -> T {
        T::narrow(self.reduce(v.widen(), T::Acc::max, T::Acc::LOWEST))
    }

    /// The smallest `v` of the block, on every thread.
    #[inline(always)]
    pub fn min<T: Reducible>(self, v: T) -> T {
        T::narrow(self.reduce(v.widen(), T::Acc::min, T::Acc::HIGHEST))
    }

    /// `op` over the block: each warp's result goes to its slot of a 32-slot shared scratch
    /// that this call declares, then every warp reduces the slots itself, so the result needs
    /// no second broadcast. The barrier at the end lets the next call reuse the scratch.
    #[inline(always)]
    fn reduce<A: Accumulator>(self, a: A, op: fn(A, A) -> A, identity: A) -> A {
        let scratch = scratch::<A>();
        let part = butterfly(self.warp, a, op);
        let (tid, nwarps) = thread_and_warps();
        let lane = self.warp.lane();
        if lane == 0 {
            // SAFETY: `tid / 32 < 32` (at most 1024 threads), inside the 32 slots; each warp
            // writes only its own slot, and no thread reads it before the barrier below.
            unsafe { *scratch.add((tid / 32) as usize) = part };
        }
        self.sync();
        let mine = if lane < nwarps {
            // SAFETY: slot `lane` was written by warp `lane` before the barrier.
            unsafe { *scratch.add(lane as usize) }
        } else {
            identity
        };
        let total = butterfly(self.warp, mine, op);
        self.sync();
        total
    }
}

/// The linear thread index in the block and the block's number of warps.
#[inline(always)]
fn thread_and_warps() -> (u32, u32) {
    let (x, y, z) = crate::thread::thread_xyz();
    let (dx, dy, dz) = crate::thread::block_dim_xyz();
    ((z * dy + y) * dx + x, (dx * dy * dz) / 32)
}

/// 32 slots of 4 bytes of static shared memory, declared in this function's PTX (one array
/// per call site once inlined, allocated by `ptxas` for each kernel that uses it).
#[inline(always)]
fn scratch<A: Accumulator>() -> *mut A {
    const { assert!(core::mem::size_of::<A>() == 4 && core::mem::align_of::<A>() <= 4) };
    let p: u64;
    // SAFETY: declares a block-scoped shared array and takes its generic address; touches no
    // memory. Not `pure`, so that each call site keeps its one array.
    unsafe {
        asm!(
            "{{ .shared .align 4 .b8 scratch[128]; cvta.shared.u64 {p}, scratch; }}",
            p = out(reg64) p,
            options(nomem, nostack, preserves_flags)
        )
    };
    p as *mut A
}
