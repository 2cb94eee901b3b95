//! The element types a product's f32 results are written to `C` in: f32 as computed, or bf16
//! rounded once (to nearest, ties to even), so that a bf16 result needs no f32 copy in memory
//! and no rounding pass over one.

use super::F4;
use core::intrinsics::fmaf32;
use streamline_device::element::{bf16, Element};

/// An element type of `C`, computed on in f32.
pub(super) trait Out: Element<Acc = f32> {
    /// The four elements at `c`, widened to f32, with one load.
    ///
    /// # Safety
    /// `c` must address four elements of `C`, aligned to the size of all four.
    unsafe fn read4(c: *const Self) -> [f32; 4];

    /// Writes `alpha * v[j] + beta * old[j]` (`old` unused when `beta` is 0) to the four
    /// elements at `c` with one store. The old values come in read, so that a thread can read
    /// those of several stores before it makes any: a read queued behind a store that may
    /// alias it waits for that store.
    ///
    /// # Safety
    /// As for [`Out::read4`].
    unsafe fn write4(c: *mut Self, v: &[f32], old: [f32; 4], alpha: f32, beta: f32);
}

/// `alpha * acc + beta * old`, without `old` when `beta == 0` (it may be anything, NaN
/// included).
#[inline(always)]
pub(super) fn scaled(acc: f32, old: impl FnOnce() -> f32, alpha: f32, beta: f32) -> f32 {
    if beta == 0.0 {
        alpha * acc
    } else {
        fmaf32(beta, old(), alpha * acc)
    }
}

impl Out for f32 {
    #[inline(always)]
    unsafe fn read4(c: *const f32) -> [f32; 4] {
        // SAFETY: four elements of `C`, 16-byte aligned (the contract).
        unsafe { (*(c as *const F4)).0 }
    }

    #[inline(always)]
    unsafe fn write4(c: *mut f32, v: &[f32], old: [f32; 4], alpha: f32, beta: f32) {
        let mut out = super::ZERO4;
        for j in 0..4 {
            out.0[j] = scaled(v[j], || old[j], alpha, beta);
        }
        // SAFETY: four elements of `C`, 16-byte aligned (the contract).
        unsafe { *(c as *mut F4) = out }
    }
}

/// Four bf16 that move as one 8-byte access.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct B4([bf16; 4]);

impl Out for bf16 {
    #[inline(always)]
    unsafe fn read4(c: *const bf16) -> [f32; 4] {
        // SAFETY: four elements of `C`, 8-byte aligned (the contract).
        let old = unsafe { *(c as *const B4) };
        old.0.map(|x| x.to_acc())
    }

    #[inline(always)]
    unsafe fn write4(c: *mut bf16, v: &[f32], old: [f32; 4], alpha: f32, beta: f32) {
        let mut out = B4([bf16::from_bits(0); 4]);
        for j in 0..4 {
            out.0[j] = bf16::from_acc(scaled(v[j], || old[j], alpha, beta));
        }
        // SAFETY: four elements of `C`, 8-byte aligned (the contract).
        unsafe { *(c as *mut B4) = out }
    }
}
