//! Image kernels on NCHW batches: uint8 to float, ROI-align crop, rotation, Gaussian blur,
//! resize, per-channel normalisation, and seed 003's whole augmentation fused into one kernel.
//!
//! All images are dense NCHW (`n` images of `c` planes of `h` rows of `w` values). Per-image
//! parameters (boxes, angles, sigmas) live in device arrays, so one launch covers a batch whose
//! images each get their own random parameters. The host validates every array before it is
//! uploaded; the kernels stay memory-safe even for values it would refuse (they never index
//! outside the arrays whatever the parameters hold).
//!
//! Geometry: a plane holds at most `i32::MAX` values (`h * w <= 2^31 - 1`) and an image at most
//! `u32::MAX` (`c * h * w <= 2^32 - 1`), so coordinates fit `i32` and offsets inside an image
//! `u32` on the device; offsets of images in a batch are computed in 64 bits.

use crate::{declare, params, DevPtr, DevPtrMut, Kernel};

/// Threads per block along x of the per-pixel image kernels (one warp along a row).
pub const IMAGE_BLOCK_X: u32 = 32;
/// Threads per block along y of the per-pixel image kernels.
pub const IMAGE_BLOCK_Y: u32 = 8;
/// Most output rows one thread of the per-pixel kernels (resize, rotate, roi_align) computes.
/// The host picks the count per launch (`rows` in their parameters): a thread's per-image and
/// per-column setup serves every one of its rows, while fewer rows per thread give a small
/// batch more threads to spread its memory latency over.
pub const MAX_ROWS_PER_THREAD: u32 = 8;
/// Side of the square output tile of the blur and the fused augmentation.
pub const TILE: u32 = 32;
/// Largest Gaussian kernel size (odd) of `gaussian_blur` and `augment`.
pub const MAX_KERNEL_SIZE: u32 = 63;
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
/// Threads per block of the elementwise kernels (`to_float`, `normalize`).
pub const ELEMENTWISE_BLOCK: u32 = 256;
/// Largest number of bilinear samples per output bin of `roi_align` (`grid_h * grid_w`); the
/// host refuses boxes that would need more, so a huge box cannot stall the device.
pub const ROI_MAX_SAMPLES_PER_BIN: u32 = 1 << 16;

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

params! {
    /// `roi_align`: `torchvision.ops.roi_align` over `num_boxes` boxes `[batch_index, x1, y1, x2,
    /// y2]` (f32) into `num_boxes x channels x out_h x out_w`.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct RoiAlignParams {
        /// Device address of the f32 input, `batch x channels x height x width`.
        pub x: DevPtr<f32>,
        /// Device address of the boxes, `num_boxes x 5` f32.
        pub boxes: DevPtr<f32>,
        /// Device address of the f32 output.
        pub y: DevPtrMut<f32>,
        /// Images in the input.
        pub batch: u32,
        /// Channels per image.
        pub channels: u32,
        /// Input height.
        pub height: u32,
        /// Input width.
        pub width: u32,
        /// Number of boxes.
        pub num_boxes: u32,
        /// Output height (`pooled_height`).
        pub out_h: u32,
        /// Output width (`pooled_width`).
        pub out_w: u32,
        /// Samples per bin along each axis; `<= 0` means adaptive (`ceil(roi_size / out_size)`).
        pub sampling_ratio: i32,
        /// Factor from box coordinates to input pixels.
        pub spatial_scale: f32,
        /// 1: shift box coordinates by -0.5 pixel (`aligned=True`), 0: not.
        pub aligned: u32,
        /// Output rows per thread, `1..=MAX_ROWS_PER_THREAD` (the grid is made for it).
        pub rows: u32,
        /// Zero (keeps the layout free of implicit padding).
        pub pad: u32,
    }
}

params! {
    /// The gradient of `roi_align` with respect to its input ([`ROI_ALIGN_BACKWARD`] and
    /// [`ROI_ALIGN_BACKWARD_DETERMINISTIC`]): every bin's gradient spread over the pixels its
    /// samples read, with the forward's bilinear weights divided by the bin's sample count.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct RoiAlignBackwardParams {
        /// Device address of the output's gradient, `num_boxes x channels x out_h x out_w` f32.
        pub grad_y: DevPtr<f32>,
        /// Device address of the boxes, `num_boxes x 5` f32.
        pub boxes: DevPtr<f32>,
        /// Device address of the input's gradient, `batch x channels x height x width` f32.
        pub grad_x: DevPtrMut<f32>,
        /// Images in the input.
        pub batch: u32,
        /// Channels per image.
        pub channels: u32,
        /// Input height.
        pub height: u32,
        /// Input width.
        pub width: u32,
        /// Number of boxes.
        pub num_boxes: u32,
        /// Output height.
        pub out_h: u32,
        /// Output width.
        pub out_w: u32,
        /// Samples per bin along each axis; `<= 0` means adaptive, as in the forward.
        pub sampling_ratio: i32,
        /// Factor from box coordinates to input pixels.
        pub spatial_scale: f32,
        /// 1: `aligned=True`, 0: not.
        pub aligned: u32,
    }
}

