//! Warp-level operations: shuffles and votes among the 32 threads of a warp.
//!
//! Every function takes `mask`, the lanes taking part ([`FULL_MASK`] for the whole warp). Each
//! lane named in `mask` must execute the same call (the same instruction, converged), or the
//! result is undefined: hence `unsafe`.
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

/// The 32-bit value `v` of lane `lane_id() + delta`; lanes past the last get their own `v`.
///
/// # Safety
/// Every lane in `mask` executes this call together.
#[inline(always)]
pub unsafe fn shfl_down(mask: u32, v: u32, delta: u32) -> u32 {
    let r: u32;
    // SAFETY: guaranteed by the caller; registers only.
    unsafe {
        asm!(
            "shfl.sync.down.b32 {r}, {v}, {d}, 31, {m};",
            r = out(reg32) r, v = in(reg32) v, d = in(reg32) delta, m = in(reg32) mask,
            options(nomem, nostack, preserves_flags)
        )
    };
    r
}

/// The 32-bit value `v` of lane `lane_id() ^ lane_mask`.
///
/// # Safety
/// Every lane in `mask` executes this call together.
#[inline(always)]
pub unsafe fn shfl_xor(mask: u32, v: u32, lane_mask: u32) -> u32 {
    let r: u32;
    // SAFETY: guaranteed by the caller; registers only.
    unsafe {
        asm!(
            "shfl.sync.bfly.b32 {r}, {v}, {x}, 31, {m};",
            r = out(reg32) r, v = in(reg32) v, x = in(reg32) lane_mask, m = in(reg32) mask,
            options(nomem, nostack, preserves_flags)
        )
    };
    r
}

/// The 32-bit value `v` of lane `src % 32`.
///
/// # Safety
/// Every lane in `mask` executes this call together, and lane `src % 32` is in `mask`.
#[inline(always)]
pub unsafe fn shfl_idx(mask: u32, v: u32, src: u32) -> u32 {
    let r: u32;
    // SAFETY: guaranteed by the caller; registers only.
    unsafe {
        asm!(
            "shfl.sync.idx.b32 {r}, {v}, {s}, 31, {m};",
            r = out(reg32) r, v = in(reg32) v, s = in(reg32) src, m = in(reg32) mask,
            options(nomem, nostack, preserves_flags)
        )
    };
    r
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
