//! Atomic read-modify-write operations on global or shared memory (generic addresses).
//!
//! Each returns the value before the operation. They are relaxed: they order nothing but
//! themselves, which is what a reduction or a histogram needs.
use core::arch::asm;

/// One relaxed two-operand atomic: `$name(p, v)` runs `$instr` on `[p]` with `v`.
macro_rules! atomic {
    ($(#[$doc:meta])* $name:ident, $t:ty, $instr:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub unsafe fn $name(p: *mut $t, v: $t) -> $t {
            let old: $t;
            // SAFETY: guaranteed by the caller; the instruction only touches `[p]`.
            unsafe {
                asm!(
                    concat!($instr, " {o}, [{p}], {v};"),
                    o = out(reg32) old, p = in(reg64) p, v = in(reg32) v,
                    options(nostack, preserves_flags)
                )
            };
            old
        }
    };
}

atomic!(
    /// `*p += v` for f32, returning the old value.
    ///
    /// # Safety
    /// `p` must point to a 4-byte aligned f32 in global or shared memory that is only accessed
    /// atomically while the kernel runs.
    atomic_add_f32, f32, "atom.add.f32"
);

atomic!(
    /// `*p += v` for u32 (wrapping), returning the old value.
    ///
    /// # Safety
    /// As for [`atomic_add_f32`], for a u32.
    atomic_add_u32, u32, "atom.add.u32"
);

atomic!(
    /// `*p = max(*p, v)` for u32, returning the old value.
    ///
    /// # Safety
    /// As for [`atomic_add_f32`], for a u32.
    atomic_max_u32, u32, "atom.max.u32"
);

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
