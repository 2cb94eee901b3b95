//! Seed 003's augmentation: its configuration, random draw, and the fused and separate runs;
//! `ragged` runs it on batches of images of their own sizes.

mod ragged;

pub use ragged::{check_extents, extent_words};

use super::{
    check_len, check_sigma, gaussian_blur, layout_bits, normalize, resize, resize_scale, roi_align,
    roi_sampling_grid, rotate, tile_grid, to_float_relayout, to_float_scale, ChannelStats, Interp,
    Layout, PerImage, ResizeMode, RoiBoxes, Shape, Sigma,
};
use crate::engine::params;
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{Gpu, LaunchConfig};
use crate::spec::image::{AugmentConfig, AugmentDraw};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice};
use std::sync::Arc;
use streamline_abi::image::{
    augment_block_dim, augment_dyadic, augment_kernel, augment_ragged_kernel, augment_shared_bytes,
    augment_takes_dyadic, AugmentDrawParams, AugmentParams, AUGMENT_DRAW, AUGMENT_DRAW_BLOCK,
    AUGMENT_NHWC_IN, AUGMENT_NHWC_OUT, ROI_MAX_SAMPLES_PER_BIN, TILE,
};
use streamline_device::{DevPtr, DevPtrMut};

/// An augmentation ready to run: configuration and draw validated and on the device.
pub struct Augment {
    cfg: AugmentConfig,
    shape: Shape,
    layouts: (Layout, Layout),
    /// The host's draw; for a draw made on the device ([`Augment::drawn_on_device`]), its
    /// generator and whether each image gets its own sigma.
    draw: Drawn,
    /// The fused kernel's per-call arrays in one allocation ([`FusedArrays`]): one buffer to
    /// order against the stream per run instead of four.
    fused: Arc<params::DeviceParams<f32>>,
    /// Output tiles per block of the fused kernel, one above the other (`None`: see
    /// [`Augment::with_strip`]).
    strip: Option<usize>,
    /// Whether the fused kernel takes its dyadic kernels ([`augment_takes_dyadic`]: the draw's
    /// crops pass [`augment_dyadic`], nearest rotation, up to 7 taps).
    dyadic: bool,
    /// Whether it takes ragged batches ([`Augment::ragged`]); `shape` is then the square its
    /// crops are drawn in.
    ragged: bool,
}

/// Where the fused kernel's arrays lie in [`Augment`]'s one buffer, in f32 from its start: the
/// boxes (four per image), the angles and the sigmas (one per image), then the channels' means
/// and standard deviations.
struct FusedArrays {
    angles: usize,
    sigmas: usize,
    stats: usize,
}

impl FusedArrays {
    fn of(n: usize) -> FusedArrays {
        FusedArrays {
            angles: 4 * n,
            sigmas: 5 * n,
            stats: 6 * n,
        }
    }

    /// The buffer's contents for `draw` and `cfg`, in the order of [`FusedArrays::of`].
    fn pack(cfg: &AugmentConfig, draw: &AugmentDraw) -> Vec<f32> {
        let mut v: Vec<f32> = draw.boxes.iter().flatten().copied().collect();
        debug_assert_eq!(v.len(), FusedArrays::of(draw.angles.len()).angles);
        v.extend_from_slice(&draw.angles);
        v.extend_from_slice(&draw.sigmas);
        v.extend_from_slice(&cfg.mean);
        v.extend_from_slice(&cfg.std);
        v
    }
}

/// Where an [`Augment`]'s random parameters come from.
enum Drawn {
    /// Drawn on the host, with the separate chain's arrays of that draw.
    Host(AugmentDraw, Box<Chain>),
    Device {
        /// Device address of the generator's state.
        state: u64,
        /// Its owner, where the augmentation keeps it alive.
        rng: Option<Arc<DeviceRng>>,
        per_image_sigma: bool,
    },
}

/// The per-call arrays of [`Augment::run_separate`]'s chain of kernels.
struct Chain {
    roi_boxes: RoiBoxes,
    angles: PerImage,
    sigma_pairs: PerImage,
    stats: ChannelStats,
}

