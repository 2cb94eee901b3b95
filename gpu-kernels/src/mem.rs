//! Global-memory loads with an explicit state space and width.
//!
//! A Rust pointer becomes a generic PTX address, and LLVM may split or merge loads it cannot
//! prove aligned; these helpers pin down the instruction a hot loop relies on: a read-only
//! (`.nc`) global load, 4 or 16 bytes, from a generic address converted to a global one.
use core::arch::asm;

/// One f32 through the read-only global path.
///
/// # Safety
/// `p` must point to a readable f32 in global memory that no thread writes while the kernel
/// runs.
#[inline(always)]
pub unsafe fn ldg(p: *const f32) -> f32 {
    let v: f32;
    // SAFETY: guaranteed by the caller; the instruction only reads `[p]`.
    unsafe {
        asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.global.nc.f32 {v}, [g]; }}",
            v = out(reg32) v,
            p = in(reg64) p,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    v
}

/// Four f32 in one 16-byte read-only global load.
///
/// # Safety
/// `p` must be 16-byte aligned and point to four readable f32 in global memory that no thread
/// writes while the kernel runs.
#[inline(always)]
pub unsafe fn ldg4(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    // SAFETY: guaranteed by the caller; the instruction only reads `[p, p + 16)`.
    unsafe {
        asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.global.nc.v4.f32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
            a = out(reg32) a,
            b = out(reg32) b,
            c = out(reg32) c,
            d = out(reg32) d,
            p = in(reg64) p,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    [a, b, c, d]
}
