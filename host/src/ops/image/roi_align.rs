//! `roi_align`: its boxes, options and checks.

use super::{check_len, column_grid, Shape, BLOCK};
use crate::error::{DriverContext, Error, Result};
use crate::runtime::Gpu;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use std::sync::{Arc, Mutex};
use streamline_abi::image::{
    RoiAlignParams, ROI_ALIGN, ROI_ALIGN_ONE_SAMPLE, ROI_MAX_SAMPLES_PER_BIN,
};

/// Boxes of `roi_align`, `[batch_index, x1, y1, x2, y2]` each, on the device.
pub struct RoiBoxes {
    dev: CudaSlice<f32>,
    host: Vec<[f32; 5]>,
    /// The outcome of the last call's box checks ([`RoiBoxes::against`]) and what it depended
    /// on: a pipeline calls with the same batch size and options every time, and then the
    /// checks, a pass over every box, are not repeated before each launch.
    checked: Mutex<Option<(usize, RoiAlign, bool)>>,
}

impl RoiBoxes {
    /// Checks boxes without uploading them: each with a finite integral batch index `>= 0`,
    /// finite coordinates and `x1 <= x2`, `y1 <= y2`.
    pub fn check(boxes: &[[f32; 5]]) -> Result<()> {
        if boxes.is_empty() {
            return Err(Error::arg("boxes", "needs at least one box"));
        }
        for (i, b) in boxes.iter().enumerate() {
            if let Some(v) = b.iter().find(|v| !v.is_finite()) {
                return Err(Error::arg(
                    "boxes",
                    format!("box {i} holds {v}; every value must be finite"),
                ));
            }
            if b[0] < 0.0 || b[0].fract() != 0.0 {
                return Err(Error::arg(
                    "boxes",
                    format!("box {i}: batch index {} must be a whole number >= 0", b[0]),
                ));
            }
            if b[3] < b[1] || b[4] < b[2] {
                return Err(Error::arg(
                    "boxes",
                    format!(
                        "box {i} = [{}, {}, {}, {}]: needs x1 <= x2 and y1 <= y2",
                        b[1], b[2], b[3], b[4]
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks `boxes` like [`RoiBoxes::check`] and uploads them.
    pub fn upload(stream: &Arc<CudaStream>, boxes: &[[f32; 5]]) -> Result<RoiBoxes> {
        Self::check(boxes)?;
        let flat: Vec<f32> = boxes.iter().flatten().copied().collect();
        let dev = stream.clone_htod(&flat).op("cuMemcpyHtoDAsync")?;
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
        let one = check_against(&self.host, n, o)?;
        *last = Some((n, *o, one));
        Ok(one)
    }

    /// The boxes as uploaded.
    pub fn boxes(&self) -> &[[f32; 5]] {
        &self.host
    }
}

/// Options of `roi_align` (torchvision's arguments).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoiAlign {
    /// Output height.
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
    /// Box coordinates times this give input pixels.
    pub spatial_scale: f32,
    /// Samples per bin along each axis; `<= 0`: adaptive, `ceil(roi_size / out_size)`.
    pub sampling_ratio: i32,
    /// Shift the box by -0.5 pixel (pixel-centre convention).
    pub aligned: bool,
}

/// The sampling grid torchvision uses for `b` (f32 arithmetic as on the device):
/// `(grid_h, grid_w)`.
pub fn roi_sampling_grid(b: &[f32; 5], o: &RoiAlign) -> (i64, i64) {
    let off = if o.aligned { 0.5f32 } else { 0.0 };
    let mut rw = (b[3] * o.spatial_scale - off) - (b[1] * o.spatial_scale - off);
    let mut rh = (b[4] * o.spatial_scale - off) - (b[2] * o.spatial_scale - off);
    if !o.aligned {
        rw = rw.max(1.0);
        rh = rh.max(1.0);
    }
    if o.sampling_ratio > 0 {
        (o.sampling_ratio as i64, o.sampling_ratio as i64)
    } else {
        (
            (rh / o.out_h as f32).ceil() as i64,
            (rw / o.out_w as f32).ceil() as i64,
        )
    }
}

/// The checks of [`roi_align`] that need no device: the input shape, the output size, the
/// options, and every box (batch index inside `0..n`, bounded sampling grid). Returns the
/// output shape.
pub fn check_roi_align(shape: Shape, boxes: &[[f32; 5]], o: &RoiAlign) -> Result<Shape> {
    RoiBoxes::check(boxes)?;
    let out = check_options(shape, boxes.len(), o)?;
    check_against(boxes, shape.n, o)?;
    Ok(out)
}

/// The shape and option checks of [`check_roi_align`]; returns the output shape.
fn check_options(shape: Shape, num_boxes: usize, o: &RoiAlign) -> Result<Shape> {
    shape.check("x")?;
    let out = Shape::new(num_boxes, shape.c, o.out_h, o.out_w);
    if o.out_h == 0 || o.out_w == 0 {
        return Err(Error::arg(
            "output_size",
            format!("{}x{}: both must be at least 1", o.out_h, o.out_w),
        ));
    }
    out.check("output_size")?;
    if !o.spatial_scale.is_finite() || o.spatial_scale <= 0.0 {
        return Err(Error::arg(
            "spatial_scale",
            format!("{}: must be finite and > 0", o.spatial_scale),
        ));
    }
    if o.sampling_ratio > 256 {
        return Err(Error::arg(
            "sampling_ratio",
            format!("{}: at most 256 (<= 0 means adaptive)", o.sampling_ratio),
        ));
    }
    Ok(out)
}

/// The checks of well-formed boxes against a batch of `n` images and the options, in one pass:
/// batch index inside `0..n`, sampling grid at most [`ROI_MAX_SAMPLES_PER_BIN`] points. Returns
/// whether every box samples once per bin (the one-sample kernel's condition).
fn check_against(boxes: &[[f32; 5]], n: usize, o: &RoiAlign) -> Result<bool> {
    let mut one = true;
    for (i, b) in boxes.iter().enumerate() {
        if b[0] as usize >= n {
            return Err(Error::arg(
                "boxes",
                format!("box {i}: batch index {} is out of range 0..{n}", b[0]),
            ));
        }
        let (gh, gw) = roi_sampling_grid(b, o);
        if gh * gw > ROI_MAX_SAMPLES_PER_BIN as i64 {
            return Err(Error::arg(
                "boxes",
                format!(
                    "box {i} needs {gh} x {gw} samples per bin with adaptive sampling; at most {ROI_MAX_SAMPLES_PER_BIN} (use a larger output or a fixed sampling_ratio)"
                ),
            ));
        }
        one &= (gh, gw) == (1, 1);
    }
    Ok(one)
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
    let out = check_options(shape, boxes.host.len(), &o)?;
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
