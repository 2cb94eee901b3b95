//! FP32 matrix multiply `C = alpha * A @ B + beta * C` (row-major, leading dimensions), with
//! our kernels and, for comparison on the same inputs, cuBLAS SGEMM.

use crate::error::{DriverContext, Error, Result};
use crate::runtime::{Gpu, LaunchConfig};
use cudarc::cublas::{sys as blas_sys, CudaBlas, Gemm as _, GemmConfig};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use std::sync::Arc;
use streamline_abi::matmul::{
    splitk_reduce_by_quads, splitk_row_stride, GemmParamsTo, GemmTiling, SplitKParams,
    SplitKReduceParams, SplitKTiling, SGEMM_5_PIPELINED_128X64, SGEMM_5_PIPELINED_64X64,
    SGEMM_8_WIDE_128X128, SGEMM_8_WIDE_128X128_BF16, SGEMM_DOT_1X16, SGEMM_SPLITK_128X128,
    SGEMM_SPLITK_32X128, SGEMM_SPLITK_64X64, SGEMM_SPLITK_ALL, SGEMM_SPLITK_REDUCE,
    SGEMM_SPLITK_WIDE_128X128, SGEMM_WHOLE, SPLITK_REDUCE_BLOCK,
};
use streamline_device::element::{bf16, Element};
use streamline_device::{DevPtr, DevPtrMut};

pub use crate::spec::matmul::{Gemm, MAX_DIM};
pub use sgd::{fused_split, sgemm_after_sgd, sgemm_after_sgd_pair, Applied};

mod sgd;

/// The launch side of a product.
impl Gemm {
    /// The kernels' parameters for this product with `A`, `B` and `C` at these addresses.
    pub fn params<O: Element>(
        &self,
        a: DevPtr<f32>,
        b: DevPtr<f32>,
        c: DevPtrMut<O>,
    ) -> GemmParamsTo<O> {
        GemmParamsTo {
            a,
            b,
            c,
            m: self.m as u32,
            n: self.n as u32,
            k: self.k as u32,
            lda: self.lda as u32,
            ldb: self.ldb as u32,
            ldc: self.ldc as u32,
            alpha: self.alpha,
            beta: self.beta,
        }
    }
}

