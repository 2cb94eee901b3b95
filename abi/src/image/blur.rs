//! `gaussian_blur`: separable, reflect padding; the fast path for small kernels.

use super::*;
use crate::{params, DevPtr, DevPtrMut};

/// Largest Gaussian kernel size (odd) of `gaussian_blur` and `augment`.
pub const MAX_KERNEL_SIZE: u32 = 63;

params! {
    /// `gaussian_blur`: separable Gaussian blur with reflect padding, kernel `kx` wide and `ky`
    /// tall (both odd).
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct GaussianBlurParams {
        /// Device address of the f32 input, `batch x channels x height x width` (NCHW), or
        /// `batch x height x width x channels` (NHWC, the `_nhwc` kernels).
        pub x: DevPtr<f32>,
        /// Device address of the f32 output (same shape).
        pub y: DevPtrMut<f32>,
        /// Device address of `batch` pairs `[sigma_x, sigma_y]` (f32), or 0 to use
        /// `sigma_x`/`sigma_y` below for every image.
        pub sigmas: DevPtr<f32>,
        /// Images.
        pub batch: u32,
        /// Channels per image.
        pub channels: u32,
        /// Height.
        pub height: u32,
        /// Width.
        pub width: u32,
        /// Kernel width (odd, at most [`MAX_KERNEL_SIZE`]).
        pub kx: u32,
        /// Kernel height (odd, at most [`MAX_KERNEL_SIZE`]).
        pub ky: u32,
        /// Sigma along x for every image when `sigmas == 0`.
        pub sigma_x: f32,
        /// Sigma along y for every image when `sigmas == 0`.
        pub sigma_y: f32,
        /// Division by the output tiles of a plane, by those of a row of tiles, and by `channels`:
        /// a block's plane, tile and image from its index ([`blur_output_tile`]'s tiles).
        pub tiles: FastDiv,
        pub tiles_x: FastDiv,
        pub planes: FastDiv,
        /// Layout of input and output: 0 NCHW, [`NHWC_IN`](super::NHWC_IN) `|`
        /// [`NHWC_OUT`](super::NHWC_OUT) NHWC (what the `_nhwc` kernels take).
        pub layout: u32,
        /// Zero (keeps the layout free of implicit padding).
        pub pad: u32,
    }
}

/// Largest radius (`kernel_size / 2`) of `gaussian_blur`'s fast path, taken for square kernels
/// (`kx == ky`): the vertical taps live in registers, one window of `2r + 1` per thread.
pub const BLUR_FAST_MAX_RADIUS: u32 = 7;
/// Output rows of one thread of the fast path (`GAUSSIAN_BLUR_FAST`); a block of 32 x 8
/// threads covers [`BLUR_FAST_VALUES`] outputs, two neighbouring columns per thread.
pub const BLUR_FAST_ROWS: u32 = 16;
/// Outputs of one block of the fast path.
pub const BLUR_FAST_VALUES: u32 = IMAGE_BLOCK_X * IMAGE_BLOCK_Y * 2 * BLUR_FAST_ROWS;
/// Widest output tile of the fast path.
pub const BLUR_FAST_MAX_W: u32 = 256;

/// Output tile `(width, height)` of the fast path for planes `width` wide: whole rows where a
/// row fits the widest tile and is more than half of it (each block then reads whole rows, and
/// the reflected halo columns lie in them), otherwise 128 x 64.
pub const fn blur_fast_tile(width: u32) -> (u32, u32) {
    let w = if width > BLUR_FAST_MAX_W / 2 && width <= BLUR_FAST_MAX_W {
        BLUR_FAST_MAX_W
    } else {
        BLUR_FAST_MAX_W / 2
    };
    (w, BLUR_FAST_VALUES / w)
}

/// Most channels of an NHWC image that the fast path takes (as one plane of interleaved
/// values, its halo `radius * channels` values wide); more take the general path.
pub const BLUR_FAST_NHWC_MAX_CHANNELS: u32 = 4;

/// Whether `gaussian_blur` of NHWC images of `channels` channels takes its fast path for these
/// kernel sizes.
pub const fn blur_fast_nhwc(kx: u32, ky: u32, channels: u32) -> bool {
    blur_fast(kx, ky) && channels <= BLUR_FAST_NHWC_MAX_CHANNELS
}

/// Dynamic shared memory in bytes of `gaussian_blur_nhwc` / `gaussian_blur_fast_nhwc` for
/// kernel sizes `kx`, `ky` and NHWC images `width` pixels wide of `channels` channels: on the
/// fast path, the tile of interleaved values with its halo; otherwise as
/// [`blur_shared_bytes`].
pub const fn blur_shared_bytes_nhwc(kx: u32, ky: u32, width: u32, channels: u32) -> u32 {
    if blur_fast_nhwc(kx, ky, channels) {
        let r = kx / 2;
        let (w, h) = blur_fast_tile(width * channels);
        return 4 * (h + 2 * r) * (w + 2 * r * channels);
    }
    blur_shared_bytes(kx, ky, width)
}

/// Whether `gaussian_blur` takes its fast path for these kernel sizes.
pub const fn blur_fast(kx: u32, ky: u32) -> bool {
    kx == ky && kx / 2 <= BLUR_FAST_MAX_RADIUS
}

/// Output tile `(width, height)` of `gaussian_blur` for these kernel sizes and planes `width`
/// wide; the grid has one block per tile per plane.
pub const fn blur_output_tile(kx: u32, ky: u32, width: u32) -> (u32, u32) {
    if blur_fast(kx, ky) {
        blur_fast_tile(width)
    } else {
        (TILE, TILE)
    }
}

/// Dynamic shared memory in bytes of `gaussian_blur` for kernel sizes `kx`, `ky` and planes
/// `width` wide. Fast path:
/// the input tile with its halo. Otherwise: the input tile with its halo, the horizontally
/// blurred tile, and both weight vectors.
pub const fn blur_shared_bytes(kx: u32, ky: u32, width: u32) -> u32 {
    if blur_fast(kx, ky) {
        let r = kx / 2;
        let (w, h) = blur_fast_tile(width);
        return 4 * (h + 2 * r) * (w + 2 * r);
    }
    let rx = kx / 2;
    let ry = ky / 2;
    let tile_in = (TILE + 2 * ry) * (TILE + 2 * rx);
    let tile_h = (TILE + 2 * ry) * TILE;
    4 * (tile_in + tile_h + kx + ky)
}
