//! `rotate`: nearest and bilinear, NCHW or NHWC in and out, and the bilinear kernel that stages
//! its input window in shared memory.

use crate::{params, DevPtr, DevPtrMut};

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
pub const ROTATE_NHWC_IN: u32 = super::NHWC_IN;
/// `RotateParams::layout` bit: the output is NHWC.
pub const ROTATE_NHWC_OUT: u32 = super::NHWC_OUT;

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

/// Dynamic shared memory in bytes of a staged rotation of NHWC input of `channels` channels:
/// the per-block values, then the margin and the window with the channels interleaved.
pub const fn rotate_staged_nhwc_shared_bytes(channels: u32) -> u32 {
    ROTATE_STAGED_SETUP_BYTES + 4 * channels * (ROTATE_STAGED_MARGIN + ROTATE_STAGED_PLANE)
}
