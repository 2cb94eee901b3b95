//! `streamline op` (one image operation on a `.npy` array) and `streamline augment` (seed 003's
//! augmentation on PNG/JPEG images or a built-in synthetic image, written as PNG files and a
//! contact sheet).
//!
//! Everything about the input and the parameters is checked before the device is opened, and
//! outputs are written to a temporary name and renamed, so an error leaves no partial file.

use anyhow::{bail, Context, Result};
use cudarc::driver::CudaSlice;
use ndarray::{ArrayD, IxDyn};
use std::path::{Path, PathBuf};
use streamline::ops::image::*;
use streamline::Gpu;

#[derive(clap::Args, Debug)]
pub struct OpArgs {
    #[command(subcommand)]
    op: Op,
    /// Input array (`.npy`): NCHW (or CHW for one image), f32; uint8 for `to-float`.
    #[arg(long, global = true)]
    input: Option<PathBuf>,
    /// Output array (`.npy`, f32 NCHW).
    #[arg(long, global = true)]
    output: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
enum Op {
    /// uint8 to f32 (`ToDtype(float32)`), with `--scale` to [0, 1].
    ToFloat {
        #[arg(long)]
        scale: bool,
    },
    /// `(x - mean[c]) / std[c]`.
    Normalize {
        /// One mean per channel, comma-separated.
        #[arg(
            long,
            value_delimiter = ',',
            required = true,
            allow_hyphen_values = true
        )]
        mean: Vec<f32>,
        /// One std per channel, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        std: Vec<f32>,
    },
    /// `torchvision.ops.roi_align`.
    RoiAlign {
        /// Boxes (`.npy`, K x 5 f32: batch index, x1, y1, x2, y2).
        #[arg(long)]
        boxes: PathBuf,
        /// Output size `H,W`.
        #[arg(long, value_delimiter = ',', num_args = 1..=2, required = true)]
        output_size: Vec<usize>,
        #[arg(long, default_value_t = 1.0)]
        spatial_scale: f32,
        /// Samples per bin per axis; <= 0: adaptive.
        #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
        sampling_ratio: i32,
        #[arg(long)]
        aligned: bool,
    },
    /// Rotation about the centre, counter-clockwise degrees.
    Rotate {
        /// One angle for every image, or one per image (comma-separated).
        #[arg(
            long,
            value_delimiter = ',',
            required = true,
            allow_hyphen_values = true
        )]
        angle: Vec<f32>,
        /// Interpolation.
        #[arg(long, value_enum, default_value_t = Interp::Nearest)]
        interp: Interp,
        /// Fill value outside the input (default: zero padding).
        #[arg(long, allow_hyphen_values = true)]
        fill: Option<f32>,
    },
    /// Gaussian blur with reflect padding.
    GaussianBlur {
        /// Kernel size `K` or `KX,KY` (odd).
        #[arg(long, value_delimiter = ',', num_args = 1..=2, required = true)]
        kernel_size: Vec<usize>,
        /// Sigma `S` or `SX,SY` (default: torchvision's `0.3 ((k - 1) / 2 - 1) + 0.8`).
        #[arg(long, value_delimiter = ',', num_args = 1..=2)]
        sigma: Vec<f32>,
    },
    /// Resize to `H,W`.
    Resize {
        #[arg(long, value_delimiter = ',', num_args = 1..=2, required = true)]
        size: Vec<usize>,
        /// Interpolation: `bilinear` is antialiased (torchvision's default).
        #[arg(long, value_enum, default_value_t = ResizeMode::BilinearAntialias)]
        mode: ResizeMode,
    },
}

fn pair<T: Copy>(v: &[T]) -> (T, T) {
    (v[0], *v.get(1).unwrap_or(&v[0]))
}