/// Which kernel computes a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// The shape rule of [`plan`]: a whole-product tile, or split-K.
    Auto,
    /// One whole-product kernel: a step of the progression (see
    /// `gpu-kernels/src/matmul/mod.rs`) or `dot_1x16`.
    Fixed(&'static GemmTiling),
    /// Split-K with this tiling into (about) this many slices of `K`: `ceil(k / slices)`
    /// rounded up to the tile depth, so there may be fewer (one when `K` is shallower than a
    /// tile).
    Split(&'static SplitKTiling, usize),
}

impl Kernel {
    /// How this choice runs an `m x n x k` product on `multiprocessors` SMs.
    pub fn plan(self, m: usize, n: usize, k: usize, multiprocessors: u32) -> Plan {
        match self {
            Kernel::Auto => plan(m, n, k, multiprocessors),
            Kernel::Fixed(t) => Plan::Whole(t),
            Kernel::Split(t, slices) => split(t, k, slices),
        }
    }

    /// Parses `auto`, a kernel name with or without its `sgemm_` prefix (`1_naive`,
    /// `5_pipelined_64x64`, `dot_1x16`, ...), or a split-K kernel and its slice count
    /// (`splitk_128x128:2`).
    pub fn parse(s: &str) -> Result<Kernel> {
        if s == "auto" {
            return Ok(Kernel::Auto);
        }
        let name = s.strip_prefix("sgemm_").unwrap_or(s);
        if let Some((tile, slices)) = name.split_once(':') {
            let t = SGEMM_SPLITK_ALL
                .iter()
                .find(|t| t.spec.name().strip_prefix("sgemm_") == Some(tile));
            return match (t, slices.parse::<usize>()) {
                (Some(t), Ok(n)) if (1..=MAX_SLICES).contains(&n) => Ok(Kernel::Split(t, n)),
                _ => Err(Error::arg(
                    "kernel",
                    format!(
                        "`{s}`: a split needs one of splitk_128x128, splitk_wide_128x128, splitk_64x64, splitk_32x128 and a slice count 1..={MAX_SLICES}, as in splitk_128x128:2"
                    ),
                )),
            };
        }
        SGEMM_WHOLE
            .iter()
            .find(|t| t.spec.name().strip_prefix("sgemm_") == Some(name))
            .map(Kernel::Fixed)
            .ok_or_else(|| {
                let names: Vec<&str> = SGEMM_WHOLE
                    .iter()
                    .map(|t| t.spec.name().trim_start_matches("sgemm_"))
                    .collect();
                Error::arg(
                    "kernel",
                    format!("`{s}` is not one of auto, {}", names.join(", ")),
                )
            })
    }
}

/// The launch rule: the largest tile whose grid gives at least 90% of the multiprocessors a
/// block, because an idle SM costs more than a smaller tile's extra shared traffic; 64 x 64
/// when even 128 x 64 would leave more idle (small, skinny and flat products). The 128 x 128
/// tile is step 8's (8 x 16 outputs per thread), the fastest of the 128 x 128 kernels from
/// 2048 up in `streamline matmul --kernel all`; 128 x 64 (128 blocks at 1024) and 64 x 64 are
/// step 5's.
pub fn choose(m: usize, n: usize, multiprocessors: u32) -> &'static GemmTiling {
    let blocks = |t: &GemmTiling| m.div_ceil(t.bm as usize) * n.div_ceil(t.bn as usize);
    let enough = (multiprocessors as usize * 9).div_ceil(10);
    [&SGEMM_8_WIDE_128X128, &SGEMM_5_PIPELINED_128X64]
        .into_iter()
        .find(|t| blocks(t) >= enough)
        .unwrap_or(&SGEMM_5_PIPELINED_64X64)
}

/// The shapes `streamline matmul --sweep` and `streamline bench` measure beside cuBLAS: the
/// squares, the skinny and deep products of training (the MLP of `pipeline augment-train` at
/// 256 x 256 images and batch 32: `32 x 1024 x 196608` forward, `196608 x 1024 x 32` for the
/// weight gradient, `32 x 10 x 1024`, `1024 x 10 x 32`), flat ones, and sizes that are not
/// multiples of any tile.
pub const SWEEP: [(usize, usize, usize); 14] = [
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (32, 1024, 196608),
    (128, 1024, 196608),
    (196608, 1024, 32),
    (32, 10, 1024),
    (1024, 10, 32),
    (1024, 1024, 32),
    (4096, 4096, 128),
    (1000, 1000, 1000),
    (4097, 3001, 2999),
    (32, 1024, 10),
];

/// Shortest slice of `K` split-K cuts: 8 tiles of depth 8, so that the main loop, not a
/// block's prologue (first tile) and epilogue (writing its partial tile), dominates each slice.
pub const MIN_K_SLICE: usize = 64;

/// Deepest `K` [`plan`] gives to `sgemm_dot_1x16` (64 depths per thread) instead of split-K.
pub const DOT_MAX_K: usize = 16384;

/// Most slices split-K cuts `K` into (bounds the partials at 256 planes of `m x n`, rows padded
/// to 32 floats).
pub const MAX_SLICES: usize = 256;

/// How a product runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// One kernel over the whole of `K`.
    Whole(&'static GemmTiling),
    /// `K` cut into `slices` slices of `k_slice` (the last shorter), multiplied by `tiling`'s
    /// blocks into planes of partial products, then added in order by the reduction kernel.
    Split {
        tiling: &'static SplitKTiling,
        k_slice: usize,
        slices: usize,
    },
}

