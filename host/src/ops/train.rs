//! The elementwise and layout kernels of a small training step (ReLU and its gradient, the
//! mean-squared-error gradient, SGD, transpose): with [`crate::ops::matmul`], a two-layer MLP's
//! forward and backward pass; SGD by the mean of two gradients, which two GPUs of a
//! data-parallel step apply after exchanging theirs; and the rounding of a gradient to bf16, which halves the bytes
//! it takes between GPUs.

use crate::error::{Error, Result};
use crate::runtime::{Gpu, LaunchConfig};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};
use half::bf16;
use streamline_abi::matmul::{
    SplitKSgdParams, SGEMM_SPLITK_WIDE_SGD_BF16, SGEMM_SPLITK_WIDE_SGD_F32,
    SGEMM_SPLITK_WIDE_SGD_PAIR_F32,
};
use streamline_abi::train::{
    transpose_shared_bytes, MseGradParams, ReluBackwardParams, ReluParams, RoundBf16Params,
    SgdPairParams, SgdParams, TransposeParams, MSE_GRAD_F32, RELU_BACKWARD_F32, RELU_F32,
    ROUND_BF16, SGD_F32, SGD_F32_BF16, SGD_PAIR_F32, SGD_PAIR_F32_BF16, TRAIN_BLOCK, TRANSPOSE_F32,
    TRANSPOSE_ROWS, TRANSPOSE_TILE,
};
use streamline_abi::Kernel;

/// Gradient elements [`sgd`] updates f32 weights by: f32, and bf16 (a gradient rounded by
/// [`round_bf16`] for its trip between GPUs).
pub trait GradElement: DeviceRepr + streamline_device::element::Element {
    /// The update's kernel for this gradient type.
    const SGD: Kernel<SgdParams<Self>>;
    /// The update's kernel by the mean of two gradients of this type.
    const SGD_PAIR: Kernel<SgdPairParams<Self>>;
    /// The split-K product that applies the update to its `B` as it reads it.
    const SPLITK_SGD: Kernel<SplitKSgdParams<Self>>;
    /// The same by the mean of two gradients, where there is one (f32 only: in bf16 the
    /// kernel would spill).
    const SPLITK_SGD_PAIR: Option<Kernel<SplitKSgdParams<Self>>>;
}

impl GradElement for f32 {
    const SGD: Kernel<SgdParams<f32>> = SGD_F32;
    const SGD_PAIR: Kernel<SgdPairParams<f32>> = SGD_PAIR_F32;
    const SPLITK_SGD: Kernel<SplitKSgdParams<f32>> = SGEMM_SPLITK_WIDE_SGD_F32;
    const SPLITK_SGD_PAIR: Option<Kernel<SplitKSgdParams<f32>>> =
        Some(SGEMM_SPLITK_WIDE_SGD_PAIR_F32);
}

impl GradElement for bf16 {
    const SGD: Kernel<SgdParams<bf16>> = SGD_F32_BF16;
    const SGD_PAIR: Kernel<SgdPairParams<bf16>> = SGD_PAIR_F32_BF16;
    const SPLITK_SGD: Kernel<SplitKSgdParams<bf16>> = SGEMM_SPLITK_WIDE_SGD_BF16;
    const SPLITK_SGD_PAIR: Option<Kernel<SplitKSgdParams<bf16>>> = None;
}

fn same(arg: &'static str, have: usize, want: usize, of: &str) -> Result<()> {
    if have != want {
        return Err(Error::arg(
            arg,
            format!("length {have} differs from the length of {of}, {want}"),
        ));
    }
    Ok(())
}

/// One thread per element, the grid capped at [`MAX_BLOCKS`] (the kernels stride over the
/// rest).
const PER_BLOCK: (u32, u64) = (TRAIN_BLOCK, TRAIN_BLOCK as u64);
const MAX_BLOCKS: u32 = 1 << 20;

/// `y = relu(x)` on `stream` (`x` where positive or NaN, else `+0`). Equal lengths.
pub fn relu(
    gpu: &Gpu,
    stream: &CudaStream,
    x: &impl DevicePtr<f32>,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    same("y", y.len(), x.len(), "x")?;
    if x.len() == 0 {
        return Ok(());
    }
    let n = x.len();
    let mut launch = gpu.kernels()?.prepare(stream, RELU_F32);
    let xp = launch.read(x);
    let yp = launch.write(y);
    let p = ReluParams {
        x: xp,
        y: yp,
        n: n as u64,
    };
    // SAFETY: both buffers hold `n` f32 (checked); `y` is borrowed exclusively so it does not
    // overlap `x`; the launch is ordered after earlier accesses.
    unsafe {
        launch.run(
            crate::LaunchConfig::strided(n as u64, PER_BLOCK, MAX_BLOCKS),
            p,
        )
    }
}

