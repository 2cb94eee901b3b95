//! `roi_align` (torchvision's) and its input gradient, atomic and deterministic.

use crate::{params, DevPtr, DevPtrMut};

/// Largest number of bilinear samples per output bin of `roi_align` (`grid_h * grid_w`); the
/// host refuses boxes that would need more, so a huge box cannot stall the device.
pub const ROI_MAX_SAMPLES_PER_BIN: u32 = 1 << 16;

params! {
    /// `roi_align`: `torchvision.ops.roi_align` over `num_boxes` boxes `[batch_index, x1, y1, x2,
    /// y2]` (f32) into `num_boxes x channels x out_h x out_w` (NCHW, or NHWC on either side in
    /// the `_relayout` kernels).
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
        /// Layouts: [`NHWC_IN`](super::NHWC_IN) and [`NHWC_OUT`](super::NHWC_OUT) bits (0: NCHW
        /// in and out). Read by the `_relayout` kernels only, which take 0 as NHWC on both sides.
        pub layout: u32,
    }
}

params! {
    /// The gradient of `roi_align` with respect to its input ([`ROI_ALIGN_BACKWARD`](super::ROI_ALIGN_BACKWARD) and
    /// [`ROI_ALIGN_BACKWARD_DETERMINISTIC`](super::ROI_ALIGN_BACKWARD_DETERMINISTIC)): every bin's gradient spread over the pixels its
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
