//! `y = a x + y`: one parameter struct and one kernel. On the GPU `saxpy` is the kernel; on the
//! host it is its typed handle, `Kernel<SaxpyParams>`.
#![no_std]

use streamline_device::prelude::*;

params! {
    /// Parameters of [`saxpy`] (`params!` makes it `#[repr(C)]` and records its fields, so
    /// Python can call `m.saxpy(grid, block, x=x, y=y, n=n, a=2.0)` by name).
    #[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct SaxpyParams {
        /// Device address of the `n` f32 of `x`.
        pub x: DevPtr<f32>,
        /// Device address of the `n` f32 of `y`, read and overwritten.
        pub y: DevPtrMut<f32>,
        /// Number of elements.
        pub n: u64,
        /// The scale of `x`.
        pub a: f32,
        /// Padding (zero), so the struct has no hidden bytes.
        pub pad: u32,
    }
}

kernel! {
    /// `y[i] = a * x[i] + y[i]` for every `i < n`, with one rounding (a fused multiply-add).
    ///
    /// # Safety
    /// `p.x` and `p.y` must each address `p.n` f32 on the device, not overlapping.
    pub unsafe fn saxpy(p: SaxpyParams) {
        let (x, y) = (p.x.as_ptr(), p.y.as_mut_ptr());
        for i in grid_stride(p.n) {
            // SAFETY: `i < n`, so both accesses lie inside the arrays the contract names.
            unsafe { *y.add(i) = fmaf(p.a, *x.add(i), *y.add(i)) };
        }
    }
}