/// `dx = dy` where `x > 0`, else `+0`: the gradient through a ReLU whose input was `x`.
/// Equal lengths.
pub fn relu_backward(
    gpu: &Gpu,
    stream: &CudaStream,
    dy: &impl DevicePtr<f32>,
    x: &impl DevicePtr<f32>,
    dx: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    same("x", x.len(), dy.len(), "dy")?;
    same("dx", dx.len(), dy.len(), "dy")?;
    let n = dy.len();
    if n == 0 {
        return Ok(());
    }
    let mut launch = gpu.kernels()?.prepare(stream, RELU_BACKWARD_F32);
    let gp = launch.read(dy);
    let xp = launch.read(x);
    let dp = launch.write(dx);
    let p = ReluBackwardParams {
        dy: gp,
        x: xp,
        dx: dp,
        n: n as u64,
    };
    // SAFETY: the three buffers hold `n` f32 (checked); `dx` is borrowed exclusively so it
    // overlaps neither input; the launch is ordered after earlier accesses.
    unsafe {
        launch.run(
            crate::LaunchConfig::strided(n as u64, PER_BLOCK, MAX_BLOCKS),
            p,
        )
    }
}

/// `d = scale * (y - t)`: with `scale = 2 / y.len()`, the gradient of the mean squared error
/// `mean((y - t)^2)` with respect to `y`. Equal lengths; `scale` finite.
pub fn mse_grad(
    gpu: &Gpu,
    stream: &CudaStream,
    y: &impl DevicePtr<f32>,
    t: &impl DevicePtr<f32>,
    scale: f32,
    d: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    same("t", t.len(), y.len(), "y")?;
    same("d", d.len(), y.len(), "y")?;
    if !scale.is_finite() {
        return Err(Error::arg("scale", format!("{scale}: must be finite")));
    }
    let n = y.len();
    if n == 0 {
        return Ok(());
    }
    let mut launch = gpu.kernels()?.prepare(stream, MSE_GRAD_F32);
    let yp = launch.read(y);
    let tp = launch.read(t);
    let dp = launch.write(d);
    let p = MseGradParams {
        y: yp,
        t: tp,
        d: dp,
        n: n as u64,
        scale,
        pad: 0,
    };
    // SAFETY: the three buffers hold `n` f32 (checked); `d` is borrowed exclusively; the
    // launch is ordered after earlier accesses.
    unsafe {
        launch.run(
            crate::LaunchConfig::strided(n as u64, PER_BLOCK, MAX_BLOCKS),
            p,
        )
    }
}

/// `w = w - lr * g` in place (one rounding; a bf16 `g` widens to f32 exactly). Equal lengths;
/// `lr` finite.
pub fn sgd<G: GradElement>(
    gpu: &Gpu,
    stream: &CudaStream,
    w: &mut impl DevicePtrMut<f32>,
    g: &impl DevicePtr<G>,
    lr: f32,
) -> Result<()> {
    same("g", g.len(), w.len(), "w")?;
    if !lr.is_finite() {
        return Err(Error::arg("lr", format!("{lr}: must be finite")));
    }
    let n = w.len();
    if n == 0 {
        return Ok(());
    }
    let mut launch = gpu.kernels()?.prepare(stream, G::SGD);
    let gp = launch.read(g);
    let wp = launch.write(w);
    let p = SgdParams {
        w: wp,
        g: gp,
        n: n as u64,
        lr,
        pad: 0,
    };
    // SAFETY: `w` holds `n` f32 and `g` `n` elements of `G` (checked); `w` is borrowed
    // exclusively so `g` does not overlap it; the launch is ordered after earlier accesses.
    unsafe {
        launch.run(
            crate::LaunchConfig::strided(n as u64, PER_BLOCK, MAX_BLOCKS),
            p,
        )
    }
}

