//! Seed 003's augmentation: its configuration, random draw, and the fused and separate runs.

use super::{
    check_len, check_sigma, gaussian_blur, normalize, resize, roi_align, roi_sampling_grid, rotate,
    tile_grid, to_float_relayout, to_float_scale, ChannelStats, Interp, Layout, PerImage,
    ResizeMode, RoiBoxes, Shape, Sigma, BLOCK,
};
use crate::error::{DriverContext, Error, Result};
use crate::runtime::Gpu;
use crate::spec::image::{AugmentConfig, AugmentDraw};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use std::sync::Arc;
use streamline_abi::image::{
    augment_kernel, augment_shared_bytes, AugmentParams, AUGMENT_NHWC_IN, AUGMENT_NHWC_OUT,
    ROI_MAX_SAMPLES_PER_BIN,
};

/// An augmentation ready to run: configuration and draw validated and on the device.
pub struct Augment {
    cfg: AugmentConfig,
    shape: Shape,
    layouts: (Layout, Layout),
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
        let roi = draw.roi_boxes();
        let roi_boxes = RoiBoxes::upload(stream, &roi)?;
        let o = cfg.crop_options();
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
            layouts: (Layout::Nchw, Layout::Nchw),
            draw: draw.clone(),
            boxes,
            roi_boxes,
            angles: PerImage::upload(stream, "angles", &draw.angles)?,
            sigmas: PerImage::upload(stream, "sigma", &draw.sigmas)?,
            sigma_pairs: PerImage::upload(stream, "sigma", &pairs)?,
            stats: ChannelStats::upload(stream, &cfg.mean, &cfg.std)?,
        })
    }

    /// The same augmentation reading its uint8 input in layout `input` (NHWC as image decoders
    /// produce it, or NCHW, the default) and writing its f32 output in layout `output`; the
    /// fused kernel reads and writes them in place, with no separate permute.
    pub fn with_layouts(self, input: Layout, output: Layout) -> Augment {
        Augment {
            layouts: (input, output),
            ..self
        }
    }

    /// Layouts of the input and the output.
    pub fn layouts(&self) -> (Layout, Layout) {
        self.layouts
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
    /// [`Augment::output_shape`], in the layouts of [`Augment::layouts`].
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
            layout: match self.layouts.0 {
                Layout::Nchw => 0,
                Layout::Nhwc => AUGMENT_NHWC_IN,
            } | match self.layouts.1 {
                Layout::Nchw => 0,
                Layout::Nhwc => AUGMENT_NHWC_OUT,
            },
        };
        let (c, k) = (self.shape.c as u32, self.cfg.kernel_size as u32);
        let smem = augment_shared_bytes(c, k);
        let max = gpu.info().limits.max_shared_per_block;
        if smem > max {
            let fits = (1..=k)
                .rev()
                .step_by(2)
                .find(|&k| augment_shared_bytes(c, k) <= max)
                .unwrap_or(1);
            return Err(Error::arg(
                "kernel_size",
                format!(
                    "{k} with {c} channels needs {smem} bytes of shared memory per block; this GPU allows {max} (kernel sizes up to {fits} fit)"
                ),
            ));
        }
        // SAFETY: every parameter was validated in `Augment::new` (channels, crop, size, kernel
        // size, per-image arrays of `n`), lengths checked above; the shared memory is what the
        // kernel uses for these sizes.
        unsafe {
            gpu.launch_shared(
                stream,
                augment_kernel(p.channels, p.ksize),
                grid,
                BLOCK,
                smem,
                p,
            )
        }
    }

    /// Runs the same transform as six separate kernels with their intermediates in `scratch`
    /// (allocated on first use, reused after). The first converts from the input's layout to
    /// NCHW; the chain writes NCHW only (an NHWC output is refused).
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
        if self.layouts.1 != Layout::Nchw {
            return Err(Error::arg(
                "output layout",
                "the separate chain writes NCHW only; the fused kernel writes NHWC",
            ));
        }
        let crop = self.shape.with_size(self.cfg.crop, self.cfg.crop);
        if scratch.is_none() {
            let alloc = |n: usize| stream.alloc_zeros::<f32>(n).op("cuMemAlloc");
            *scratch = Some(AugmentScratch {
                float: alloc(self.shape.len())?,
                crop: alloc(crop.len())?,
                a: alloc(out.len())?,
                b: alloc(out.len())?,
            });
        }
        let s = scratch.as_mut().expect("allocated above");
        to_float_relayout(
            gpu,
            stream,
            self.shape,
            (x, self.layouts.0),
            (&mut s.float, Layout::Nchw),
            self.cfg.scale,
        )?;
        let o = self.cfg.crop_options();
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
