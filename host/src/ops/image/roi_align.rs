//! `roi_align`: its boxes, options and checks.

use super::{check_len, column_grid, layout_bits, Shape, BLOCK};
use crate::engine::params;
use crate::error::{Error, Result};
use crate::runtime::{Gpu, LaunchConfig};
use crate::spec::image::{check_boxes, check_roi_boxes, check_roi_options, Layout, RoiAlign};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};
use std::sync::{Arc, Mutex};
use streamline_abi::image::{
    RoiAlignBackwardParams, RoiAlignParams, NHWC_IN, NHWC_OUT, ROI_ALIGN, ROI_ALIGN_BACKWARD,
    ROI_ALIGN_BACKWARD_BLOCK, ROI_ALIGN_BACKWARD_DETERMINISTIC, ROI_ALIGN_ONE_SAMPLE,
    ROI_ALIGN_ONE_SAMPLE_RELAYOUT, ROI_ALIGN_RELAYOUT,
};
use streamline_device::DevPtr;

/// Boxes of `roi_align`, `[batch_index, x1, y1, x2, y2]` each, on the device: uploaded from
/// the host and checked, or in the caller's device memory ([`RoiBoxes::on_device`]).
pub struct RoiBoxes {
    dev: On,
    /// The boxes as uploaded; `None` for the caller's device memory, which the host never reads.
    host: Option<Vec<[f32; 5]>>,
    count: usize,
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
            dev: On::Uploaded(dev),
            host: Some(boxes.to_vec()),
            count: boxes.len(),
            checked: Mutex::new(None),
        })
    }

    /// Boxes already on the device (five f32 each), read by the kernel alone: no copy and no
    /// wait, so a CUDA graph capture or a detection model's boxes cost nothing on the host. The
    /// host cannot check them: a box whose batch index is outside the batch gives zeros, and a
    /// bin's sampling grid is capped at `ROI_MAX_SAMPLES_PER_BIN` points (the kernel stays
    /// inside the input whatever the boxes hold).
    ///
    /// # Safety
    /// `boxes` must stay allocated, and unwritten by other work, until the launches that read
    /// it have run (their order is the caller's, as for [`crate::engine::External`]).
    pub unsafe fn on_device(boxes: &impl DevicePtr<f32>, stream: &CudaStream) -> Result<RoiBoxes> {
        let n = boxes.len();
        if n == 0 || !n.is_multiple_of(5) {
            return Err(Error::arg(
                "boxes",
                format!("holds {n} values; needs five per box and at least one box"),
            ));
        }
        let (ptr, _) = boxes.device_ptr(stream);
        Ok(RoiBoxes {
            dev: On::Caller(ptr),
            host: None,
            count: n / 5,
            checked: Mutex::new(None),
        })
    }

    /// Number of boxes.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none (never: at least one is required).
    pub fn is_empty(&self) -> bool {
        self.count == 0
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
        let Some(host) = &self.host else {
            // Boxes the host cannot read take the general kernel.
            return Ok(false);
        };
        let one = check_roi_boxes(host, n, o)?;
        *last = Some((n, *o, one));
        Ok(one)
    }

    /// The boxes as uploaded (`None` for boxes on the device, [`RoiBoxes::on_device`]).
    pub fn boxes(&self) -> Option<&[[f32; 5]]> {
        self.host.as_deref()
    }
}

impl RoiBoxes {
    /// The boxes' device address for a launch on `stream`; a graph capturing the launch keeps
    /// uploaded boxes alive after their owner goes (boxes in the caller's memory are theirs).
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> Result<(u64, SyncOnDrop<'a>)> {
        Ok(match &self.dev {
            On::Uploaded(d) => {
                params::keep_in_capture(stream, Box::new(d.clone()))?;
                d.device_ptr(stream)
            }
            On::Caller(p) => (*p, SyncOnDrop::Sync(None)),
        })
    }
}

/// Where [`RoiBoxes`] lie.
enum On {
    Uploaded(Arc<params::DeviceParams<f32>>),
    Caller(u64),
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
    let nchw = Layout::Nchw;
    roi_align_relayout(gpu, stream, shape, (x, nchw), boxes, o, (y, nchw))
}