/// `w = w - lr * (a + b) / 2` in place: the sum rounded once in f32 (so `a` and `b` may be
/// swapped without changing a bit: two GPUs that each pass their own gradient first end with
/// the same weights), halved exactly, the update one rounding. Equal lengths; `lr` finite.
pub fn sgd_pair<G: GradElement>(
    gpu: &Gpu,
    stream: &CudaStream,
    w: &mut impl DevicePtrMut<f32>,
    (a, b): (&impl DevicePtr<G>, &impl DevicePtr<G>),
    lr: f32,
) -> Result<()> {
    same("a", a.len(), w.len(), "w")?;
    same("b", b.len(), w.len(), "w")?;
    if !lr.is_finite() {
        return Err(Error::arg("lr", format!("{lr}: must be finite")));
    }
    let n = w.len();
    if n == 0 {
        return Ok(());
    }
    let mut launch = gpu.kernels()?.prepare(stream, G::SGD_PAIR);
    let ap = launch.read(a);
    let bp = launch.read(b);
    let wp = launch.write(w);
    let p = SgdPairParams {
        w: wp,
        a: ap,
        b: bp,
        n: n as u64,
        lr,
        pad: 0,
    };
    // SAFETY: `w` holds `n` f32 and `a`, `b` `n` elements of `G` each (checked); `w` is borrowed
    // exclusively so neither overlaps it; the launch is ordered after earlier accesses.
    unsafe {
        launch.run(
            crate::LaunchConfig::strided(n as u64, PER_BLOCK, MAX_BLOCKS),
            p,
        )
    }
}

/// `y = x` rounded to the nearest bf16 (ties to even). Equal lengths.
pub fn round_bf16(
    gpu: &Gpu,
    stream: &CudaStream,
    x: &impl DevicePtr<f32>,
    y: &mut impl DevicePtrMut<bf16>,
) -> Result<()> {
    same("y", y.len(), x.len(), "x")?;
    let n = x.len();
    if n == 0 {
        return Ok(());
    }
    let mut launch = gpu.kernels()?.prepare(stream, ROUND_BF16);
    let xp = launch.read(x);
    let yp = launch.write(y);
    let p = RoundBf16Params {
        x: xp,
        y: yp,
        n: n as u64,
    };
    // SAFETY: `x` holds `n` f32 and `y` `n` bf16 (checked); `y` is borrowed exclusively while `x`
    // is borrowed, so they do not overlap; the launch is ordered after earlier accesses.
    unsafe {
        launch.run(
            crate::LaunchConfig::strided(n as u64, PER_BLOCK, MAX_BLOCKS),
            p,
        )
    }
}

/// Largest `rows` [`transpose`] accepts: one grid row of blocks per `TRANSPOSE_TILE` rows, at
/// most 65535.
pub const TRANSPOSE_MAX_ROWS: usize = 65_535 * TRANSPOSE_TILE as usize;

/// `y = x^T` for the row-major `rows x cols` matrix `x` (`y` is `cols x rows`). Both hold
/// exactly `rows * cols` elements; `rows` is at least 1 and at most [`TRANSPOSE_MAX_ROWS`],
/// `cols` in `1..=2^31 - 1`.
pub fn transpose(
    gpu: &Gpu,
    stream: &CudaStream,
    rows: usize,
    cols: usize,
    x: &impl DevicePtr<f32>,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    if !(1..=TRANSPOSE_MAX_ROWS).contains(&rows) {
        return Err(Error::arg(
            "rows",
            format!("{rows} is outside the allowed range 1..={TRANSPOSE_MAX_ROWS}"),
        ));
    }
    if !(1..=i32::MAX as usize).contains(&cols) {
        return Err(Error::arg(
            "cols",
            format!("{cols} is outside the allowed range 1..={}", i32::MAX),
        ));
    }
    let n = rows
        .checked_mul(cols)
        .ok_or_else(|| Error::arg("cols", "rows * cols overflows"))?;
    same("x", x.len(), n, "the rows x cols matrix")?;
    same("y", y.len(), n, "the rows x cols matrix")?;
    let t = TRANSPOSE_TILE as usize;
    let grid = (cols.div_ceil(t) as u32, rows.div_ceil(t) as u32, 1);
    let mut launch = gpu.kernels()?.prepare(stream, TRANSPOSE_F32);
    let xp = launch.read(x);
    let yp = launch.write(y);
    let p = TransposeParams {
        x: xp,
        y: yp,
        rows: rows as u32,
        cols: cols as u32,
        ldx: cols as u32,
        ldy: rows as u32,
    };
    let cfg = LaunchConfig::new(grid, (TRANSPOSE_TILE, TRANSPOSE_ROWS, 1))
        .with_shared(transpose_shared_bytes(4));
    // SAFETY: both buffers hold `rows * cols` f32 (checked), `y` borrowed exclusively; the grid
    // and block are the kernel's contract (grid.y <= 65535 by the row limit, grid.x below
    // 2^26) and the shared memory is its tile.
    unsafe { launch.run(cfg, p) }
}
