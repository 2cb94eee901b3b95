//! The image operations' vocabulary: shapes and layouts, each operation's options, seed 003's
//! augmentation settings and random draw, and every check that needs no device. The launchers
//! ([`crate::ops::image`]) and the CPU references (`streamline_testing::reference::image`) both
//! build on it, and neither depends on the other.

use crate::error::{Error, Result};
use rand::{rngs::StdRng, Rng, SeedableRng};
use streamline_abi::image::{AUGMENT_MAX_CHANNELS, MAX_KERNEL_SIZE, ROI_MAX_SAMPLES_PER_BIN};

/// Memory layout of a dense batch of `n` images of `c` channels of `h x w`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Layout {
    /// Channel planes one after the other (what PyTorch models take).
    #[default]
    Nchw,
    /// Pixels one after the other, their channels interleaved (what image decoders produce).
    Nhwc,
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layout::Nchw => "NCHW",
            Layout::Nhwc => "NHWC",
        })
    }
}

impl Layout {
    /// `NCHW` or `NHWC`, as torchvision and the Python package write them; `arg` names it in
    /// the error.
    pub fn parse(arg: &'static str, s: &str) -> Result<Layout> {
        match s {
            "NCHW" => Ok(Layout::Nchw),
            "NHWC" => Ok(Layout::Nhwc),
            _ => Err(Error::arg(
                arg,
                format!("{s:?}: must be \"NCHW\" or \"NHWC\""),
            )),
        }
    }

    /// The batch whose dimensions, in this layout's order, are `d`.
    pub fn shape(self, [a, b, c, d]: [usize; 4]) -> Shape {
        match self {
            Layout::Nchw => Shape::new(a, b, c, d),
            Layout::Nhwc => Shape::new(a, d, b, c),
        }
    }

    /// The dimensions of `s` in this layout's order.
    pub fn dims(self, s: Shape) -> [usize; 4] {
        match self {
            Layout::Nchw => [s.n, s.c, s.h, s.w],
            Layout::Nhwc => [s.n, s.h, s.w, s.c],
        }
    }
}

/// Shape of a dense batch (`n`, `c`, `h`, `w`, whatever its [`Layout`]).
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

    /// Checks that every extent is at least 1, a plane holds at most `2^31 - 1` values, an image
    /// at most `2^32 - 1` and the batch at most `2^40`; `arg` names the tensor in the error.
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
        // The kernels address a pixel by a 32-bit offset inside its image.
        let image = plane.and_then(|p| p.checked_mul(self.c));
        if image.is_none_or(|i| i > u32::MAX as usize) {
            return Err(Error::arg(
                arg,
                format!("shape {self}: channels * height * width must be at most 2^32 - 1"),
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

/// Checks that a buffer of `len` values holds a batch of `shape`; `arg` names it.
pub fn check_len(arg: &'static str, len: usize, shape: Shape) -> Result<()> {
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

/// Interpolation of `resize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ResizeMode {
    /// Bilinear, `align_corners=False`, no antialiasing.
    #[cfg_attr(feature = "clap", value(name = "bilinear-noaa"))]
    Bilinear,
    /// Bilinear with torchvision's antialiasing (`antialias=True`, its default).
    #[cfg_attr(feature = "clap", value(name = "bilinear"))]
    BilinearAntialias,
    /// torch's `nearest`.
    Nearest,
}

/// Interpolation of `rotate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Interp {
    /// Nearest neighbour (torchvision's default for `rotate`).
    Nearest,
    /// Bilinear.
    Bilinear,
}

impl Interp {
    /// `nearest` or `bilinear`, torchvision's names; `arg` names it in the error.
    pub fn parse(arg: &'static str, s: &str) -> Result<Interp> {
        match s {
            "nearest" => Ok(Interp::Nearest),
            "bilinear" => Ok(Interp::Bilinear),
            _ => Err(Error::arg(
                arg,
                format!("{s:?}: must be nearest or bilinear"),
            )),
        }
    }
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

/// Checks per-channel normalisation values: one mean and one std per channel (`channels`
/// where the images are known, else at least one), every mean finite, every std finite and
/// non-zero.
pub fn check_mean_std(mean: &[f32], std: &[f32], channels: Option<usize>) -> Result<()> {
    let c = channels.unwrap_or(mean.len());
    if c == 0 || mean.len() != c {
        return Err(Error::arg(
            "mean",
            format!(
                "has {} values; needs one per channel ({})",
                mean.len(),
                if c == 0 {
                    "at least one".to_string()
                } else {
                    c.to_string()
                }
            ),
        ));
    }
    if std.len() != c {
        return Err(Error::arg(
            "std",
            format!("has {} values; needs one per channel ({c})", std.len()),
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
    Ok(())
}

/// torchvision's default Gaussian sigma for a kernel of `k` taps:
/// `0.3 ((k - 1) / 2 - 1) + 0.8`.
pub fn default_sigma(k: usize) -> f32 {
    0.3 * ((k as f32 - 1.0) * 0.5 - 1.0) + 0.8
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

/// The checks of `roi_align` that need no device: the input shape, the output size, the
/// options, and every box (batch index inside `0..n`, bounded sampling grid). Returns the
/// output shape.
pub fn check_roi_align(shape: Shape, boxes: &[[f32; 5]], o: &RoiAlign) -> Result<Shape> {
    check_boxes(boxes)?;
    let out = check_roi_options(shape, boxes.len(), o)?;
    check_roi_boxes(boxes, shape.n, o)?;
    Ok(out)
}

/// The shape and option checks of [`check_roi_align`]; returns the output shape.
pub fn check_roi_options(shape: Shape, num_boxes: usize, o: &RoiAlign) -> Result<Shape> {
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
pub fn check_roi_boxes(boxes: &[[f32; 5]], n: usize, o: &RoiAlign) -> Result<bool> {
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

/// Checks boxes without uploading them: each with a finite integral batch index `>= 0`,
/// finite coordinates and `x1 <= x2`, `y1 <= y2`.
pub fn check_boxes(boxes: &[[f32; 5]]) -> Result<()> {
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
        check_mean_std(&self.mean, &self.std, Some(shape.c))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_order_the_same_batch_their_own_way() {
        let s = Shape::new(2, 3, 5, 7);
        assert_eq!(Layout::Nchw.dims(s), [2, 3, 5, 7]);
        assert_eq!(Layout::Nhwc.dims(s), [2, 5, 7, 3]);
        for l in [Layout::Nchw, Layout::Nhwc] {
            assert_eq!(l.shape(l.dims(s)), s);
            assert_eq!(Layout::parse("layout", &l.to_string()).ok(), Some(l));
        }
        let e = Layout::parse("output_layout", "CHW")
            .unwrap_err()
            .to_string();
        assert!(e.contains("output_layout") && e.contains("NHWC"), "{e}");
        assert_eq!(
            Interp::parse("interpolation", "bilinear").ok(),
            Some(Interp::Bilinear)
        );
        assert!(Interp::parse("interpolation", "bicubic").is_err());
    }
}
