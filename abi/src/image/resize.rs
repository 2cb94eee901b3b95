//! `resize`: bilinear (antialiased or not) and nearest.

use crate::{params, DevPtr, DevPtrMut};

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
