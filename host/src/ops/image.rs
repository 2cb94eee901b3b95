//! Image operations on NCHW batches, each one launch for the whole batch with per-image
//! parameters: uint8 to float, ROI-align crop, rotation, Gaussian blur, resize, per-channel
//! normalisation, and seed 003's whole augmentation (fused, and as the chain of separate
//! kernels).
//!
//! Their exact definitions, following torchvision so results can be swapped in, are written
//! with the CPU references in [`crate::reference::image`]. Every argument is checked before any
//! device work: a bad one gives [`Error::InvalidArgument`] naming it and the allowed range, and
//! nothing is written.

use crate::error::{Error, Result};
use crate::runtime::Gpu;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;
use streamline_abi::image::{self as abi, *};
use streamline_abi::KernelSpec;

/// Shape of a dense NCHW batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Images.
    pub n: usize,
    /// Channels per image.
    pub c: usize,
    /// Height.
    pub h: usize,
    /// Width.
    pub w: usize,
}

impl Shape {
    /// `n x c x h x w`.
    pub const fn new(n: usize, c: usize, h: usize, w: usize) -> Shape {
        Shape { n, c, h, w }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.n * self.c * self.h * self.w
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same batch with planes of `h x w`.
    pub fn with_size(&self, h: usize, w: usize) -> Shape {
        Shape { h, w, ..*self }
    }

    /// Checks that every extent is at least 1, a plane holds at most `2^31 - 1` values and the
    /// batch at most `2^40` values; `arg` names the tensor in the error.
    pub fn check(&self, arg: &'static str) -> Result<()> {
        let dims = [self.n, self.c, self.h, self.w];
        if dims.contains(&0) {
            return Err(Error::arg(
                arg,
                format!(
                    "shape {self} has a zero extent; every extent must be at least 1 (a zero-size output is not allowed)"
                ),
            ));
        }
        let plane = self.h.checked_mul(self.w);
        if plane.is_none_or(|p| p > i32::MAX as usize) {
            return Err(Error::arg(
                arg,
                format!("shape {self}: height * width must be at most 2^31 - 1"),
            ));
        }
        let total = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if total.is_none_or(|t| t > 1 << 40) {
            return Err(Error::arg(
                arg,
                format!("shape {self}: at most 2^40 values"),
            ));
        }
        if self.n > u32::MAX as usize || self.c > u32::MAX as usize {
            return Err(Error::arg(
                arg,
                format!("shape {self}: too many images or channels"),
            ));
        }
        Ok(())
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{}x{}", self.n, self.c, self.h, self.w)
    }
}

fn check_len(arg: &'static str, len: usize, shape: Shape) -> Result<()> {
    if len != shape.len() {
        return Err(Error::arg(
            arg,
            format!(
                "length {len} does not match the shape {shape} ({} values)",
                shape.len()
            ),
        ));
    }
    Ok(())
}

const BLOCK: (u32, u32, u32) = (IMAGE_BLOCK_X, IMAGE_BLOCK_Y, 1);

/// Grid of the per-pixel kernels (the kernels' `for_columns`): 32-column patches of an
/// `h x w` plane whose threads compute `rows_per_thread` rows each, by `count` planes stacked
/// along the grid's depth (at most 65535 deep; the blocks step through the rest).
fn column_grid(
    arg: &'static str,
    h: usize,
    w: usize,
    count: usize,
    rows_per_thread: u32,
) -> Result<(u32, u32, u32)> {
    const MAX_Y: usize = 65535;
    let rows = (IMAGE_BLOCK_Y * rows_per_thread) as usize;
    let (gx, gy) = (w.div_ceil(IMAGE_BLOCK_X as usize), h.div_ceil(rows));
    if gx > i32::MAX as usize || gy > MAX_Y {
        return Err(Error::arg(
            arg,
            format!(
                "{h} x {w} is too large for one launch (at most {} rows)",
                MAX_Y * rows
            ),
        ));
    }
    Ok((gx as u32, gy as u32, count.clamp(1, MAX_Y) as u32))
}

/// Grid of the tiled kernels: `TILE x TILE` tiles of an `h x w` plane, times `count`.
fn tile_grid(arg: &'static str, h: usize, w: usize, count: usize) -> Result<(u32, u32, u32)> {
    let t = TILE as usize;
    grid_of(arg, w.div_ceil(t) * h.div_ceil(t), count)
}

fn grid_of(arg: &'static str, per: usize, count: usize) -> Result<(u32, u32, u32)> {
    match per.checked_mul(count) {
        Some(b) if b <= i32::MAX as usize => Ok((b as u32, 1, 1)),
        _ => Err(Error::arg(
            arg,
            "too large for one launch (more than 2^31 - 1 blocks)",
        )),
    }
}

/// Per-image f32 parameters on the device (angles, sigmas), checked finite on upload; the host
/// copy is kept for later checks and for references.
pub struct PerImage {
    dev: CudaSlice<f32>,
    host: Vec<f32>,
}

impl PerImage {
    /// Uploads `values` (one per image, or `stride` per image for pairs); `arg` names them in
    /// errors. Every value must be finite.
    pub fn upload(stream: &Arc<CudaStream>, arg: &'static str, values: &[f32]) -> Result<PerImage> {
        if values.is_empty() {
            return Err(Error::arg(arg, "needs at least one value"));
        }
        if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(Error::arg(arg, format!("value {i} is {v}; must be finite")));
        }
        let dev = stream.clone_htod(values).map_err(|source| Error::Driver {
            op: "cuMemcpyHtoDAsync",
            source,
        })?;
        Ok(PerImage {
            dev,
            host: values.to_vec(),
        })
    }