impl Plan {
    /// A short name (`8_wide_128x128`, `splitk_32x128 x 132`).
    pub fn name(&self) -> String {
        match self {
            Plan::Whole(t) => t.spec.name().trim_start_matches("sgemm_").to_string(),
            Plan::Split { tiling, slices, .. } => {
                format!(
                    "{} x {slices}",
                    tiling.spec.name().trim_start_matches("sgemm_")
                )
            }
        }
    }
}

/// The shape rule of [`Kernel::Auto`].
///
/// - Whole products when 128 x 128 tiles give at least 90% of the SMs a block: [`choose`].
/// - Otherwise, when both sides are longer than 64, `K` is split with 128 x 128 tiles (the
///   tile that reuses most) into the most slices whose blocks fit one wave of two resident
///   blocks per SM (at least two; fewer where `K` is too shallow for them): a slice more would
///   start a second wave for a few blocks. Step 8's tile where eight or more slices remain
///   (its longer slices amortise its larger prologue), step 5's otherwise (BENCHMARKS.md has
///   the measurements from 768 to 1152).
/// - Otherwise [`choose`]'s tile when its grid gives 90% of the SMs a block; if even 64 x 64
///   tiles leave more idle, the output is too small to fill the GPU and `K` carries the work
///   (a training batch of 32 against 196608 inputs: 16 blocks for 132 SMs), so `K` is split
///   with the tile that wastes fewest rows (32 x 128 up to 32 rows, 64 x 64 up to 64) into as
///   many slices as make one full wave of resident blocks; except where `sgemm_dot_1x16`,
///   which splits `K` across the threads of each block, needs no more blocks than there are
///   SMs and `K` is at most [`DOT_MAX_K`]: such products take about as long as their launches,
///   and that is one instead of two (BENCHMARKS.md has the shapes measured both ways).
///
/// There are at most `k / `[`MIN_K_SLICE`] slices (so they average at least that deep; the
/// last, what remains, may be shorter) and at most [`MAX_SLICES`], and a product that would
/// get fewer than two slices runs whole.
pub fn plan(m: usize, n: usize, k: usize, multiprocessors: u32) -> Plan {
    let whole = choose(m, n, multiprocessors);
    let sms = multiprocessors as usize;
    let enough = (sms * 9).div_ceil(10);
    let blocks = |bm: u32, bn: u32| m.div_ceil(bm as usize) * n.div_ceil(bn as usize);
    let most = (k / MIN_K_SLICE).min(MAX_SLICES);
    let b128 = blocks(128, 128);
    if b128 >= enough {
        return Plan::Whole(whole);
    }
    let (tiling, slices) = if m > 64 && n > 64 {
        // The most slices whose blocks all fit one wave of resident blocks.
        let fill = SGEMM_SPLITK_128X128.blocks_per_sm as usize * sms / b128;
        // Step 8's tile only where the slices stay eight or more once `K` bounds them.
        let t = if fill.min(most) >= 8 {
            &SGEMM_SPLITK_WIDE_128X128
        } else {
            &SGEMM_SPLITK_128X128
        };
        (t, fill.max(2))
    } else if blocks(whole.bm, whole.bn) >= enough {
        return Plan::Whole(whole);
    } else {
        let t = if m <= 32 {
            &SGEMM_SPLITK_32X128
        } else if m <= 64 {
            &SGEMM_SPLITK_64X64
        } else {
            &SGEMM_SPLITK_128X128
        };
        let wave = (t.blocks_per_sm * multiprocessors) as usize;
        (t, wave.div_ceil(blocks(t.bm, t.bn)))
    };
    let slices = slices.min(most);
    if slices < 2 {
        return Plan::Whole(whole);
    }
    if m * n.div_ceil(SGEMM_DOT_1X16.bn as usize) <= sms && k <= DOT_MAX_K {
        return Plan::Whole(&SGEMM_DOT_1X16);
    }
    split(tiling, k, slices)
}

