//! The last step of a split-K product: `C = alpha * (P_0 + P_1 + ...) + beta * C`, the f32
//! planes of the slices added in slice order for every element (the same bits on every run),
//! then rounded once to `C`'s type (written as it is when `C` is f32).

use super::{Bf16, Output, Tf32, F16};
use streamline_abi::hgemm::{
    HgemmReduceParams, HGEMM_SPLITK_REDUCE_BF16, HGEMM_SPLITK_REDUCE_F16, HGEMM_SPLITK_REDUCE_F32,
};
use streamline_device::kernel;
use streamline_device::thread::grid_stride;

#[inline(always)]
unsafe fn reduce<T: Output>(p: HgemmReduceParams<T::Elem>) {
    let plane = p.m as usize * p.n as usize;
    let partials = p.partials.as_ptr();
    let c = p.c.as_mut_ptr();
    for i in grid_stride(plane as u64) {
        let (row, col) = (i / p.n as usize, i % p.n as usize);
        let mut sum = 0.0f32;
        for s in 0..p.slices as usize {
            // SAFETY: `i < m n`, inside plane `s` of the `slices` planes (the contract).
            sum += unsafe { *partials.add(s * plane + i) };
        }
        let at = c.wrapping_add(row * p.ldc as usize + col);
        // SAFETY: `row < m`, `col < n`: an element of `C`.
        unsafe { T::write(at, p.alpha * sum, p.beta) };
    }
}

kernel! {
    #[declared(HGEMM_SPLITK_REDUCE_BF16)]
    /// The split-K sum (see the module) into a bf16 `C`.
    ///
    /// # Safety
    /// `partials` must address `slices * m * n` readable f32 and `c` an `m x n` bf16 matrix with
    /// row stride `ldc`, on the device.
    pub unsafe fn hgemm_splitk_reduce_bf16(p: HgemmReduceParams<streamline_device::bf16>) {
        // SAFETY: forwarded.
        unsafe { reduce::<Bf16>(p) }
    }
}

kernel! {
    #[declared(HGEMM_SPLITK_REDUCE_F16)]
    /// The split-K sum (see the module) into an f16 `C`.
    ///
    /// # Safety
    /// As for [`hgemm_splitk_reduce_bf16`], with an f16 `C`.
    pub unsafe fn hgemm_splitk_reduce_f16(p: HgemmReduceParams<streamline_device::f16>) {
        // SAFETY: forwarded.
        unsafe { reduce::<F16>(p) }
    }
}

kernel! {
    #[declared(HGEMM_SPLITK_REDUCE_F32)]
    /// The split-K sum (see the module) into an f32 `C` (the TF32 product's).
    ///
    /// # Safety
    /// As for [`hgemm_splitk_reduce_bf16`], with an f32 `C`.
    pub unsafe fn hgemm_splitk_reduce_f32(p: HgemmReduceParams<f32>) {
        // SAFETY: forwarded.
        unsafe { reduce::<Tf32>(p) }
    }
}
