//! Warp-level operations: shuffles and votes among the 32 threads of a warp.
//!
//! Every function takes `mask`, the lanes taking part ([`FULL_MASK`] for the whole warp). Each
//! lane named in `mask` must execute the same call (the same instruction, converged), or the
//! result is undefined: hence `unsafe`. A [`Warp`] token carries that promise for the whole
//! warp once, so that shuffles, votes and reductions through it are safe calls.
//!
//! Shuffles move any 4- or 8-byte plain value (`u32`, `f32`, `i32`, [`crate::element::bf16`]
//! pairs, `f64`, `u64`, `[f32; 2]`, ...); another size does not compile.
use bytemuck::Pod;
use core::arch::asm;

/// Threads per warp.
pub const WARP_SIZE: u32 = 32;
/// Every lane of the warp.
pub const FULL_MASK: u32 = 0xffff_ffff;

/// This thread's lane in its warp, `0..32`.
#[inline(always)]
pub fn lane_id() -> u32 {
    let l: u32;
    // SAFETY: reads a special register; touches no memory.
    unsafe {
        asm!("mov.u32 {l}, %laneid;", l = out(reg32) l, options(pure, nomem, nostack, preserves_flags))
    };
    l
}

/// One 32-bit shuffle `op` (`down`, `bfly`, `idx`) of `v` with lane operand `b`.
macro_rules! shfl_b32 {
    ($op:literal, $mask:expr, $v:expr, $b:expr) => {{
        let r: u32;
        // SAFETY: the enclosing function's caller guarantees convergence; registers only.
        unsafe {
            asm!(
                concat!("shfl.sync.", $op, ".b32 {r}, {v}, {b}, 31, {m};"),
                r = out(reg32) r, v = in(reg32) $v, b = in(reg32) $b, m = in(reg32) $mask,
                options(nomem, nostack, preserves_flags)
            )
        };
        r
    }};
}

/// `v` moved between lanes 32 bits at a time by `shfl`.
#[inline(always)]
fn shuffle<T: Pod>(v: T, shfl: impl Fn(u32) -> u32) -> T {
    let size = core::mem::size_of::<T>();
    const {
        assert!(
            core::mem::size_of::<T>() == 4 || core::mem::size_of::<T>() == 8,
            "warp shuffles move values of 4 or 8 bytes"
        )
    };
    let mut words = [0u32; 2];
    // SAFETY: `T` is plain data of at most 8 bytes (checked above), copied into the 8 bytes of
    // `words`; the two do not overlap.
    unsafe {
        core::ptr::copy_nonoverlapping(
            &v as *const T as *const u8,
            words.as_mut_ptr() as *mut u8,
            size,
        )
    };
    words[0] = shfl(words[0]);
    if size == 8 {
        words[1] = shfl(words[1]);
    }
    // SAFETY: `words` holds at least `size` bytes, and any bytes are a valid `T` (`Pod`).
    unsafe { core::ptr::read_unaligned(words.as_ptr() as *const T) }
}

/// The value `v` of lane `lane_id() + delta`; lanes past the last get their own `v`.
///
/// # Safety
/// Every lane in `mask` executes this call together.
#[inline(always)]
pub unsafe fn shfl_down<T: Pod>(mask: u32, v: T, delta: u32) -> T {
    shuffle(v, |w| shfl_b32!("down", mask, w, delta))
}

/// The value `v` of lane `lane_id() ^ lane_mask`.
///
/// # Safety
/// Every lane in `mask` executes this call together.
#[inline(always)]
pub unsafe fn shfl_xor<T: Pod>(mask: u32, v: T, lane_mask: u32) -> T {
    shuffle(v, |w| shfl_b32!("bfly", mask, w, lane_mask))
}

/// The value `v` of lane `src % 32`.
///
/// # Safety
/// Every lane in `mask` executes this call together, and lane `src % 32` is in `mask`.
#[inline(always)]
pub unsafe fn shfl_idx<T: Pod>(mask: u32, v: T, src: u32) -> T {
    shuffle(v, |w| shfl_b32!("idx", mask, w, src))
}