/// The split of `k` into about `slices` slices whose depth is a multiple of the tile's.
fn split(tiling: &'static SplitKTiling, k: usize, slices: usize) -> Plan {
    let bk = tiling.bk as usize;
    let k_slice = k.div_ceil(slices.max(1)).div_ceil(bk) * bk;
    Plan::Split {
        tiling,
        k_slice,
        slices: k.div_ceil(k_slice),
    }
}

/// Grid of a tiling for `m x n` outputs.
fn grid(t: &GemmTiling, m: usize, n: usize) -> Result<(u32, u32, u32)> {
    let gx = n.div_ceil(t.bn as usize);
    let gy = m.div_ceil(t.bm as usize);
    if gy > 65_535 {
        return Err(Error::arg(
            "m",
            format!(
                "{m} rows need {gy} blocks of {} rows; one launch allows at most 65535",
                t.bm
            ),
        ));
    }
    Ok((gx as u32, gy as u32, 1))
}

/// Computes `C = alpha * A @ B + beta * C` on `stream` with `kernel`.
pub fn sgemm(
    gpu: &Gpu,
    stream: &CudaStream,
    kernel: Kernel,
    g: &Gemm,
    a: &impl DevicePtr<f32>,
    b: &impl DevicePtr<f32>,
    c: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    g.check_lengths(a.len(), b.len(), c.len())?;
    let t = match kernel.plan(g.m, g.n, g.k, gpu.info().multiprocessors) {
        Plan::Whole(t) => t,
        Plan::Split {
            tiling,
            k_slice,
            slices,
        } => return split_k(gpu, stream, g, (tiling, k_slice, slices), a, b, c),
    };
    whole(gpu, stream, t, t.spec, g, (a, b, c))
}

/// Launches `spec`, a kernel of tiling `t` that computes the whole product in one launch, on
/// buffers whose lengths `check_lengths` has proved.
fn whole<O: Element>(
    gpu: &Gpu,
    stream: &CudaStream,
    t: &GemmTiling,
    spec: streamline_device::Kernel<GemmParamsTo<O>>,
    g: &Gemm,
    (a, b, c): (
        &impl DevicePtr<f32>,
        &impl DevicePtr<f32>,
        &mut impl DevicePtrMut<O>,
    ),
) -> Result<()> {
    let grid = grid(t, g.m, g.n)?;
    let mut launch = gpu.kernels()?.prepare(stream, spec);
    let ap = launch.read(a);
    let bp = launch.read(b);
    let cp = launch.write(c);
    let params = g.params(ap, bp, cp);
    let cfg = LaunchConfig::new(grid, (t.block_x, t.block_y, 1)).with_shared(t.shared_bytes);
    // SAFETY: `check_lengths` proved each buffer holds its matrix with its stride (C's length
    // counted in its own elements), so every in-bounds access the kernel makes is inside an
    // allocation; `c` is borrowed exclusively so it aliases neither input, and the launch is
    // ordered after earlier work on all three buffers. The shared size and block shape are
    // those of `t`, the tiling `spec` is built for.
    unsafe { launch.run(cfg, params) }
}

/// Computes `C = alpha * A @ B + beta * C` on `stream` with `C` in bf16: the product in f32
/// by step 8's kernel, each result rounded once to bf16 (to nearest, ties to even) as it is
/// written. For a product whose result is used in bf16 (a gradient averaged across GPUs in
/// bf16), this spares writing it in f32 and a pass rounding it; the bits are those of
/// [`sgemm`] with step 8 into f32, then rounded. Products of any shape, in one launch (no
/// split of `K`).
pub fn sgemm_to_bf16(
    gpu: &Gpu,
    stream: &CudaStream,
    g: &Gemm,
    a: &impl DevicePtr<f32>,
    b: &impl DevicePtr<f32>,
    c: &mut impl DevicePtrMut<bf16>,
) -> Result<()> {
    g.check_lengths(a.len(), b.len(), c.len())?;
    let t = &SGEMM_8_WIDE_128X128;
    whole(gpu, stream, t, SGEMM_8_WIDE_128X128_BF16, g, (a, b, c))
}

