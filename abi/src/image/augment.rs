//! Seed 003's fused augmentation: its parameters, the device draw, the choice of kernel for a
//! configuration, and the shared memory each kernel takes.

use super::*;
use crate::{params, DevPtr, DevPtrMut, Kernel};

/// Largest channel count of the fused `augment` (its shared-memory tile holds every channel).
pub const AUGMENT_MAX_CHANNELS: u32 = 4;
/// Crop pixels (every channel of a pixel in one slot) that one block of `augment` keeps in
/// shared memory: the window of the crop that the rotation of its output tile and blur halo
/// reads. Seed 003's shapes (crop enlarged twofold, any angle, kernel 7) need at most 31 x 31;
/// a block whose window is larger works through its tile in 16 x 16 parts, whose windows always
/// fit (at most 28 x 28 while the resize enlarges). The region is shared with the horizontal
/// blur pass, so it is at least [`augment_scratch_px`] of the kernel size.
pub const AUGMENT_CROP_BUDGET: u32 = 1024;
/// Input pixels (every channel of a pixel packed in 4 bytes) that one block of `augment` stages
/// in shared memory to compute its crop window from, when each crop pixel is one bilinear
/// sample of the input (crops no larger than their output, like a random crop) and the window
/// spans at most [`AUGMENT_CROP_TAPS`] rows and columns; otherwise the crop pixels are read
/// from device memory directly.
pub const AUGMENT_INPUT_BUDGET: u32 = 1536;
/// Entries of each of `augment`'s two crop-tap tables (crop rows and columns of a window).
pub const AUGMENT_CROP_TAPS: u32 = 64;
/// Largest output side of `augment`'s dyadic kernels ([`augment_dyadic`]): they round a rotated
/// pixel's source point with the adder instead of a conversion, which serves coordinates below
/// `2^22`.
pub const AUGMENT_DYADIC_MAX_SIDE: u32 = 1 << 22;
/// Bytes of the region where `augment`'s dyadic strips stage the input window of a strip's
/// later tiles (the first stages in the scratch region, free then), apart from the horizontally
/// blurred rows, so that a tile's window is staged while the tile before is blurred. The
/// window of a later tile's 32 new rows (any angle, 7 taps) needs at most the bytes
/// [`augment_dyadic_stage_bound`] gives; four blocks of the 3- and 4-channel strips fit an SM
/// with it.
pub const AUGMENT_DYADIC_STAGE_BYTES: u32 = 10112;
/// Bytes at the start of `augment`'s shared memory for the per-block values one thread
/// computes for all (rotation, crop box, window, normalisation).
pub const AUGMENT_SETUP_BYTES: u32 = 256;
/// Warps of a block of `augment`'s one-tile kernels (`augment_c*`, `augment_bilinear_c*`),
/// against [`IMAGE_BLOCK_Y`] in the others: one warp fewer leaves each thread 72 registers at
/// four blocks per SM, which their one tile per block gains from.
pub const AUGMENT_ONE_TILE_WARPS: u32 = 7;

/// The block an [`augment_kernel`] is launched with: rows of [`IMAGE_BLOCK_X`] threads up to
/// its launch bound ([`AUGMENT_ONE_TILE_WARPS`] of them for the one-tile kernels,
/// [`IMAGE_BLOCK_Y`] for the others).
pub const fn augment_block_dim(kernel: Kernel<AugmentParams>) -> (u32, u32, u32) {
    let warps = match kernel.bounds() {
        Some(b) => b.max_threads / IMAGE_BLOCK_X,
        None => IMAGE_BLOCK_Y,
    };
    (IMAGE_BLOCK_X, warps, 1)
}

/// Blur radius of `augment`'s fast path: kernels up to 7 taps run as 7 taps (the missing ones
/// weighted 0) with their weights in registers.
pub const AUGMENT_FAST_RADIUS: u32 = 3;
/// `AugmentParams::layout` bit: the uint8 input is NHWC (pixels with interleaved channels, as
/// image decoders produce) instead of NCHW.
pub const AUGMENT_NHWC_IN: u32 = 1;
/// `AugmentParams::layout` bit: the f32 output is NHWC instead of NCHW.
pub const AUGMENT_NHWC_OUT: u32 = 2;

