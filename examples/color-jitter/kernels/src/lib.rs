//! torchvision's `ColorJitter(brightness, contrast, saturation)` on a batch of NCHW RGB f32
//! images in `[0, 1]`, each image with its own factors, applied in the order brightness,
//! contrast, saturation:
//!
//! - brightness `b`: `v = clamp(b x)`;
//! - contrast `c`: `v = clamp(c v + (1 - c) m)`, `m` the mean over the image of the grayscale
//!   of the brightness-adjusted image;
//! - saturation `s`: `v = clamp(s v + (1 - s) gray(v))`;
//!
//! with `clamp` to `[0, 1]` and `gray = 0.2989 r + 0.587 g + 0.114 b` (torchvision's
//! `rgb_to_grayscale`). Two kernels: [`jitter_gray_sum`] sums each image's grayscale (warp
//! sums, one atomic add per warp), [`color_jitter`] applies the three steps.
#![no_std]

use streamline_device::prelude::*;

/// Threads per block of both kernels.
pub const JITTER_BLOCK: u32 = 256;

params! {
    /// Parameters of both kernels. The grid is `(blocks, n, 1)`: blocks along x walk the
    /// pixels of image `blockIdx.y`.
    #[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct JitterParams {
        /// Device address of the input, `n x 3 x plane` f32.
        pub x: DevPtr<f32>,
        /// Device address of the output, `n x 3 x plane` f32 (`color_jitter` only).
        pub y: DevPtrMut<f32>,
        /// Device address of `n` factor quadruples `[brightness, contrast, saturation, 0]`.
        pub factors: DevPtr<[f32; 4]>,
        /// Device address of `n` f32 grayscale sums: zeroed, then accumulated by
        /// `jitter_gray_sum`, read by `color_jitter`.
        pub sums: DevPtrMut<f32>,
        /// Pixels per image plane (`h * w`).
        pub plane: u32,
        /// Padding (zero).
        pub pad: u32,
    }
}

device! {
    /// Clamps to `[0, 1]`, as torchvision's `_blend` does for float images.
    #[inline(always)]
    fn unit(v: f32) -> f32 {
        fminf(fmaxf(v, 0.0), 1.0)
    }

    /// torchvision's grayscale weights.
    #[inline(always)]
    fn gray(r: f32, g: f32, b: f32) -> f32 {
        0.2989 * r + 0.587 * g + 0.114 * b
    }

    /// This block's image, its factors, first pixel and the stride over its pixels.
    ///
    /// # Safety
    /// `p.factors` must address one quadruple per image of the grid.
    #[inline(always)]
    unsafe fn place(p: &JitterParams) -> (usize, [f32; 4], usize, usize) {
        let (bx, img, _) = block_xyz();
        let (tx, _) = thread_xy();
        let (gx, _, _) = grid_dim_xyz();
        // SAFETY: `img` is below the grid's y dimension, the image count (contract).
        let f = unsafe { *p.factors.as_ptr().add(img as usize) };
        let first = bx as usize * JITTER_BLOCK as usize + tx as usize;
        (img as usize, f, first, gx as usize * JITTER_BLOCK as usize)
    }
}

kernel! {
    #[launch_bounds(JITTER_BLOCK)]
    /// Adds the grayscale of each brightness-adjusted pixel of image `blockIdx.y` to
    /// `sums[blockIdx.y]`.
    ///
    /// # Safety
    /// `x` must address `n x 3 x plane` f32, `factors` `n` quadruples and `sums` `n` f32 for
    /// the grid's `n` images, with blocks of `JITTER_BLOCK` threads along x.
    pub unsafe fn jitter_gray_sum(p: JitterParams) {
        // SAFETY: forwarded from the contract.
        let (img, f, mut i, stride) = unsafe { place(&p) };
        let plane = p.plane as usize;
        // SAFETY: image `img` lies inside `x` (contract).
        let x = unsafe { p.x.as_ptr().add(img * 3 * plane) };
        let mut acc = 0.0f32;
        while i < plane {
            // SAFETY: `i < plane`, so the three planes' pixels lie inside image `img`.
            let (r, g, b) = unsafe { (*x.add(i), *x.add(plane + i), *x.add(2 * plane + i)) };
            acc += gray(unit(f[0] * r), unit(f[0] * g), unit(f[0] * b));
            i += stride;
        }
        // Every lane of the full warps of the block reaches this, converged after the loop.
        // SAFETY: as said; the block's size is a multiple of 32.
        let sum = unsafe { warp_sum_f32(acc) };
        if lane_id() == 0 {
            // SAFETY: `sums` holds one f32 per image, accessed only atomically here.
            unsafe { atomic_add_f32(p.sums.as_mut_ptr().add(img), sum) };
        }
    }
}

kernel! {
    #[launch_bounds(JITTER_BLOCK)]
    /// Brightness, contrast (with the mean `sums[img] / plane`) and saturation of image
    /// `blockIdx.y`, written to `y`.
    ///
    /// # Safety
    /// As for `jitter_gray_sum`, with `y` addressing `n x 3 x plane` writable f32 not
    /// overlapping `x`, and `sums` complete (the sum kernel finished before this launch).
    pub unsafe fn color_jitter(p: JitterParams) {
        // SAFETY: forwarded from the contract.
        let (img, f, mut i, stride) = unsafe { place(&p) };
        let plane = p.plane as usize;
        // SAFETY: one sum per image (contract).
        let mean = unsafe { *p.sums.as_ptr().add(img) } / p.plane as f32;
        let (b, c, s) = (f[0], f[1], f[2]);
        // SAFETY: image `img` lies inside `x` and `y` (contract).
        let (x, y) = unsafe {
            (
                p.x.as_ptr().add(img * 3 * plane),
                p.y.as_mut_ptr().add(img * 3 * plane),
            )
        };
        while i < plane {
            // SAFETY: `i < plane`: the pixel's three values lie inside image `img`.
            let v = unsafe { [*x.add(i), *x.add(plane + i), *x.add(2 * plane + i)] };
            let v = v.map(|v| unit(c * unit(b * v) + (1.0 - c) * mean));
            let g = gray(v[0], v[1], v[2]);
            let v = v.map(|v| unit(s * v + (1.0 - s) * g));
            // SAFETY: as above, for `y`.
            unsafe {
                *y.add(i) = v[0];
                *y.add(plane + i) = v[1];
                *y.add(2 * plane + i) = v[2];
            }
            i += stride;
        }
    }
}
