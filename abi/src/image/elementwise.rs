//! The elementwise kernels: uint8 to f32 (`to_float`, also between layouts) and per-channel
//! normalisation.

use crate::{params, DevPtr, DevPtrMut};

/// Threads per block of the elementwise kernels (`to_float`, `normalize`).
pub const ELEMENTWISE_BLOCK: u32 = 256;

params! {
    /// `to_float`: `y[i] = f32(x[i]) * scale` for `n` bytes at `x`, `n` f32 at `y`.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct ToFloatParams {
        /// Device address of the `u8` input.
        pub x: DevPtr<u8>,
        /// Device address of the f32 output.
        pub y: DevPtrMut<f32>,
        /// Number of elements.
        pub n: u64,
        /// Multiplier: 1 (`ToDtype(float32)`) or `f32(1/255)` (`ToDtype(float32, scale=True)`).
        pub scale: f32,
        /// Padding (zero).
        pub pad: u32,
    }
}

params! {
    /// `to_float_relayout`: `y = f32(x) * scale` for `images` images of `channels` x `plane`
    /// values, read in one layout and written in the other.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct ToFloatRelayoutParams {
        /// Device address of the `u8` input.
        pub x: DevPtr<u8>,
        /// Device address of the f32 output.
        pub y: DevPtrMut<f32>,
        /// Images.
        pub images: u32,
        /// Channels per image.
        pub channels: u32,
        /// Pixels per image (`height * width`).
        pub plane: u32,
        /// Multiplier: 1 or `f32(1/255)`.
        pub scale: f32,
        /// 1: NHWC in, NCHW out; 0: NCHW in, NHWC out.
        pub to_nchw: u32,
        /// Padding (zero).
        pub pad: u32,
    }
}

params! {
    /// `normalize`: `y = (x - mean[c]) / std[c]` over `planes` planes of `plane_len` values,
    /// plane `p` having channel `p % channels`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct NormalizeParams {
        /// Device address of the f32 input.
        pub x: DevPtr<f32>,
        /// Device address of the f32 output.
        pub y: DevPtrMut<f32>,
        /// Device address of `channels` f32 means followed by `channels` f32 standard deviations.
        pub stats: DevPtr<f32>,
        /// Number of planes (`n * c`).
        pub planes: u32,
        /// Channels per image.
        pub channels: u32,
        /// Values per plane (`h * w`).
        pub plane_len: u32,
        /// Padding (zero).
        pub pad: u32,
    }
}