/// Threads per block of the `roi_align` backward kernels.
pub const ROI_ALIGN_BACKWARD_BLOCK: u32 = 256;

params! {
    /// `rotate_nearest` / `rotate_bilinear` (NCHW in and out) and their `_relayout` twins (the
    /// layouts `layout` names): each image rotated by its own angle about its centre.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct RotateParams {
        /// Device address of the f32 input, `batch x channels x height x width` (NCHW) or
        /// `batch x height x width x channels` (NHWC, see `layout`).
        pub x: DevPtr<f32>,
        /// Device address of the f32 output (same shape, either layout).
        pub y: DevPtrMut<f32>,
        /// Device address of `batch` f32 angles in degrees, counter-clockwise.
        pub angles: DevPtr<f32>,
        /// Images.
        pub batch: u32,
        /// Channels per image.
        pub channels: u32,
        /// Height.
        pub height: u32,
        /// Width.
        pub width: u32,
        /// Fill value for pixels whose source lies outside (used when `has_fill == 1`).
        pub fill: f32,
        /// 0: zero padding (torchvision's `fill=None`), 1: torchvision's masked fill with `fill`.
        pub has_fill: u32,
        /// Output rows per thread, `1..=MAX_ROWS_PER_THREAD` (the grid is made for it).
        pub rows: u32,
        /// Layouts: [`ROTATE_NHWC_IN`] and [`ROTATE_NHWC_OUT`] bits (0: NCHW in and out). Read
        /// by the `_relayout` kernels only, which take 0 as NHWC on both sides.
        pub layout: u32,
    }
}

/// `RotateParams::layout` bit: the input is NHWC (pixels with interleaved channels).
pub const ROTATE_NHWC_IN: u32 = 1;
/// `RotateParams::layout` bit: the output is NHWC.
pub const ROTATE_NHWC_OUT: u32 = 2;

/// Output tile side of the staged rotation (`rotate_bilinear_staged`): a block rotates a 32 x 32
/// tile of one image from the input window its source points read, copied to shared memory
/// first.
pub const ROTATE_STAGED_TILE: u32 = 32;
/// Most input rows the window of a staged rotation's tile spans. The tile's source points span
/// at most `31 (|cos| + |sin|) <= 31 sqrt(2) < 44` pixels along each axis; flooring both ends
/// and adding the row of the last points' south neighbours makes at most 46 rows.
pub const ROTATE_STAGED_ROWS: u32 = 48;
/// Row pitch of the staged window in f32 (a multiple of 4, so that each row starts 16-byte
/// aligned for the 16-byte copies). A window row holds the 46 columns above rounded out to
/// whole 16-byte chunks of the input row: at most 13 chunks, 52 values.
pub const ROTATE_STAGED_PITCH: u32 = 52;
/// Row pitch of the staged window in f32 where the block's warps take output rows (where an
/// output row runs within 22.5 degrees of an input row): a multiple of 32, so that a warp's
/// reads along a line near an input row fall on distinct banks wherever it crosses a row.
pub const ROTATE_STAGED_ROW_PITCH: u32 = 64;
/// Most input rows the window of such a tile spans: its source points span at most `31 (cos
/// 22.5 + sin 22.5) < 41` pixels along each axis, so at most 43 rows, and one more leaves room
/// for the source points' rounding on large images.
pub const ROTATE_STAGED_ROW_ROWS: u32 = 44;
/// Bytes of the staged rotation's per-block values (the image's rotation, its window and the
/// columns each window row is read in) at the start of their shared memory.
pub const ROTATE_STAGED_SETUP_BYTES: u32 = 96;
/// Most channels the staged rotation takes (its window holds every channel).
pub const ROTATE_STAGED_MAX_CHANNELS: u32 = 4;