params! {
    /// `augment`: seed 003's transform, uint8 NCHW or NHWC in, f32 NCHW or NHWC out: to float (times `scale`),
    /// crop each image by its box with `roi_align` (aligned=False, sampling_ratio=-1,
    /// spatial_scale=1) to `crop_h x crop_w`, resize bilinear to `out_h x out_w` (upscaling, where
    /// torchvision's antialias changes nothing), rotate by the image's angle (nearest or bilinear,
    /// zero fill), Gaussian blur (`ksize` square, the image's sigma for both axes, reflect padding),
    /// normalize per channel.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct AugmentParams {
        /// Device address of the `u8` input, `batch x channels x height x width` (NCHW) or
        /// `batch x height x width x channels` (NHWC).
        pub x: DevPtr<u8>,
        /// Device address of the f32 output, `batch x channels x out_h x out_w` (NCHW) or
        /// `batch x out_h x out_w x channels` (NHWC).
        pub y: DevPtrMut<f32>,
        /// Device address of `batch` boxes `[x1, y1, x2, y2]` (f32, input pixels).
        pub boxes: DevPtr<f32>,
        /// Device address of `batch` angles in degrees (f32, counter-clockwise).
        pub angles: DevPtr<f32>,
        /// Device address of `batch` blur sigmas (f32).
        pub sigmas: DevPtr<f32>,
        /// Device address of `channels` means followed by `channels` standard deviations.
        pub stats: DevPtr<f32>,
        /// A ragged batch (images of their own sizes): the device address of `batch` extents,
        /// [`EXTENT_WORDS`] u32 each (see [`ImageExtent`]); null for a batch of
        /// `height x width` images. An extent that is empty or reaches past `x_bytes` makes its
        /// image's output NaN, never a read outside `x`.
        pub extents: DevPtr<u32>,
        /// Bytes of the input (a ragged batch's images lie inside them).
        pub x_bytes: u64,
        /// Images.
        pub batch: u32,
        /// Channels per image (at most [`AUGMENT_MAX_CHANNELS`]).
        pub channels: u32,
        /// Input height (0 in a ragged batch).
        pub height: u32,
        /// Input width (0 in a ragged batch).
        pub width: u32,
        /// Crop (roi_align output) height.
        pub crop_h: u32,
        /// Crop width.
        pub crop_w: u32,
        /// Output height (resize target; at least `crop_h`).
        pub out_h: u32,
        /// Output width (at least `crop_w`).
        pub out_w: u32,
        /// Blur kernel size (odd, at most [`MAX_KERNEL_SIZE`]).
        pub ksize: u32,
        /// uint8-to-float multiplier (1 or `f32(1/255)`).
        pub scale: f32,
        /// 1: nearest rotation (torchvision's default), 0: bilinear.
        pub nearest: u32,
        /// Layouts: [`AUGMENT_NHWC_IN`] and [`AUGMENT_NHWC_OUT`] bits (0: NCHW in and out).
        pub layout: u32,
        /// The resize's scales `crop_h / out_h` and `crop_w / out_w` (f32 divisions, as torch
        /// computes them), found once by the host rather than by every block.
        pub scale_y: f32,
        pub scale_x: f32,
        /// Division by the strips of an image, and by those of a row of strips: a block's image
        /// and strip from its index. A strip is `strip` output tiles one above the other.
        pub tiles: FastDiv,
        pub tiles_x: FastDiv,
        /// Output tiles ([`TILE`] x [`TILE`]) per strip, at least 1: a block works down its strip
        /// tile by tile, keeping the rotated rows that the blur's halo shares between a tile and
        /// the next, so those are rotated once and the block's setup serves every tile.
        pub strip: u32,
        /// Zero (keeps the layout free of implicit padding).
        pub pad: u32,
    }
}