    /// The values as uploaded.
    pub fn values(&self) -> &[f32] {
        &self.host
    }
}

/// Per-channel mean and standard deviation on the device.
pub struct ChannelStats {
    dev: CudaSlice<f32>,
    mean: Vec<f32>,
    std: Vec<f32>,
}

impl ChannelStats {
    /// Uploads `mean` and `std` (one per channel, finite, `std != 0`).
    pub fn upload(stream: &Arc<CudaStream>, mean: &[f32], std: &[f32]) -> Result<ChannelStats> {
        if mean.is_empty() {
            return Err(Error::arg(
                "mean",
                "needs one value per channel (at least one)",
            ));
        }
        if std.len() != mean.len() {
            return Err(Error::arg(
                "std",
                format!("has {} values but mean has {}", std.len(), mean.len()),
            ));
        }
        if let Some(v) = mean.iter().find(|v| !v.is_finite()) {
            return Err(Error::arg("mean", format!("value {v} is not finite")));
        }
        if let Some(v) = std.iter().find(|v| !v.is_finite() || **v == 0.0) {
            return Err(Error::arg(
                "std",
                format!("value {v}: every std must be finite and non-zero"),
            ));
        }
        let mut both = mean.to_vec();
        both.extend_from_slice(std);
        let dev = stream.clone_htod(&both).map_err(|source| Error::Driver {
            op: "cuMemcpyHtoDAsync",
            source,
        })?;
        Ok(ChannelStats {
            dev,
            mean: mean.to_vec(),
            std: std.to_vec(),
        })
    }

    /// Channels.
    pub fn channels(&self) -> usize {
        self.mean.len()
    }
    /// Means.
    pub fn mean(&self) -> &[f32] {
        &self.mean
    }
    /// Standard deviations.
    pub fn std(&self) -> &[f32] {
        &self.std
    }
}

/// `ToDtype(float32)`: `y = f32(x)`, or with `scale` `y = f32(x) * f32(1/255)`.
pub fn to_float(
    gpu: &Gpu,
    stream: &CudaStream,
    x: &impl DevicePtr<u8>,
    y: &mut impl DevicePtrMut<f32>,
    scale: bool,
) -> Result<()> {
    super::check_same_len(x.len(), y.len())?;
    if x.len() == 0 {
        return Ok(());
    }
    let n = x.len() as u64;
    let blocks = n.div_ceil(16 * ELEMENTWISE_BLOCK as u64).clamp(1, 1 << 20) as u32;
    let (xp, _r) = x.device_ptr(stream);
    let (yp, _w) = y.device_ptr_mut(stream);
    let p = ToFloatParams {
        x: xp,
        y: yp,
        n,
        scale: to_float_scale(scale),
        pad: 0,
    };
    // SAFETY: `x` holds `n` bytes and `y` `n` f32 (lengths checked), distinct allocations (one
    // borrowed shared, one exclusively); the kernel strides over all of them.
    unsafe {
        gpu.launch(
            stream,
            &TO_FLOAT,
            (blocks, 1, 1),
            (ELEMENTWISE_BLOCK, 1, 1),
            p,
        )
    }
}