/// Values of margin before the first window of a staged rotation: a row and a 16-byte chunk,
/// so that a neighbour one row above and one column left of the window is still a read inside
/// the buffer (which the kernel never makes for a neighbour inside the image).
pub const ROTATE_STAGED_MARGIN: u32 = ROTATE_STAGED_ROW_PITCH + 4;

/// Values of each channel's staged window: room for the rows of either pitch and one more (the
/// extra row keeps a south neighbour's read inside the buffer whatever the indices).
pub const ROTATE_STAGED_PLANE: u32 = {
    let rows = (ROTATE_STAGED_ROWS + 1) * ROTATE_STAGED_PITCH;
    let row_shaped = (ROTATE_STAGED_ROW_ROWS + 1) * ROTATE_STAGED_ROW_PITCH;
    if rows > row_shaped {
        rows
    } else {
        row_shaped
    }
};

/// Dynamic shared memory in bytes of a staged rotation of `channels` planes: the per-block
/// values, the margin, then each channel's window.
pub const fn rotate_staged_shared_bytes(channels: u32) -> u32 {
    ROTATE_STAGED_SETUP_BYTES + 4 * ROTATE_STAGED_MARGIN + 4 * channels * ROTATE_STAGED_PLANE
}

params! {
    /// `gaussian_blur`: separable Gaussian blur with reflect padding, kernel `kx` wide and `ky`
    /// tall (both odd).
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct GaussianBlurParams {
        /// Device address of the f32 input, `batch x channels x height x width`.
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
    }
}

params! {
    /// `resize_*`: every plane of `planes` planes resized from `in_h x in_w` to `out_h x out_w`.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct ResizeParams {
        /// Device address of the f32 input.
        pub x: DevPtr<f32>,
        /// Device address of the f32 output.
        pub y: DevPtrMut<f32>,
        /// Images.
        pub batch: u32,
        /// Channels per image.
        pub channels: u32,
        /// Input height.
        pub in_h: u32,
        /// Input width.
        pub in_w: u32,
        /// Output height.
        pub out_h: u32,
        /// Output width.
        pub out_w: u32,
        /// `in_h / out_h` in f32, torch's source-coordinate scale.
        pub scale_h: f32,
        /// `in_w / out_w` in f32.
        pub scale_w: f32,
        /// Output rows per thread, `1..=MAX_ROWS_PER_THREAD` (the grid is made for it).
        pub rows: u32,
        /// Zero (keeps the layout free of implicit padding).
        pub pad: u32,
    }
}

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
        /// Images.
        pub batch: u32,
        /// Channels per image (at most [`AUGMENT_MAX_CHANNELS`]).
        pub channels: u32,
        /// Input height.
        pub height: u32,
        /// Input width.
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
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct AugmentDrawParams {
        /// Device address of the generator's state, four u32: the seed (low word first), then the
        /// number of draws made so far (low word first), which the kernel advances by one.
        pub state: DevPtrMut<u32>,
        /// Device address of the draw: `batch` boxes `[x1, y1, x2, y2]`, then `batch` angles, then
        /// `batch` sigmas (f32), as [`AugmentParams`] reads them.
        pub draw: DevPtrMut<f32>,
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
        /// Zero (keeps the struct free of implicit padding).
        pub pad: u32,
    }
}

/// Threads of the one block of [`AUGMENT_DRAW`].
pub const AUGMENT_DRAW_BLOCK: u32 = 256;