/// The generator of augmentations drawn on the device ([`Augment::drawn_on_device`]): a seed
/// and the number of draws made so far, in device memory, where every run of the fused kernel
/// (eager, or a replay of a graph that captured it) draws from it and advances it. The same
/// seed gives the same sequence of draws, however the runs are launched.
pub struct DeviceRng {
    state: Arc<params::DeviceParams<u32>>,
    seed: u64,
}

impl DeviceRng {
    /// A generator with `seed` that has made no draw, in device memory of `stream`'s context
    /// (made before this returns, during a capture too: see [`params::upload_kept`]). Runs
    /// that use it on several streams must be ordered by the caller, as they draw in turn.
    pub fn new(stream: &Arc<CudaStream>, seed: u64) -> Result<Arc<DeviceRng>> {
        let state = params::upload_kept(stream, &[seed as u32, (seed >> 32) as u32, 0, 0])?;
        Ok(Arc::new(DeviceRng { state, seed }))
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Device address of the state: the seed (two u32, low word first), then the draws made
    /// (two u32, low word first).
    pub fn state_ptr(&self) -> u64 {
        let (p, _) = self.state.device_ptr(self.state.stream());
        p
    }

    /// The draws made so far, once the work queued on `stream` has finished (the host waits).
    pub fn draws(&self, stream: &Arc<CudaStream>) -> Result<u64> {
        let v = stream.clone_dtoh(&*self.state).op("cuMemcpyDtoHAsync")?;
        stream.synchronize().op("cuStreamSynchronize")?;
        Ok((v[3] as u64) << 32 | v[2] as u64)
    }
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
        let angles = PerImage::upload(stream, "angles", &draw.angles)?;
        let stats = ChannelStats::upload(stream, &cfg.mean, &cfg.std)?;
        let fused = FusedArrays::pack(cfg, draw);
        debug_assert_eq!(fused.len(), FusedArrays::of(n).stats + 2 * shape.c);
        // The boxes come first, so a value this upload refuses is named by its index among
        // them; the other arrays were checked above.
        let fused = PerImage::upload(stream, "boxes", &fused)?.dev;
        let pairs: Vec<f32> = draw.sigmas.iter().flat_map(|s| [*s, *s]).collect();
        let dyadic = takes_dyadic(cfg, shape, &draw.boxes);
        Ok(Augment {
            cfg: cfg.clone(),
            shape,
            layouts: (Layout::Nchw, Layout::Nchw),
            draw: Drawn::Host(
                draw.clone(),
                Box::new(Chain {
                    roi_boxes,
                    angles,
                    sigma_pairs: PerImage::upload(stream, "sigma", &pairs)?,
                    stats,
                }),
            ),
            fused,
            strip: None,
            dyadic,
            ragged: false,
        })
    }

    /// An augmentation of uint8 input of `shape` whose random parameters are drawn on the
    /// device from `rng` at every run of the fused kernel, anew each time: in a captured CUDA
    /// graph, every replay draws the next batch's crops, angles and sigmas, as the same
    /// sequence of eager runs would. The crops are whole-pixel boxes of `cfg.crop` inside the
    /// image, the angles in `[-degrees, degrees)`, the sigmas in the configured range (one per
    /// image with `per_image_sigma`, else one per batch); `streamline_abi::image::
    /// AugmentDrawParams` gives the exact formula, and the CPU reference
    /// `streamline_testing::reference::image::augment_device_draw` reproduces it bit for bit.
    ///
    /// Only the fused kernel runs it ([`Augment::run_separate`] needs a host draw).
    pub fn drawn_on_device(
        stream: &Arc<CudaStream>,
        shape: Shape,
        cfg: &AugmentConfig,
        rng: &Arc<DeviceRng>,
        per_image_sigma: bool,
    ) -> Result<Augment> {
        let state = rng.state_ptr();
        let mut aug = Self::drawn_from(stream, shape, cfg, state, per_image_sigma)?;
        if let Drawn::Device { rng: owner, .. } = &mut aug.draw {
            *owner = Some(rng.clone());
        }
        Ok(aug)
    }