/// The multiplier of `to_float`: 1, or `f32(1/255)` as torchvision's `mul_(1 / 255)` applies.
pub fn to_float_scale(scale: bool) -> f32 {
    if scale {
        (1.0f64 / 255.0) as f32
    } else {
        1.0
    }
}

/// `normalize`: `y = (x - mean[c]) / std[c]` for a batch of `shape`.
pub fn normalize(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    x: &impl DevicePtr<f32>,
    stats: &ChannelStats,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    shape.check("x")?;
    check_len("x", x.len(), shape)?;
    check_len("y", y.len(), shape)?;
    if stats.channels() != shape.c {
        return Err(Error::arg(
            "mean",
            format!(
                "has {} channels but the images have {}",
                stats.channels(),
                shape.c
            ),
        ));
    }
    let (xp, _r) = x.device_ptr(stream);
    let (sp, _s) = stats.dev.device_ptr(stream);
    let (yp, _w) = y.device_ptr_mut(stream);
    let plane = shape.h * shape.w;
    let p = NormalizeParams {
        x: xp,
        y: yp,
        stats: sp,
        planes: (shape.n * shape.c) as u32,
        channels: shape.c as u32,
        plane_len: plane as u32,
        pad: 0,
    };
    let vec = plane.is_multiple_of(4) && xp.is_multiple_of(16) && yp.is_multiple_of(16);
    let units = if vec { plane / 4 } else { plane };
    let grid = grid_of(
        "x",
        units.div_ceil(ELEMENTWISE_BLOCK as usize),
        shape.n * shape.c,
    )?;
    if (shape.n * shape.c) > u32::MAX as usize {
        return Err(Error::arg("x", "more than 2^32 - 1 planes"));
    }
    // SAFETY: lengths checked against `shape`; `stats` holds `2 * c` values; the grid covers
    // every plane with the kernel's own vectorisation rule.
    unsafe { gpu.launch(stream, &NORMALIZE, grid, (ELEMENTWISE_BLOCK, 1, 1), p) }
}

