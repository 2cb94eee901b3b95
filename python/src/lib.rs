//! `streamline._native`: Streamline's launchers for the Python package.
//!
//! Every function takes device addresses, shapes and the handle of the CUDA stream to queue on,
//! which the Python layer (`streamline/_arrays.py`) took from the caller's tensors after
//! checking their dtype, device and contiguity. The work is queued on that stream (PyTorch's
//! current stream unless told otherwise) without synchronizing anything, in the primary
//! context PyTorch uses, so torch's stream semantics (`torch.cuda.stream`, `wait_stream`,
//! `record_stream`) order it exactly as they order torch's own operations. Shapes, ranges and
//! values are checked by the library, whose errors become `ValueError` naming the argument.

use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaStream;
use half::{bf16, f16};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use streamline::engine::{params, External};
use streamline::error::DriverContext;
use streamline::ops::heavy::heavy as heavy_op;
use streamline::ops::hgemm as hgemm_op;
use streamline::ops::image::{
    self, Augment, AugmentConfig, AugmentDraw, ChannelStats, DeviceRng, Interp, Layout, PerImage,
    ResizeMode, RoiAlign, RoiBoxes, Shape, Sigma,
};
use streamline::ops::matmul::{self, Gemm};
use streamline::{Error, Gpu, LaunchConfig, Module};
use streamline_testing::reference::image::augment_device_draw;

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
fn to_py(e: Error) -> PyErr {
    to_py_as(e, IMAGE)
}

/// How the library's argument names read in Python: `(library, Python)` pairs.
type Names = &'static [(&'static str, &'static str)];

/// The image operations: the library's `x` and `y` are torchvision's `inpt` and `out`.
const IMAGE: Names = &[("x", "inpt"), ("y", "out")];