    /// [`Augment::drawn_on_device`] with a generator whose state lies in memory of the
    /// caller's (a PyTorch tensor of four int32: the seed, low word first, then the draws made,
    /// low word first), which every run reads and advances.
    ///
    /// # Safety
    /// `state` must address four u32 of device memory in `stream`'s context that stay
    /// allocated while runs of this augmentation are queued, and no other work may use them
    /// concurrently with a run (ordering them is the caller's, as for [`crate::engine::External`]).
    pub unsafe fn drawn_on_device_at(
        stream: &Arc<CudaStream>,
        shape: Shape,
        cfg: &AugmentConfig,
        state: &impl DevicePtr<u32>,
        per_image_sigma: bool,
    ) -> Result<Augment> {
        if state.len() < 4 {
            return Err(Error::arg(
                "state",
                format!(
                    "holds {} values; the generator's state needs 4",
                    state.len()
                ),
            ));
        }
        let (ptr, _) = state.device_ptr(stream);
        Self::drawn_from(stream, shape, cfg, ptr, per_image_sigma)
    }

    fn drawn_from(
        stream: &Arc<CudaStream>,
        shape: Shape,
        cfg: &AugmentConfig,
        state: u64,
        per_image_sigma: bool,
    ) -> Result<Augment> {
        cfg.check(shape)?;
        let crop = cfg.crop as u32;
        let c = cfg.crop as f32;
        let o = cfg.crop_options();
        // Every box the device draws has this size: one check covers them all.
        let (gh, gw) = roi_sampling_grid(&[0.0, 0.0, 0.0, c, c], &o);
        if gh * gw > ROI_MAX_SAMPLES_PER_BIN as i64 {
            return Err(Error::arg(
                "crop",
                format!("{crop} needs more than {ROI_MAX_SAMPLES_PER_BIN} samples per bin"),
            ));
        }
        let n = shape.n;
        let mut fused = vec![0.0f32; FusedArrays::of(n).stats];
        fused.extend_from_slice(&cfg.mean);
        fused.extend_from_slice(&cfg.std);
        let fused = params::upload(stream, &fused)?;
        // Every box the device draws is a whole-pixel `crop x crop` inside the image.
        let dyadic = takes_dyadic(cfg, shape, &[[0.0, 0.0, c, c]]);
        Ok(Augment {
            cfg: cfg.clone(),
            shape,
            layouts: (Layout::Nchw, Layout::Nchw),
            draw: Drawn::Device {
                state,
                rng: None,
                per_image_sigma,
            },
            fused,
            strip: None,
            dyadic,
            ragged: false,
        })
    }

