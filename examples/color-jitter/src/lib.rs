//! The host side of the color-jitter example: the embedded kernels, a launcher that plugs into
//! seed 003's `augment-train` pipeline as a [`Transform`], and the f64 CPU reference.

use color_jitter_kernels::{JitterParams, JITTER_BLOCK};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;
use streamline::cudarc::driver::CudaStream;
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::ops::image::Shape;
use streamline::{DevPtrMut, EmbeddedModule, Error, Gpu, LaunchConfig, Module, Result};
use streamline_scenarios::augment_train::Transform;

/// The PTX `build.rs` built from `kernels/`.
pub static KERNELS: EmbeddedModule = streamline::include_kernels!("color_jitter_kernels");

/// The factor ranges, torchvision's `ColorJitter(brightness, contrast, saturation)`: each
/// factor is drawn uniformly from `[1 - v, 1 + v]`, per image.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Jitter {
    pub brightness: f32,
    pub contrast: f32,
    pub saturation: f32,
}

impl Jitter {
    /// `n` factor quadruples `[b, c, s, 0]`, deterministic in `seed`.
    pub fn draw(&self, n: usize, seed: u64) -> Result<Vec<[f32; 4]>> {
        for (name, v) in [
            ("brightness", self.brightness),
            ("contrast", self.contrast),
            ("saturation", self.saturation),
        ] {
            if !(0.0..1.0).contains(&v) {
                return Err(Error::arg(
                    "jitter",
                    format!("{name} {v} is outside [0, 1): factors would reach 0 or below"),
                ));
            }
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let mut f = |v: f32| 1.0 + rng.gen_range(-v..=v);
        Ok((0..n)
            .map(|_| {
                [
                    f(self.brightness),
                    f(self.contrast),
                    f(self.saturation),
                    0.0,
                ]
            })
            .collect())
    }
}

/// Color jitter on `n` RGB images of `plane` pixels: the two kernels, their per-image factors
/// and the grayscale sums, on one module.
pub struct ColorJitter {
    module: Module,
    jitter: Jitter,
    plane: u32,
    images: u32,
    factors: Option<DeviceBuffer<f32>>,
    sums: Option<DeviceBuffer<f32>>,
    host_factors: Vec<[f32; 4]>,
}

impl ColorJitter {
    /// Loads the kernels on `gpu`.
    pub fn new(gpu: &Gpu, jitter: Jitter) -> Result<ColorJitter> {
        Ok(ColorJitter {
            module: gpu.load(&KERNELS)?,
            jitter,
            plane: 0,
            images: 0,
            factors: None,
            sums: None,
            host_factors: Vec::new(),
        })
    }

    /// The factors of the current batch size, as drawn.
    pub fn factors(&self) -> &[[f32; 4]] {
        &self.host_factors
    }

    /// Draws new factors for `shape` (3 channels) and uploads them with the sums' buffer.
    pub fn set_batch(&mut self, pool: &StreamPool, shape: Shape, seed: u64) -> Result<()> {
        if shape.c != 3 {
            return Err(Error::arg(
                "shape",
                format!("color jitter needs 3 channels (RGB), got {}", shape.c),
            ));
        }
        let plane = shape.h * shape.w;
        if plane == 0 || plane > u32::MAX as usize || shape.n == 0 || shape.n > 65_535 {
            return Err(Error::arg(
                "shape",
                format!(
                    "{} images of {plane} pixels; allowed 1..=65535 images of 1..=2^32-1 pixels",
                    shape.n
                ),
            ));
        }
        self.host_factors = self.jitter.draw(shape.n, seed)?;
        let flat: Vec<f32> = self.host_factors.iter().flatten().copied().collect();
        self.factors = Some(DeviceBuffer::from_slice(pool, 0, &flat)?);
        self.sums = Some(DeviceBuffer::zeros(pool, 0, shape.n)?);
        self.plane = plane as u32;
        self.images = shape.n as u32;
        Ok(())
    }

