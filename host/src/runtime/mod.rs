//! Loading kernel modules onto a device and launching their kernels, in the order a launch
//! needs them:
//!
//! 1. [`image`]: the kernel image (embedded with [`include_kernels!`] or read from files): its
//!    machine code and PTX, checked against the manifest written at build time, and the one
//!    that suits a device.
//! 2. [`module`]: a module loaded on a device, each kernel's function resolved when it is first
//!    launched.
//! 3. [`config`]: launch configurations, checked against the kernel's declaration and the
//!    device's limits.
//! 4. [`launch`]: the one generic launch that every safe launcher in [`crate::ops`] (and every
//!    user kernel) goes through.
//! 5. [`gpu`]: a device with Streamline's own kernels, loaded when first launched, its SMs
//!    split with [`partition`] where side work needs some of its own.
//!
//! [`include_kernels!`]: crate::include_kernels

pub mod config;
pub(crate) mod dylib;
pub mod gpu;
pub mod image;
pub mod launch;
pub mod module;
pub mod partition;

pub use config::{DeviceLimits, LaunchConfig};
pub use gpu::{DeviceInfo, Gpu, POOL_KEEP_BYTES};
pub use image::{embedded_archs, EmbeddedArch, EmbeddedModule, KernelImage, KERNELS, SOURCE_HASH};
pub use launch::Launch;
pub use module::Module;
pub use partition::SmSplit;

use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::{self, CUstreamCaptureMode};
use cudarc::driver::CudaContext;

/// The driver's environment variable for how many hardware work queues a device's streams are
/// spread over (8 where it is unset, at most 32). Streams beyond that many share queues, and
/// work on one then waits for work queued before it on another: a JPEG decode, for one, waits
/// for the training step's kernels even on SMs of its own ([`Gpu::with_side_sms`]). The
/// driver reads it once, when it starts, so a program sets it before its first CUDA call.
pub const CONNECTIONS_VAR: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

/// The count of hardware work queues `streamline`'s command-line tool asks for where
/// [`CONNECTIONS_VAR`] is unset: the most the driver allows.
pub const CONNECTIONS: u32 = 32;

/// Whether the CUDA driver library can be loaded; the error says so in one line if not.
pub fn driver_present() -> Result<()> {
    // SAFETY: only tries to dlopen the driver library by its usual names and closes it again.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::NoDriver(
            "the NVIDIA driver library could not be loaded on this machine".into(),
        ))
    }
}

/// CUDA driver version as (major, minor).
pub fn driver_version() -> Result<(i32, i32)> {
    driver_present()?;
    let mut v = 0i32;
    // SAFETY: the driver library is present (checked above); the call writes one int.
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    r.result().op("cuDriverGetVersion")?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// Number of CUDA devices.
pub fn device_count() -> Result<usize> {
    driver_present()?;
    let n = CudaContext::device_count().map_err(|e| Error::NoDevice {
        ordinal: 0,
        reason: e.to_string(),
    })?;
    Ok(n.max(0) as usize)
}

/// Runs `f` with this thread's capture mode relaxed, so that calls a capture in progress
/// would refuse (allocating, synchronizing another stream) are allowed for `f`, as PyTorch's
/// own allocator does while a graph is captured. `f` must not touch a capturing stream.
pub fn outside_capture<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    crate::runtime::driver_present()?;
    let mut mode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: exchanges this thread's capture mode with a local; the guard puts it back.
    unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) }
        .result()
        .op("cuThreadExchangeStreamCaptureMode")?;
    /// Puts the thread's capture mode back, also if `f` panics.
    struct Restore(CUstreamCaptureMode);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: puts back the mode the thread had before `outside_capture`.
            let _ = unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut self.0) };
        }
    }
    let _restore = Restore(mode);
    f()
}
