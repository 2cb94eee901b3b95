//! The elementwise and layout kernels of a small training step: ReLU and its gradient, the
//! mean-squared-error gradient, an SGD update (by an f32 or a bf16 gradient, or by the mean of
//! two, as two GPUs exchange them), a transpose
//! through shared memory, and the rounding of a gradient to bf16.

use core::arch::nvptx;
use core::intrinsics::{fmaf32, gpu::gpu_launch_sized_workgroup_mem};
use streamline_abi::train::{
    MseGradParams, ReluBackwardParams, ReluParams, RoundBf16Params, SgdPairParams, SgdParams,
    TransposeParams, TRANSPOSE_ROWS, TRANSPOSE_TILE,
};
use streamline_abi::train::{
    MSE_GRAD_F32, RELU_BACKWARD_F32, RELU_F32, ROUND_BF16, SGD_F32, SGD_F32_BF16, SGD_PAIR_F32,
    SGD_PAIR_F32_BF16, TRANSPOSE_BF16, TRANSPOSE_F16, TRANSPOSE_F32,
};
use streamline_device::element::{bf16, f16, Element, Float};
use streamline_device::kernel;
use streamline_device::thread::{global_x, sync_block, thread_xy};

kernel! {
    #[declared(RELU_F32)]
    /// `y = x` where `x > 0` or NaN, else `+0`.
    ///
    /// # Safety
    /// `p.x` must address `p.n` readable f32 and `p.y` `p.n` writable f32, not overlapping unless
    /// equal.
    pub unsafe fn relu_f32(p: ReluParams) {
        let (x, y) = (p.x.as_ptr(), p.y.as_mut_ptr());
        let (mut i, stride) = global_x();
        while i < p.n {
            // SAFETY: `i < n`; both ranges hold `n` elements (host-validated).
            unsafe {
                let v = *x.add(i as usize);
                *y.add(i as usize) = if v <= 0.0 { 0.0 } else { v };
            }
            i += stride;
        }
    }
}

kernel! {
    #[declared(RELU_BACKWARD_F32)]
    /// `dx = dy` where `x > 0`, else `+0`.
    ///
    /// # Safety
    /// `p.dy`, `p.x` must address `p.n` readable f32 and `p.dx` `p.n` writable f32; `dx` may
    /// equal `dy` but must not overlap `x` or partially overlap `dy`.
    pub unsafe fn relu_backward_f32(p: ReluBackwardParams) {
        let (dy, x, dx) = (p.dy.as_ptr(), p.x.as_ptr(), p.dx.as_mut_ptr());
        let (mut i, stride) = global_x();
        while i < p.n {
            // SAFETY: `i < n`; the three ranges hold `n` elements (host-validated).
            unsafe {
                let g = *dy.add(i as usize);
                *dx.add(i as usize) = if *x.add(i as usize) > 0.0 { g } else { 0.0 };
            }
            i += stride;
        }
    }
}

kernel! {
    #[declared(MSE_GRAD_F32)]
    /// `d = scale * (y - t)`.
    ///
    /// # Safety
    /// `p.y`, `p.t` must address `p.n` readable f32 and `p.d` `p.n` writable f32 not overlapping
    /// either input unless equal to it.
    pub unsafe fn mse_grad_f32(p: MseGradParams) {
        let (y, t, d) = (p.y.as_ptr(), p.t.as_ptr(), p.d.as_mut_ptr());
        let (mut i, stride) = global_x();
        while i < p.n {
            // SAFETY: `i < n`; the three ranges hold `n` elements (host-validated).
            unsafe {
                *d.add(i as usize) = p.scale * (*y.add(i as usize) - *t.add(i as usize));
            }
            i += stride;
        }
    }
}

