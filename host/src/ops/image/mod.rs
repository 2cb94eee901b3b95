//! Image operations on NCHW batches, each one launch for the whole batch with per-image
//! parameters: uint8 to float, ROI-align crop, rotation, Gaussian blur, resize, per-channel
//! normalisation, and seed 003's whole augmentation (fused, and as the chain of separate
//! kernels). The uint8 entry points (`to_float_relayout`, the fused augmentation) also read
//! NHWC, as image decoders produce it, and the augmentation writes either layout.
//! `rotate_relayout`, `resize_relayout` and `roi_align_relayout` read and write f32 batches in
//! either layout (NHWC is CV-CUDA's); `gaussian_blur_in` and `normalize_in` work in either.
//!
//! Their exact definitions, following torchvision so results can be swapped in, are written
//! with the CPU references in `streamline_testing::reference::image`. Every argument is checked
//! before any device work: a bad one gives [`Error::InvalidArgument`] naming it and the allowed
//! range, and nothing is written.

mod augment;
mod gaussian_blur;
mod normalize;
mod resize;
mod roi_align;
mod rotate;
mod to_float;

pub use crate::spec::image::{
    check_boxes, check_kernel_size, check_len, check_mean_std, check_roi_align, check_sigma,
    default_sigma, roi_sampling_grid, AugmentConfig, AugmentDraw, Interp, Layout, ResizeMode,
    RoiAlign, Shape,
};
pub use augment::{
    check_extents, extent_words, Augment, AugmentScratch, DeviceRng, DEFAULT_STRIP, DYADIC_STRIP,
    STRIP_MIN_BLOCKS_PER_SM,
};
pub use gaussian_blur::{gaussian_blur, gaussian_blur_in, Sigma};
pub use normalize::{normalize, normalize_in, ChannelStats};
pub use resize::{resize, resize_relayout};
pub use roi_align::{roi_align, roi_align_backward, roi_align_relayout, RoiBoxes};
pub use rotate::{rotate, rotate_relayout};
pub use streamline_abi::image::{ImageExtent, EXTENT_WORDS};
pub use to_float::{to_float, to_float_relayout, to_float_scale};

use crate::engine::params;
use crate::error::{Error, Result};
use crate::runtime::Gpu;
use cudarc::driver::CudaStream;
use std::sync::Arc;
use streamline_abi::image::{FastDiv, IMAGE_BLOCK_X, IMAGE_BLOCK_Y, MAX_ROWS_PER_THREAD};

const BLOCK: (u32, u32, u32) = (IMAGE_BLOCK_X, IMAGE_BLOCK_Y, 1);

/// Grid of the per-pixel kernels (the kernels' `for_columns`) and the rows each thread
/// computes: 32-column patches of an `h x w` plane, by `count` planes stacked along the grid's
/// depth (at most 65535 deep; the blocks step through the rest).
///
/// A thread's per-image and per-column setup serves all its rows, but its rows wait on memory
/// one after another: each row per thread needs `threads_per_sm_per_row` threads on every
/// multiprocessor to hide that wait. The launch takes the most rows per thread (up to
/// `MAX_ROWS_PER_THREAD`) whose thread count still meets that, and one row otherwise.
fn column_grid(
    gpu: &Gpu,
    arg: &'static str,
    (h, w): (usize, usize),
    count: usize,
    threads_per_sm_per_row: usize,
) -> Result<((u32, u32, u32), u32)> {
    const MAX_Y: usize = 65535;
    let wanted = |rows: usize| gpu.info().multiprocessors as usize * threads_per_sm_per_row * rows;
    let gx = w.div_ceil(IMAGE_BLOCK_X as usize);
    let threads = |rows: usize| {
        (gx * IMAGE_BLOCK_X as usize)
            .saturating_mul(h.div_ceil(rows))
            .saturating_mul(count)
    };
    let mut rows = MAX_ROWS_PER_THREAD as usize;
    while rows > 1 && threads(rows) < wanted(rows) {
        rows /= 2;
    }
    let per_block = IMAGE_BLOCK_Y as usize * rows;
    let gy = h.div_ceil(per_block);
    if gx > i32::MAX as usize || gy > MAX_Y {
        return Err(Error::arg(
            arg,
            format!(
                "{h} x {w} is too large for one launch (at most {} rows)",
                MAX_Y * per_block
            ),
        ));
    }
    Ok((
        (gx as u32, gy as u32, count.clamp(1, MAX_Y) as u32),
        rows as u32,
    ))
}

/// Grid of the tiled kernels, one block per `tw x th` tile of each of `count` planes of
/// `h x w` (every tile of a plane before the next plane's), with the dividers that find a
/// block's plane and tile from its index: by the tiles of a plane, and by those of a row.
fn tile_grid(
    arg: &'static str,
    (h, w): (usize, usize),
    (tw, th): (u32, u32),
    count: usize,
) -> Result<((u32, u32, u32), FastDiv, FastDiv)> {
    let (tiles_x, tiles_y) = (w.div_ceil(tw as usize), h.div_ceil(th as usize));
    let grid = grid_of(arg, tiles_x * tiles_y, count)?;
    // `grid_of` refused grids of more than `2^31 - 1` blocks, so these fit `u32`.
    Ok((
        grid,
        FastDiv::new((tiles_x * tiles_y) as u32),
        FastDiv::new(tiles_x as u32),
    ))
}

/// torch's bilinear resize scale along an axis for `align_corners=False` without a scale
/// factor: `n_in / n_out`, divided in f32.
fn resize_scale(n_in: usize, n_out: usize) -> f32 {
    n_in as f32 / n_out as f32
}

/// A kernel's layout bits for input layout `from` and output layout `to`: `nhwc_in` where the
/// input is NHWC, `nhwc_out` where the output is.
fn layout_bits((from, to): (Layout, Layout), (nhwc_in, nhwc_out): (u32, u32)) -> u32 {
    let bit = |l: Layout, b: u32| if l == Layout::Nhwc { b } else { 0 };
    bit(from, nhwc_in) | bit(to, nhwc_out)
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
    dev: Arc<params::DeviceParams<f32>>,
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
        let dev = params::upload(stream, values)?;
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