/// Boxes of `roi_align`, `[batch_index, x1, y1, x2, y2]` each, on the device.
pub struct RoiBoxes {
    dev: CudaSlice<f32>,
    host: Vec<[f32; 5]>,
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
        let dev = stream.clone_htod(&flat).map_err(|source| Error::Driver {
            op: "cuMemcpyHtoDAsync",
            source,
        })?;
        Ok(RoiBoxes {
            dev,
            host: boxes.to_vec(),
        })
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
    shape.check("x")?;
    let out = Shape::new(boxes.len(), shape.c, o.out_h, o.out_w);
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
    for (i, b) in boxes.iter().enumerate() {
        if b[0] as usize >= shape.n {
            return Err(Error::arg(
                "boxes",
                format!(
                    "box {i}: batch index {} is out of range 0..{}",
                    b[0], shape.n
                ),
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
    }
    Ok(out)
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
    let out = check_roi_align(shape, &boxes.host, &o)?;
    check_len("x", x.len(), shape)?;
    check_len("y", y.len(), out)?;
    let grid = column_grid(
        "output_size",
        o.out_h,
        o.out_w,
        boxes.host.len(),
        ROI_ROWS_PER_THREAD,
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
    };
    // The sampling grid computed as the kernels do (same f32 operations, no contraction), so a
    // launch whose every box samples once per bin can take the one-sample kernel.
    let spec = if boxes
        .host
        .iter()
        .all(|b| roi_sampling_grid(b, &o) == (1, 1))
    {
        &ROI_ALIGN_ONE_SAMPLE
    } else {
        &ROI_ALIGN
    };
    // SAFETY: lengths checked against the shapes; the boxes were validated (batch index in
    // range, bounded sampling grid); the grid covers every output.
    unsafe { gpu.launch(stream, spec, grid, BLOCK, p) }
}

/// Interpolation of `rotate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interp {
    /// Nearest neighbour (torchvision's default for `rotate`).
    Nearest,
    /// Bilinear.
    Bilinear,
}

/// `rotate`: image `i` rotated by `angles[i]` degrees counter-clockwise about its centre,
/// `expand=False`; outside the input, `fill` (torchvision's masked fill) or 0 with `None`.
#[allow(clippy::too_many_arguments)]
pub fn rotate(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    x: &impl DevicePtr<f32>,
    angles: &PerImage,
    mode: Interp,
    fill: Option<f32>,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    shape.check("x")?;
    check_len("x", x.len(), shape)?;
    check_len("y", y.len(), shape)?;
    if angles.host.len() != shape.n {
        return Err(Error::arg(
            "angles",
            format!(
                "has {} values; needs one per image ({})",
                angles.host.len(),
                shape.n
            ),
        ));
    }
    if let Some(f) = fill.filter(|f| !f.is_finite()) {
        return Err(Error::arg("fill", format!("{f}: must be finite")));
    }
    let grid = column_grid("x", shape.h, shape.w, shape.n, IMAGE_ROWS_PER_THREAD)?;
    let (xp, _r) = x.device_ptr(stream);
    let (ap, _a) = angles.dev.device_ptr(stream);
    let (yp, _w) = y.device_ptr_mut(stream);
    let p = RotateParams {
        x: xp,
        y: yp,
        angles: ap,
        batch: shape.n as u32,
        channels: shape.c as u32,
        height: shape.h as u32,
        width: shape.w as u32,
        fill: fill.unwrap_or(0.0),
        has_fill: fill.is_some() as u32,
    };
    let spec = match mode {
        Interp::Nearest => &ROTATE_NEAREST,
        Interp::Bilinear => &ROTATE_BILINEAR,
    };
    // SAFETY: lengths checked against `shape`; one angle per image; the grid covers every
    // output pixel.
    unsafe { gpu.launch(stream, spec, grid, BLOCK, p) }
}

/// Sigma of `gaussian_blur`.
pub enum Sigma<'a> {
    /// `(sigma_x, sigma_y)` for every image.
    Global(f32, f32),
    /// Pairs `[sigma_x, sigma_y]` per image (`2 * n` values).
    PerImage(&'a PerImage),
}

/// Checks a Gaussian kernel size against the image extent it slides along (reflect padding
/// needs `k / 2 < extent`).
pub fn check_kernel_size(arg: &'static str, k: usize, extent: usize, axis: &str) -> Result<()> {
    if k == 0 || k.is_multiple_of(2) || k > MAX_KERNEL_SIZE as usize {
        return Err(Error::arg(
            arg,
            format!("{k}: must be odd, 1..={MAX_KERNEL_SIZE}"),
        ));
    }
    if k / 2 >= extent {
        return Err(Error::arg(
            arg,
            format!(
                "{k} needs an image {axis} of at least {} (reflect padding of {} must be smaller than the {axis} {extent})",
                k / 2 + 1,
                k / 2
            ),
        ));
    }
    Ok(())
}

/// Checks a Gaussian sigma (finite, > 0).
pub fn check_sigma(arg: &'static str, s: f32) -> Result<()> {
    if !s.is_finite() || s <= 0.0 {
        return Err(Error::arg(arg, format!("{s}: must be finite and > 0")));
    }
    Ok(())
}

/// `gaussian_blur(x, [kx, ky], [sigma_x, sigma_y])` with reflect padding.
#[allow(clippy::too_many_arguments)]
pub fn gaussian_blur(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    x: &impl DevicePtr<f32>,
    (kx, ky): (usize, usize),
    sigma: Sigma,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    shape.check("x")?;
    check_len("x", x.len(), shape)?;
    check_len("y", y.len(), shape)?;
    check_kernel_size("kernel_size", kx, shape.w, "width")?;
    check_kernel_size("kernel_size", ky, shape.h, "height")?;
    let (sp, sx, sy) = match &sigma {
        Sigma::Global(sx, sy) => {
            check_sigma("sigma", *sx)?;
            check_sigma("sigma", *sy)?;
            (None, *sx, *sy)
        }
        Sigma::PerImage(s) => {
            if s.host.len() != 2 * shape.n {
                return Err(Error::arg(
                    "sigma",
                    format!(
                        "has {} values; needs a pair per image ({})",
                        s.host.len(),
                        2 * shape.n
                    ),
                ));
            }
            for v in &s.host {
                check_sigma("sigma", *v)?;
            }
            (Some(&s.dev), 0.0, 0.0)
        }
    };
    let (tw, th) = blur_output_tile(kx as u32, ky as u32);
    let grid = grid_of(
        "x",
        shape.w.div_ceil(tw as usize) * shape.h.div_ceil(th as usize),
        shape.n * shape.c,
    )?;
    let (xp, _r) = x.device_ptr(stream);
    let sguard = sp.map(|d| d.device_ptr(stream));
    let (yp, _w) = y.device_ptr_mut(stream);
    let p = GaussianBlurParams {
        x: xp,
        y: yp,
        sigmas: sguard.as_ref().map_or(0, |g| g.0),
        batch: shape.n as u32,
        channels: shape.c as u32,
        height: shape.h as u32,
        width: shape.w as u32,
        kx: kx as u32,
        ky: ky as u32,
        sigma_x: sx,
        sigma_y: sy,
    };
    let smem = blur_shared_bytes(kx as u32, ky as u32);
    // SAFETY: lengths checked; kernel sizes odd, within MAX_KERNEL_SIZE and smaller than twice
    // the image; sigmas a pair per image or 0; the shared memory is what the kernel uses for
    // these sizes.
    unsafe { gpu.launch_shared(stream, &GAUSSIAN_BLUR, grid, BLOCK, smem, p) }
}

/// Interpolation of `resize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeMode {
    /// Bilinear, `align_corners=False`, no antialiasing.
    Bilinear,
    /// Bilinear with torchvision's antialiasing (`antialias=True`, its default).
    BilinearAntialias,
    /// torch's `nearest`.
    Nearest,
}

/// `resize` of every plane to `out_h x out_w`.
#[allow(clippy::too_many_arguments)]
pub fn resize(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    x: &impl DevicePtr<f32>,
    (out_h, out_w): (usize, usize),
    mode: ResizeMode,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    shape.check("x")?;
    check_len("x", x.len(), shape)?;
    let out = shape.with_size(out_h, out_w);
    out.check("size")?;
    check_len("y", y.len(), out)?;
    let grid = column_grid("size", out_h, out_w, shape.n, IMAGE_ROWS_PER_THREAD)?;
    let (xp, _r) = x.device_ptr(stream);
    let (yp, _w) = y.device_ptr_mut(stream);
    let p = ResizeParams {
        x: xp,
        y: yp,
        batch: shape.n as u32,
        channels: shape.c as u32,
        in_h: shape.h as u32,
        in_w: shape.w as u32,
        out_h: out_h as u32,
        out_w: out_w as u32,
    };
    // Antialiasing changes nothing when neither axis shrinks (the triangle's support stays one
    // pixel): the plain bilinear kernel computes the same values.
    let spec = match mode {
        ResizeMode::BilinearAntialias if out_h < shape.h || out_w < shape.w => &RESIZE_BILINEAR_AA,
        ResizeMode::Bilinear | ResizeMode::BilinearAntialias => &RESIZE_BILINEAR,
        ResizeMode::Nearest => &RESIZE_NEAREST,
    };
    // SAFETY: lengths checked against the shapes; the grid covers every output pixel.
    unsafe { gpu.launch(stream, spec, grid, BLOCK, p) }
}

/// Settings of seed 003's augmentation.
#[derive(Clone, Debug, PartialEq)]
pub struct AugmentConfig {
    /// Side of the square random crop (`RandomCrop(crop)` through `roi_align`).
    pub crop: usize,
    /// Side of the square output (`Resize(size)`, upscaling from the crop).
    pub size: usize,
    /// Angles are drawn uniformly from `[-degrees, degrees]` (`RandomRotation(degrees)`).
    pub degrees: f32,
    /// Rotation interpolation (torchvision's default: nearest).
    pub interp: Interp,
    /// Blur kernel size (`GaussianBlur(kernel_size)`).
    pub kernel_size: usize,
    /// Sigma is drawn uniformly from this range once per batch (`GaussianBlur`'s default
    /// `(0.1, 2.0)`).
    pub sigma: (f32, f32),
    /// Scale to `[0, 1]` when converting (`ToDtype(float32, scale=True)`).
    pub scale: bool,
    /// Normalisation mean per channel.
    pub mean: Vec<f32>,
    /// Normalisation standard deviation per channel.
    pub std: Vec<f32>,
}

impl AugmentConfig {
    /// Checks the configuration for uint8 input of `shape` (no device needed): 1..=4
    /// channels, a crop inside the image, an output at least as large as the crop, finite
    /// degrees, a valid kernel size for the output and positive sigmas, one mean and std per
    /// channel (std non-zero).
    pub fn check(&self, shape: Shape) -> Result<()> {
        shape.check("x")?;
        if shape.c > AUGMENT_MAX_CHANNELS as usize {
            return Err(Error::arg(
                "x",
                format!(
                    "{} channels; the fused augmentation takes 1..={AUGMENT_MAX_CHANNELS}",
                    shape.c
                ),
            ));
        }
        if self.crop == 0 || self.crop > shape.h || self.crop > shape.w {
            return Err(Error::arg(
                "crop",
                format!(
                    "{}: must be 1..={} (the smaller image side)",
                    self.crop,
                    shape.h.min(shape.w)
                ),
            ));
        }
        if self.size < self.crop || self.size > 1 << 15 {
            return Err(Error::arg(
                "size",
                format!(
                    "{}: must be at least the crop ({}) and at most 32768 (the resize only enlarges)",
                    self.size, self.crop
                ),
            ));
        }
        if !self.degrees.is_finite() || self.degrees < 0.0 {
            return Err(Error::arg(
                "degrees",
                format!("{}: must be finite and >= 0", self.degrees),
            ));
        }
        check_kernel_size("kernel_size", self.kernel_size, self.size, "size")?;
        check_sigma("sigma", self.sigma.0)?;
        check_sigma("sigma", self.sigma.1)?;
        if self.mean.len() != shape.c {
            return Err(Error::arg(
                "mean",
                format!(
                    "has {} values; the images have {} channels",
                    self.mean.len(),
                    shape.c
                ),
            ));
        }
        if self.std.len() != shape.c {
            return Err(Error::arg(
                "std",
                format!(
                    "has {} values; the images have {} channels",
                    self.std.len(),
                    shape.c
                ),
            ));
        }
        if let Some(v) = self.std.iter().find(|v| !v.is_finite() || **v == 0.0) {
            return Err(Error::arg(
                "std",
                format!("value {v}: must be finite and non-zero"),
            ));
        }
        Ok(())
    }

