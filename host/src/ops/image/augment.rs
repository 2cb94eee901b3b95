//! Seed 003's augmentation: its configuration, random draw, and the fused and separate runs.

use super::{
    check_kernel_size, check_len, check_sigma, gaussian_blur, normalize, resize, roi_align,
    roi_sampling_grid, rotate, tile_grid, to_float_relayout, to_float_scale, ChannelStats, Interp,
    Layout, PerImage, ResizeMode, RoiAlign, RoiBoxes, Shape, Sigma, BLOCK,
};
use crate::error::{DriverContext, Error, Result};
use crate::runtime::Gpu;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;
use streamline_abi::image::{
    augment_kernel, augment_shared_bytes, AugmentParams, AUGMENT_MAX_CHANNELS, AUGMENT_NHWC_IN,
    AUGMENT_NHWC_OUT, ROI_MAX_SAMPLES_PER_BIN,
};

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
    /// The crop as `roi_align` options: a `crop x crop` output of whole-pixel boxes at scale 1,
    /// adaptive sampling (one sample per bin for such boxes), not aligned.
    pub fn crop_options(&self) -> RoiAlign {
        RoiAlign {
            out_h: self.crop,
            out_w: self.crop,
            spatial_scale: 1.0,
            sampling_ratio: -1,
            aligned: false,
        }
    }

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
    /// The crop boxes as `roi_align` boxes, `[i, x1, y1, x2, y2]` for image `i`.
    pub fn roi_boxes(&self) -> Vec<[f32; 5]> {
        self.boxes
            .iter()
            .enumerate()
            .map(|(i, b)| [i as f32, b[0], b[1], b[2], b[3]])
            .collect()
    }

    /// Draws the parameters for `n` images of `h x w` from `seed` (deterministic), one sigma
    /// for the batch as torchvision's `GaussianBlur` draws it per call.
    pub fn random(cfg: &AugmentConfig, n: usize, h: usize, w: usize, seed: u64) -> AugmentDraw {
        Self::draw(cfg, n, h, w, seed, false)
    }

    /// [`AugmentDraw::random`] with a sigma drawn for every image, as the crop and the angle.
    pub fn random_per_image(
        cfg: &AugmentConfig,
        n: usize,
        h: usize,
        w: usize,
        seed: u64,
    ) -> AugmentDraw {
        Self::draw(cfg, n, h, w, seed, true)
    }

    fn draw(
        cfg: &AugmentConfig,
        n: usize,
        h: usize,
        w: usize,
        seed: u64,
        each: bool,
    ) -> AugmentDraw {
        let sigma = |rng: &mut StdRng| {
            if cfg.sigma.1 > cfg.sigma.0 {
                rng.gen_range(cfg.sigma.0..=cfg.sigma.1)
            } else {
                cfg.sigma.0
            }
        };
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
        let sigmas = if each {
            (0..n).map(|_| sigma(&mut rng)).collect()
        } else {
            vec![sigma(&mut rng); n]
        };
        AugmentDraw {
            boxes,
            angles,
            sigmas,
        }
    }
}

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
            let alloc = |n: usize| {
                stream
                    .alloc_zeros::<f32>(n)
                    .op("cuMemAlloc")
            };
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