/// Division by a divisor `d` fixed for a launch (`1 <= d < 2^31`) of numerators below `2^31`
/// (block indices), as a multiply and a shift: the host finds the multiplier once, where a
/// kernel dividing by a runtime value would spend a few tens of instructions per division in
/// every warp. Granlund and Montgomery's round-up method: with `l = ceil(log2 d)`, `p = 31 + l`
/// and `magic = ceil(2^p / d)` (below `2^32`), `n / d = (n * magic) >> p` for every `n < 2^31`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct FastDiv {
    pub d: u32,
    pub magic: u32,
    pub shift: u32,
    /// Zero (keeps the struct free of implicit padding).
    pub pad: u32,
}

/// A `FastDiv` field passes as its bytes.
impl streamline_device::params::Field for FastDiv {
    const KIND: streamline_device::params::FieldKind = streamline_device::params::FieldKind::Bytes;
}

impl FastDiv {
    /// Division by `d` (0 is taken as 1; `d` must be below `2^31`).
    pub const fn new(d: u32) -> FastDiv {
        let d = if d == 0 { 1 } else { d };
        let l = 32 - (d - 1).leading_zeros();
        let p = 31 + l;
        let magic = (1u64 << p).div_ceil(d as u64);
        FastDiv {
            d,
            magic: magic as u32,
            shift: p,
            pad: 0,
        }
    }

    /// `(n / d, n % d)` for `n < 2^31`.
    #[inline(always)]
    pub const fn divmod(self, n: u32) -> (u32, u32) {
        let q = ((n as u64 * self.magic as u64) >> self.shift) as u32;
        (q, n - q * self.d)
    }
}

params! {
    /// The fused augmentation's random draw on the device ([`AUGMENT_DRAW`]): one block draws every
    /// image's crop box, angle and sigma from Philox4x32-10 and then advances the generator's
    /// counter, so each launch (and each replay of a graph that holds it) draws anew.
    ///
    /// Image `i` of the draw made at counter value `t` takes the four words of
    /// `philox4x32_10([t_lo, t_hi, i, 0], [seed_lo, seed_hi])`: the crop's top is
    /// `below(w0, max_top + 1)` and its left `below(w1, max_left + 1)`, the angle
    /// `fma(2 degrees, unit(w2), -degrees)`, the sigma `fma(sigma_span, unit(w3), sigma_lo)` (with
    /// image 0's `w3` for every image unless `per_image_sigma`); see `streamline_device::random`.
    /// The box is `[left, top, left + crop_w, top + crop_h]`.
    ///
    /// In a ragged batch (`extents` not null) the crop is drawn the same way in a square of
    /// `side x side` (`max_top = max_left = side - crop`), the square that covers the centre of
    /// image `i` (`h x w`, `m = min(h, w)`) scaled by `f = m / side` (an f32 division); the box
    /// is then `x1 = fma(left, f, (w - m) / 2)`, `y1 = fma(top, f, (h - m) / 2)`,
    /// `[x1, y1, fma(crop_w, f, x1), fma(crop_h, f, y1)]`: the crop a CPU loader takes after
    /// scaling the image to cover the square and cutting its centre, taken from the image itself.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct AugmentDrawParams {
        /// Device address of the generator's state, four u32: the seed (low word first), then the
        /// number of draws made so far (low word first), which the kernel advances by one.
        pub state: DevPtrMut<u32>,
        /// Device address of the draw: `batch` boxes `[x1, y1, x2, y2]`, then `batch` angles, then
        /// `batch` sigmas (f32), as [`AugmentParams`] reads them.
        pub draw: DevPtrMut<f32>,
        /// A ragged batch's extents ([`AugmentParams::extents`]); null for a batch of images of
        /// one size.
        pub extents: DevPtr<u32>,
        /// Images.
        pub batch: u32,
        /// Crop height and width.
        pub crop_h: u32,
        pub crop_w: u32,
        /// Largest top and left of a crop (`height - crop_h`, `width - crop_w`).
        pub max_top: u32,
        pub max_left: u32,
        /// Angles are drawn from `[-degrees, degrees)` (0: no rotation).
        pub degrees: f32,
        /// Sigmas are drawn from `[sigma_lo, sigma_lo + sigma_span)` (`sigma_span` 0: always
        /// `sigma_lo`).
        pub sigma_lo: f32,
        pub sigma_span: f32,
        /// 1: a sigma per image; 0: one sigma for the batch.
        pub per_image_sigma: u32,
        /// Side of the square a ragged batch's crops are drawn in (unused otherwise).
        pub side: u32,
    }
}

