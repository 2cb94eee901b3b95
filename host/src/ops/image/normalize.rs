//! `normalize`: per-channel normalisation, and its statistics on the device.

use super::{check_len, grid_of, Shape};
use crate::engine::params;
use crate::error::{Error, Result};
use crate::runtime::{Gpu, LaunchConfig};
use crate::spec::image::{check_mean_std, Layout};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use std::sync::Arc;
use streamline_abi::image::{NormalizeParams, ELEMENTWISE_BLOCK, NORMALIZE, NORMALIZE_NHWC};

/// Per-channel mean and standard deviation on the device.
pub struct ChannelStats {
    pub(super) dev: Arc<params::DeviceParams<f32>>,
    mean: Vec<f32>,
    std: Vec<f32>,
}

impl ChannelStats {
    /// Uploads `mean` and `std` (one per channel, finite, `std != 0`).
    pub fn upload(stream: &Arc<CudaStream>, mean: &[f32], std: &[f32]) -> Result<ChannelStats> {
        check_mean_std(mean, std, None)?;
        let mut both = mean.to_vec();
        both.extend_from_slice(std);
        let dev = params::upload(stream, &both)?;
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

/// `normalize`: `y = (x - mean[c]) / std[c]` for a batch of `shape`.
pub fn normalize(
    gpu: &Gpu,
    stream: &CudaStream,
    shape: Shape,
    x: &impl DevicePtr<f32>,
    stats: &ChannelStats,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    normalize_in(gpu, stream, Layout::Nchw, shape, x, stats, y)
}

/// [`normalize`] of a batch stored in `layout` (NCHW, or NHWC as image decoders and CV-CUDA lay
/// images out), written in the same layout.
pub fn normalize_in(
    gpu: &Gpu,
    stream: &CudaStream,
    layout: Layout,
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
    if (shape.n * shape.c) > u32::MAX as usize {
        return Err(Error::arg("x", "more than 2^32 - 1 planes"));
    }
    let nhwc = layout == Layout::Nhwc;
    let kernel = if nhwc { NORMALIZE_NHWC } else { NORMALIZE };
    let mut launch = gpu.kernels()?.prepare(stream, kernel);
    let xp = launch.read(x);
    // A graph that captures this launch keeps the statistics alive after their owner goes.
    params::keep_in_capture(stream, Box::new(stats.dev.clone()))?;
    let sp = launch.read(&*stats.dev);
    let yp = launch.write(y);
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
    let aligned = xp.addr().is_multiple_of(16) && yp.addr().is_multiple_of(16);
    let block = (ELEMENTWISE_BLOCK, 1, 1);
    if nhwc {
        // `shape.check` keeps an image's values (`c * h * w`) within 32 bits.
        let per_image = plane * shape.c;
        let units = if per_image.is_multiple_of(4) && aligned {
            per_image / 4
        } else {
            per_image
        };
        let grid = (
            units.div_ceil(ELEMENTWISE_BLOCK as usize) as u32,
            shape.n.min(65_535) as u32,
            1,
        );
        // SAFETY: lengths checked against `shape`; `stats` holds `2 * c` values; the grid
        // covers every image's values with the kernel's own vectorisation rule, the images
        // past the grid's height by its loop.
        return unsafe { launch.run(LaunchConfig::new(grid, block), p) };
    }
    let vec = plane.is_multiple_of(4) && aligned;
    let units = if vec { plane / 4 } else { plane };
    let grid = grid_of(
        "x",
        units.div_ceil(ELEMENTWISE_BLOCK as usize),
        shape.n * shape.c,
    )?;
    // SAFETY: lengths checked against `shape`; `stats` holds `2 * c` values; the grid covers
    // every plane with the kernel's own vectorisation rule.
    unsafe { launch.run(LaunchConfig::new(grid, block), p) }
}
