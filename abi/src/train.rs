//! The elementwise and layout kernels of a small training step (seed 003's model stream): the
//! ReLU and its gradient, the gradient of the mean squared error, a plain SGD update (by an f32
//! or a bf16 gradient), a transpose, which together with the matmul make a two-layer MLP's
//! forward and backward pass, and the rounding of a gradient to bf16 for its trip between GPUs.

use crate::{declare, params, DevPtr, DevPtrMut};
use streamline_device::element::{bf16, f16, Element};

params! {
    /// Parameters of `relu_f32`: `y[i] = x[i]` where `x[i] > 0` or is NaN, else `+0`, for
    /// `i < n`. The ranges must not overlap unless `x == y`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct ReluParams {
        /// Device address of the input.
        pub x: DevPtr<f32>,
        /// Device address of the output.
        pub y: DevPtrMut<f32>,
        /// Number of elements.
        pub n: u64,
    }
}

params! {
    /// Parameters of `relu_backward_f32`: `dx[i] = dy[i]` where `x[i] > 0`, else `+0` (the
    /// gradient of the ReLU at its input `x`, as `threshold_backward` defines it).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct ReluBackwardParams {
        /// Device address of the incoming gradient.
        pub dy: DevPtr<f32>,
        /// Device address of the ReLU's input.
        pub x: DevPtr<f32>,
        /// Device address of the outgoing gradient (may equal `dy`).
        pub dx: DevPtrMut<f32>,
        /// Number of elements.
        pub n: u64,
    }
}

params! {
    /// Parameters of `mse_grad_f32`: `d[i] = scale * (y[i] - t[i])`, the gradient of
    /// `sum (y - t)^2 * scale / 2` (with `scale = 2 / count`, of the mean squared error).
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct MseGradParams {
        /// Device address of the prediction.
        pub y: DevPtr<f32>,
        /// Device address of the target.
        pub t: DevPtr<f32>,
        /// Device address of the gradient.
        pub d: DevPtrMut<f32>,
        /// Number of elements.
        pub n: u64,
        /// Factor applied to the difference.
        pub scale: f32,
        /// Zero (keeps the struct free of implicit padding).
        pub pad: u32,
    }
}

params! {
    /// Parameters of the SGD updates of f32 weights by a gradient of elements `G` (`sgd_f32`
    /// for an f32 gradient, `sgd_f32_bf16` for a bf16 one): `w[i] = w[i] - lr * g[i]` in
    /// place, one rounding (a fused multiply-add; a bf16 gradient widens to f32 exactly).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct SgdParams<G: Element> {
        /// Device address of the weights, updated in place.
        pub w: DevPtrMut<f32>,
        /// Device address of the gradient (must not overlap `w`).
        pub g: DevPtr<G>,
        /// Number of elements.
        pub n: u64,
        /// Learning rate.
        pub lr: f32,
        /// Zero (keeps the struct free of implicit padding).
        pub pad: u32,
    }
}

// SAFETY: two 8-byte addresses, a u64, an f32 and a u32 whatever `G` is: no padding, and every
// bit pattern (zeros included) is a valid value.
#[cfg(feature = "bytemuck")]
unsafe impl<G: Element> bytemuck::Zeroable for SgdParams<G> {}
// SAFETY: as above.
#[cfg(feature = "bytemuck")]
unsafe impl<G: Element> bytemuck::Pod for SgdParams<G> {}

params! {
    /// Parameters of the SGD updates of f32 weights by the mean of two gradients of elements
    /// `G` (`sgd_pair_f32`, `sgd_pair_f32_bf16`), as two GPUs of a data-parallel step apply
    /// their own gradient and the one the other sent: `w[i] = w[i] - lr * (a[i] + b[i]) / 2` in
    /// place, the sum rounded once in f32 (so `a` and `b` may be swapped without changing a
    /// bit), halved exactly, the update one rounding (a fused multiply-add).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct SgdPairParams<G: Element> {
        /// Device address of the weights, updated in place.
        pub w: DevPtrMut<f32>,
        /// Device address of one gradient (must not overlap `w`).
        pub a: DevPtr<G>,
        /// Device address of the other (must not overlap `w`).
        pub b: DevPtr<G>,
        /// Number of elements.
        pub n: u64,
        /// Learning rate.
        pub lr: f32,
        /// Zero (keeps the struct free of implicit padding).
        pub pad: u32,
    }
}