/// u32 words of one image's extent in a ragged batch's device array
/// ([`AugmentParams::extents`]): [`ImageExtent::words`].
pub const EXTENT_WORDS: usize = 4;

/// Where one image of a ragged batch lies: `height x width` pixels of every channel from byte
/// `offset` of the batch's buffer (NHWC, as image decoders give them, or NCHW). On the device
/// it is [`EXTENT_WORDS`] u32: the offset's low and high words, the height, the width.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageExtent {
    pub offset: u64,
    pub height: u32,
    pub width: u32,
}

impl ImageExtent {
    /// The extent as the device reads it.
    pub const fn words(self) -> [u32; EXTENT_WORDS] {
        [
            self.offset as u32,
            (self.offset >> 32) as u32,
            self.height,
            self.width,
        ]
    }

    /// The extent of its device words.
    pub const fn from_words(w: [u32; EXTENT_WORDS]) -> ImageExtent {
        ImageExtent {
            offset: (w[1] as u64) << 32 | w[0] as u64,
            height: w[2],
            width: w[3],
        }
    }

    /// Bytes of the image with `channels` channels (`None` where they overflow `u64`).
    pub const fn bytes(self, channels: u32) -> Option<u64> {
        match (self.height as u64).checked_mul(self.width as u64) {
            Some(px) => px.checked_mul(channels as u64),
            None => None,
        }
    }

    /// Whether the image is a non-empty one of at most `u32::MAX` bytes lying inside
    /// `x_bytes` bytes: what the fused augmentation reads, and otherwise makes NaN.
    pub const fn fits(self, channels: u32, x_bytes: u64) -> bool {
        match self.bytes(channels) {
            Some(b) => {
                self.height > 0
                    && self.width > 0
                    && b <= u32::MAX as u64
                    && self.offset <= x_bytes
                    && b <= x_bytes - self.offset
            }
            None => false,
        }
    }
}

/// Threads of the one block of [`AUGMENT_DRAW`].
pub const AUGMENT_DRAW_BLOCK: u32 = 256;

/// Whether the fused augmentation may take its dyadic kernels (`augment_dyadic_*`, nearest
/// rotation, up to 7 taps): each crop box (`[x1, y1, x2, y2]`) has whole-pixel corners inside
/// the `image` (height, width) and the crop's size (`crop`, height and width), and the crop is
/// enlarged exactly twofold to `out`. Then every crop pixel is the mean of a 2 x 2 input
/// block (or of fewer at the image's last row and column) and every resize weight a quarter,
/// so each resized value is a sum of at most nine input bytes with weights in 64ths: exact in
/// integers, and equal to what the f32 crop and resize give. The output's sides are at most
/// [`AUGMENT_DYADIC_MAX_SIDE`].
pub fn augment_dyadic(
    crop: (u32, u32),
    out: (u32, u32),
    image: (u32, u32),
    boxes: &[[f32; 4]],
) -> bool {
    let whole = |v: f32, max: u32| v >= 0.0 && v <= max as f32 && (v as u32) as f32 == v;
    out.0 == 2 * crop.0
        && out.1 == 2 * crop.1
        && out.0 <= AUGMENT_DYADIC_MAX_SIDE
        && out.1 <= AUGMENT_DYADIC_MAX_SIDE
        && boxes.iter().all(|b| {
            whole(b[0], image.1)
                && whole(b[1], image.0)
                && whole(b[2], image.1)
                && whole(b[3], image.0)
                && b[2] - b[0] == crop.1 as f32
                && b[3] - b[1] == crop.0 as f32
        })
}