/// `w = w - lr * g` in place over `n` elements, `g` widened to f32 exactly.
///
/// # Safety
/// `p.w` must address `p.n` readable and writable f32 and `p.g` `p.n` readable `G`, not
/// overlapping `w`.
#[inline(always)]
unsafe fn sgd<G: Float>(p: SgdParams<G>) {
    let (w, g) = (p.w.as_mut_ptr(), p.g.as_ptr());
    let (mut i, stride) = global_x();
    while i < p.n {
        // SAFETY: `i < n`; both ranges hold `n` elements (host-validated) and do not overlap.
        unsafe {
            let wi = w.add(i as usize);
            *wi = fmaf32(-p.lr, (*g.add(i as usize)).to_acc(), *wi);
        }
        i += stride;
    }
}

kernel! {
    #[declared(SGD_F32)]
    /// `w = w - lr * g` in place, one rounding.
    ///
    /// # Safety
    /// `p.w` must address `p.n` readable and writable f32 and `p.g` `p.n` readable f32, not
    /// overlapping `w`.
    pub unsafe fn sgd_f32(p: SgdParams<f32>) {
        // SAFETY: forwarded from this function's contract.
        unsafe { sgd(p) }
    }
}

kernel! {
    #[declared(SGD_F32_BF16)]
    /// `w = w - lr * g` in place for f32 weights and a bf16 gradient (widened exactly), one
    /// rounding.
    ///
    /// # Safety
    /// `p.w` must address `p.n` readable and writable f32 and `p.g` `p.n` readable bf16, not
    /// overlapping `w`.
    pub unsafe fn sgd_f32_bf16(p: SgdParams<bf16>) {
        // SAFETY: forwarded from this function's contract.
        unsafe { sgd(p) }
    }
}

/// `w = w - lr * (a + b) / 2` in place over `n` elements, `a` and `b` widened to f32 exactly
/// and summed in f32, so that swapping them gives the same bits.
///
/// # Safety
/// `p.w` must address `p.n` readable and writable f32, `p.a` and `p.b` `p.n` readable `G`
/// each, neither overlapping `w`.
#[inline(always)]
unsafe fn sgd_pair<G: Float>(p: SgdPairParams<G>) {
    let (w, a, b) = (p.w.as_mut_ptr(), p.a.as_ptr(), p.b.as_ptr());
    let (mut i, stride) = global_x();
    while i < p.n {
        // SAFETY: `i < n`; the three ranges hold `n` elements (host-validated) and the inputs
        // do not overlap `w`.
        unsafe {
            let wi = w.add(i as usize);
            let mean = ((*a.add(i as usize)).to_acc() + (*b.add(i as usize)).to_acc()) * 0.5;
            *wi = fmaf32(-p.lr, mean, *wi);
        }
        i += stride;
    }
}

kernel! {
    #[declared(SGD_PAIR_F32)]
    /// `w = w - lr * (a + b) / 2` in place for f32 gradients: the sum rounded once, halved
    /// exactly, the update one rounding.
    ///
    /// # Safety
    /// `p.w` must address `p.n` readable and writable f32, `p.a` and `p.b` `p.n` readable f32
    /// each, neither overlapping `w`.
    pub unsafe fn sgd_pair_f32(p: SgdPairParams<f32>) {
        // SAFETY: forwarded from this function's contract.
        unsafe { sgd_pair(p) }
    }
}

kernel! {
    #[declared(SGD_PAIR_F32_BF16)]
    /// `w = w - lr * (a + b) / 2` in place for f32 weights and bf16 gradients (widened
    /// exactly): the sum rounded once in f32, halved exactly, the update one rounding.
    ///
    /// # Safety
    /// `p.w` must address `p.n` readable and writable f32, `p.a` and `p.b` `p.n` readable bf16
    /// each, neither overlapping `w`.
    pub unsafe fn sgd_pair_f32_bf16(p: SgdPairParams<bf16>) {
        // SAFETY: forwarded from this function's contract.
        unsafe { sgd_pair(p) }
    }
}

