//! Atomic read-modify-write operations on global or shared memory (generic addresses).
//!
//! Each returns the value before the operation. They are relaxed: they order nothing but
//! themselves, which is what a reduction or a histogram needs.
use core::arch::asm;

/// `*p += v` for f32, returning the old value.
///
/// # Safety
/// `p` must point to a 4-byte aligned f32 in global or shared memory that is only accessed
/// atomically while the kernel runs.
#[inline(always)]
pub unsafe fn atomic_add_f32(p: *mut f32, v: f32) -> f32 {
    let old: f32;
    // SAFETY: guaranteed by the caller; the instruction only touches `[p]`.
    unsafe {
        asm!(
            "atom.add.f32 {o}, [{p}], {v};",
            o = out(reg32) old, p = in(reg64) p, v = in(reg32) v,
            options(nostack, preserves_flags)
        )
    };
    old
}

/// `*p += v` for u32 (wrapping), returning the old value.
///
/// # Safety
/// As for [`atomic_add_f32`], for a u32.
#[inline(always)]
pub unsafe fn atomic_add_u32(p: *mut u32, v: u32) -> u32 {
    let old: u32;
    // SAFETY: guaranteed by the caller; the instruction only touches `[p]`.
    unsafe {
        asm!(
            "atom.add.u32 {o}, [{p}], {v};",
            o = out(reg32) old, p = in(reg64) p, v = in(reg32) v,
            options(nostack, preserves_flags)
        )
    };
    old
}

/// `*p = max(*p, v)` for u32, returning the old value.
///
/// # Safety
/// As for [`atomic_add_f32`], for a u32.
#[inline(always)]
pub unsafe fn atomic_max_u32(p: *mut u32, v: u32) -> u32 {
    let old: u32;
    // SAFETY: guaranteed by the caller; the instruction only touches `[p]`.
    unsafe {
        asm!(
            "atom.max.u32 {o}, [{p}], {v};",
            o = out(reg32) old, p = in(reg64) p, v = in(reg32) v,
            options(nostack, preserves_flags)
        )
    };
    old
}

/// If `*p == expected` then `*p = new`; returns the old value either way.
///
/// # Safety
/// As for [`atomic_add_f32`], for a u32.
#[inline(always)]
pub unsafe fn atomic_cas_u32(p: *mut u32, expected: u32, new: u32) -> u32 {
    let old: u32;
    // SAFETY: guaranteed by the caller; the instruction only touches `[p]`.
    unsafe {
        asm!(
            "atom.cas.b32 {o}, [{p}], {e}, {n};",
            o = out(reg32) old, p = in(reg64) p, e = in(reg32) expected, n = in(reg32) new,
            options(nostack, preserves_flags)
        )
    };
    old
}