/// Along one axis of a draw that [`augment_dyadic`] accepts: the resize's taps of resized index
/// `z` (`z < 2 crop`) composed with the crop's, for a box starting at whole input index
/// `start` (`start + crop <= n`) in a line of `n` input pixels. Returns the first input index
/// read and the weights of it and the next two, in eighths, which sum to 8.
///
/// The resize's source point `max(z / 2 - 1/4, 0)` blends crop pixels `m - 1` and `m` by 1/4
/// and 3/4 (`z = 2m > 0`), or `m` and `m + 1` by 3/4 and 1/4 (`z = 2m + 1`, the last crop
/// pixel standing in for the one past it; `z = 0` takes crop pixel 0 alone); crop pixel `p`
/// samples the input at `start + p + 1/2`, the mean of input pixels `start + p` and the next,
/// or input pixel `n - 1` alone where `start + p = n - 1` (`roi_align`'s clamp at the last
/// pixel). The kernels tabulate this once per resized row and column.
pub fn augment_dyadic_taps(z: u32, crop: u32, start: u32, n: u32) -> (u32, [u32; 3]) {
    let m = z / 2;
    let last = crop.saturating_sub(1);
    let next = |i: u32| if i < last { i + 1 } else { i };
    // Crop pixels `i0 <= i1` and their weights in quarters.
    let (i0, q0, i1, q1) = if z == 0 {
        (0, 4, 0, 0)
    } else if z & 1 == 0 {
        (m - 1, 1, next(m - 1), 3)
    } else {
        (m, 3, next(m), 1)
    };
    // The crop pixel on the input's last pixel, if any, gives it its whole weight.
    let edge = n.saturating_sub(1).saturating_sub(start);
    let split = |i: u32, q: u32| if i == edge { (2 * q, 0) } else { (q, q) };
    let ((a0, b0), (a1, b1)) = (split(i0, q0), split(i1, q1));
    let w = if i1 == i0 {
        [a0 + a1, b0 + b1, 0]
    } else {
        [a0, b0 + a1, b1]
    };
    (start + i0, w)
}

/// Whether [`augment_kernel`] takes the dyadic kernels for blur kernel size `k` and nearest
/// (or bilinear) rotation, `dyadic` saying whether the draw passes [`augment_dyadic`]: nearest
/// rotation and a blur of up to 7 taps.
pub const fn augment_takes_dyadic(k: u32, nearest: bool, dyadic: bool) -> bool {
    dyadic && nearest && augment_radius(k) == AUGMENT_FAST_RADIUS
}

