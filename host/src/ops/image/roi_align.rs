//! `roi_align`: its boxes, options and checks.

use super::{check_len, column_grid, Shape, BLOCK};
use crate::engine::params;
use crate::error::Result;
use crate::runtime::Gpu;
use crate::spec::image::{check_boxes, check_roi_boxes, check_roi_options, RoiAlign};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use std::sync::{Arc, Mutex};
use streamline_abi::image::{RoiAlignParams, ROI_ALIGN, ROI_ALIGN_ONE_SAMPLE};

/// Boxes of `roi_align`, `[batch_index, x1, y1, x2, y2]` each, on the device.
pub struct RoiBoxes {
    dev: Arc<params::DeviceParams<f32>>,
    host: Vec<[f32; 5]>,
    /// The outcome of the last call's box checks ([`RoiBoxes::against`]) and what it depended
    /// on: a pipeline calls with the same batch size and options every time, and then the
    /// checks, a pass over every box, are not repeated before each launch.
    checked: Mutex<Option<(usize, RoiAlign, bool)>>,
}

impl RoiBoxes {
    /// Checks boxes without uploading them (see [`check_boxes`]).
    pub fn check(boxes: &[[f32; 5]]) -> Result<()> {
        check_boxes(boxes)
    }

    /// Checks `boxes` like [`RoiBoxes::check`] and uploads them.
    pub fn upload(stream: &Arc<CudaStream>, boxes: &[[f32; 5]]) -> Result<RoiBoxes> {
        Self::check(boxes)?;
        let flat: Vec<f32> = boxes.iter().flatten().copied().collect();
        let dev = params::upload(stream, &flat)?;
        Ok(RoiBoxes {
            dev,
            host: boxes.to_vec(),
            checked: Mutex::new(None),
        })
    }

    /// [`check_against`] for these boxes, a batch of `n` images and options `o`, remembering
    /// the last success.
    fn against(&self, n: usize, o: &RoiAlign) -> Result<bool> {
        // A poisoned lock only means another thread panicked while holding it; the value is a
        // plain cache entry, still valid or absent.
        let mut last = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((ln, lo, one)) = *last {
            if ln == n && lo == *o {
                return Ok(one);
            }
        }
        let one = check_roi_boxes(&self.host, n, o)?;
        *last = Some((n, *o, one));
        Ok(one)
    }

    /// The boxes as uploaded.
    pub fn boxes(&self) -> &[[f32; 5]] {
        &self.host
    }
}

/// `torchvision.ops.roi_align(x, boxes, (out_h, out_w), spatial_scale, sampling_ratio,
/// aligned)`: `y` is `boxes x c x out_h x out_w`.
pub fn roi_align(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    x: &impl DevicePtr<f32>,
    boxes: &RoiBoxes,
    o: RoiAlign,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    // The boxes were checked when uploaded; what depends on this call is checked here.
    let out = check_roi_options(shape, boxes.host.len(), &o)?;
    let one_sample = boxes.against(shape.n, &o)?;
    check_len("x", x.len(), shape)?;
    check_len("y", y.len(), out)?;
    // A box's setup costs as much as several bins, so far fewer threads per row pay (measured
    // on an H200).
    let (grid, rows) = column_grid(
        gpu,
        "output_size",
        (o.out_h, o.out_w),
        boxes.host.len(),
        128,
    )?;
    let (xp, _r) = x.device_ptr(stream);
    let (bp, _b) = boxes.dev.device_ptr(stream);
    let (yp, _w) = y.device_ptr_mut(stream);
    let p = RoiAlignParams {
        x: xp,
        boxes: bp,
        y: yp,
        batch: shape.n as u32,
        channels: shape.c as u32,
        height: shape.h as u32,
        width: shape.w as u32,
        num_boxes: boxes.host.len() as u32,
        out_h: o.out_h as u32,
        out_w: o.out_w as u32,
        sampling_ratio: o.sampling_ratio,
        spatial_scale: o.spatial_scale,
        aligned: o.aligned as u32,
        rows,
        pad: 0,
    };
    // The sampling grid is computed as the kernels do (same f32 operations, no contraction), so
    // a launch whose every box samples once per bin can take the one-sample kernel.
    let kernel = if one_sample {
        ROI_ALIGN_ONE_SAMPLE
    } else {
        ROI_ALIGN
    };
    // SAFETY: lengths checked against the shapes; the boxes were validated (batch index in
    // range, bounded sampling grid); the grid covers every output.
    unsafe { gpu.launch(stream, kernel, grid, BLOCK, p) }
}
