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

mod augment;
mod blur;
mod elementwise;
mod resize;
mod roi_align;
mod rotate;

pub use augment::*;
pub use blur::*;
pub use elementwise::*;
pub use resize::*;
pub use roi_align::*;
pub use rotate::*;

use crate::declare;

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

/// Bit of a parameter struct's `layout` field: the input is NHWC (pixels with interleaved
/// channels, as image decoders and CV-CUDA lay images out) rather than NCHW.
pub const NHWC_IN: u32 = 1;
/// Bit of a parameter struct's `layout` field: the output is NHWC.
pub const NHWC_OUT: u32 = 2;

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
    /// Per-channel normalisation of NHWC images.
    pub const NORMALIZE_NHWC: Kernel<NormalizeParams> = Kernel::new("normalize_nhwc");
    /// ROI-align.
    pub const ROI_ALIGN: Kernel<RoiAlignParams> = Kernel::new("roi_align").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// ROI-align when every box has one sampling point per bin (the host checks).
    pub const ROI_ALIGN_ONE_SAMPLE: Kernel<RoiAlignParams> = Kernel::new("roi_align_one_sample").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`ROI_ALIGN`] from or to NHWC.
    pub const ROI_ALIGN_RELAYOUT: Kernel<RoiAlignParams> = Kernel::new("roi_align_relayout").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`ROI_ALIGN_ONE_SAMPLE`] from or to NHWC.
    pub const ROI_ALIGN_ONE_SAMPLE_RELAYOUT: Kernel<RoiAlignParams> = Kernel::new("roi_align_one_sample_relayout").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
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
    /// [`ROTATE_BILINEAR_STAGED`] from or to NHWC (`layout`; NHWC input staged with its
    /// channels interleaved, in [`rotate_staged_nhwc_shared_bytes`] bytes).
    pub const ROTATE_BILINEAR_STAGED_RELAYOUT: Kernel<RotateParams> = Kernel::new("rotate_bilinear_staged_relayout").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 6);
    /// Separable Gaussian blur.
    pub const GAUSSIAN_BLUR: Kernel<GaussianBlurParams> = Kernel::new("gaussian_blur");
    /// Separable Gaussian blur, square kernels up to radius [`BLUR_FAST_MAX_RADIUS`]: bounded to
    /// four blocks per SM (64 registers), which the two columns' windows and both weight
    /// vectors of radius 7 need without spilling.
    pub const GAUSSIAN_BLUR_FAST: Kernel<GaussianBlurParams> = Kernel::new("gaussian_blur_fast").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`GAUSSIAN_BLUR`] of NHWC images (each block blurs one channel of a tile).
    pub const GAUSSIAN_BLUR_NHWC: Kernel<GaussianBlurParams> = Kernel::new("gaussian_blur_nhwc");
    /// [`GAUSSIAN_BLUR_FAST`] of NHWC images.
    pub const GAUSSIAN_BLUR_FAST_NHWC: Kernel<GaussianBlurParams> = Kernel::new("gaussian_blur_fast_nhwc").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// Bilinear resize without antialiasing (also antialiased upscaling, where it is the same).
    /// Two columns per thread, 64 registers: four blocks per SM.
    pub const RESIZE_BILINEAR: Kernel<ResizeParams> = Kernel::new("resize_bilinear").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// Antialiased bilinear resize (triangle filter widened by the downscale factor).
    pub const RESIZE_BILINEAR_AA: Kernel<ResizeParams> = Kernel::new("resize_bilinear_aa");
    /// Nearest-neighbour resize (torch's `nearest`).
    pub const RESIZE_NEAREST: Kernel<ResizeParams> = Kernel::new("resize_nearest");
    /// [`RESIZE_BILINEAR`] from or to NHWC.
    pub const RESIZE_BILINEAR_RELAYOUT: Kernel<ResizeParams> = Kernel::new("resize_bilinear_relayout").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`RESIZE_BILINEAR_AA`] from or to NHWC.
    pub const RESIZE_BILINEAR_AA_RELAYOUT: Kernel<ResizeParams> = Kernel::new("resize_bilinear_aa_relayout");
    /// [`RESIZE_NEAREST`] from or to NHWC.
    pub const RESIZE_NEAREST_RELAYOUT: Kernel<ResizeParams> = Kernel::new("resize_nearest_relayout");
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
    /// [`AUGMENT_STRIP_C1`] on a ragged batch (`AugmentParams::extents`, each image of its own
    /// size and place).
    pub const AUGMENT_RAGGED_C1: Kernel<AugmentParams> = Kernel::new("augment_ragged_c1").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_STRIP_C2`], ragged.
    pub const AUGMENT_RAGGED_C2: Kernel<AugmentParams> = Kernel::new("augment_ragged_c2").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_STRIP_C3`], ragged.
    pub const AUGMENT_RAGGED_C3: Kernel<AugmentParams> = Kernel::new("augment_ragged_c3").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_STRIP_C4`], ragged.
    pub const AUGMENT_RAGGED_C4: Kernel<AugmentParams> = Kernel::new("augment_ragged_c4").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_BILINEAR_STRIP_C1`], ragged.
    pub const AUGMENT_RAGGED_BILINEAR_C1: Kernel<AugmentParams> = Kernel::new("augment_ragged_bilinear_c1").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_BILINEAR_STRIP_C2`], ragged.
    pub const AUGMENT_RAGGED_BILINEAR_C2: Kernel<AugmentParams> = Kernel::new("augment_ragged_bilinear_c2").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_BILINEAR_STRIP_C3`], ragged.
    pub const AUGMENT_RAGGED_BILINEAR_C3: Kernel<AugmentParams> = Kernel::new("augment_ragged_bilinear_c3").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_BILINEAR_STRIP_C4`], ragged.
    pub const AUGMENT_RAGGED_BILINEAR_C4: Kernel<AugmentParams> = Kernel::new("augment_ragged_bilinear_c4").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 4);
    /// [`AUGMENT_WIDE_C1`], ragged.
    pub const AUGMENT_RAGGED_WIDE_C1: Kernel<AugmentParams> = Kernel::new("augment_ragged_wide_c1").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 2);
    /// [`AUGMENT_WIDE_C2`], ragged.
    pub const AUGMENT_RAGGED_WIDE_C2: Kernel<AugmentParams> = Kernel::new("augment_ragged_wide_c2").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 2);
    /// [`AUGMENT_WIDE_C3`], ragged.
    pub const AUGMENT_RAGGED_WIDE_C3: Kernel<AugmentParams> = Kernel::new("augment_ragged_wide_c3").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 2);
    /// [`AUGMENT_WIDE_C4`], ragged.
    pub const AUGMENT_RAGGED_WIDE_C4: Kernel<AugmentParams> = Kernel::new("augment_ragged_wide_c4").with_bounds(IMAGE_BLOCK_X * IMAGE_BLOCK_Y, 2);
}