/// Writes through a temporary file in the same folder and renames it into place.
pub fn write_atomically(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{} is not a file name", path.display()))?;
    let tmp = path.with_file_name(format!(
        ".{}.partial-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let r = write(&tmp).and_then(|_| {
        std::fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

fn shape_of(dims: &[usize], what: &str) -> Result<Shape> {
    match *dims {
        [n, c, h, w] => Ok(Shape::new(n, c, h, w)),
        [c, h, w] => Ok(Shape::new(1, c, h, w)),
        _ => bail!("{what}: expected an NCHW (or CHW) array, got shape {dims:?}"),
    }
}

fn read_f32(path: &Path) -> Result<(Shape, Vec<f32>)> {
    let a: ArrayD<f32> = ndarray_npy::read_npy(path)
        .with_context(|| format!("reading {} as an f32 .npy array", path.display()))?;
    let s = shape_of(a.shape(), &path.display().to_string())?;
    Ok((s, a.iter().copied().collect()))
}

fn write_f32(path: &Path, dims: &[usize], data: Vec<f32>) -> Result<()> {
    let a = ArrayD::from_shape_vec(IxDyn(dims), data).context("output shape")?;
    write_atomically(path, |tmp| {
        ndarray_npy::write_npy(tmp, &a).with_context(|| format!("writing {}", path.display()))
    })
}

pub fn run_op(device: usize, ptx: Option<&Path>, a: OpArgs) -> Result<()> {
    let input = a.input.context("--input is required")?;
    let output = a.output.context("--output is required")?;
    if let Op::ToFloat { scale } = a.op {
        let x: ArrayD<u8> = ndarray_npy::read_npy(&input)
            .with_context(|| format!("reading {} as a uint8 .npy array", input.display()))?;
        let dims = x.shape().to_vec();
        let data: Vec<u8> = x.iter().copied().collect();
        let gpu = Gpu::new(device, ptx)?;
        let st = gpu.stream();
        let xd = st.clone_htod(&data)?;
        let mut yd: CudaSlice<f32> = st.alloc_zeros(data.len().max(1))?;
        to_float(&gpu, st, &xd, &mut yd.slice_mut(0..data.len()), scale)?;
        let mut y = st.clone_dtoh(&yd)?;
        y.truncate(data.len());
        return write_f32(&output, &dims, y);
    }
    let (s, x) = read_f32(&input)?;
    s.check("input")?;
    // Check everything before opening the device.
    enum Plan {
        Normalize(Vec<f32>, Vec<f32>),
        Roi(Vec<[f32; 5]>, RoiAlign),
        Rotate(Vec<f32>, Interp, Option<f32>),
        Blur((usize, usize), (f32, f32)),
        Resize((usize, usize), ResizeMode),
    }
    let (plan, out) = match a.op {
        Op::ToFloat { .. } => unreachable!("handled above"),
        Op::Normalize { mean, std } => {
            check_mean_std(&mean, &std, Some(s.c))?;
            (Plan::Normalize(mean, std), s)
        }
        Op::RoiAlign {
            boxes,
            output_size,
            spatial_scale,
            sampling_ratio,
            aligned,
        } => {
            let b: ArrayD<f32> = ndarray_npy::read_npy(&boxes)
                .with_context(|| format!("reading boxes {}", boxes.display()))?;
            if b.ndim() != 2 || b.shape()[1] != 5 {
                bail!(
                    "invalid argument `boxes`: expected K x 5 (batch index, x1, y1, x2, y2), got {:?}",
                    b.shape()
                );
            }
            let list: Vec<[f32; 5]> = b
                .outer_iter()
                .map(|r| [r[0], r[1], r[2], r[3], r[4]])
                .collect();
            let (oh, ow) = pair(&output_size);
            let o = RoiAlign {
                out_h: oh,
                out_w: ow,
                spatial_scale,
                sampling_ratio,
                aligned,
            };
            let out = check_roi_align(s, &list, &o)?;
            (Plan::Roi(list, o), out)
        }
        Op::Rotate {
            angle,
            interp,
            fill,
        } => {
            let angles = match angle.len() {
                1 => vec![angle[0]; s.n],
                k if k == s.n => angle,
                k => bail!(
                    "invalid argument `angle`: {k} values; give one, or one per image ({})",
                    s.n
                ),
            };
            if let Some(v) = angles.iter().find(|v| !v.is_finite()) {
                bail!("invalid argument `angle`: {v} is not finite");
            }
            (Plan::Rotate(angles, interp, fill), s)
        }
        Op::GaussianBlur { kernel_size, sigma } => {
            let (kx, ky) = pair(&kernel_size);
            check_kernel_size("kernel_size", kx, s.w, "width")?;
            check_kernel_size("kernel_size", ky, s.h, "height")?;
            let (sx, sy) = if sigma.is_empty() {
                (default_sigma(kx), default_sigma(ky))
            } else {
                pair(&sigma)
            };
            check_sigma("sigma", sx)?;
            check_sigma("sigma", sy)?;
            (Plan::Blur((kx, ky), (sx, sy)), s)
        }
        Op::Resize { size, mode } => {
            let (h, w) = pair(&size);
            let out = s.with_size(h, w);
            out.check("size")?;
            (Plan::Resize((h, w), mode), out)
        }
    };
    let gpu = Gpu::new(device, ptx)?;
    let st = gpu.stream();
    let xd = st.clone_htod(&x)?;
    let mut yd: CudaSlice<f32> = st.alloc_zeros(out.len())?;
    match plan {
        Plan::Normalize(mean, std) => {
            let stats = ChannelStats::upload(st, &mean, &std)?;
            normalize(&gpu, st, s, &xd, &stats, &mut yd)?
        }
        Plan::Roi(list, o) => {
            let rb = RoiBoxes::upload(st, &list)?;
            roi_align(&gpu, st, s, &xd, &rb, o, &mut yd)?
        }
        Plan::Rotate(angles, mode, fill) => {
            let a = PerImage::upload(st, "angle", &angles)?;
            rotate(&gpu, st, s, &xd, &a, mode, fill, &mut yd)?
        }
        Plan::Blur(k, (sx, sy)) => {
            gaussian_blur(&gpu, st, s, &xd, k, Sigma::Global(sx, sy), &mut yd)?
        }
        Plan::Resize(size, m) => resize(&gpu, st, s, &xd, size, m, &mut yd)?,
    }
    let y = st.clone_dtoh(&yd)?;
    write_f32(&output, &[out.n, out.c, out.h, out.w], y)?;
    println!("wrote {} ({})", output.display(), out);
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct AugmentArgs {
    /// Folder of PNG/JPEG images, all of one size (converted to RGB).
    #[arg(long, conflicts_with = "synthetic")]
    input: Option<PathBuf>,
    /// Use the built-in synthetic pattern image instead of files.
    #[arg(long)]
    synthetic: bool,
    /// Images in the synthetic batch.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// Side of the synthetic images.
    #[arg(long, default_value_t = 256)]
    size: usize,
    /// Seed of the random crops, angles and sigma.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output folder (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Side of the crop (default: half the smaller image side).
    #[arg(long)]
    crop: Option<usize>,
    /// Largest rotation in degrees.
    #[arg(long, default_value_t = 45.0)]
    degrees: f32,
    /// Blur kernel size (odd).
    #[arg(long, default_value_t = 7)]
    kernel_size: usize,
    /// Bilinear rotation instead of torchvision's default nearest.
    #[arg(long)]
    bilinear: bool,
    /// Run the chain of separate kernels instead of the fused one.
    #[arg(long)]
    separate: bool,
}

/// The synthetic test image: a checkerboard (shows the crop and the rotation), concentric
/// rings (show the blur), a diagonal colour gradient and a bright arrow pointing up (shows the
/// direction of rotation), shifted a little per image.
pub fn synthetic_image(size: usize, index: usize) -> Vec<u8> {
    let mut v = vec![0u8; 3 * size * size];
    let c = size as f64 / 2.0;
    let cell = (size / 8).max(1);
    for y in 0..size {
        for x in 0..size {
            let xs = x + index * cell / 4;
            let check = ((xs / cell) + (y / cell)).is_multiple_of(2);
            let r = ((x as f64 - c).powi(2) + (y as f64 - c).powi(2)).sqrt();
            let ring = ((r / (size as f64 / 16.0)).floor() as usize).is_multiple_of(2);
            let gx = (255 * x / size.max(1)) as u8;
            let gy = (255 * y / size.max(1)) as u8;
            let arrow = {
                let dx = (x as f64 - c).abs();
                let top = size as f64 * 0.15;
                let dy = y as f64 - top;
                (dy >= 0.0 && dx <= dy * 0.6 && dy < size as f64 * 0.2)
                    || (dx < size as f64 * 0.03 && dy >= 0.0 && y as f64 <= c)
            };
            let px = if arrow {
                [255, 255, 40]
            } else {
                let base = if check { 200 } else { 40 };
                let b = if ring { base } else { base / 2 + 30 };
                [b.max(gx / 2), b / 2 + gy / 3, (255 - b).min(200)]
            };
            for ch in 0..3 {
                v[(ch * size + y) * size + x] = px[ch];
            }
        }
    }
    v
}

/// The PNG/JPEG images of `dir` (sorted by name, one size), decoded to RGB: their shape, their
/// bytes in NHWC (as decoded) and their names.
fn read_images(dir: &Path) -> Result<(Shape, Vec<u8>, Vec<String>)> {
    let files = streamline_scenarios::folder::list_images(dir)?;
    if files.is_empty() {
        bail!(
            "invalid argument `input`: no PNG or JPEG files in {}",
            dir.display()
        );
    }
    let mut data = Vec::new();
    let mut dims = None;
    let mut names = Vec::new();
    for f in &files {
        let img = image::open(f)
            .with_context(|| {
                format!(
                    "invalid argument `input`: cannot read image {}",
                    f.display()
                )
            })?
            .to_rgb8();
        let (w, h) = img.dimensions();
        match dims {
            None => dims = Some((w, h)),
            Some(d) if d != (w, h) => bail!(
                "invalid argument `input`: {} is {w}x{h} but the first image is {}x{}; all images must have one size",
                f.display(),
                d.0,
                d.1
            ),
            _ => {}
        }
        // The decoder's pixels as they are (HWC): the fused kernel reads NHWC in place.
        data.extend_from_slice(img.as_raw());
        names.push(
            f.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
    }
    let (w, h) = dims.expect("at least one image");
    Ok((
        Shape::new(files.len(), 3, h as usize, w as usize),
        data,
        names,
    ))
}

/// One output plane set to an RGB image: values clamped to the 0..=255 range of the input.
fn to_rgb(y: &[f32], s: Shape, n: usize, scale: f32) -> image::RgbImage {
    image::RgbImage::from_fn(s.w as u32, s.h as u32, |x, yy| {
        let mut p = [0u8; 3];
        for (ch, v) in p.iter_mut().enumerate() {
            let c = ch.min(s.c - 1);
            let val = y[((n * s.c + c) * s.h + yy as usize) * s.w + x as usize] * scale;
            *v = val.round().clamp(0.0, 255.0) as u8;
        }
        image::Rgb(p)
    })
}

pub fn run_augment(device: usize, ptx: Option<&Path>, a: AugmentArgs) -> Result<()> {
    let (shape, data, names, layout) = match (&a.input, a.synthetic) {
        (Some(dir), _) => {
            let (s, d, n) = read_images(dir)?;
            (s, d, n, Layout::Nhwc)
        }
        (None, true) => {
            if a.batch == 0 || a.size == 0 {
                bail!("invalid argument `batch`/`size`: both must be at least 1");
            }
            let mut d = Vec::with_capacity(3 * a.size * a.size * a.batch);
            for i in 0..a.batch {
                d.extend(synthetic_image(a.size, i));
            }
            let names = (0..a.batch).map(|i| format!("synthetic_{i:03}")).collect();
            (
                Shape::new(a.batch, 3, a.size, a.size),
                d,
                names,
                Layout::Nchw,
            )
        }
        (None, false) => bail!("give --input DIR or --synthetic"),
    };
    let side = shape.h.min(shape.w);
    let mut cfg = AugmentConfig::seed003(side, shape.c);
    cfg.crop = a.crop.unwrap_or(side / 2).max(1);
    cfg.degrees = a.degrees;
    cfg.kernel_size = a.kernel_size;
    cfg.interp = if a.bilinear {
        Interp::Bilinear
    } else {
        Interp::Nearest
    };
    cfg.check(shape)?;
    let draw = AugmentDraw::random(&cfg, shape.n, shape.h, shape.w, a.seed);
    let gpu = Gpu::new(device, ptx)?;
    let st = gpu.stream();
    let aug = Augment::new(st, shape, &cfg, &draw)?.with_layouts(layout, Layout::Nchw);
    let out = aug.output_shape();
    let xd = st.clone_htod(&data)?;
    let mut yd: CudaSlice<f32> = st.alloc_zeros(out.len())?;
    let mut scratch = None;
    if a.separate {
        aug.run_separate(&gpu, st, &xd, &mut scratch, &mut yd)?;
    } else {
        aug.run_fused(&gpu, st, &xd, &mut yd)?;
    }
    let y = st.clone_dtoh(&yd)?;
    let scale = if cfg.scale { 255.0 } else { 1.0 };
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;

    let cols = (out.n as f64).sqrt().ceil() as usize;
    let rows = out.n.div_ceil(cols);
    let gap = 4;
    let mut sheet = image::RgbImage::from_pixel(
        (cols * (out.w + gap) + gap) as u32,
        (rows * (out.h + gap) + gap) as u32,
        image::Rgb([255, 255, 255]),
    );
    for (i, name) in names.iter().enumerate() {
        let img = to_rgb(&y, out, i, scale);
        let (cx, cy) = (i % cols, i / cols);
        image::imageops::replace(
            &mut sheet,
            &img,
            (gap + cx * (out.w + gap)) as i64,
            (gap + cy * (out.h + gap)) as i64,
        );
        let path = a.out.join(format!("{name}_aug.png"));
        write_atomically(&path, |tmp| {
            img.save_with_format(tmp, image::ImageFormat::Png)
                .with_context(|| format!("writing {}", path.display()))
        })?;
    }
    let path = a.out.join("contact_sheet.png");
    write_atomically(&path, |tmp| {
        sheet
            .save_with_format(tmp, image::ImageFormat::Png)
            .with_context(|| format!("writing {}", path.display()))
    })?;
    println!(
        "augmented {} images {}x{} -> {}x{} ({}), wrote {} PNGs and {}",
        out.n,
        shape.h,
        shape.w,
        out.h,
        out.w,
        if a.separate {
            "separate kernels"
        } else {
            "fused kernel"
        },
        out.n,
        path.display()
    );
    Ok(())
}