/// [`to_py`] with the argument names of the Python function that failed.
fn to_py_as(e: Error, names: Names) -> PyErr {
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
fn gpu(ordinal: usize) -> streamline::Result<Arc<Gpu>> {
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
fn on_stream<R: Send>(
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

/// A caller's device array: `(address, number of elements it spans)`, as the Python layer
/// took them from a CUDA array of the call's device.
#[derive(Clone, Copy, FromPyObject)]
struct Array(u64, usize);

impl Array {
    /// The array as elements of `T`, used on `s`.
    fn on<T>(self, s: &Arc<CudaStream>) -> External<T> {
        let Array(ptr, len) = self;
        // SAFETY: the Python layer took `ptr` and `len` from a CUDA array of this device and
        // element type (dtype, device and layout checked there), which the caller holds for
        // the duration of the call; its owner (PyTorch's caching allocator) frees it only in the
        // order of the stream it was used on, or after `record_stream`, as for torch's own ops.
        unsafe { External::new(ptr, len, s) }
    }
}

/// A call that reads one array and writes another: `(device, stream, x, y)`, the device
/// ordinal, the handle of the stream to queue on, the input and the output.
#[derive(FromPyObject)]
struct Io(usize, u64, Array, Array);

impl Io {
    /// Runs `f` on the call's stream with the GIL released, given the input and the output;
    /// errors name the arguments as the image operations do.
    fn run<X, Y, R, F>(self, py: Python<'_>, f: F) -> PyResult<R>
    where
        R: Send,
        F: FnOnce(&Gpu, &Arc<CudaStream>, &External<X>, &mut External<Y>) -> streamline::Result<R>
            + Send,
    {
        self.run_as(py, IMAGE, f)
    }

    /// [`Io::run`] for a function whose arguments are named `names` in Python.
    fn run_as<X, Y, R, F>(self, py: Python<'_>, names: Names, f: F) -> PyResult<R>
    where
        R: Send,
        F: FnOnce(&Gpu, &Arc<CudaStream>, &External<X>, &mut External<Y>) -> streamline::Result<R>
            + Send,
    {
        let Io(device, stream, x, y) = self;
        on_stream(py, device, stream, names, |g, s| {
            f(g, s, &x.on(s), &mut y.on(s))
        })
    }
}

fn layout(arg: &'static str, s: &str) -> streamline::Result<Layout> {
    match s {
        "NCHW" => Ok(Layout::Nchw),
        "NHWC" => Ok(Layout::Nhwc),
        _ => Err(Error::arg(
            arg,
            format!("{s:?}: must be \"NCHW\" or \"NHWC\""),
        )),
    }
}

fn interp(arg: &'static str, s: &str) -> streamline::Result<Interp> {
    match s {
        "nearest" => Ok(Interp::Nearest),
        "bilinear" => Ok(Interp::Bilinear),
        _ => Err(Error::arg(
            arg,
            format!("{s:?}: must be nearest or bilinear"),
        )),
    }
}

/// Shape `(n, c, h, w)`.
type Nchw = (usize, usize, usize, usize);

fn shape((n, c, h, w): Nchw) -> Shape {
    Shape { n, c, h, w }
}

/// Whether a GPU can be used: `None` if the driver loads and has at least one device, else
/// why not (without creating a context).
#[pyfunction]
fn gpu_status() -> Option<String> {
    match streamline::runtime::device_count() {
        Ok(0) => Some("the NVIDIA driver has no CUDA device".into()),
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

/// Name and compute capability of device `device` (loads the kernels on it).
#[pyfunction]
fn device_info(py: Python<'_>, device: usize) -> PyResult<(String, (i32, i32), u32)> {
    py.detach(|| {
        let g = gpu(device)?;
        let i = g.info();
        Ok((i.name.clone(), i.compute_capability, i.multiprocessors))
    })
    .map_err(to_py)
}

/// uint8 `x` to f32 `y` (`ToDtype(float32, scale)`), from layout `src` to `dst`.
#[pyfunction]
fn to_float(py: Python<'_>, io: Io, nchw: Nchw, src: &str, dst: &str, scale: bool) -> PyResult<()> {
    let (src, dst) = (
        layout("layout", src).map_err(to_py)?,
        layout("output_layout", dst).map_err(to_py)?,
    );
    io.run(py, |g, s, x, y| {
        image::to_float_relayout(g, s, shape(nchw), (x, src), (y, dst), scale)
    })
}

fn normalize_on(
    g: &Gpu,
    s: &Arc<CudaStream>,
    sh: Shape,
    (x, y): (&External<f32>, &mut External<f32>),
    mean: &[f32],
    std: &[f32],
) -> streamline::Result<()> {
    let stats = ChannelStats::upload(s, mean, std)?;
    image::normalize(g, s, sh, x, &stats, y)
}

/// `y = (x - mean[c]) / std[c]` over f32 NCHW `x`.
#[pyfunction]
fn normalize(py: Python<'_>, io: Io, nchw: Nchw, mean: Vec<f32>, std: Vec<f32>) -> PyResult<()> {
    io.run(py, |g, s, x, y| {
        normalize_on(g, s, shape(nchw), (x, y), &mean, &std)
    })
}

/// Resizes f32 NCHW `x` to `out` (`mode`: `bilinear`, `bilinear_antialias`, `nearest`).
#[pyfunction]
fn resize(py: Python<'_>, io: Io, nchw: Nchw, out: (usize, usize), mode: &str) -> PyResult<()> {
    let mode = match mode {
        "bilinear" => ResizeMode::Bilinear,
        "bilinear_antialias" => ResizeMode::BilinearAntialias,
        "nearest" => ResizeMode::Nearest,
        _ => {
            return Err(PyValueError::new_err(format!(
                "interpolation {mode:?}: must be nearest or bilinear"
            )))
        }
    };
    io.run(py, |g, s, x, y| {
        image::resize(g, s, shape(nchw), x, out, mode, y)
    })
}

/// Rotates image `i` of f32 `x` by `angles[i]` degrees counter-clockwise, from layout `src`
/// (`x` has shape `nchw` in it) into layout `dst`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn rotate(
    py: Python<'_>,
    io: Io,
    nchw: Nchw,
    angles: Vec<f32>,
    mode: &str,
    fill: Option<f32>,
    src: &str,
    dst: &str,
) -> PyResult<()> {
    let mode = interp("interpolation", mode).map_err(to_py)?;
    let (src, dst) = (
        layout("layout", src).map_err(to_py)?,
        layout("output_layout", dst).map_err(to_py)?,
    );
    io.run(py, |g, s, x, y| {
        let angles = PerImage::upload(s, "angle", &angles)?;
        let (x, y) = ((x, src), (y, dst));
        image::rotate_relayout(g, s, shape(nchw), x, &angles, mode, fill, y)
    })
}

/// Gaussian blur of f32 NCHW `x` with kernel `(kx, ky)`; `sigma` is `[sx, sy]` for every image
/// or `[sx0, sy0, sx1, sy1, ...]` per image.
#[pyfunction]
fn gaussian_blur(
    py: Python<'_>,
    io: Io,
    nchw: Nchw,
    kernel: (usize, usize),
    sigma: Vec<f32>,
) -> PyResult<()> {
    let sh = shape(nchw);
    sh.check("x").map_err(to_py)?;
    image::check_kernel_size("kernel_size", kernel.0, sh.w, "width").map_err(to_py)?;
    image::check_kernel_size("kernel_size", kernel.1, sh.h, "height").map_err(to_py)?;
    for v in &sigma {
        image::check_sigma("sigma", *v).map_err(to_py)?;
    }
    io.run(py, |g, s, x, y| {
        if sigma.len() == 2 {
            let sigma = Sigma::Global(sigma[0], sigma[1]);
            image::gaussian_blur(g, s, sh, x, kernel, sigma, y)
        } else {
            let per = PerImage::upload(s, "sigma", &sigma)?;
            if sigma.len() != 2 * sh.n {
                return Err(Error::arg(
                    "sigma",
                    format!(
                        "has {} values; needs 2 (all images) or 2 per image ({})",
                        sigma.len(),
                        2 * sh.n
                    ),
                ));
            }
            image::gaussian_blur(g, s, sh, x, kernel, Sigma::PerImage(&per), y)
        }
    })
}

/// What a `roi_align` call takes besides its two arrays: `(shape of the input, boxes on the
/// host, boxes on the device, output size, spatial scale, sampling ratio, aligned)`. The boxes
/// are `[i, x1, y1, x2, y2]` each: checked host values, or an array of five f32 per box on the
/// device, read by the kernel alone (no copy, no wait, safe under capture).
#[derive(FromPyObject)]
struct RoiCall(
    Nchw,
    Vec<[f32; 5]>,
    Option<Array>,
    (usize, usize),
    f32,
    i32,
    bool,
);

impl RoiCall {
    /// Runs `f` with the input's shape, the boxes and the options on `io`'s stream, after the
    /// host boxes' checks; errors name the arguments as `names` says.
    fn run<F>(self, py: Python<'_>, io: Io, names: Names, f: F) -> PyResult<()>
    where
        F: FnOnce(
                &Gpu,
                &Arc<CudaStream>,
                (Shape, &RoiBoxes, RoiAlign),
                &External<f32>,
                &mut External<f32>,
            ) -> streamline::Result<()>
            + Send,
    {
        let RoiCall(nchw, boxes, device_boxes, out, spatial_scale, sampling_ratio, aligned) = self;
        let sh = shape(nchw);
        let o = RoiAlign {
            out_h: out.0,
            out_w: out.1,
            spatial_scale,
            sampling_ratio,
            aligned,
        };
        if device_boxes.is_none() {
            image::check_roi_align(sh, &boxes, &o).map_err(|e| to_py_as(e, names))?;
        }
        io.run_as(py, names, |g, s, x, y| {
            let boxes = match device_boxes {
                // SAFETY: the Python layer took the array from a CUDA float32 tensor of this
                // device that the caller holds for the call; work on it is ordered by the
                // caller's stream.
                Some(b) => unsafe { RoiBoxes::on_device(&b.on::<f32>(s), s)? },
                None => RoiBoxes::upload(s, &boxes)?,
            };
            f(g, s, (sh, &boxes, o), x, y)
        })
    }
}

/// `torchvision.ops.roi_align` of f32 NCHW `x` into `y` (`boxes x c x out_h x out_w`).
#[pyfunction]
fn roi_align(py: Python<'_>, io: Io, call: RoiCall) -> PyResult<()> {
    const NAMES: Names = &[("x", "input"), ("y", "out")];
    call.run(py, io, NAMES, |g, s, (sh, boxes, o), x, y| {
        image::roi_align(g, s, sh, x, boxes, o, y)
    })
}

/// The gradient of `roi_align` with respect to its input: `y` (the input's gradient) from `x`
/// (the output's gradient); `deterministic`: without atomics, the same bits on every run.
#[pyfunction]
fn roi_align_backward(py: Python<'_>, io: Io, call: RoiCall, deterministic: bool) -> PyResult<()> {
    const NAMES: Names = &[("grad_y", "grad"), ("grad_x", "out")];
    call.run(py, io, NAMES, |g, s, (sh, boxes, o), gy, gx| {
        image::roi_align_backward(g, s, sh, gy, boxes, o, gx, deterministic)
    })
}

/// One batch's random crop boxes (`[x1, y1, x2, y2]`), angles and sigmas.
type Draw = (Vec<[f32; 4]>, Vec<f32>, Vec<f32>);

/// Seed 003's augmentation of uint8 `x` (layout `src`) into f32 `y` (layout `dst`) in one
/// kernel. The crop boxes, angles and sigmas are `draw` if given, else drawn from `seed`
/// (sigma once per batch, or per image with `per_image_sigma`); returns them.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn augment(
    py: Python<'_>,
    io: Io,
    nchw: Nchw,
    layouts: (String, String),
    crop: usize,
    size: usize,
    degrees: f32,
    interpolation: &str,
    kernel_size: usize,
    sigma: (f32, f32),
    scale: bool,
    mean: Vec<f32>,
    std: Vec<f32>,
    seed: u64,
    per_image_sigma: bool,
    draw: Option<Draw>,
    state: Option<Array>,
) -> PyResult<Option<Draw>> {
    let sh = shape(nchw);
    let cfg = AugmentConfig {
        crop,
        size,
        degrees,
        interp: interp("interpolation", interpolation).map_err(to_py)?,
        kernel_size,
        sigma,
        scale,
        mean,
        std,
    };
    let src = layout("layout", &layouts.0).map_err(to_py)?;
    let dst = layout("output_layout", &layouts.1).map_err(to_py)?;
    cfg.check(sh).map_err(to_py)?;
    io.run(py, |g, s, x, y| {
        if let Some(state) = state {
            // SAFETY: the Python layer took `state` from a CUDA int32 tensor of four values on
            // this device (the augmentation's generator), which it keeps; runs on it are
            // ordered by the caller's stream.
            let aug = unsafe {
                Augment::drawn_on_device_at(s, sh, &cfg, &state.on::<u32>(s), per_image_sigma)?
            };
            aug.with_layouts(src, dst).run_fused(g, s, x, y)?;
            return Ok(None);
        }
        let draw = match draw {
            Some((boxes, angles, sigmas)) => AugmentDraw {
                boxes,
                angles,
                sigmas,
            },
            None if per_image_sigma => AugmentDraw::random_per_image(&cfg, sh.n, sh.h, sh.w, seed),
            None => AugmentDraw::random(&cfg, sh.n, sh.h, sh.w, seed),
        };
        Augment::new(s, sh, &cfg, &draw)?
            .with_layouts(src, dst)
            .run_fused(g, s, x, y)?;
        Ok(Some((draw.boxes, draw.angles, draw.sigmas)))
    })
}

/// The state of an augmentation's generator on the device (a seed and the draws made), made
/// at once, during a capture too, and shown to PyTorch through `__cuda_array_interface__`.
#[pyclass(frozen, module = "streamline._native")]
struct AugmentRng {
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
fn augment_device_draw_at(
    nhw: (usize, usize, usize),
    crop: usize,
    size: usize,
    degrees: f32,
    sigma: (f32, f32),
    seed: u64,
    draws: u64,
    per_image_sigma: bool,
) -> PyResult<Draw> {
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

/// Seed 000's `y = x^2 + x^3 sin(x) cos(x) + tan(x)` over the elements of `x`, of `dtype`
/// (`float32`, `float16` or `bfloat16`).
#[pyfunction]
fn heavy(py: Python<'_>, io: Io, dtype: &str) -> PyResult<()> {
    const NAMES: Names = &[("y", "out")];
    match dtype {
        "float32" => io.run_as(py, NAMES, |g, s, x, y| heavy_op::<f32>(g, s, x, y)),
        "float16" => io.run_as(py, NAMES, |g, s, x, y| heavy_op::<f16>(g, s, x, y)),
        "bfloat16" => io.run_as(py, NAMES, |g, s, x, y| heavy_op::<bf16>(g, s, x, y)),
        _ => Err(PyValueError::new_err(format!(
            "x: dtype {dtype} must be float32, float16 or bfloat16"
        ))),
    }
}

/// The product of `dims` `(m, n, k)` with row strides `(lda, ldb, ldc)`, as the Python side
/// passes them.
fn gemm(
    dims: (usize, usize, usize),
    strides: (usize, usize, usize),
    alpha: f32,
    beta: f32,
) -> Gemm {
    Gemm {
        m: dims.0,
        n: dims.1,
        k: dims.2,
        lda: strides.0,
        ldb: strides.1,
        ldc: strides.2,
        alpha,
        beta,
    }
}

/// `C = alpha A @ B + beta C` (row-major f32; `dims` `(m, n, k)`, `strides` `(lda, ldb, ldc)`,
/// each array spanning its rows up to the end of the last).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn sgemm(
    py: Python<'_>,
    device: usize,
    stream: u64,
    arrays: (Array, Array, Array),
    dims: (usize, usize, usize),
    strides: (usize, usize, usize),
    alpha: f32,
    beta: f32,
) -> PyResult<()> {
    let g = gemm(dims, strides, alpha, beta);
    let (a, b, c) = arrays;
    on_stream(py, device, stream, &[("c", "out")], |gpu, s| {
        g.validate()?;
        matmul::sgemm(
            gpu,
            s,
            matmul::Kernel::Auto,
            &g,
            &a.on(s),
            &b.on(s),
            &mut c.on(s),
        )
    })
}

/// `C = alpha A @ B + beta C` on tensor cores (row-major, `dtype` `bfloat16` or `float16`,
/// f32 accumulation; `dims` `(m, n, k)`, `strides` `(lda, ldb, ldc)`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn hgemm(
    py: Python<'_>,
    device: usize,
    stream: u64,
    arrays: (Array, Array, Array),
    dims: (usize, usize, usize),
    strides: (usize, usize, usize),
    alpha: f32,
    beta: f32,
    dtype: &str,
) -> PyResult<()> {
    let g = gemm(dims, strides, alpha, beta);
    let (a, b, c) = arrays;
    let auto = hgemm_op::HgemmKernel::Auto;
    match dtype {
        "bfloat16" => on_stream(py, device, stream, &[("c", "out")], |gpu, s| {
            hgemm_op::hgemm::<bf16>(gpu, s, auto, &g, &a.on(s), &b.on(s), &mut c.on(s))
        }),
        "float16" => on_stream(py, device, stream, &[("c", "out")], |gpu, s| {
            hgemm_op::hgemm::<f16>(gpu, s, auto, &g, &a.on(s), &b.on(s), &mut c.on(s))
        }),
        _ => Err(PyValueError::new_err(format!(
            "a: dtype {dtype} must be bfloat16 or float16"
        ))),
    }
}

/// Host time of one `normalize` call made from Rust (mean of `iters` calls, in seconds): what
/// the Python call's own cost is measured against.
#[pyfunction]
fn normalize_host_time(
    py: Python<'_>,
    io: Io,
    nchw: Nchw,
    mean: Vec<f32>,
    std: Vec<f32>,
    iters: usize,
) -> PyResult<f64> {
    io.run(py, |g, s, x, y| {
        let t = Instant::now();
        for _ in 0..iters {
            normalize_on(g, s, shape(nchw), (x, y), &mean, &std)?;
        }
        Ok(t.elapsed().as_secs_f64() / iters.max(1) as f64)
    })
}

/// Parameter uploads made during CUDA graph captures so far (see `streamline::engine::params`):
/// how a test sees that a call was captured rather than run.
#[pyfunction]
fn uploads_into_graphs() -> u64 {
    params::uploads_into_graphs()
}

/// A user's kernel module (PTX and manifest built by `streamline_builder`), loaded on a device.
#[pyclass(frozen, module = "streamline._native")]
struct KernelModule {
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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NoGpuError", m.py().get_type::<NoGpuError>())?;
    m.add_class::<KernelModule>()?;
    m.add_class::<AugmentRng>()?;
    m.add_function(wrap_pyfunction!(augment_device_draw_at, m)?)?;
    m.add_function(wrap_pyfunction!(uploads_into_graphs, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_status, m)?)?;
    m.add_function(wrap_pyfunction!(device_info, m)?)?;
    m.add_function(wrap_pyfunction!(to_float, m)?)?;
    m.add_function(wrap_pyfunction!(normalize, m)?)?;
    m.add_function(wrap_pyfunction!(resize, m)?)?;
    m.add_function(wrap_pyfunction!(rotate, m)?)?;
    m.add_function(wrap_pyfunction!(gaussian_blur, m)?)?;
    m.add_function(wrap_pyfunction!(roi_align, m)?)?;
    m.add_function(wrap_pyfunction!(roi_align_backward, m)?)?;
    m.add_function(wrap_pyfunction!(augment, m)?)?;
    m.add_function(wrap_pyfunction!(heavy, m)?)?;
    m.add_function(wrap_pyfunction!(sgemm, m)?)?;
    m.add_function(wrap_pyfunction!(hgemm, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_host_time, m)?)?;
    Ok(())
}