/// Device memory allocated and freed in one stream's order (`cuMemAllocAsync` /
/// `cuMemFreeAsync`), for scratch that only the work queued on that stream between the two
/// touches: no events, two driver calls.
pub(crate) struct Scratch<'a> {
    ptr: cudarc::driver::sys::CUdeviceptr,
    stream: &'a CudaStream,
}

impl<'a> Scratch<'a> {
    /// The scratch as f32s, which kernels write and read.
    pub(crate) fn floats(&self) -> DevPtrMut<f32> {
        DevPtrMut::from_addr(self.ptr)
    }

    pub(crate) fn new(stream: &'a CudaStream, bytes: usize) -> Result<Scratch<'a>> {
        stream.context().bind_to_thread().op("cuCtxSetCurrent")?;
        // SAFETY: allocates `bytes` in the stream's order; the memory is freed by `drop` in
        // the same order, after every use queued before it.
        let ptr = unsafe { cudarc::driver::result::malloc_async(stream.cu_stream(), bytes.max(4)) }
            .op("cuMemAllocAsync")?;
        Ok(Scratch { ptr, stream })
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `cuMemAllocAsync` on this stream and is freed once, after the
        // work queued on the stream so far (the only work that uses it).
        let freed =
            unsafe { cudarc::driver::result::free_async(self.ptr, self.stream.cu_stream()) };
        self.stream.context().record_err(freed);
    }
}

/// The split-K path of [`sgemm`]: partial products of `slices` slices of `K` into a scratch
/// buffer (allocated on `stream`, freed in its order), then their ordered sum into `C`.
fn split_k(
    gpu: &Gpu,
    stream: &CudaStream,
    g: &Gemm,
    (t, k_slice, slices): (&SplitKTiling, usize, usize),
    a: &impl DevicePtr<f32>,
    b: &impl DevicePtr<f32>,
    c: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    let (grid, scratch) = split_k_frame(stream, g, t, slices)?;
    let pp = scratch.floats();
    let module = gpu.kernels()?;
    let mut launch = module.prepare(stream, t.spec);
    let ap = launch.read(a);
    let bp = launch.read(b);
    let params = SplitKParams {
        gemm: g.params(ap, bp, DevPtrMut::NULL),
        partials: pp,
        k_slice: k_slice as u32,
        slices: slices as u32,
    };
    let cfg = LaunchConfig::new(grid, (t.threads, 1, 1)).with_shared(t.shared_bytes);
    // SAFETY: `check_lengths` proved A and B hold their matrices; every slice starts inside K
    // (`slices = ceil(k / k_slice)`), so the kernel's sub-matrices lie inside them; the
    // partials hold `slices` planes of `m` rows of `splitk_row_stride(n)`; the shared size and
    // block are the tiling's.
    unsafe { launch.run(cfg, params)? };
    split_k_sum(gpu, stream, g, slices, &scratch, c)
}

/// The grid of a split-K product of `slices` slices with tiling `t`, and scratch for its
/// partial products, allocated on `stream`.
fn split_k_frame<'s>(
    stream: &'s CudaStream,
    g: &Gemm,
    t: &SplitKTiling,
    slices: usize,
) -> Result<((u32, u32, u32), Scratch<'s>)> {
    let total = (g.m * splitk_row_stride(g.n as u32) as usize)
        .checked_mul(slices)
        .filter(|&v| v <= isize::MAX as usize / 4)
        .ok_or_else(|| {
            Error::arg(
                "m",
                "the split-K partial products overflow the address space",
            )
        })?;
    let grid = (
        g.n.div_ceil(t.bn as usize) as u32,
        g.m.div_ceil(t.bm as usize) as u32,
        slices as u32,
    );
    if grid.1 > 65_535 {
        return Err(Error::arg("m", "too many rows for one split-K launch"));
    }
    Ok((grid, Scratch::new(stream, total * 4)?))
}