/// The fused augmentation's kernel for `channels` (1 to [`AUGMENT_MAX_CHANNELS`]; more take
/// the 4-channel kernel, which the host never launches for them), blur kernel size `k`, strips
/// of `strip` tiles ([`AugmentParams::strip`]) and nearest or bilinear rotation
/// ([`AugmentParams::nearest`]), and for nearest rotation the dyadic kernels where `dyadic`
/// (the draw passes [`augment_dyadic`]). One kernel per channel count keeps each one's
/// registers to its own needs, and so does the 7-tap kernels' instance for one tile per block
/// and for each rotation; the wider kernels take strips of any length and either rotation.
pub const fn augment_kernel(
    channels: u32,
    k: u32,
    strip: u32,
    nearest: bool,
    dyadic: bool,
) -> Kernel<AugmentParams> {
    let fast = augment_radius(k) == AUGMENT_FAST_RADIUS;
    let dyadic = augment_takes_dyadic(k, nearest, dyadic);
    let family = match (fast, strip > 1, nearest) {
        (true, false, true) if dyadic => [
            AUGMENT_DYADIC_C1,
            AUGMENT_DYADIC_C2,
            AUGMENT_DYADIC_C3,
            AUGMENT_DYADIC_C4,
        ],
        (true, true, true) if dyadic => [
            AUGMENT_DYADIC_STRIP_C1,
            AUGMENT_DYADIC_STRIP_C2,
            AUGMENT_DYADIC_STRIP_C3,
            AUGMENT_DYADIC_STRIP_C4,
        ],
        (true, false, true) => [AUGMENT_C1, AUGMENT_C2, AUGMENT_C3, AUGMENT_C4],
        (true, true, true) => [
            AUGMENT_STRIP_C1,
            AUGMENT_STRIP_C2,
            AUGMENT_STRIP_C3,
            AUGMENT_STRIP_C4,
        ],
        (true, false, false) => [
            AUGMENT_BILINEAR_C1,
            AUGMENT_BILINEAR_C2,
            AUGMENT_BILINEAR_C3,
            AUGMENT_BILINEAR_C4,
        ],
        (true, true, false) => [
            AUGMENT_BILINEAR_STRIP_C1,
            AUGMENT_BILINEAR_STRIP_C2,
            AUGMENT_BILINEAR_STRIP_C3,
            AUGMENT_BILINEAR_STRIP_C4,
        ],
        (false, _, _) => [
            AUGMENT_WIDE_C1,
            AUGMENT_WIDE_C2,
            AUGMENT_WIDE_C3,
            AUGMENT_WIDE_C4,
        ],
    };
    family[match channels {
        1..=3 => channels as usize - 1,
        _ => 3,
    }]
}

/// The fused augmentation's kernel for a ragged batch ([`AugmentParams::extents`]) of
/// `channels` channels, blur kernel size `k` and nearest or bilinear rotation: the strip
/// kernels' instances that find each image's size and place where its crop stage is set up
/// (strips of any length, `strip` at least 1).
pub const fn augment_ragged_kernel(channels: u32, k: u32, nearest: bool) -> Kernel<AugmentParams> {
    let fast = augment_radius(k) == AUGMENT_FAST_RADIUS;
    let family = match (fast, nearest) {
        (true, true) => [
            AUGMENT_RAGGED_C1,
            AUGMENT_RAGGED_C2,
            AUGMENT_RAGGED_C3,
            AUGMENT_RAGGED_C4,
        ],
        (true, false) => [
            AUGMENT_RAGGED_BILINEAR_C1,
            AUGMENT_RAGGED_BILINEAR_C2,
            AUGMENT_RAGGED_BILINEAR_C3,
            AUGMENT_RAGGED_BILINEAR_C4,
        ],
        (false, _) => [
            AUGMENT_RAGGED_WIDE_C1,
            AUGMENT_RAGGED_WIDE_C2,
            AUGMENT_RAGGED_WIDE_C3,
            AUGMENT_RAGGED_WIDE_C4,
        ],
    };
    family[match channels {
        1..=3 => channels as usize - 1,
        _ => 3,
    }]
}

/// Blur radius `augment` runs with for kernel size `k`: [`AUGMENT_FAST_RADIUS`] up to 7 taps,
/// `k / 2` beyond.
pub const fn augment_radius(k: u32) -> u32 {
    if k / 2 <= AUGMENT_FAST_RADIUS {
        AUGMENT_FAST_RADIUS
    } else {
        k / 2
    }
}

/// Side of `augment`'s rotated tile (the output tile with the blur's halo) for kernel size `k`.
pub const fn augment_side(k: u32) -> u32 {
    TILE + 2 * augment_radius(k)
}

/// Row pitch, in pixels, of `augment`'s rotated tile: the side made odd, so that threads of a
/// warp on consecutive rows reach distinct banks.
pub const fn augment_pitch(k: u32) -> u32 {
    augment_side(k) | 1
}

/// Row pitch, in pixels, of `augment`'s horizontally blurred tile (odd, for the same reason).
pub const AUGMENT_HBUF_PITCH: u32 = TILE + 1;

