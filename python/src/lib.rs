//! `streamline._native`: Streamline's launchers for the Python package.
//!
//! Every operation is described once (the `ops` module): its arguments, the dtypes and ranks of its
//! tensors, its output's dtype and shape, its checks and its launch. The Python layer makes
//! its functions, torch custom operators and fake implementations from that description, and
//! calls one entry point with device addresses, shapes and the handle of the CUDA stream to
//! queue on. The work is queued on that stream (PyTorch's current stream unless told
//! otherwise) without synchronizing anything, in the primary context PyTorch uses, so torch's
//! stream semantics (`torch.cuda.stream`, `wait_stream`, `record_stream`) order it exactly as
//! they order torch's own operations. Shapes, ranges and values are checked by the library,
//! whose errors become `ValueError` naming the argument.

mod device;
mod jpeg;
mod kernels;
mod ops;
mod rng;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NoGpuError", m.py().get_type::<device::NoGpuError>())?;
    m.add_class::<kernels::KernelModule>()?;
    m.add_class::<rng::AugmentRng>()?;
    m.add_function(wrap_pyfunction!(rng::augment_device_draw_at, m)?)?;
    m.add_function(wrap_pyfunction!(device::uploads_into_graphs, m)?)?;
    m.add_function(wrap_pyfunction!(device::gpu_status, m)?)?;
    m.add_function(wrap_pyfunction!(device::device_info, m)?)?;
    m.add_function(wrap_pyfunction!(jpeg::jpeg_layout, m)?)?;
    m.add_function(wrap_pyfunction!(jpeg::jpeg_decode_into, m)?)?;
    m.add_function(wrap_pyfunction!(ops::operations, m)?)?;
    m.add_function(wrap_pyfunction!(ops::output_shape, m)?)?;
    m.add_function(wrap_pyfunction!(ops::call, m)?)?;
    m.add_function(wrap_pyfunction!(ops::host_time, m)?)?;
    Ok(())
}