    /// Seed 003's transform for images of side `size`: crop `size / 2`, resize to `size`,
    /// rotation up to 45 degrees, blur 7, mean 0 and std 1 over `channels` channels.
    pub fn seed003(size: usize, channels: usize) -> AugmentConfig {
        AugmentConfig {
            crop: size / 2,
            size,
            degrees: 45.0,
            interp: Interp::Nearest,
            kernel_size: 7,
            sigma: (0.1, 2.0),
            scale: false,
            mean: vec![0.0; channels],
            std: vec![1.0; channels],
        }
    }
}

/// The random parameters of one batch: a crop box `[x1, y1, x2, y2]`, an angle per image, and
/// the blur sigma (one per batch, as `GaussianBlur` draws it per call).
#[derive(Clone, Debug, PartialEq)]
pub struct AugmentDraw {
    /// Crop box per image, whole-pixel corners inside the image.
    pub boxes: Vec<[f32; 4]>,
    /// Angle per image in degrees.
    pub angles: Vec<f32>,
    /// Sigma per image (all equal).
    pub sigmas: Vec<f32>,
}

impl AugmentDraw {
    /// Draws the parameters for `n` images of `h x w` from `seed` (deterministic).
    pub fn random(cfg: &AugmentConfig, n: usize, h: usize, w: usize, seed: u64) -> AugmentDraw {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut boxes = Vec::with_capacity(n);
        let mut angles = Vec::with_capacity(n);
        for _ in 0..n {
            let top = rng.gen_range(0..=h.saturating_sub(cfg.crop)) as f32;
            let left = rng.gen_range(0..=w.saturating_sub(cfg.crop)) as f32;
            boxes.push([left, top, left + cfg.crop as f32, top + cfg.crop as f32]);
            let a = if cfg.degrees > 0.0 {
                rng.gen_range(-cfg.degrees..=cfg.degrees)
            } else {
                0.0
            };
            angles.push(a);
        }
        let s = if cfg.sigma.1 > cfg.sigma.0 {
            rng.gen_range(cfg.sigma.0..=cfg.sigma.1)
        } else {
            cfg.sigma.0
        };
        AugmentDraw {
            boxes,
            angles,
            sigmas: vec![s; n],
        }
    }
}

/// An augmentation ready to run: configuration and draw validated and on the device.
pub struct Augment {
    cfg: AugmentConfig,
    shape: Shape,
    draw: AugmentDraw,
    boxes: CudaSlice<f32>,
    roi_boxes: RoiBoxes,
    angles: PerImage,
    sigmas: PerImage,
    sigma_pairs: PerImage,
    stats: ChannelStats,
}

impl Augment {
    /// Validates `cfg` and `draw` for uint8 input of `shape` and uploads them.
    pub fn new(
        stream: &Arc<CudaStream>,
        shape: Shape,
        cfg: &AugmentConfig,
        draw: &AugmentDraw,
    ) -> Result<Augment> {
        cfg.check(shape)?;
        let n = shape.n;
        if draw.boxes.len() != n || draw.angles.len() != n || draw.sigmas.len() != n {
            return Err(Error::arg(
                "draw",
                format!("needs {n} boxes, angles and sigmas (one per image)"),
            ));
        }
        for s in &draw.sigmas {
            check_sigma("sigma", *s)?;
        }
        let roi: Vec<[f32; 5]> = draw
            .boxes
            .iter()
            .enumerate()
            .map(|(i, b)| [i as f32, b[0], b[1], b[2], b[3]])
            .collect();
        let roi_boxes = RoiBoxes::upload(stream, &roi)?;
        let o = RoiAlign {
            out_h: cfg.crop,
            out_w: cfg.crop,
            spatial_scale: 1.0,
            sampling_ratio: -1,
            aligned: false,
        };
        for (i, b) in roi.iter().enumerate() {
            let (gh, gw) = roi_sampling_grid(b, &o);
            if gh * gw > ROI_MAX_SAMPLES_PER_BIN as i64 {
                return Err(Error::arg(
                    "draw",
                    format!("box {i} needs more than {ROI_MAX_SAMPLES_PER_BIN} samples per bin"),
                ));
            }
        }
        let flat: Vec<f32> = draw.boxes.iter().flatten().copied().collect();
        let boxes = PerImage::upload(stream, "boxes", &flat)?.dev;
        let pairs: Vec<f32> = draw.sigmas.iter().flat_map(|s| [*s, *s]).collect();
        Ok(Augment {
            cfg: cfg.clone(),
            shape,
            draw: draw.clone(),
            boxes,
            roi_boxes,
            angles: PerImage::upload(stream, "angles", &draw.angles)?,
            sigmas: PerImage::upload(stream, "sigma", &draw.sigmas)?,
            sigma_pairs: PerImage::upload(stream, "sigma", &pairs)?,
            stats: ChannelStats::upload(stream, &cfg.mean, &cfg.std)?,
        })
    }

