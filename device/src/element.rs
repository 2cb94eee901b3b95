//! The element types a generic kernel reads and writes, on both sides: `f32`, [`f16`], [`bf16`],
//! `u8` and `i32`. Each computes in an accumulator type (`f32` for the floats, `u32` for
//! bytes, `i32` for integers), so a bf16 kernel keeps f32 precision between its loads and its
//! stores, which round once.
//!
//! [`f16`] and [`bf16`] are the `half` crate's types, so host buffers of them are the bytes the
//! device reads. On the GPU, [`Element::to_acc`] and [`Element::from_acc`] are single PTX
//! conversions (`cvt`; bf16 rounding needs sm_80); on the host, `half`'s conversions, which
//! round the same way (to nearest, ties to even).

pub use half::{bf16, f16};

/// A value an accumulator of reductions can hold: the arithmetic generic kernels reduce with.
pub trait Accumulator: Copy + bytemuck::Pod + PartialOrd + 'static {
    /// `a + b` (wrapping for integers).
    fn add(a: Self, b: Self) -> Self;
    /// The larger of `a` and `b` (for floats, the other one where one is NaN).
    fn max(a: Self, b: Self) -> Self;
    /// The smaller of `a` and `b` (for floats, the other one where one is NaN).
    fn min(a: Self, b: Self) -> Self;
    /// The identity of `add`.
    const ZERO: Self;
    /// The identity of `max`: the lowest value (`-inf` for floats).
    const LOWEST: Self;
    /// The identity of `min`: the highest value (`+inf` for floats).
    const HIGHEST: Self;
}

impl Accumulator for f32 {
    #[inline(always)]
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    fn max(a: f32, b: f32) -> f32 {
        a.max(b)
    }
    #[inline(always)]
    fn min(a: f32, b: f32) -> f32 {
        a.min(b)
    }
    const ZERO: f32 = 0.0;
    const LOWEST: f32 = f32::NEG_INFINITY;
    const HIGHEST: f32 = f32::INFINITY;
}

macro_rules! int_accumulator {
    ($($t:ty),*) => {$(
        impl Accumulator for $t {
            #[inline(always)]
            fn add(a: $t, b: $t) -> $t {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn max(a: $t, b: $t) -> $t {
                Ord::max(a, b)
            }
            #[inline(always)]
            fn min(a: $t, b: $t) -> $t {
                Ord::min(a, b)
            }
            const ZERO: $t = 0;
            const LOWEST: $t = <$t>::MIN;
            const HIGHEST: $t = <$t>::MAX;
        }
    )*};
}
int_accumulator!(i32, u32);

/// A type kernels store in memory and compute on through its accumulator type.
pub trait Element:
    Copy + bytemuck::Pod + crate::params::Field + crate::params::Pointee + 'static
{
    /// The type arithmetic on this element is carried in.
    type Acc: Accumulator;
    /// The type's name, as `#[instances(..)]` spells it in entry names (`softmax_bf16`).
    const NAME: &'static str;
    /// This value as an accumulator (exact).
    fn to_acc(self) -> Self::Acc;
    /// The accumulator rounded to this type: to nearest, ties to even, for floats; the low
    /// bits, for integers.
    fn from_acc(acc: Self::Acc) -> Self;
}

/// A floating-point element, computed on in f32: `f32`, [`f16`] and [`bf16`].
pub trait Float: Element<Acc = f32> {}
impl Float for f32 {}
impl Float for f16 {}
impl Float for bf16 {}

impl Element for f32 {
    type Acc = f32;
    const NAME: &'static str = "f32";
    #[inline(always)]
    fn to_acc(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_acc(acc: f32) -> f32 {
        acc
    }
}

impl Element for f16 {
    type Acc = f32;
    const NAME: &'static str = "f16";
    #[inline(always)]
    fn to_acc(self) -> f32 {
        convert::f16_to_f32(self)
    }
    #[inline(always)]
    fn from_acc(acc: f32) -> f16 {
        convert::f32_to_f16(acc)
    }
}

impl Element for bf16 {
    type Acc = f32;
    const NAME: &'static str = "bf16";
    #[inline(always)]
    fn to_acc(self) -> f32 {
        // Exact: bf16 is the top half of an f32.
        f32::from_bits((self.to_bits() as u32) << 16)
    }
    #[inline(always)]
    fn from_acc(acc: f32) -> bf16 {
        convert::f32_to_bf16(acc)
    }
}

impl Element for u8 {
    type Acc = u32;
    const NAME: &'static str = "u8";
    #[inline(always)]
    fn to_acc(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn from_acc(acc: u32) -> u8 {
        acc as u8
    }
}

impl Element for i32 {
    type Acc = i32;
    const NAME: &'static str = "i32";
    #[inline(always)]
    fn to_acc(self) -> i32 {
        self
    }
    #[inline(always)]
    fn from_acc(acc: i32) -> i32 {
        acc
    }
}

#[cfg(target_arch = "nvptx64")]
mod convert {
    use super::{bf16, f16};
    use core::arch::asm;

    #[inline(always)]
    pub fn f16_to_f32(h: f16) -> f32 {
        let f: f32;
        // SAFETY: a register-only conversion.
        unsafe {
            asm!("cvt.f32.f16 {f}, {h};", f = out(reg32) f, h = in(reg16) h.to_bits(),
                options(pure, nomem, nostack, preserves_flags))
        };
        f
    }

    #[inline(always)]
    pub fn f32_to_f16(f: f32) -> f16 {
        let h: u16;
        // SAFETY: a register-only conversion.
        unsafe {
            asm!("cvt.rn.f16.f32 {h}, {f};", h = out(reg16) h, f = in(reg32) f,
                options(pure, nomem, nostack, preserves_flags))
        };
        f16::from_bits(h)
    }

    #[inline(always)]
    pub fn f32_to_bf16(f: f32) -> bf16 {
        let h: u16;
        // SAFETY: a register-only conversion (PTX ISA 7.0, sm_80).
        unsafe {
            asm!("cvt.rn.bf16.f32 {h}, {f};", h = out(reg16) h, f = in(reg32) f,
                options(pure, nomem, nostack, preserves_flags))
        };
        bf16::from_bits(h)
    }
}

#[cfg(not(target_arch = "nvptx64"))]
mod convert {
    use super::{bf16, f16};

    pub fn f16_to_f32(h: f16) -> f32 {
        h.to_f32()
    }

    pub fn f32_to_f16(f: f32) -> f16 {
        f16::from_f32(f)
    }

    pub fn f32_to_bf16(f: f32) -> bf16 {
        bf16::from_f32(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_to_nearest_even() {
        assert_eq!(bf16::from_acc(1.0 + 1.0 / 512.0), bf16::ONE);
        assert_eq!(
            bf16::from_acc(1.0 + 3.0 / 512.0).to_acc(),
            1.0 + 4.0 / 512.0
        );
        assert_eq!(f16::from_acc(65504.0).to_acc(), 65504.0);
        assert_eq!(bf16::from_bits(0x3f80).to_acc(), 1.0);
        assert_eq!(u8::from_acc(300), 44);
    }

    #[test]
    fn identities_are_identities() {
        assert_eq!(<f32 as Accumulator>::max(f32::LOWEST, -3.0), -3.0);
        assert_eq!(<i32 as Accumulator>::min(i32::HIGHEST, 7), 7);
        assert_eq!(<u32 as Accumulator>::add(u32::ZERO, 9), 9);
        assert_eq!(<f32 as Element>::NAME, "f32");
    }
}