/// [`roi_align`] of a batch of `shape` stored in layout `from`, the crops written in layout
/// `to`: NHWC (as image decoders and CV-CUDA lay images out) or NCHW, in any pair, in one pass.
#[allow(clippy::too_many_arguments)]
pub fn roi_align_relayout(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    (x, from): (&impl DevicePtr<f32>, Layout),
    boxes: &RoiBoxes,
    o: RoiAlign,
    (y, to): (&mut impl DevicePtrMut<f32>, Layout),
) -> Result<()> {
    // The boxes were checked when uploaded; what depends on this call is checked here.
    let out = check_roi_options(shape, boxes.count, &o)?;
    let one_sample = boxes.against(shape.n, &o)?;
    check_len("x", x.len(), shape)?;
    check_len("y", y.len(), out)?;
    // A box's setup costs as much as several bins, so far fewer threads per row pay (measured
    // on an H200).
    let (grid, rows) = column_grid(gpu, "output_size", (o.out_h, o.out_w), boxes.count, 128)?;
    // The sampling grid is computed as the kernels do (same f32 operations, no contraction), so
    // a launch whose every box samples once per bin can take the one-sample kernel.
    let layout = layout_bits((from, to), (NHWC_IN, NHWC_OUT));
    let kernel = match (one_sample, layout) {
        (true, 0) => ROI_ALIGN_ONE_SAMPLE,
        (false, 0) => ROI_ALIGN,
        (true, _) => ROI_ALIGN_ONE_SAMPLE_RELAYOUT,
        (false, _) => ROI_ALIGN_RELAYOUT,
    };
    let mut launch = gpu.kernels()?.prepare(stream, kernel);
    let xp = launch.read(x);
    let (bp, _b) = boxes.device_ptr(stream)?;
    let yp = launch.write(y);
    let p = RoiAlignParams {
        x: xp,
        boxes: DevPtr::from_addr(bp),
        y: yp,
        batch: shape.n as u32,
        channels: shape.c as u32,
        height: shape.h as u32,
        width: shape.w as u32,
        num_boxes: boxes.count as u32,
        out_h: o.out_h as u32,
        out_w: o.out_w as u32,
        sampling_ratio: o.sampling_ratio,
        spatial_scale: o.spatial_scale,
        aligned: o.aligned as u32,
        rows,
        layout,
    };
    // SAFETY: lengths checked against the shapes; the boxes were validated (batch index in
    // range, bounded sampling grid), or, on the device, the kernel reads zeros for a batch index
    // outside the batch and caps the grid; the grid covers every output; `kernel` reads the
    // layouts `layout` names.
    unsafe { launch.run(LaunchConfig::new(grid, BLOCK), p) }
}

/// The gradient of [`roi_align`] with respect to its input: `grad_x` (`shape`) from the
/// output's gradient `grad_y` (`boxes x c x out_h x out_w`), as torchvision's backward
/// defines it. With `deterministic`, without atomics: the same bits on every run (torchvision
/// has no such mode); otherwise torchvision's atomic scatter, whose last bits depend on the
/// order the additions land in.
#[allow(clippy::too_many_arguments)]
pub fn roi_align_backward(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    grad_y: &impl DevicePtr<f32>,
    boxes: &RoiBoxes,
    o: RoiAlign,
    grad_x: &mut impl DevicePtrMut<f32>,
    deterministic: bool,
) -> Result<()> {
    let out = check_roi_options(shape, boxes.count, &o)?;
    boxes.against(shape.n, &o)?;
    check_len("grad_y", grad_y.len(), out)?;
    check_len("grad_x", grad_x.len(), shape)?;
    if boxes.count > u32::MAX as usize {
        return Err(Error::arg("boxes", "more than 2^32 - 1 boxes"));
    }
    let (kernel, items) = if deterministic {
        (ROI_ALIGN_BACKWARD_DETERMINISTIC, shape.len())
    } else {
        (ROI_ALIGN_BACKWARD, out.len())
    };
    let mut launch = gpu.kernels()?.prepare(stream, kernel);
    let gyp = launch.read(grad_y);
    let (bp, _b) = boxes.device_ptr(stream)?;
    let gxp = launch.write(grad_x);
    if !deterministic {
        // SAFETY: `gxp` addresses `shape.len()` f32 (checked above), written on `stream` only.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                gxp.addr(),
                0,
                shape.len() * 4,
                stream.cu_stream(),
            )
        }
        .map_err(|e| Error::Driver {
            op: "cuMemsetD8Async",
            source: e,
        })?;
    }
    let p = RoiAlignBackwardParams {
        grad_y: gyp,
        boxes: DevPtr::from_addr(bp),
        grad_x: gxp,
        batch: shape.n as u32,
        channels: shape.c as u32,
        height: shape.h as u32,
        width: shape.w as u32,
        num_boxes: boxes.count as u32,
        out_h: o.out_h as u32,
        out_w: o.out_w as u32,
        sampling_ratio: o.sampling_ratio,
        spatial_scale: o.spatial_scale,
        aligned: o.aligned as u32,
    };
    let blocks = items
        .div_ceil(ROI_ALIGN_BACKWARD_BLOCK as usize)
        .min(gpu.info().multiprocessors as usize * 32)
        .max(1);
    // SAFETY: lengths checked against the shapes; the boxes were validated, or, on the device,
    // the kernels skip a batch index outside the batch and cap the grid; the grid-stride loops
    // cover every item; the atomic kernel's output was zeroed above on the same stream.
    unsafe {
        launch.run(
            LaunchConfig::new((blocks as u32, 1, 1), (ROI_ALIGN_BACKWARD_BLOCK, 1, 1)),
            p,
        )
    }
}
