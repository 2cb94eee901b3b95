//! The augmentation's generator on the device (its seed and the draws made, which PyTorch sees
//! as a tensor), and the host's copy of the draw it makes.

use crate::device::{on_stream, to_py};
use pyo3::prelude::*;
use std::sync::Arc;
use streamline::ops::image::{AugmentConfig, DeviceRng, Shape};
use streamline_testing::reference::image::augment_device_draw;

/// The state of an augmentation's generator on the device (a seed and the draws made), made
/// at once, during a capture too, and shown to PyTorch through `__cuda_array_interface__`.
#[pyclass(frozen, module = "streamline._native")]
pub struct AugmentRng {
    rng: Arc<DeviceRng>,
}

#[pymethods]
impl AugmentRng {
    #[new]
    fn new(py: Python<'_>, device: usize, stream: u64, seed: u64) -> PyResult<AugmentRng> {
        on_stream(py, device, stream, &[], |_, s| {
            Ok(AugmentRng {
                rng: DeviceRng::new(s, seed)?,
            })
        })
    }

    /// Four int32: the seed (low word first), then the draws made (low word first).
    #[getter]
    fn __cuda_array_interface__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let d = pyo3::types::PyDict::new(py);
        d.set_item("shape", (4,))?;
        d.set_item("typestr", "<i4")?;
        d.set_item("data", (self.rng.state_ptr(), false))?;
        d.set_item("version", 3)?;
        d.set_item("strides", py.None())?;
        d.set_item("stream", py.None())?;
        Ok(d)
    }
}

/// The draw that a generator of `seed` that has made `draws` draws makes next for `n` images
/// of `h x w` (the device's formula, computed on the host).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn augment_device_draw_at(
    nhw: (usize, usize, usize),
    crop: usize,
    size: usize,
    degrees: f32,
    sigma: (f32, f32),
    seed: u64,
    draws: u64,
    per_image_sigma: bool,
) -> PyResult<crate::ops::Draw> {
    let cfg = AugmentConfig {
        crop,
        size,
        degrees,
        sigma,
        ..AugmentConfig::seed003(size, 1)
    };
    let (n, h, w) = nhw;
    cfg.check(Shape { n, c: 1, h, w }).map_err(to_py)?;
    let d = augment_device_draw(&cfg, nhw, seed, draws, per_image_sigma);
    Ok((d.boxes, d.angles, d.sigmas))
}