    /// `y = jitter(x)` on `stream`, both `n x 3 x plane` f32 of the batch set last.
    pub fn apply(
        &mut self,
        stream: &Arc<CudaStream>,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
    ) -> Result<()> {
        let (Some(factors), Some(sums)) = (&self.factors, &mut self.sums) else {
            return Err(Error::arg("batch", "no batch set: call set_batch first"));
        };
        let len = self.images as usize * 3 * self.plane as usize;
        for (arg, n) in [("x", x.len()), ("y", y.len())] {
            if n != len {
                return Err(Error::arg(
                    arg,
                    format!("length {n}; the batch set holds {len} values"),
                ));
            }
        }
        let blocks = self.plane.div_ceil(JITTER_BLOCK).clamp(1, 1024);
        let cfg = LaunchConfig::new((blocks, self.images, 1), (JITTER_BLOCK, 1, 1));
        sums.fill_zeros(stream)?;
        {
            let mut l = self
                .module
                .prepare(stream, color_jitter_kernels::jitter_gray_sum);
            let p = JitterParams {
                x: l.read(x),
                y: DevPtrMut::NULL,
                factors: l.read(factors).cast(),
                sums: l.write(sums),
                plane: self.plane,
                pad: 0,
            };
            // SAFETY: `x` holds the batch's `n x 3 x plane` values (checked above), `factors`
            // and `sums` one entry per image, and the grid has one row per image.
            unsafe { l.run(cfg, p)? };
        }
        let mut l = self
            .module
            .prepare(stream, color_jitter_kernels::color_jitter);
        let p = JitterParams {
            x: l.read(x),
            y: l.write(y),
            factors: l.read(factors).cast(),
            sums: l.write(sums),
            plane: self.plane,
            pad: 0,
        };
        // SAFETY: as above; `y` is a distinct buffer of the same length, and the sums are
        // complete: this launch is ordered after the sum kernel on the same stream.
        unsafe { l.run(cfg, p) }
    }
}

impl Transform for ColorJitter {
    fn name(&self) -> &str {
        "color jitter"
    }

    fn prepare(&mut self, pool: &StreamPool, shape: Shape, seed: u64) -> Result<()> {
        self.set_batch(pool, shape, seed)
    }

    fn run(
        &mut self,
        stream: &Arc<CudaStream>,
        x: &DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
    ) -> Result<()> {
        self.apply(stream, x, y)
    }
}

fn unit(v: f64) -> f64 {
    v.clamp(0.0, 1.0)
}

fn gray(r: f64, g: f64, b: f64) -> f64 {
    0.2989 * r + 0.587 * g + 0.114 * b
}

/// The jitter of `x` (`n x 3 x plane`) with `factors`, in f64, and per image the absolute
/// bound the GPU result must meet.
///
/// Error analysis (`u = 2^-24`, every value in `[0, 1]`, clamping 1-Lipschitz): brightness
/// rounds once (`u`); a grayscale of rounded values is within `6u`; the mean is a sum of
/// `plane` non-negative terms in some order, within `(plane + 7) u` of the exact mean (relative
/// bound of any summation order, plus the terms' own errors and the division); contrast adds
/// `c (2u) + |1 - c| ((plane + 7) u + 2u) + 2u`; saturation multiplies that by `s + |1 - s|` and
/// adds `|1 - s| 6u + 3u`. The bound is that sum with a 10% margin.
pub fn reference(x: &[f32], plane: usize, factors: &[[f32; 4]]) -> (Vec<f64>, Vec<f64>) {
    let u = f64::powi(2.0, -24);
    let mut out = Vec::with_capacity(x.len());
    let mut bounds = Vec::with_capacity(factors.len());
    for (img, f) in x.chunks(3 * plane).zip(factors) {
        let (b, c, s) = (f[0] as f64, f[1] as f64, f[2] as f64);
        let bright: Vec<f64> = img.iter().map(|&v| unit(b * v as f64)).collect();
        let mean = (0..plane)
            .map(|i| gray(bright[i], bright[plane + i], bright[2 * plane + i]))
            .sum::<f64>()
            / plane as f64;
        let contrast: Vec<f64> = bright
            .iter()
            .map(|&v| unit(c * v + (1.0 - c) * mean))
            .collect();
        let mut res = vec![0.0; 3 * plane];
        for i in 0..plane {
            let g = gray(contrast[i], contrast[plane + i], contrast[2 * plane + i]);
            for ch in 0..3 {
                res[ch * plane + i] = unit(s * contrast[ch * plane + i] + (1.0 - s) * g);
            }
        }
        out.extend(res);
        let e_contrast =
            c * 2.0 * u + (1.0 - c).abs() * ((plane as f64 + 7.0) * u + 2.0 * u) + 2.0 * u;
        let e = (s + (1.0 - s).abs()) * e_contrast + (1.0 - s).abs() * 6.0 * u + 3.0 * u;
        bounds.push(1.1 * e);
    }
    (out, bounds)
}