kernel! {
    #[declared(ROUND_BF16)]
    /// `y = x` rounded to the nearest bf16, ties to even.
    ///
    /// # Safety
    /// `p.x` must address `p.n` readable f32 and `p.y` `p.n` writable bf16, not overlapping.
    pub unsafe fn round_bf16(p: RoundBf16Params) {
        let (x, y) = (p.x.as_ptr(), p.y.as_mut_ptr());
        let (mut i, stride) = global_x();
        while i < p.n {
            // SAFETY: `i < n`; both ranges hold `n` elements (host-validated).
            unsafe { *y.add(i as usize) = bf16::from_acc(*x.add(i as usize)) };
            i += stride;
        }
    }
}

/// `y (cols x rows, row stride ldy) = x (rows x cols, row stride ldx)` transposed, elements
/// moved as they are. Each block stages one `TILE x TILE` tile in shared memory (padded by a
/// column against bank conflicts), so that both the global reads and the global writes are
/// coalesced along rows.
///
/// # Safety
/// Launched with a `TRANSPOSE_TILE x TRANSPOSE_ROWS` block, a grid of
/// `ceil(cols / TILE) x ceil(rows / TILE)` blocks and `transpose_shared_bytes(size of T)` of
/// dynamic shared memory; `ldx >= cols`, `ldy >= rows`; `p.x` must address
/// `(rows - 1) * ldx + cols` elements and `p.y` `(cols - 1) * ldy + rows`, not overlapping.
#[inline(always)]
unsafe fn transpose<T: Element>(p: TransposeParams<T>) {
    const S: usize = TRANSPOSE_TILE as usize;
    const R: usize = TRANSPOSE_ROWS as usize;
    let tile = gpu_launch_sized_workgroup_mem::<T>();
    let (tx, ty) = thread_xy();
    let (tx, ty) = (tx as usize, ty as usize);
    // SAFETY: reading special registers has no side effects.
    let (bx, by) = unsafe {
        (
            nvptx::_block_idx_x() as usize,
            nvptx::_block_idx_y() as usize,
        )
    };
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let (ldx, ldy) = (p.ldx as usize, p.ldy as usize);
    let (x, y) = (p.x.as_ptr(), p.y.as_mut_ptr());
    let c = bx * S + tx;
    let mut k = ty;
    while k < S {
        let r = by * S + k;
        if r < rows && c < cols {
            // SAFETY: `r < rows`, `c < cols`: `r * ldx + c` is below `(rows - 1) * ldx + cols`,
            // inside `x`; `k * (S + 1) + tx` is inside the tile of `S * (S + 1)` elements.
            unsafe { *tile.add(k * (S + 1) + tx) = *x.add(r * ldx + c) };
        }
        k += R;
    }
    // SAFETY: every thread of the block reaches this barrier (no early return above).
    unsafe { sync_block() };
    // Output row `oc` (an input column), output column `or` (an input row).
    let or = by * S + tx;
    let mut k = ty;
    while k < S {
        let oc = bx * S + k;
        if oc < cols && or < rows {
            // SAFETY: `oc < cols`, `or < rows`: `oc * ldy + or` is below `(cols - 1) * ldy +
            // rows`, inside `y`; the tile index is inside the tile.
            unsafe { *y.add(oc * ldy + or) = *tile.add(tx * (S + 1) + k) };
        }
        k += R;
    }
}

kernel! {
    #[declared(TRANSPOSE_F32)]
    /// [`transpose`] of f32.
    ///
    /// # Safety
    /// As for [`transpose`].
    pub unsafe fn transpose_f32(p: TransposeParams<f32>) {
        // SAFETY: forwarded.
        unsafe { transpose(p) }
    }
}

kernel! {
    #[declared(TRANSPOSE_BF16)]
    /// [`transpose`] of bf16.
    ///
    /// # Safety
    /// As for [`transpose`].
    pub unsafe fn transpose_bf16(p: TransposeParams<bf16>) {
        // SAFETY: forwarded.
        unsafe { transpose(p) }
    }
}

kernel! {
    #[declared(TRANSPOSE_F16)]
    /// [`transpose`] of f16.
    ///
    /// # Safety
    /// As for [`transpose`].
    pub unsafe fn transpose_f16(p: TransposeParams<f16>) {
        // SAFETY: forwarded.
        unsafe { transpose(p) }
    }
}
