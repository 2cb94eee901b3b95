//! The device side of a call from Python: Streamline's kernels loaded once per device in its
//! primary context (the one PyTorch uses), the caller's stream borrowed for the call, and the
//! library's errors as Python exceptions naming Python's arguments.

use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaStream;
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use streamline::engine::params;
use streamline::error::DriverContext;
use streamline::{Error, Gpu};

create_exception!(
    _native,
    NoGpuError,
    PyRuntimeError,
    "No NVIDIA driver or no such CUDA device: raised when a GPU function is called."
);

/// The error as Python sees it: a bad argument is a `ValueError` (its message names the
/// argument and the allowed range), as is a launch configuration the kernel or device does not
/// allow; a missing GPU a `NoGpuError`, anything else a
/// `RuntimeError` with its causes.
pub fn to_py(e: Error) -> PyErr {
    to_py_as(e, IMAGE)
}

/// How the library's argument names read in Python: `(library, Python)` pairs.
pub type Names = &'static [(&'static str, &'static str)];

/// The image operations: the library's `x` and `y` are torchvision's `inpt` and `out`.
pub const IMAGE: Names = &[("x", "inpt"), ("y", "out")];

/// [`to_py`] with the argument names of the Python function that failed.
pub fn to_py_as(e: Error, names: Names) -> PyErr {
    let e = match e {
        Error::InvalidArgument { arg, reason } => Error::InvalidArgument {
            arg: names
                .iter()
                .find(|(lib, _)| *lib == arg)
                .map_or(arg, |(_, py)| py),
            reason,
        },
        e => e,
    };
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    match e {
        Error::InvalidArgument { .. } | Error::LaunchConfig { .. } => PyValueError::new_err(msg),
        Error::NoDriver(_) | Error::NoDevice { .. } => NoGpuError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

/// Streamline's kernels loaded on each device used so far, by ordinal.
static DEVICES: Mutex<Vec<Option<Arc<Gpu>>>> = Mutex::new(Vec::new());

/// The device `ordinal` with Streamline's kernels loaded (on first use, in its primary
/// context, the one PyTorch uses). `STREAMLINE_PTX` names a PTX file to load instead of the
/// embedded one (built from the same sources).
pub fn gpu(ordinal: usize) -> streamline::Result<Arc<Gpu>> {
    let mut devices = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(Some(g)) = devices.get(ordinal) {
        return Ok(g.clone());
    }
    let ptx = std::env::var_os("STREAMLINE_PTX").map(PathBuf::from);
    // The first call may come while torch captures a graph: loading the kernels is no part of
    // it.
    let g = Arc::new(params::outside_capture(|| {
        let gpu = Gpu::new(ordinal, ptx.as_deref())?;
        gpu.kernels()?;
        Ok(gpu)
    })?);
    // SAFETY: every buffer this module allocates (per-call parameters: angles, boxes, sigmas,
    // means; an augmentation's generator state) is uploaded on the stream of the call that
    // first uses it (or, during a capture, before the call returns) and then used only by
    // launches on the caller's streams, which the caller orders as for torch's own operations;
    // its (stream-ordered) free follows its uses on that stream, and memory made during a
    // capture is freed only after the context's work (`streamline::engine::params`). The caller's tensors are not
    // cudarc buffers and were never tracked.
    unsafe { g.context().disable_event_tracking() };
    if devices.len() <= ordinal {
        devices.resize(ordinal + 1, None);
    }
    devices[ordinal] = Some(g.clone());
    Ok(g)
}

/// Runs `f` with the GIL released, on device `device` and the caller's stream `stream`; its
/// errors name the arguments as `names` says they are named in Python.
pub fn on_stream<R: Send>(
    py: Python<'_>,
    device: usize,
    stream: u64,
    names: Names,
    f: impl FnOnce(&Gpu, &Arc<CudaStream>) -> streamline::Result<R> + Send,
) -> PyResult<R> {
    py.detach(|| {
        let g = gpu(device)?;
        g.context().bind_to_thread().op("cuCtxSetCurrent")?;
        // SAFETY: `stream` is a stream handle of this device's primary context, given by
        // PyTorch (`torch.cuda.Stream.cuda_stream`) or the caller, or 0 for the legacy default
        // stream; the caller keeps it alive for this call, which only queues work on it.
        let s = unsafe { g.context().wrap_borrowed_stream(stream as CUstream) };
        f(&g, &s)
    })
    .map_err(|e| to_py_as(e, names))
}

/// Whether a GPU can be used: `None` if the driver loads and has at least one device, else
/// why not (without creating a context).
#[pyfunction]
pub fn gpu_status() -> Option<String> {
    match streamline::runtime::device_count() {
        Ok(0) => Some("the NVIDIA driver has no CUDA device".into()),
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

/// Name and compute capability of device `device` (loads the kernels on it).
#[pyfunction]
pub fn device_info(py: Python<'_>, device: usize) -> PyResult<(String, (i32, i32), u32)> {
    py.detach(|| {
        let g = gpu(device)?;
        let i = g.info();
        Ok((i.name.clone(), i.compute_capability, i.multiprocessors))
    })
    .map_err(to_py)
}

/// Parameter uploads made during CUDA graph captures so far (see `streamline::engine::params`):
/// how a test sees that a call was captured rather than run.
#[pyfunction]
pub fn uploads_into_graphs() -> u64 {
    params::uploads_into_graphs()
}