/// Pixels of `augment`'s scratch region for kernel size `k`: the crop window
/// ([`AUGMENT_CROP_BUDGET`]) or the horizontally blurred tile, whichever is larger.
pub const fn augment_scratch_px(k: u32) -> u32 {
    let hbuf = augment_side(k) * AUGMENT_HBUF_PITCH;
    if hbuf > AUGMENT_CROP_BUDGET {
        hbuf
    } else {
        AUGMENT_CROP_BUDGET
    }
}

/// f32 slots of one pixel in `augment`'s shared memory for `channels` channels: the channel
/// count rounded up to a power of two, so that one shared access moves a pixel.
pub const fn augment_px_lanes(channels: u32) -> u32 {
    if channels <= 1 {
        1
    } else if channels == 2 {
        2
    } else {
        4
    }
}

/// Entries of each of `augment`'s two resize-tap tables (one per resized row and column a
/// window spans; a rotated span of `side` pixels covers fewer than `2 side + 4`).
pub const fn augment_taps_len(k: u32) -> u32 {
    2 * augment_side(k) + 4
}

/// Dynamic shared memory in bytes of `augment` for `channels` channels and kernel size `k`, in
/// this order: the per-block values ([`AUGMENT_SETUP_BYTES`]), the weights (padded to 16
/// bytes), the rotation's terms of each row and column of the rotated tile, the two resize-tap
/// and the two crop-tap tables (16 bytes an entry), the rotated tile, one region holding first
/// the crop window and then the horizontally blurred tile, and the staged input window. The
/// dyadic kernels (`dyadic`, see [`augment_takes_dyadic`]) have no crop-tap tables, and in
/// place of the input window the later tiles' staging ([`AUGMENT_DYADIC_STAGE_BYTES`]).
pub const fn augment_shared_bytes(channels: u32, k: u32, dyadic: bool) -> u32 {
    let px = 4 * augment_px_lanes(channels);
    let side = augment_side(k);
    let weights = 4 * (2 * augment_radius(k) + 1).next_multiple_of(4);
    let (crop_taps, input) = if dyadic {
        (0, AUGMENT_DYADIC_STAGE_BYTES)
    } else {
        (AUGMENT_CROP_TAPS, 4 * AUGMENT_INPUT_BUDGET)
    };
    AUGMENT_SETUP_BYTES
        + weights
        + 4 * 4 * side
        + 2 * 16 * (augment_taps_len(k) + crop_taps)
        + px * (side * augment_pitch(k) + augment_scratch_px(k))
        + input
}

/// An upper bound on the bytes that `augment`'s dyadic strips stage for a later tile of a strip
/// (its `TILE` new rows of the haloed tile, 7 taps) rotated by an angle of sine `sin` and cosine
/// `cos`, with entries of `entry` bytes. The new rows' source points span at most `31 |sin| +
/// 37 |cos|` resized rows (and `37 |sin| + 31 |cos|` columns), widened by the window's margins
/// (one resized line before, two after, and one for the rounding of the computed points); each
/// crop line covers two resized ones (one more for where the halves fall) and takes one more
/// input line; the columns start at a multiple of 4, entries come two per word of four columns
/// plus one a row, and the reads reach two rows past the last.
pub fn augment_dyadic_stage_bound(sin: f64, cos: f64, entry: u32) -> u32 {
    let span = |a: f64, b: f64| {
        let (i, j) = ((TILE - 1) as f64, (augment_side(7) - 1) as f64);
        // Resized lines `z0 ..= z1`: `z1 - z0 <= floor(extent) + 1` between the points' floors,
        // one more for their rounding, and the margins' three.
        let z = (i * a.abs() + j * b.abs()) as u32 + 5;
        // Crop lines `p0 ..= p1` with `p1 - p0 <= z / 2 + 2`, input lines one more.
        z / 2 + 4
    };
    let rows = span(cos, sin);
    let cols = span(sin, cos) + 3;
    let entries = 2 * cols.div_ceil(4);
    (rows + 2) * (entries + 1) * entry
}
