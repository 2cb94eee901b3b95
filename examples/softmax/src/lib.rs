//! The host side of the softmax example: the embedded kernels, a safe launcher generic over
//! the element type, and the f64 reference with its error analysis.

use softmax_kernels::{
    softmax as kernel, softmax_held as held_kernel, softmax_long as long_kernel, Lanes,
    SoftmaxParams, BLOCK, LONG_BLOCK, LONG_GROUP, WARP_COLS, WARP_ROWS,
};
use streamline::cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline::{EmbeddedModule, Error, LaunchConfig, Module, Result};
use streamline_testing::Tolerance;

pub use half::bf16;

/// The PTX and machine code `build.rs` built from `kernels/`.
pub static KERNELS: EmbeddedModule = streamline::include_kernels!("softmax_kernels");

/// An element type the kernel has an instance for: `f32` or [`bf16`].
pub trait Elem:
    Lanes
    + kernel::Instance
    + held_kernel::Instance
    + long_kernel::Instance
    + streamline::cudarc::driver::DeviceRepr
{
}
impl Elem for f32 {}
impl Elem for bf16 {}

/// The kernel that takes a softmax's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// [`softmax_held`](fn@softmax_kernels::softmax_held): rows a warp holds, of at most
    /// [`WARP_COLS`] columns, each of whole 16-byte chunks, both matrices 16-byte aligned.
    Held,
    /// [`softmax_long`](fn@softmax_kernels::softmax_long): rows of at least
    /// [`LONG_BLOCK`]` * `[`LONG_GROUP`] chunks (64 KiB), chunked and aligned the same way.
    /// Shorter rows stay with [`Path::Any`]: its blocks of 256 threads keep them in L2 between
    /// passes (several blocks fit on a multiprocessor), where a block of 1024 threads would wait
    /// on its reductions with little to read between them.
    Long,
    /// [`softmax`](fn@softmax_kernels::softmax): every other shape and alignment.
    Any,
}

/// The path rows of `cols` elements of `T` take between the matrices at device addresses `x`
/// and `y`.
pub fn path<T: Elem>(cols: usize, x: u64, y: u64) -> Path {
    let chunked = (cols * std::mem::size_of::<T>()).is_multiple_of(16)
        && x.is_multiple_of(16)
        && y.is_multiple_of(16);
    let chunks = cols * std::mem::size_of::<T>() / 16;
    if !chunked {
        Path::Any
    } else if cols <= WARP_COLS as usize {
        Path::Held
    } else if chunks >= LONG_BLOCK as usize * LONG_GROUP {
        Path::Long
    } else {
        Path::Any
    }
}

/// The grid of a `rows x cols` softmax on `path`: a warp per row for short rows, else a block.
pub fn launch_config(path: Path, rows: u32, cols: u32) -> LaunchConfig {
    match path {
        Path::Long => LaunchConfig::new((rows, 1, 1), (LONG_BLOCK, 1, 1)),
        _ if cols <= WARP_COLS => {
            LaunchConfig::new((rows.div_ceil(WARP_ROWS), 1, 1), (BLOCK, 1, 1))
        }
        _ => LaunchConfig::new((rows, 1, 1), (BLOCK, 1, 1)),
    }
}