/// Bit `l` set for each lane `l` of `mask` whose `pred` is true.
///
/// # Safety
/// Every lane in `mask` executes this call together.
#[inline(always)]
pub unsafe fn ballot(mask: u32, pred: bool) -> u32 {
    let r: u32;
    // SAFETY: guaranteed by the caller; registers only.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {v}, 0; vote.sync.ballot.b32 {r}, p, {m}; }}",
            r = out(reg32) r, v = in(reg32) pred as u32, m = in(reg32) mask,
            options(nomem, nostack, preserves_flags)
        )
    };
    r
}

/// Whether `pred` is true on every lane of `mask`.
///
/// # Safety
/// Every lane in `mask` executes this call together.
#[inline(always)]
pub unsafe fn vote_all(mask: u32, pred: bool) -> bool {
    // SAFETY: forwarded from this function's contract.
    unsafe { ballot(mask, pred) == mask }
}

/// Whether `pred` is true on any lane of `mask`.
///
/// # Safety
/// Every lane in `mask` executes this call together.
#[inline(always)]
pub unsafe fn vote_any(mask: u32, pred: bool) -> bool {
    // SAFETY: forwarded from this function's contract.
    unsafe { ballot(mask, pred) != 0 }
}

/// Waits until every lane of `mask` has reached this call; memory accesses before it are
/// visible to those lanes after it.
///
/// # Safety
/// Every lane in `mask` executes this call.
#[inline(always)]
pub unsafe fn sync_warp(mask: u32) {
    // SAFETY: guaranteed by the caller.
    unsafe { asm!("bar.warp.sync {m};", m = in(reg32) mask, options(nostack, preserves_flags)) }
}

/// The sum of `v` over the whole warp, on every lane (a butterfly of [`shfl_xor`]).
///
/// # Safety
/// All 32 lanes execute this call together.
#[inline(always)]
pub unsafe fn warp_sum_f32(v: f32) -> f32 {
    let mut s = v;
    let mut d = 16;
    while d > 0 {
        // SAFETY: forwarded from this function's contract.
        s += f32::from_bits(unsafe { shfl_xor(FULL_MASK, s.to_bits(), d) });
        d /= 2;
    }
    s
}

/// Proof that all 32 lanes of this thread's warp are active and converged wherever the token
/// is used, which makes warp-wide shuffles, votes and reductions safe calls. Made once per
/// kernel, where that is known (a block whose size is a multiple of 32, outside divergent
/// branches), with [`Warp::new`].
#[derive(Clone, Copy, Debug)]
pub struct Warp {
    _proof: (),
}

impl Warp {
    /// The token of this thread's warp.
    ///
    /// # Safety
    /// All 32 lanes of the warp are active and converged at every use of the token and its
    /// copies: no use inside a branch some lanes skip, none after some lanes have returned.
    #[inline(always)]
    pub unsafe fn new() -> Warp {
        Warp { _proof: () }
    }

    /// This thread's lane, `0..32`.
    #[inline(always)]
    pub fn lane(self) -> u32 {
        lane_id()
    }

    /// The value `v` of lane `lane + delta`; the last lanes get their own `v`.
    #[inline(always)]
    pub fn shfl_down<T: Pod>(self, v: T, delta: u32) -> T {
        // SAFETY: the token's contract: the whole warp is here, converged.
        unsafe { shfl_down(FULL_MASK, v, delta) }
    }

    /// The value `v` of lane `lane ^ lane_mask`.
    #[inline(always)]
    pub fn shfl_xor<T: Pod>(self, v: T, lane_mask: u32) -> T {
        // SAFETY: the token's contract: the whole warp is here, converged.
        unsafe { shfl_xor(FULL_MASK, v, lane_mask) }
    }

    /// The value `v` of lane `src % 32`.
    #[inline(always)]
    pub fn shfl_idx<T: Pod>(self, v: T, src: u32) -> T {
        // SAFETY: the token's contract: the whole warp is here, converged.
        unsafe { shfl_idx(FULL_MASK, v, src) }
    }

    /// Bit `l` set for each lane `l` whose `pred` is true.
    #[inline(always)]
    pub fn ballot(self, pred: bool) -> u32 {
        // SAFETY: the token's contract: the whole warp is here, converged.
        unsafe { ballot(FULL_MASK, pred) }
    }

    /// Whether `pred` holds on every lane.
    #[inline(always)]
    pub fn all(self, pred: bool) -> bool {
        self.ballot(pred) == FULL_MASK
    }

    /// Whether `pred` holds on any lane.
    #[inline(always)]
    pub fn any(self, pred: bool) -> bool {
        self.ballot(pred) != 0
    }
}