    /// The same augmentation with each block of the fused kernel working down `tiles` output
    /// tiles of 32 x 32 pixels, one above the other (`None`, the default: [`DEFAULT_STRIP`]
    /// tiles, [`DYADIC_STRIP`] where the dyadic kernels run, halved until every multiprocessor
    /// gets [`STRIP_MIN_BLOCKS_PER_SM`] blocks, down to one).
    ///
    /// A block rotates the blur's halo rows that a tile shares with the next one once and
    /// sets up its image once per strip; the results are the same bits whatever the strip.
    /// `Some(0)` and strips over 32768 tiles are refused, naming `strip`.
    pub fn with_strip(self, tiles: Option<usize>) -> Result<Augment> {
        if tiles == Some(0) || tiles.is_some_and(|t| t > 1 << 15) {
            return Err(Error::arg(
                "strip",
                format!("{}: must be 1..=32768 tiles", tiles.unwrap_or(0)),
            ));
        }
        Ok(Augment {
            strip: tiles,
            ..self
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

    /// The random parameters drawn on the host ([`Augment::new`]); `None` where they are
    /// drawn on the device at every run (see [`Augment::last_draw`]).
    pub fn draw(&self) -> Option<&AugmentDraw> {
        match &self.draw {
            Drawn::Host(d, _) => Some(d),
            Drawn::Device { .. } => None,
        }
    }

    /// The random parameters of the last run queued on `stream`: the host's draw, or a copy of
    /// the device's last draw (the host waits for `stream`).
    pub fn last_draw(&self, stream: &Arc<CudaStream>) -> Result<AugmentDraw> {
        if let Drawn::Host(d, _) = &self.draw {
            return Ok(d.clone());
        }
        let n = self.shape.n;
        let at = FusedArrays::of(n);
        let v = stream.clone_dtoh(&*self.fused).op("cuMemcpyDtoHAsync")?;
        stream.synchronize().op("cuStreamSynchronize")?;
        Ok(AugmentDraw {
            boxes: v[..at.angles]
                .chunks_exact(4)
                .map(|b| [b[0], b[1], b[2], b[3]])
                .collect(),
            angles: v[at.angles..at.sigmas].to_vec(),
            sigmas: v[at.sigmas..at.stats].to_vec(),
        })
    }

    /// Queues the device draw of this run into the fused arrays, if the draw is the device's,
    /// for a ragged batch of `extents` where there are some.
    fn draw_on_device<E: DevicePtr<u32>>(
        &self,
        gpu: &Gpu,
        stream: &CudaStream,
        extents: Option<&E>,
    ) -> Result<()> {
        let Drawn::Device {
            state: sp,
            per_image_sigma,
            ..
        } = &self.draw
        else {
            return Ok(());
        };
        let sp = *sp;
        let mut launch = gpu.kernels()?.prepare(stream, AUGMENT_DRAW);
        // The draw writes the fused arrays, through their shared handle (see `run_fused` for
        // the ordering across streams).
        let dp = launch.read(&*self.fused);
        let ep = extents.map_or(DevPtr::NULL, |e| launch.read(e));
        let (lo, hi) = self.cfg.sigma;
        let p = AugmentDrawParams {
            state: DevPtrMut::from_addr(sp),
            draw: DevPtrMut::from_addr(dp.addr()),
            extents: ep,
            batch: self.shape.n as u32,
            crop_h: self.cfg.crop as u32,
            crop_w: self.cfg.crop as u32,
            max_top: (self.shape.h - self.cfg.crop) as u32,
            max_left: (self.shape.w - self.cfg.crop) as u32,
            degrees: self.cfg.degrees,
            sigma_lo: lo,
            sigma_span: if hi > lo { hi - lo } else { 0.0 },
            per_image_sigma: *per_image_sigma as u32,
            side: self.cfg.size as u32,
        };
        // SAFETY: the state holds four u32 and the fused arrays `6 n` values before the
        // statistics; one block of the kernel's size; nothing else uses them meanwhile (work
        // on them is ordered by `stream`).
        unsafe { launch.run(LaunchConfig::new((1, 1, 1), (AUGMENT_DRAW_BLOCK, 1, 1)), p) }
    }

    /// Runs the fused kernel: `x` uint8 of [`Augment::input_shape`], `y` f32 of
    /// [`Augment::output_shape`], in the layouts of [`Augment::layouts`]. Each run writes its
    /// draw into this augmentation's own arrays first, so runs of one `Augment` on several
    /// streams must be ordered by the caller, as for its [`DeviceRng`].
    pub fn run_fused(
        &self,
        gpu: &Gpu,
        stream: &CudaStream,
        x: &impl DevicePtr<u8>,
        y: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        if self.ragged {
            return Err(Error::arg(
                "x",
                "this augmentation takes ragged batches: run it with run_ragged and the batch's extents",
            ));
        }
        check_len("x", x.len(), self.shape)?;
        self.launch(gpu, stream, x, None::<&CudaSlice<u32>>, y)
    }

    /// The fused kernel's launch (with the device draw first, where the draw is the
    /// device's) on `x`, a batch of [`Augment::input_shape`] or, with `extents`, a ragged
    /// batch.
    fn launch<E: DevicePtr<u32>>(
        &self,
        gpu: &Gpu,
        stream: &CudaStream,
        x: &impl DevicePtr<u8>,
        extents: Option<&E>,
        y: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        let out = self.output_shape();
        check_len("y", y.len(), out)?;
        let tiles_y = out.h.div_ceil(TILE as usize);
        let strip = match self.strip {
            Some(s) => s.min(tiles_y),
            None => default_strip(
                out.n * out.w.div_ceil(TILE as usize),
                tiles_y,
                gpu.info().multiprocessors as usize,
                if self.dyadic {
                    DYADIC_STRIP
                } else {
                    DEFAULT_STRIP
                },
            ),
        };
        let (grid, tiles, tiles_x) =
            tile_grid("size", (out.h, out.w), (TILE, TILE * strip as u32), out.n)?;
        // A graph that captures this run keeps the arrays (and the generator) alive after the
        // augmentation goes.
        let rng = match &self.draw {
            Drawn::Device { rng, .. } => rng.clone(),
            Drawn::Host(..) => None,
        };
        params::keep_in_capture(stream, Box::new((self.fused.clone(), rng)))?;
        let (c, k) = (self.shape.c as u32, self.cfg.kernel_size as u32);
        let nearest = self.cfg.interp == Interp::Nearest;
        let kernel = if self.ragged {
            augment_ragged_kernel(c, k, nearest)
        } else {
            augment_kernel(c, k, strip as u32, nearest, self.dyadic)
        };
        let mut launch = gpu.kernels()?.prepare(stream, kernel);
        let xp = launch.read(x);
        let ep = extents.map_or(DevPtr::NULL, |e| launch.read(e));
        let fp = launch.read(&*self.fused);
        let yp = launch.write(y);
        let at = FusedArrays::of(self.shape.n);
        let f32_at = |i: usize| fp.wrapping_add(i as u64);
        let p = AugmentParams {
            x: xp,
            y: yp,
            boxes: fp,
            angles: f32_at(at.angles),
            sigmas: f32_at(at.sigmas),
            stats: f32_at(at.stats),
            extents: ep,
            x_bytes: x.len() as u64,
            batch: self.shape.n as u32,
            channels: self.shape.c as u32,
            height: if self.ragged { 0 } else { self.shape.h as u32 },
            width: if self.ragged { 0 } else { self.shape.w as u32 },
            crop_h: self.cfg.crop as u32,
            crop_w: self.cfg.crop as u32,
            out_h: out.h as u32,
            out_w: out.w as u32,
            ksize: self.cfg.kernel_size as u32,
            scale: to_float_scale(self.cfg.scale),
            nearest: (self.cfg.interp == Interp::Nearest) as u32,
            layout: layout_bits(self.layouts, (AUGMENT_NHWC_IN, AUGMENT_NHWC_OUT)),
            scale_y: resize_scale(self.cfg.crop, out.h),
            scale_x: resize_scale(self.cfg.crop, out.w),
            tiles,
            tiles_x,
            strip: strip as u32,
            pad: 0,
        };
        let dyadic = augment_takes_dyadic(k, nearest, self.dyadic);
        let smem = augment_shared_bytes(c, k, dyadic);
        let max = gpu.info().limits.max_shared_per_block;
        if smem > max {
            let fits = (1..=k)
                .rev()
                .step_by(2)
                .find(|&k| augment_shared_bytes(c, k, false) <= max)
                .unwrap_or(1);
            return Err(Error::arg(
                "kernel_size",
                format!(
                    "{k} with {c} channels needs {smem} bytes of shared memory per block; this GPU allows {max} (kernel sizes up to {fits} fit)"
                ),
            ));
        }
        self.draw_on_device(gpu, stream, extents)?;
        // SAFETY: every parameter was validated in `Augment::new` (channels, crop, size, kernel
        // size, per-image arrays of `n`), lengths checked above; the shared memory is what the
        // kernel uses for these sizes, and the block fills the kernel's launch bound.
        unsafe {
            let cfg = LaunchConfig::new(grid, augment_block_dim(kernel)).with_shared(smem);
            launch.run(cfg, p)
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
        if self.ragged {
            return Err(Error::arg(
                "x",
                "the separate chain takes batches of one image size; a ragged batch runs the fused kernel (run_ragged)",
            ));
        }
        let out = self.output_shape();
        check_len("x", x.len(), self.shape)?;
        check_len("y", y.len(), out)?;
        let Drawn::Host(_, chain) = &self.draw else {
            return Err(Error::arg(
                "draw",
                "the separate chain takes a host draw (Augment::new); a device draw runs the fused kernel",
            ));
        };
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
            &chain.roi_boxes,
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
            &chain.angles,
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
            Sigma::PerImage(&chain.sigma_pairs),
            &mut s.a,
        )?;
        normalize(gpu, stream, out, &s.a, &chain.stats, y)
    }
}

/// Whether the fused kernel takes its dyadic kernels for `cfg` on input of `shape` and crop
/// `boxes` ([`augment_takes_dyadic`]).
fn takes_dyadic(cfg: &AugmentConfig, shape: Shape, boxes: &[[f32; 4]]) -> bool {
    let (crop, size) = (cfg.crop as u32, cfg.size as u32);
    augment_takes_dyadic(
        cfg.kernel_size as u32,
        cfg.interp == Interp::Nearest,
        augment_dyadic(
            (crop, crop),
            (size, size),
            (shape.h as u32, shape.w as u32),
            boxes,
        ),
    )
}

/// Tiles per strip of the fused kernel by default, where the GPU stays full with them (see
/// [`Augment::with_strip`]). Longer strips share more rows and setups but leave the last
/// wave of blocks less even, which costs the kernels with a crop window as much as they save
/// on an H200.
pub const DEFAULT_STRIP: usize = 2;

/// Tiles per strip of the dyadic kernels by default (where `augment_takes_dyadic` holds, as
/// for seed 003's draws), where the GPU stays full with them: their blocks are shorter, and on
/// an H200 the rows and setups that longer strips share outweigh the less even last wave.
pub const DYADIC_STRIP: usize = 4;

/// Blocks per multiprocessor that the default strip leaves at least (the 7-tap kernels' four
/// resident blocks): below that the GPU would idle, and the default strip is halved, down to
/// one tile per block.
pub const STRIP_MIN_BLOCKS_PER_SM: usize = 4;

/// The default strip for `columns` columns of `tiles_y` tiles (images times tiles across) on
/// `sms` multiprocessors: `longest` tiles, halved until that gives every multiprocessor
/// [`STRIP_MIN_BLOCKS_PER_SM`] blocks, down to one tile.
fn default_strip(columns: usize, tiles_y: usize, sms: usize, longest: usize) -> usize {
    let mut strip = longest.min(tiles_y).max(1);
    while strip > 1 && columns * tiles_y.div_ceil(strip) < sms.max(1) * STRIP_MIN_BLOCKS_PER_SM {
        strip /= 2;
    }
    strip
}

/// Intermediate buffers of [`Augment::run_separate`].
pub struct AugmentScratch {
    float: CudaSlice<f32>,
    crop: CudaSlice<f32>,
    a: CudaSlice<f32>,
    b: CudaSlice<f32>,
}

#[cfg(test)]
mod tests {
    use super::{default_strip, DEFAULT_STRIP, DYADIC_STRIP};

    #[test]
    fn default_strip_keeps_the_gpu_full() {
        // 256 x 256 outputs (8 x 8 tiles) on 132 SMs: b128 and b32 take strips of two tiles
        // (4096 and 1024 blocks), b8 one tile (512 blocks, fewer than 4 per SM with two).
        assert_eq!(default_strip(128 * 8, 8, 132, DEFAULT_STRIP), 2);
        assert_eq!(default_strip(32 * 8, 8, 132, DEFAULT_STRIP), 2);
        assert_eq!(default_strip(8 * 8, 8, 132, DEFAULT_STRIP), 1);
        // The dyadic kernels: b128 strips of four (2048 blocks); b32 two (512 blocks of four
        // would leave an SM fewer than 4); b8 one.
        assert_eq!(default_strip(128 * 8, 8, 132, DYADIC_STRIP), 4);
        assert_eq!(default_strip(32 * 8, 8, 132, DYADIC_STRIP), 2);
        assert_eq!(default_strip(8 * 8, 8, 132, DYADIC_STRIP), 1);
        // A column of one tile has nothing to share; a GPU of no reported SMs counts as one; a
        // column shorter than the strip takes it whole.
        assert_eq!(default_strip(10_000, 1, 132, DYADIC_STRIP), 1);
        assert_eq!(default_strip(4, 3, 0, DEFAULT_STRIP), 2);
        assert_eq!(default_strip(4, 3, 0, DYADIC_STRIP), 3);
    }
}
