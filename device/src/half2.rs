//! Pairs of half-precision values in one 32-bit register, computed on with single PTX
//! instructions: [`F16x2`] (sm_53 and later) and [`Bf16x2`] (fma from sm_80; add and
//! multiply are their own instructions from sm_90, and an fma with a constant before it, which
//! rounds the same way). Each operation rounds once, to nearest even, per half.
//!
//! For anything else (exponentials, division, long sums) convert to f32
//! ([`F16x2::to_f32`], [`crate::element::Element::to_acc`]) and round once when storing.
use crate::element::{bf16, f16};
use core::arch::asm;

macro_rules! packed {
    ($name:ident, $elem:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
        #[repr(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The pair `(lo, hi)`; `lo` is the one at the lower address in memory.
            #[inline(always)]
            pub fn new(lo: $elem, hi: $elem) -> $name {
                $name(lo.to_bits() as u32 | (hi.to_bits() as u32) << 16)
            }

            /// Both halves.
            #[inline(always)]
            pub fn halves(self) -> ($elem, $elem) {
                (
                    $elem::from_bits(self.0 as u16),
                    $elem::from_bits((self.0 >> 16) as u16),
                )
            }
        }
    };
}

packed!(F16x2, f16, "Two f16 in one register.");
packed!(Bf16x2, bf16, "Two bf16 in one register.");

/// One packed instruction `op` on `a` and `b`.
macro_rules! binary {
    ($op:literal, $a:expr, $b:expr) => {{
        let r: u32;
        // SAFETY: a register-only arithmetic instruction.
        unsafe {
            asm!(concat!($op, " {r}, {a}, {b};"), r = out(reg32) r, a = in(reg32) $a,
                b = in(reg32) $b, options(pure, nomem, nostack, preserves_flags))
        };
        r
    }};
}

/// One packed fused multiply-add `op`: `a * b + c`.
macro_rules! ternary {
    ($op:literal, $a:expr, $b:expr, $c:expr) => {{
        let r: u32;
        // SAFETY: a register-only arithmetic instruction.
        unsafe {
            asm!(concat!($op, " {r}, {a}, {b}, {c};"), r = out(reg32) r, a = in(reg32) $a,
                b = in(reg32) $b, c = in(reg32) $c, options(pure, nomem, nostack, preserves_flags))
        };
        r
    }};
}

impl F16x2 {
    /// Both halves widened to f32, exactly: `(lo, hi)`.
    #[inline(always)]
    pub fn to_f32(self) -> (f32, f32) {
        let (lo, hi) = self.halves();
        use crate::element::Element;
        (lo.to_acc(), hi.to_acc())
    }

    /// `(lo, hi)` rounded to f16.
    #[inline(always)]
    pub fn from_f32(lo: f32, hi: f32) -> F16x2 {
        use crate::element::Element;
        F16x2::new(f16::from_acc(lo), f16::from_acc(hi))
    }

    /// `self + b`, per half.
    #[inline(always)]
    pub fn add(self, b: F16x2) -> F16x2 {
        F16x2(binary!("add.rn.f16x2", self.0, b.0))
    }

    /// `self * b`, per half.
    #[inline(always)]
    pub fn mul(self, b: F16x2) -> F16x2 {
        F16x2(binary!("mul.rn.f16x2", self.0, b.0))
    }

    /// `self * b + c`, per half, with one rounding.
    #[inline(always)]
    pub fn fma(self, b: F16x2, c: F16x2) -> F16x2 {
        F16x2(ternary!("fma.rn.f16x2", self.0, b.0, c.0))
    }
}

impl Bf16x2 {
    /// Both halves widened to f32, exactly: `(lo, hi)`.
    #[inline(always)]
    pub fn to_f32(self) -> (f32, f32) {
        (
            f32::from_bits(self.0 << 16),
            f32::from_bits(self.0 & 0xffff_0000),
        )
    }

    /// `(lo, hi)` rounded to bf16 (one `cvt.rn.bf16x2.f32`, sm_80).
    #[inline(always)]
    pub fn from_f32(lo: f32, hi: f32) -> Bf16x2 {
        let r: u32;
        // SAFETY: a register-only conversion; PTX takes the upper half first.
        unsafe {
            asm!("cvt.rn.bf16x2.f32 {r}, {hi}, {lo};", r = out(reg32) r, hi = in(reg32) hi,
                lo = in(reg32) lo, options(pure, nomem, nostack, preserves_flags))
        };
        Bf16x2(r)
    }

    /// `self * b + c`, per half, with one rounding (sm_80).
    #[inline(always)]
    pub fn fma(self, b: Bf16x2, c: Bf16x2) -> Bf16x2 {
        Bf16x2(ternary!("fma.rn.bf16x2", self.0, b.0, c.0))
    }

    /// `self + b`, per half: `add.rn.bf16x2` on sm_90, else `self * 1 + b`, the same value.
    #[inline(always)]
    pub fn add(self, b: Bf16x2) -> Bf16x2 {
        #[cfg(target_feature = "sm_90")]
        return Bf16x2(binary!("add.rn.bf16x2", self.0, b.0));
        #[cfg(not(target_feature = "sm_90"))]
        return self.fma(Bf16x2(0x3f80_3f80), b);
    }

    /// `self * b`, per half: `mul.rn.bf16x2` on sm_90, else `self * b + (-0)`, the same value
    /// (adding negative zero changes no product, not even a zero's sign).
    #[inline(always)]
    pub fn mul(self, b: Bf16x2) -> Bf16x2 {
        #[cfg(target_feature = "sm_90")]
        return Bf16x2(binary!("mul.rn.bf16x2", self.0, b.0));
        #[cfg(not(target_feature = "sm_90"))]
        return self.fma(b, Bf16x2(0x8000_8000));
    }
}