    /// Shape of the input.
    pub fn input_shape(&self) -> Shape {
        self.shape
    }

    /// Shape of the output.
    pub fn output_shape(&self) -> Shape {
        self.shape.with_size(self.cfg.size, self.cfg.size)
    }

    /// The configuration.
    pub fn config(&self) -> &AugmentConfig {
        &self.cfg
    }

    /// The random parameters.
    pub fn draw(&self) -> &AugmentDraw {
        &self.draw
    }

    /// Runs the fused kernel: `x` uint8 of [`Augment::input_shape`], `y` f32 of
    /// [`Augment::output_shape`].
    pub fn run_fused(
        &self,
        gpu: &Gpu,
        stream: &CudaStream,
        x: &impl DevicePtr<u8>,
        y: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        let out = self.output_shape();
        check_len("x", x.len(), self.shape)?;
        check_len("y", y.len(), out)?;
        let grid = tile_grid("size", out.h, out.w, out.n)?;
        let (xp, _r) = x.device_ptr(stream);
        let (bp, _b) = self.boxes.device_ptr(stream);
        let (ap, _a) = self.angles.dev.device_ptr(stream);
        let (sp, _s) = self.sigmas.dev.device_ptr(stream);
        let (tp, _t) = self.stats.dev.device_ptr(stream);
        let (yp, _w) = y.device_ptr_mut(stream);
        let p = AugmentParams {
            x: xp,
            y: yp,
            boxes: bp,
            angles: ap,
            sigmas: sp,
            stats: tp,
            batch: self.shape.n as u32,
            channels: self.shape.c as u32,
            height: self.shape.h as u32,
            width: self.shape.w as u32,
            crop_h: self.cfg.crop as u32,
            crop_w: self.cfg.crop as u32,
            out_h: out.h as u32,
            out_w: out.w as u32,
            ksize: self.cfg.kernel_size as u32,
            scale: to_float_scale(self.cfg.scale),
            nearest: (self.cfg.interp == Interp::Nearest) as u32,
            pad: 0,
        };
        let smem = augment_shared_bytes(self.shape.c as u32, self.cfg.kernel_size as u32);
        // SAFETY: every parameter was validated in `Augment::new` (channels, crop, size, kernel
        // size, per-image arrays of `n`), lengths checked above; the shared memory is what the
        // kernel uses for these sizes.
        unsafe { gpu.launch_shared(stream, &AUGMENT, grid, BLOCK, smem, p) }
    }

