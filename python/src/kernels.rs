//! A user's kernel module, loaded on a device and launched with the bytes of a parameter struct
//! (the Python layer packs them by field name from the manifest's record).

use crate::device::{gpu, on_stream, to_py};
use pyo3::prelude::*;
use std::path::PathBuf;
use streamline::{LaunchConfig, Module};

/// A user's kernel module (PTX and manifest built by `streamline_builder`), loaded on a device.
#[pyclass(frozen, module = "streamline._native")]
pub struct KernelModule {
    device: usize,
    module: Module,
}

#[pymethods]
impl KernelModule {
    /// Loads `DIR/NAME.ptx` with its `NAME.manifest.json` on device `device`.
    #[new]
    fn new(py: Python<'_>, device: usize, ptx: PathBuf) -> PyResult<KernelModule> {
        py.detach(|| {
            let module = gpu(device)?.load_file(&ptx)?;
            Ok(KernelModule { device, module })
        })
        .map_err(to_py)
    }

    /// `(name, parameter size, parameter alignment, declared max threads or None, fields or
    /// None)` of every kernel, in the manifest's order; `fields` lists `(name, offset, size,
    /// kind)` for parameter structs declared with `params!`.
    #[allow(clippy::type_complexity)]
    fn kernels(
        &self,
    ) -> Vec<(
        String,
        usize,
        usize,
        Option<u32>,
        Option<Vec<(String, usize, usize, String)>>,
    )> {
        self.module
            .image()
            .manifest
            .kernels
            .iter()
            .map(|e| {
                let (size, align) = e.params.first().map_or((0, 0), |p| (p.size, p.align));
                let fields = e.fields.as_ref().map(|f| {
                    f.iter()
                        .map(|f| (f.name.clone(), f.offset, f.size, f.kind.clone()))
                        .collect()
                });
                (
                    e.name.clone(),
                    size,
                    align,
                    e.bounds.map(|b| b.max_threads),
                    fields,
                )
            })
            .collect()
    }

    /// Launches kernel `name` on `stream` with the bytes of its parameter struct, checked
    /// against the size (and `align`, if given) that the PTX declares, and the configuration
    /// against its launch bounds and the device.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        py: Python<'_>,
        stream: u64,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared: u32,
        params: Vec<u8>,
        align: Option<usize>,
    ) -> PyResult<()> {
        let cfg = LaunchConfig::new(grid, block).with_shared(shared);
        on_stream(py, self.device, stream, &[], |_, s| {
            // SAFETY: the parameter bytes were checked against the PTX's size (and alignment);
            // that the addresses inside are valid for the kernel is the caller's contract, as
            // with CuPy's `RawKernel` (documented on `streamline.load_module`).
            unsafe { self.module.launch_bytes(s, name, cfg, &params, align) }
        })
    }
}