// SAFETY: three 8-byte addresses, a u64, an f32 and a u32 whatever `G` is: no padding, and every
// bit pattern (zeros included) is a valid value.
#[cfg(feature = "bytemuck")]
unsafe impl<G: Element> bytemuck::Zeroable for SgdPairParams<G> {}
// SAFETY: as above.
#[cfg(feature = "bytemuck")]
unsafe impl<G: Element> bytemuck::Pod for SgdPairParams<G> {}

params! {
    /// Parameters of `round_bf16`: `y[i] = x[i]` rounded to the nearest bf16 (ties to even),
    /// for `i < n`: a gradient made half as many bytes before it travels between GPUs. The
    /// ranges must not overlap.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct RoundBf16Params {
        /// Device address of the f32 input.
        pub x: DevPtr<f32>,
        /// Device address of the bf16 output.
        pub y: DevPtrMut<bf16>,
        /// Number of elements.
        pub n: u64,
    }
}

params! {
    /// Parameters of `transpose_*`: `y[j * ldy + i] = x[i * ldx + j]` for the row-major
    /// `rows x cols` matrix `x` of `T` (the ranges must not overlap). The elements are moved,
    /// not converted.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct TransposeParams<T: Element> {
        /// Device address of the input.
        pub x: DevPtr<T>,
        /// Device address of the output.
        pub y: DevPtrMut<T>,
        /// Rows of the input.
        pub rows: u32,
        /// Columns of the input.
        pub cols: u32,
        /// Row stride of the input, elements (`>= cols`).
        pub ldx: u32,
        /// Row stride of the output, elements (`>= rows`).
        pub ldy: u32,
    }
}

// SAFETY: two 8-byte addresses and four u32 whatever `T` is: no padding, and every bit
// pattern is a valid value. (bytemuck's derive does not take generic structs.)
#[cfg(feature = "bytemuck")]
unsafe impl<T: Element> bytemuck::Zeroable for TransposeParams<T> {}
// SAFETY: as above.
#[cfg(feature = "bytemuck")]
unsafe impl<T: Element> bytemuck::Pod for TransposeParams<T> {}

declare! {
    /// ReLU.
    pub const RELU_F32: Kernel<ReluParams> = Kernel::new("relu_f32");
    /// Gradient of the ReLU.
    pub const RELU_BACKWARD_F32: Kernel<ReluBackwardParams> = Kernel::new("relu_backward_f32");
    /// Gradient of the mean squared error.
    pub const MSE_GRAD_F32: Kernel<MseGradParams> = Kernel::new("mse_grad_f32");
    /// SGD update by an f32 gradient.
    pub const SGD_F32: Kernel<SgdParams<f32>> = Kernel::new("sgd_f32");
    /// SGD update of f32 weights by a bf16 gradient.
    pub const SGD_F32_BF16: Kernel<SgdParams<bf16>> = Kernel::new("sgd_f32_bf16");
    /// SGD update by the mean of two f32 gradients.
    pub const SGD_PAIR_F32: Kernel<SgdPairParams<f32>> = Kernel::new("sgd_pair_f32");
    /// SGD update of f32 weights by the mean of two bf16 gradients.
    pub const SGD_PAIR_F32_BF16: Kernel<SgdPairParams<bf16>> = Kernel::new("sgd_pair_f32_bf16");
    /// f32 rounded to bf16.
    pub const ROUND_BF16: Kernel<RoundBf16Params> = Kernel::new("round_bf16");
    /// Transpose of f32 through a shared-memory tile.
    pub const TRANSPOSE_F32: Kernel<TransposeParams<f32>> = Kernel::new("transpose_f32");
    /// Transpose of bf16.
    pub const TRANSPOSE_BF16: Kernel<TransposeParams<bf16>> = Kernel::new("transpose_bf16");
    /// Transpose of f16.
    pub const TRANSPOSE_F16: Kernel<TransposeParams<f16>> = Kernel::new("transpose_f16");
}

/// Threads per block of the elementwise kernels.
pub const TRAIN_BLOCK: u32 = 256;

/// Side of the square tile `transpose_*` stages through shared memory; its block is
/// `TRANSPOSE_TILE x TRANSPOSE_ROWS` threads, each moving `TRANSPOSE_TILE / TRANSPOSE_ROWS`
/// elements.
pub const TRANSPOSE_TILE: u32 = 64;
/// Rows of threads in a `transpose_*` block.
pub const TRANSPOSE_ROWS: u32 = 4;
/// Dynamic shared memory of one `transpose_*` block moving elements of `size` bytes: the tile
/// with one column of padding, so that reading a tile column of 4-byte elements touches 32
/// different banks (2-byte elements share a bank two by two).
pub const fn transpose_shared_bytes(size: u32) -> u32 {
    TRANSPOSE_TILE * (TRANSPOSE_TILE + 1) * size
}