/// Queues the ordered sum of the `slices` planes of partial products in `scratch` (written by
/// the launch before it on `stream`) into `C`, scaled by `alpha` and `beta`.
fn split_k_sum(
    gpu: &Gpu,
    stream: &CudaStream,
    g: &Gemm,
    slices: usize,
    scratch: &Scratch<'_>,
    c: &mut impl DevicePtrMut<f32>,
) -> Result<()> {
    let pp = scratch.floats();
    let mut launch = gpu.kernels()?.prepare(stream, SGEMM_SPLITK_REDUCE);
    let cp = launch.write(c);
    let reduce = SplitKReduceParams {
        partials: pp.as_const(),
        c: cp,
        m: g.m as u32,
        n: g.n as u32,
        ldc: g.ldc as u32,
        slices: slices as u32,
        alpha: g.alpha,
        beta: g.beta,
    };
    // The grid is sized for the kernel's steps: four elements each where it can use 16-byte
    // accesses.
    let outputs = g.m * g.n;
    let quads = splitk_reduce_by_quads(g.m as u32, g.n as u32, g.ldc as u32, cp.addr(), pp.addr());
    let steps = if quads { outputs / 4 } else { outputs };
    // SAFETY: the partials were written by the launch before on this stream; `C` holds
    // `m x n` at stride `ldc` (checked); the kernel strides over the `m n` elements.
    unsafe {
        let per_block = (SPLITK_REDUCE_BLOCK, SPLITK_REDUCE_BLOCK as u64);
        launch.run(
            LaunchConfig::strided(steps as u64, per_block, 1 << 16),
            reduce,
        )
    }
}

/// cuBLAS on one stream, set to plain FP32 arithmetic (no TF32), for comparisons.
pub struct Cublas {
    blas: CudaBlas,
}

impl Cublas {
    /// Loads cuBLAS and binds a handle to `stream`; a clear error when the library is absent.
    pub fn new(stream: Arc<CudaStream>) -> Result<Cublas> {
        // SAFETY: only tries to open the shared library.
        if !unsafe { blas_sys::is_culib_present() } {
            return Err(Error::MissingLibrary {
                library: "cuBLAS",
                reason: "libcublas.so was not found on the library path (install the CUDA toolkit's cuBLAS or add its directory to LD_LIBRARY_PATH)".into(),
            });
        }
        let blas = CudaBlas::new(stream).map_err(|source| Error::Cublas {
            op: "cublasCreate",
            source,
        })?;
        // SAFETY: the handle is valid for the lifetime of `blas`.
        unsafe {
            blas_sys::cublasSetMathMode(*blas.handle(), blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH)
        }
        .result()
        .map_err(|source| Error::Cublas {
            op: "cublasSetMathMode",
            source,
        })?;
        Ok(Cublas { blas })
    }

    /// `C = alpha * A @ B + beta * C`, row-major, through cuBLAS's column-major SGEMM as
    /// `C^T = B^T A^T` (a row-major matrix is its transpose in column-major order).
    pub fn sgemm(
        &self,
        g: &Gemm,
        a: &impl DevicePtr<f32>,
        b: &impl DevicePtr<f32>,
        c: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        g.check_lengths(a.len(), b.len(), c.len())?;
        let cfg = GemmConfig {
            transa: blas_sys::cublasOperation_t::CUBLAS_OP_N,
            transb: blas_sys::cublasOperation_t::CUBLAS_OP_N,
            m: g.n as i32,
            n: g.m as i32,
            k: g.k as i32,
            alpha: g.alpha,
            lda: g.ldb as i32,
            ldb: g.lda as i32,
            beta: g.beta,
            ldc: g.ldc as i32,
        };
        // SAFETY: the lengths were checked against the shape and strides (all within i32 by
        // `validate`), so cuBLAS's accesses stay inside the three buffers.
        unsafe { self.blas.gemm(cfg, b, a, c) }.map_err(|source| Error::Cublas {
            op: "cublasSgemm",
            source,
        })
    }
}