/// Row-wise softmax of the row-major `rows x cols` matrix `x` into `y`, on `stream`, in `T`
/// (f32 arithmetic inside), by the kernel [`path`] picks. The launch waits for earlier writers
/// of `x` and `y` on other streams of the engine, and later users of `y` wait for it.
pub fn softmax<T: Elem>(
    module: &Module,
    stream: &CudaStream,
    (rows, cols): (usize, usize),
    x: &impl DevicePtr<T>,
    y: &mut impl DevicePtrMut<T>,
) -> Result<()> {
    streamline::ops::check_same_len(x.len(), y.len())?;
    let shape = rows.checked_mul(cols).filter(|&n| n == x.len());
    if shape.is_none() {
        return Err(Error::arg(
            "x",
            format!("length {} is not rows x cols = {rows} x {cols}", x.len()),
        ));
    }
    let (Ok(r), Ok(c)) = (u32::try_from(rows), u32::try_from(cols)) else {
        return Err(Error::arg(
            "x",
            format!("shape {rows} x {cols} exceeds u32"),
        ));
    };
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let mut launch = module.prepare(stream, kernel::<T>());
    let params = SoftmaxParams {
        x: launch.read(x),
        y: launch.write(y),
        rows: r,
        cols: c,
    };
    let path = path::<T>(cols, params.x.addr(), params.y.addr());
    match path {
        Path::Held => launch = launch.instead(held_kernel::<T>()),
        Path::Long => launch = launch.instead(long_kernel::<T>()),
        Path::Any => {}
    }
    // SAFETY: both buffers hold `rows * cols` elements of `T` (checked above) and are distinct
    // (one borrowed shared, one exclusively); `cols >= 1`; the grid is the chosen kernel's
    // (`launch_config` of its path), and the held and long rows' kernels are taken only for
    // the columns and alignment they require.
    unsafe { launch.run(launch_config(path, r, c), params) }
}

/// Softmax of each row of `x` (`cols` wide) in f64, with plain loops.
pub fn reference(x: &[f64], cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let mut m = f64::NEG_INFINITY;
        for &v in row {
            m = m.max(v);
        }
        let mut s = 0.0;
        for &v in row {
            s += (v - m).exp();
        }
        for &v in row {
            out.push((v - m).exp() / s);
        }
    }
    out
}

/// Relative bound on the kernel's f32 result against [`reference`], for inputs whose row
/// spread (largest minus smallest) is at most `spread`.
///
/// Error analysis, with `u = 2^-24` (f32 unit roundoff): the maximum is exact; `x - max`
/// rounds once, an absolute error of at most `spread * u` in the exponent, which is a relative
/// error of as much in the exponential; the held rows take `e^d` as `2^(d log2(e))`, whose
/// constant and product round once each, `2 spread u` more; `expf` and `exp2f` add at most
/// 2 ulp (`2^-22`); the sum of
/// positive terms, each thread adding at most `ceil(cols / 32) + 16` of them in turn (its
/// chunks' elements and a share of the unaligned ends) and the butterflies of the warp and the
/// block at most 8 more levels, adds `(ceil(cols / 32) + 24) u`;
/// the reciprocal and the product add `2 u`. The reference's own f64 error is negligible.
///
/// [`reference`]: fn@reference
pub fn f32_bound(cols: usize, spread: f64) -> f64 {
    let u = f64::powi(2.0, -24);
    (3.0 * spread + (cols.div_ceil(32) + 26) as f64) * u + f64::powi(2.0, -22)
}

/// What the long rows' kernel adds to [`f32_bound`] for rows of `cols` elements of `T` (0 for
/// rows it does not take): it sums each thread's exponentials against that thread's maximum so
/// far, and moves the sum to a new maximum at most once per group of the thread's chunks
/// (`GROUP` of them, `LANES` elements each) and once more for the block's maximum; each
/// factor, a power of two of a rounded difference, is off by at most `2^-22 + 3 spread u`
/// relative.
pub fn long_rows_bound<T: Elem>(cols: usize, spread: f64) -> f64 {
    let chunks = cols * std::mem::size_of::<T>() / 16;
    if cols <= WARP_COLS as usize || chunks < LONG_BLOCK as usize * LONG_GROUP {
        return 0.0;
    }
    let moves = cols.div_ceil(T::LANES * LONG_BLOCK as usize * T::GROUP) + 1;
    moves as f64 * (f64::powi(2.0, -22) + 3.0 * spread * f64::powi(2.0, -24))
}

/// [`f32_bound`] (with [`long_rows_bound`]) for `T`'s output: for bf16, the f32 result rounded
/// once to bf16 (8 significant bits), `2^-8` relative more.
pub fn tolerance<T: Elem>(cols: usize, spread: f64) -> Tolerance {
    let e = f32_bound(cols, spread) + long_rows_bound::<T>(cols, spread);
    let rel = if std::mem::size_of::<T>() == 2 {
        e + f64::powi(2.0, -8) * (1.0 + e)
    } else {
        e
    };
    Tolerance::Relative { rel, abs: 0.0 }
}
