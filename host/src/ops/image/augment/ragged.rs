//! The fused augmentation on ragged batches: images of their own sizes one after the other in
//! one buffer, as a batched JPEG decoder leaves them, each cropped from the image itself (no
//! resize to a common size first).

use super::{Augment, DeviceRng};
use crate::error::{Error, Result};
use crate::ops::image::{Layout, Shape};
use crate::runtime::Gpu;
use crate::spec::image::AugmentConfig;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use std::sync::Arc;
use streamline_abi::image::{ImageExtent, EXTENT_WORDS};

impl Augment {
    /// An augmentation of ragged batches of `batch` images of `channels` channels, each of its
    /// own size, drawn on the device from `rng` at every run (see [`Augment::drawn_on_device`]).
    ///
    /// Each image's crop is drawn in the `cfg.size` square that covers its centre (the
    /// square a CPU loader gets by scaling the image to cover it and cutting the middle),
    /// then taken from the image itself by `roi_align`, whose adaptive sampling averages the
    /// pixels a bin covers where the image is larger than the square: one kernel does the
    /// loader's resize and the augmentation, with no intermediate image.
    /// `streamline_abi::image::AugmentDrawParams` gives the box's formula. The input's layout
    /// is NHWC by default (as decoders give it; [`Augment::with_layouts`] changes it), the
    /// output is `batch x channels x size x size`.
    pub fn ragged(
        stream: &Arc<CudaStream>,
        batch: usize,
        channels: usize,
        cfg: &AugmentConfig,
        rng: &Arc<DeviceRng>,
        per_image_sigma: bool,
    ) -> Result<Augment> {
        let square = Shape::new(batch, channels, cfg.size, cfg.size);
        let aug = Augment::drawn_on_device(stream, square, cfg, rng, per_image_sigma)?;
        Ok(aug.into_ragged())
    }

    /// [`Augment::ragged`] with a generator whose state lies in memory of the caller's (as
    /// [`Augment::drawn_on_device_at`] takes it).
    ///
    /// # Safety
    /// As for [`Augment::drawn_on_device_at`].
    pub unsafe fn ragged_at(
        stream: &Arc<CudaStream>,
        batch: usize,
        channels: usize,
        cfg: &AugmentConfig,
        state: &impl DevicePtr<u32>,
        per_image_sigma: bool,
    ) -> Result<Augment> {
        let square = Shape::new(batch, channels, cfg.size, cfg.size);
        // SAFETY: forwarded.
        let aug =
            unsafe { Augment::drawn_on_device_at(stream, square, cfg, state, per_image_sigma)? };
        Ok(aug.into_ragged())
    }

    /// The same device-drawn augmentation (made for the square) taking ragged batches: NHWC
    /// in by default, never the dyadic kernels (the boxes are the images').
    fn into_ragged(self) -> Augment {
        Augment {
            ragged: true,
            dyadic: false,
            layouts: (Layout::Nhwc, Layout::Nchw),
            ..self
        }
    }

    /// Whether this augmentation takes ragged batches ([`Augment::ragged`]).
    pub fn is_ragged(&self) -> bool {
        self.ragged
    }

    /// Runs the fused kernel on a ragged batch: image `i` is `extents[i]` (as
    /// [`ImageExtent::words`], [`EXTENT_WORDS`] u32 an image) of `x`, `y` f32 of
    /// [`Augment::output_shape`]. The extents live on the device (a graph that captures the run
    /// reads them at every replay); an image whose extent is empty or reaches past `x` comes
    /// out NaN rather than read outside `x` ([`ImageExtent::fits`]), so check them on the host
    /// where they are made ([`check_extents`]).
    pub fn run_ragged(
        &self,
        gpu: &Gpu,
        stream: &CudaStream,
        x: &impl DevicePtr<u8>,
        extents: &impl DevicePtr<u32>,
        y: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        if !self.ragged {
            return Err(Error::arg(
                "extents",
                "this augmentation takes batches of one image size: make it with Augment::ragged for ragged batches",
            ));
        }
        let (n, c) = (self.shape.n, self.shape.c);
        if extents.len() != EXTENT_WORDS * n {
            return Err(Error::arg(
                "extents",
                format!(
                    "holds {} u32; {n} images need {} ({EXTENT_WORDS} each)",
                    extents.len(),
                    EXTENT_WORDS * n
                ),
            ));
        }
        if x.len() < c {
            return Err(Error::arg(
                "x",
                format!(
                    "holds {} bytes; a batch of {c}-channel images needs at least {c}",
                    x.len()
                ),
            ));
        }
        self.launch(gpu, stream, x, Some(extents), y)
    }
}

/// Checks that every extent of a ragged batch of `channels`-channel images is a non-empty
/// image inside `x_bytes` bytes (what [`Augment::run_ragged`] reads; it makes any other image
/// NaN), naming the first that is not.
pub fn check_extents(extents: &[ImageExtent], channels: usize, x_bytes: usize) -> Result<()> {
    for (i, e) in extents.iter().enumerate() {
        if !e.fits(channels as u32, x_bytes as u64) {
            return Err(Error::arg(
                "extents",
                format!(
                    "image {i} ({} x {} x {channels} from byte {}) is empty, over 4 GiB or past the batch's {x_bytes} bytes",
                    e.height, e.width, e.offset
                ),
            ));
        }
    }
    Ok(())
}

/// The device words of `extents` ([`ImageExtent::words`], one image after the other).
pub fn extent_words(extents: &[ImageExtent]) -> Vec<u32> {
    extents.iter().flat_map(|e| e.words()).collect()
}