    /// Runs the same transform as six separate kernels with their intermediates in `scratch`
    /// (allocated on first use, reused after).
    pub fn run_separate(
        &self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        x: &impl DevicePtr<u8>,
        scratch: &mut Option<AugmentScratch>,
        y: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        let out = self.output_shape();
        check_len("x", x.len(), self.shape)?;
        check_len("y", y.len(), out)?;
        let crop = self.shape.with_size(self.cfg.crop, self.cfg.crop);
        if scratch.is_none() {
            let alloc = |n: usize| {
                stream
                    .alloc_zeros::<f32>(n)
                    .map_err(|source| Error::Driver {
                        op: "cuMemAlloc",
                        source,
                    })
            };
            *scratch = Some(AugmentScratch {
                float: alloc(self.shape.len())?,
                crop: alloc(crop.len())?,
                a: alloc(out.len())?,
                b: alloc(out.len())?,
            });
        }
        let s = scratch.as_mut().expect("allocated above");
        to_float(gpu, stream, x, &mut s.float, self.cfg.scale)?;
        let o = RoiAlign {
            out_h: self.cfg.crop,
            out_w: self.cfg.crop,
            spatial_scale: 1.0,
            sampling_ratio: -1,
            aligned: false,
        };
        roi_align(
            gpu,
            stream,
            self.shape,
            &s.float,
            &self.roi_boxes,
            o,
            &mut s.crop,
        )?;
        resize(
            gpu,
            stream,
            crop,
            &s.crop,
            (out.h, out.w),
            ResizeMode::BilinearAntialias,
            &mut s.a,
        )?;
        rotate(
            gpu,
            stream,
            out,
            &s.a,
            &self.angles,
            self.cfg.interp,
            None,
            &mut s.b,
        )?;
        let k = self.cfg.kernel_size;
        gaussian_blur(
            gpu,
            stream,
            out,
            &s.b,
            (k, k),
            Sigma::PerImage(&self.sigma_pairs),
            &mut s.a,
        )?;
        normalize(gpu, stream, out, &s.a, &self.stats, y)
    }
}

/// Intermediate buffers of [`Augment::run_separate`].
pub struct AugmentScratch {
    float: CudaSlice<f32>,
    crop: CudaSlice<f32>,
    a: CudaSlice<f32>,
    b: CudaSlice<f32>,
}

/// Every image kernel (for reports).
pub const KERNELS: [KernelSpec; 11] = abi::IMAGE_KERNELS;
