//! `resize`: bilinear (antialiased or not) and nearest, NCHW or NHWC in and out.

use crate::{params, DevPtr, DevPtrMut};

params! {
    /// `resize_*`: every plane of `planes` planes resized from `in_h x in_w` to `out_h x out_w`
    /// (NCHW), and the `_relayout` twins in the layouts `layout` names.
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
        /// Layouts: [`NHWC_IN`](super::NHWC_IN) and [`NHWC_OUT`](super::NHWC_OUT) bits (0: NCHW
        /// in and out). Read by the `_relayout` kernels only, which take 0 as NHWC on both sides.
        pub layout: u32,
    }
}