declare! {
    /// The fused augmentation's random draw on the device: one block of
    /// [`AUGMENT_DRAW_BLOCK`] threads.
    pub const AUGMENT_DRAW: Kernel<AugmentDrawParams> = Kernel::new("augment_draw").with_bounds(AUGMENT_DRAW_BLOCK, 1);
    /// uint8 to f32.
    pub const TO_FLOAT: Kernel<ToFloatParams> = Kernel::new("to_float");
    /// uint8 to f32 from one layout to the other (NHWC to NCHW or back).
    pub const TO_FLOAT_RELAYOUT: Kernel<ToFloatRelayoutParams> = Kernel::new("to_float_relayout");
    /// Per-channel normalisation.
    pub const NORMALIZE: Kernel<NormalizeParams> = Kernel::new("normalize");
    /// ROI-align.
    pub const ROI_ALIGN: Kernel<RoiAlignParams> = Kernel::new("roi_align").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// ROI-align when every box has one sampling point per bin (the host checks).
    pub const ROI_ALIGN_ONE_SAMPLE: Kernel<RoiAlignParams> = Kernel::new("roi_align_one_sample").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// `roi_align`'s input gradient as torchvision computes it: one thread per output
    /// gradient value, added to the input gradient's pixels with atomic adds (the host zeroes
    /// it first), so the order of the additions, and the last bits, vary from run to run.
    pub const ROI_ALIGN_BACKWARD: Kernel<RoiAlignBackwardParams> = Kernel::new("roi_align_backward").with_bounds(ROI_ALIGN_BACKWARD_BLOCK, 1);
    /// `roi_align`'s input gradient without atomics: one thread per input gradient value sums
    /// what every box's bins give it in a fixed order, the same bits on every run.
    pub const ROI_ALIGN_BACKWARD_DETERMINISTIC: Kernel<RoiAlignBackwardParams> = Kernel::new("roi_align_backward_deterministic").with_bounds(ROI_ALIGN_BACKWARD_BLOCK, 1);
    /// Rotation, nearest neighbour.
    pub const ROTATE_NEAREST: Kernel<RotateParams> = Kernel::new("rotate_nearest");
    /// Rotation, bilinear.
    pub const ROTATE_BILINEAR: Kernel<RotateParams> = Kernel::new("rotate_bilinear");
    /// Rotation, nearest neighbour, from or to NHWC.
    pub const ROTATE_NEAREST_RELAYOUT: Kernel<RotateParams> = Kernel::new("rotate_nearest_relayout");
    /// Rotation, bilinear, from or to NHWC.
    pub const ROTATE_BILINEAR_RELAYOUT: Kernel<RotateParams> = Kernel::new("rotate_bilinear_relayout");
    /// Rotation, bilinear, NCHW, each tile's input window staged in shared memory (planes
    /// 16-byte aligned, widths a multiple of 4, at most [`ROTATE_STAGED_MAX_CHANNELS`] channels;
    /// grid `(tiles_x, tiles_y, batch)` of [`ROTATE_STAGED_TILE`] tiles). Six blocks per SM: 40
    /// registers, no spills.
    pub const ROTATE_BILINEAR_STAGED: Kernel<RotateParams> = Kernel::new("rotate_bilinear_staged").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 6);
    /// Separable Gaussian blur.
    pub const GAUSSIAN_BLUR: Kernel<GaussianBlurParams> = Kernel::new("gaussian_blur");
    /// Separable Gaussian blur, square kernels up to radius [`BLUR_FAST_MAX_RADIUS`]: bounded to
    /// four blocks per SM (64 registers), which the two columns' windows and both weight
    /// vectors of radius 7 need without spilling.
    pub const GAUSSIAN_BLUR_FAST: Kernel<GaussianBlurParams> = Kernel::new("gaussian_blur_fast").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// Bilinear resize without antialiasing (also antialiased upscaling, where it is the same).
    /// Two columns per thread, 64 registers: four blocks per SM.
    pub const RESIZE_BILINEAR: Kernel<ResizeParams> = Kernel::new("resize_bilinear").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// Antialiased bilinear resize (triangle filter widened by the downscale factor).
    pub const RESIZE_BILINEAR_AA: Kernel<ResizeParams> = Kernel::new("resize_bilinear_aa");
    /// Nearest-neighbour resize (torch's `nearest`).
    pub const RESIZE_NEAREST: Kernel<ResizeParams> = Kernel::new("resize_nearest");
    /// Seed 003's whole transform in one kernel: 1 channel, blur kernels of up to 7 taps, nearest
    /// rotation (each rotation has kernels of its own: the other's code costs a kernel
    /// registers and time even where it never runs).
    pub const AUGMENT_C1: Kernel<AugmentParams> = Kernel::new("augment_c1").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// 2 channels, up to 7 taps.
    pub const AUGMENT_C2: Kernel<AugmentParams> = Kernel::new("augment_c2").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// 3 channels, up to 7 taps.
    pub const AUGMENT_C3: Kernel<AugmentParams> = Kernel::new("augment_c3").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// 4 channels, up to 7 taps.
    pub const AUGMENT_C4: Kernel<AugmentParams> = Kernel::new("augment_c4").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// 1 channel, up to 7 taps, strips of tiles (`strip` of at least 1).
    pub const AUGMENT_STRIP_C1: Kernel<AugmentParams> = Kernel::new("augment_strip_c1").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// 2 channels, up to 7 taps, strips of tiles.
    pub const AUGMENT_STRIP_C2: Kernel<AugmentParams> = Kernel::new("augment_strip_c2").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// 3 channels, up to 7 taps, strips of tiles.
    pub const AUGMENT_STRIP_C3: Kernel<AugmentParams> = Kernel::new("augment_strip_c3").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// 4 channels, up to 7 taps, strips of tiles.
    pub const AUGMENT_STRIP_C4: Kernel<AugmentParams> = Kernel::new("augment_strip_c4").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_C1`] with bilinear rotation.
    pub const AUGMENT_BILINEAR_C1: Kernel<AugmentParams> = Kernel::new("augment_bilinear_c1").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// [`AUGMENT_C2`] with bilinear rotation.
    pub const AUGMENT_BILINEAR_C2: Kernel<AugmentParams> = Kernel::new("augment_bilinear_c2").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// [`AUGMENT_C3`] with bilinear rotation.
    pub const AUGMENT_BILINEAR_C3: Kernel<AugmentParams> = Kernel::new("augment_bilinear_c3").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// [`AUGMENT_C4`] with bilinear rotation.
    pub const AUGMENT_BILINEAR_C4: Kernel<AugmentParams> = Kernel::new("augment_bilinear_c4").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// [`AUGMENT_STRIP_C1`] with bilinear rotation.
    pub const AUGMENT_BILINEAR_STRIP_C1: Kernel<AugmentParams> = Kernel::new("augment_bilinear_strip_c1").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_STRIP_C2`] with bilinear rotation.
    pub const AUGMENT_BILINEAR_STRIP_C2: Kernel<AugmentParams> = Kernel::new("augment_bilinear_strip_c2").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_STRIP_C3`] with bilinear rotation.
    pub const AUGMENT_BILINEAR_STRIP_C3: Kernel<AugmentParams> = Kernel::new("augment_bilinear_strip_c3").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_STRIP_C4`] with bilinear rotation.
    pub const AUGMENT_BILINEAR_STRIP_C4: Kernel<AugmentParams> = Kernel::new("augment_bilinear_strip_c4").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_C1`] with the crop and resize composed in integers: for a whole-pixel crop box
    /// of the crop's size inside the image, enlarged exactly twofold (see [`augment_dyadic`]).
    pub const AUGMENT_DYADIC_C1: Kernel<AugmentParams> = Kernel::new("augment_dyadic_c1").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// [`AUGMENT_C2`], dyadic.
    pub const AUGMENT_DYADIC_C2: Kernel<AugmentParams> = Kernel::new("augment_dyadic_c2").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// [`AUGMENT_C3`], dyadic.
    pub const AUGMENT_DYADIC_C3: Kernel<AugmentParams> = Kernel::new("augment_dyadic_c3").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// [`AUGMENT_C4`], dyadic.
    pub const AUGMENT_DYADIC_C4: Kernel<AugmentParams> = Kernel::new("augment_dyadic_c4").with_bounds(IMAGE_BLOCK_X * AUGMENT_ONE_TILE_WARPS, 4);
    /// [`AUGMENT_STRIP_C1`], dyadic.
    pub const AUGMENT_DYADIC_STRIP_C1: Kernel<AugmentParams> = Kernel::new("augment_dyadic_strip_c1").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_STRIP_C2`], dyadic.
    pub const AUGMENT_DYADIC_STRIP_C2: Kernel<AugmentParams> = Kernel::new("augment_dyadic_strip_c2").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_STRIP_C3`], dyadic.
    pub const AUGMENT_DYADIC_STRIP_C3: Kernel<AugmentParams> = Kernel::new("augment_dyadic_strip_c3").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_STRIP_C4`], dyadic.
    pub const AUGMENT_DYADIC_STRIP_C4: Kernel<AugmentParams> = Kernel::new("augment_dyadic_strip_c4").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// 1 channel, blur kernels of 9 taps or more (strips of tiles, `strip` of at least 1), either
    /// rotation.
    pub const AUGMENT_WIDE_C1: Kernel<AugmentParams> = Kernel::new("augment_wide_c1").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 2);
    /// 2 channels, 9 taps or more.
    pub const AUGMENT_WIDE_C2: Kernel<AugmentParams> = Kernel::new("augment_wide_c2").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 2);
    /// 3 channels, 9 taps or more.
    pub const AUGMENT_WIDE_C3: Kernel<AugmentParams> = Kernel::new("augment_wide_c3").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 2);
    /// 4 channels, 9 taps or more.
    pub const AUGMENT_WIDE_C4: Kernel<AugmentParams> = Kernel::new("augment_wide_c4").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 2);
}

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
