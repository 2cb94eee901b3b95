//! Launchers of the tensor-core probes (one warp each): what the lanes of an `ldmatrix` or an
//! `mma.sync` hold, for the tests of the fragment layouts `streamline_device::mma` documents.

use crate::error::{Error, Result};
use crate::runtime::{Gpu, LaunchConfig};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};
use half::{bf16, f16};
use streamline_abi::probe::{
    LdmatrixProbeParams, MmaProbeParams, PROBE_LDMATRIX_X4, PROBE_LDMATRIX_X4_TRANS,
    PROBE_MMA_BF16, PROBE_MMA_F16, PROBE_MMA_TF32,
};
use streamline_abi::Kernel;

fn exactly(arg: &'static str, have: usize, want: usize) -> Result<()> {
    if have != want {
        return Err(Error::arg(
            arg,
            format!("holds {have} elements, the probe takes exactly {want}"),
        ));
    }
    Ok(())
}

/// One warp.
fn warp() -> LaunchConfig {
    LaunchConfig::new((1, 1, 1), (32, 1, 1))
}

/// Lane `l`'s four registers after `ldmatrix.x4` (`.trans` with `transposed`) into
/// `out[4 l..4 l + 4]`, lane `l` addressing row `l % 8` of matrix `l / 8` of the four 8 x 8
/// matrices in `src` (256 values, matrix after matrix, row-major).
pub fn ldmatrix_x4(
    gpu: &Gpu,
    stream: &CudaStream,
    src: &impl DevicePtr<u16>,
    out: &mut impl DevicePtrMut<u32>,
    transposed: bool,
) -> Result<()> {
    exactly("src", src.len(), 256)?;
    exactly("out", out.len(), 128)?;
    let kernel = if transposed {
        PROBE_LDMATRIX_X4_TRANS
    } else {
        PROBE_LDMATRIX_X4
    };
    let mut launch = gpu.kernels()?.prepare(stream, kernel);
    let p = LdmatrixProbeParams {
        src: launch.read(src),
        out: launch.write(out),
    };
    // SAFETY: `src` holds 256 u16 and `out` 128 u32 (checked), one warp as the kernel wants;
    // the launch is ordered after earlier accesses.
    unsafe { launch.run(warp(), p) }
}

/// Operand types of the `mma.sync` probe: bf16 and f16 (`m16n8k16`), and f32 holding tf32
/// values (`m16n8k8`: the low 13 bits of each value's significand are not read).
pub trait MmaElement: DeviceRepr + streamline_device::element::Element {
    /// The probe kernel.
    const KERNEL: Kernel<MmaProbeParams<Self>>;
    /// The product's depth `K`.
    const K: usize;
}

impl MmaElement for bf16 {
    const KERNEL: Kernel<MmaProbeParams<bf16>> = PROBE_MMA_BF16;
    const K: usize = 16;
}

impl MmaElement for f16 {
    const KERNEL: Kernel<MmaProbeParams<f16>> = PROBE_MMA_F16;
    const K: usize = 16;
}

impl MmaElement for f32 {
    const KERNEL: Kernel<MmaProbeParams<f32>> = PROBE_MMA_TF32;
    const K: usize = 8;
}

/// `d = a b` by one `mma.sync`, every lane's fragments built from the documented layout: `a`
/// is `16 x K` and `b` `K x 8` (row-major, `K` = [`MmaElement::K`]), `d` 16 x 8 f32.
pub fn mma<T: MmaElement>(
    gpu: &Gpu,
    stream: &CudaStream,
    a: &impl DevicePtr<T>,
    b: &impl DevicePtr<T>,
    d: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    exactly("a", a.len(), 16 * T::K)?;
    exactly("b", b.len(), T::K * 8)?;
    exactly("d", d.len(), 16 * 8)?;
    let mut launch = gpu.kernels()?.prepare(stream, T::KERNEL);
    let p = MmaProbeParams {
        a: launch.read(a),
        b: launch.read(b),
        d: launch.write(d),
    };
    // SAFETY: the three buffers hold the sizes the kernel reads and writes (checked), one warp
    // as it wants; the launch is ordered after earlier accesses.
    unsafe { launch.run(warp(), p) }
}
