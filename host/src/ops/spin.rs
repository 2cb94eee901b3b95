//! Wait on the device clock, then copy: an access of controlled duration (tests, filler work).

use crate::error::{Error, Result};
use crate::runtime::Gpu;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline_abi::spin::{SpinCopyParams, SPIN_COPY_BLOCK, SPIN_COPY_F32, SPIN_MAX_NS};

/// Waits `spin_ns` nanoseconds on the device (every thread), then copies `x` into `y`, on
/// `stream`. With empty slices and a non-zero wait it only occupies the stream (one block).
/// `x` and `y` must have the same length; `spin_ns` is at most 10 s.
pub fn spin_copy(
    gpu: &Gpu,
    stream: &CudaStream,
    x: &impl DevicePtr<f32>,
    y: &mut impl DevicePtrMut<f32>,
    spin_ns: u64,
) -> Result<()> {
    super::check_same_len(x.len(), y.len())?;
    if spin_ns > SPIN_MAX_NS {
        return Err(Error::arg(
            "spin_ns",
            format!("{spin_ns} is above the allowed maximum of {SPIN_MAX_NS} (10 s)"),
        ));
    }
    if x.len() == 0 && spin_ns == 0 {
        return Ok(());
    }
    let n = x.len() as u64;
    let mut launch = gpu.kernels()?.prepare(stream, SPIN_COPY_F32);
    let xp = launch.read(x);
    let yp = launch.write(y);
    let params = SpinCopyParams {
        x: xp,
        y: yp,
        n,
        spin_ns,
    };
    let per_block = (SPIN_COPY_BLOCK, SPIN_COPY_BLOCK as u64);
    // SAFETY: `x` and `y` are live device allocations of `n` f32 each (lengths checked), distinct
    // (one borrowed shared, the other exclusively); the launch is ordered after earlier
    // accesses and recorded for later ones.
    unsafe {
        launch.run(
            crate::LaunchConfig::strided(n, per_block, i32::MAX as u32),
            params,
        )
    }
}
