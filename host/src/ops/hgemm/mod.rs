//! Matrix multiply on tensor cores, `C = alpha * A @ B + beta * C` with bf16 or f16 matrices,
//! or f32 matrices multiplied as TF32 (row-major, leading dimensions), f32 accumulation, with
//! our kernels and, for comparison on the same inputs, cuBLAS's `cublasGemmEx`.
//!
//! The kernels are a progression (see `gpu-kernels/src/matmul/half/mod.rs`); on a Hopper GPU
//! the default is the last `wgmma` step except for small products of shallow `K`
//! ([`prefers_mma`]), elsewhere the `mma.sync` one. TF32 runs on Hopper only, on steps 3 and 4
//! (the default).
//!
//! `B` comes either as `k x n` rows ([`hgemm`]) or transposed, `n x k`, as a linear layer keeps
//! its weight ([`hgemm_bt`]). The bf16 and f16 kernels read the first, the TF32 ones the second
//! (the tensor cores take TF32 operands only K-major); given the other way, `B` is first
//! copied transposed, in the stream's order.

mod cublas;
mod operands;

pub use cublas::CublasHalf;

use crate::error::{Error, Result};
use crate::ops::matmul::Scratch;
use crate::runtime::{Gpu, LaunchConfig};
use cudarc::cublas::sys as blas_sys;
use cudarc::driver::sys::CUtensorMapDataType;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use half::{bf16, f16};
use operands::{encode_maps, transpose_b};
use std::sync::Arc;
use streamline_abi::hgemm::{
    HgemmParams, HgemmReduceParams, HgemmTiling, HGEMM_1_MMA, HGEMM_4_TMA_STORE, HGEMM_5_NARROW,
    HGEMM_ALL, HGEMM_REDUCE_BLOCK, HGEMM_SPLITK_REDUCE_BF16, HGEMM_SPLITK_REDUCE_F16,
    HGEMM_SPLITK_REDUCE_F32,
};
use streamline_abi::train::{TransposeParams, TRANSPOSE_BF16, TRANSPOSE_F16, TRANSPOSE_F32};
use streamline_device::Kernel as KernelHandle;
use streamline_device::{DevPtr, DevPtrMut};

pub use crate::spec::matmul::{BLayout, Gemm};

/// An element type of the tensor-core kernels: bf16, f16, or f32 multiplied as TF32.
pub trait Half: cudarc::driver::DeviceRepr + streamline_device::element::Element {
    /// The type's name in messages (`tf32` for f32).
    const DTYPE: &'static str;
    /// The driver's name of the type for tensor maps.
    const TMA: CUtensorMapDataType;
    /// cuBLAS's name of the type.
    const BLAS: blas_sys::cudaDataType_t;
    /// cuBLAS's compute type for the same product (f32 accumulation; TF32 products for f32).
    const COMPUTE: blas_sys::cublasComputeType_t =
        blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F;
    /// How the kernels read `B`: transposed (K-major) for TF32, as the tensor cores take TF32
    /// operands only that way; `k x n` rows for the 16-bit types.
    const B_READ: BLayout = BLayout::Rows;
    /// The transposition of this type, for a `B` given the other way.
    fn transpose() -> KernelHandle<TransposeParams<Self>>;
    /// The step's kernel for this type, where it has one.
    fn kernel(t: &HgemmTiling) -> Option<KernelHandle<HgemmParams<Self>>>;
    /// The split-K reduction into this type.
    fn reduce() -> KernelHandle<HgemmReduceParams<Self>>;
}

impl Half for bf16 {
    const DTYPE: &'static str = "bf16";
    const TMA: CUtensorMapDataType = CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const BLAS: blas_sys::cudaDataType_t = blas_sys::cudaDataType_t::CUDA_R_16BF;
    fn kernel(t: &HgemmTiling) -> Option<KernelHandle<HgemmParams<bf16>>> {
        Some(t.bf16)
    }
    fn transpose() -> KernelHandle<TransposeParams<bf16>> {
        TRANSPOSE_BF16
    }
    fn reduce() -> KernelHandle<HgemmReduceParams<bf16>> {
        HGEMM_SPLITK_REDUCE_BF16
    }
}

impl Half for f16 {
    const DTYPE: &'static str = "f16";
    const TMA: CUtensorMapDataType = CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    const BLAS: blas_sys::cudaDataType_t = blas_sys::cudaDataType_t::CUDA_R_16F;
    fn kernel(t: &HgemmTiling) -> Option<KernelHandle<HgemmParams<f16>>> {
        Some(t.f16)
    }
    fn transpose() -> KernelHandle<TransposeParams<f16>> {
        TRANSPOSE_F16
    }
    fn reduce() -> KernelHandle<HgemmReduceParams<f16>> {
        HGEMM_SPLITK_REDUCE_F16
    }
}

impl Half for f32 {
    const DTYPE: &'static str = "tf32";
    const TMA: CUtensorMapDataType = CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    const BLAS: blas_sys::cudaDataType_t = blas_sys::cudaDataType_t::CUDA_R_32F;
    const COMPUTE: blas_sys::cublasComputeType_t =
        blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32;
    const B_READ: BLayout = BLayout::Transposed;
    fn kernel(t: &HgemmTiling) -> Option<KernelHandle<HgemmParams<f32>>> {
        t.tf32
    }
    fn transpose() -> KernelHandle<TransposeParams<f32>> {
        TRANSPOSE_F32
    }
    fn reduce() -> KernelHandle<HgemmReduceParams<f32>> {
        HGEMM_SPLITK_REDUCE_F32
    }
}

/// The shapes of `streamline matmul --dtype bf16 --sweep`: the FP32 sweep's, a wide and flat
/// product, and the projections of a transformer layer (hidden size 768 and 4096, 8192 tokens).
pub const HALF_SWEEP: [(usize, usize, usize); 19] = {
    let mut s = [(0, 0, 0); 19];
    let mut i = 0;
    while i < crate::ops::matmul::SWEEP.len() {
        s[i] = crate::ops::matmul::SWEEP[i];
        i += 1;
    }
    s[14] = (16384, 16384, 1024);
    s[15] = (8192, 3072, 768);
    s[16] = (8192, 768, 3072);
    s[17] = (8192, 12288, 4096);
    s[18] = (8192, 4096, 4096);
    s
};

/// Which step computes a product.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HgemmKernel {
    /// The fastest `wgmma` step where the loaded kernels have it (Hopper): 4 (the TMA-store
    /// epilogue), or 5 (its narrow tiles) where [`prefers_narrow`]; except for the small,
    /// shallow products of [`prefers_mma`], which take the `mma.sync` step. TF32: step 4 or 5.
    Auto,
    /// One step.
    Step(&'static HgemmTiling),
    /// A persistent step (3 or 4) with `K` cut into this many slices (at most one per stage
    /// of `K`), added by the split-K reduction; 1 keeps `K` whole.
    Split(&'static HgemmTiling, u32),
}

impl HgemmKernel {
    /// Parses `auto`, a step's name with or without its `hgemm_` prefix (`1_mma`,
    /// `2_wgmma`), or a persistent step with a slice count (`4_tma_store:4`).
    pub fn parse(s: &str) -> Result<HgemmKernel> {
        if s == "auto" {
            return Ok(HgemmKernel::Auto);
        }
        if let Some((step, slices)) = s.split_once(':') {
            let HgemmKernel::Step(t) = HgemmKernel::parse(step)? else {
                return Err(Error::arg(
                    "kernel",
                    format!("`{s}`: slices go with a step (`4_tma_store:4`), not with auto"),
                ));
            };
            let slices = slices
                .parse::<u32>()
                .ok()
                .filter(|v| (1..=MAX_SLICES).contains(v))
                .ok_or_else(|| {
                    Error::arg(
                        "kernel",
                        format!("`{s}`: the slice count must be in 1..={MAX_SLICES}"),
                    )
                })?;
            if !t.persistent {
                return Err(Error::arg(
                    "kernel",
                    format!("`{s}`: {} cannot split K; steps 3 and 4 can", t.name()),
                ));
            }
            return Ok(HgemmKernel::Split(t, slices));
        }
        let name = s.strip_prefix("hgemm_").unwrap_or(s);
        HGEMM_ALL
            .iter()
            .find(|t| t.name().strip_prefix("hgemm_") == Some(name))
            .map(HgemmKernel::Step)
            .ok_or_else(|| {
                let names: Vec<&str> = HGEMM_ALL.iter().map(|t| t.name()).collect();
                Error::arg(
                    "kernel",
                    format!("`{s}` is not auto or one of {}", names.join(", ")),
                )
            })
    }

    /// The step this choice runs for `T` on `gpu`, for the product `g`, and its kernel.
    pub fn resolve<T: Half>(
        self,
        gpu: &Gpu,
        g: &Gemm,
    ) -> Result<(&'static HgemmTiling, KernelHandle<HgemmParams<T>>)> {
        let module = gpu.kernels()?;
        let has = |t: &HgemmTiling| T::kernel(t).is_some_and(|k| module.has(k));
        let t = match self {
            HgemmKernel::Step(t) => t,
            HgemmKernel::Split(t, _) if t.persistent => t,
            HgemmKernel::Split(t, _) => {
                return Err(Error::arg(
                    "kernel",
                    format!("{} cannot split K; steps 3 and 4 can", t.name()),
                ))
            }
            HgemmKernel::Auto
                if T::B_READ == BLayout::Transposed
                    || !prefers_mma(g) && has(&HGEMM_4_TMA_STORE) =>
            {
                let (sms, bk) = (
                    gpu.info().multiprocessors as usize,
                    128 / std::mem::size_of::<T>(),
                );
                if prefers_narrow(g, sms, bk) && has(&HGEMM_5_NARROW) {
                    &HGEMM_5_NARROW
                } else {
                    &HGEMM_4_TMA_STORE
                }
            }
            HgemmKernel::Auto => &HGEMM_1_MMA,
        };
        let steps: Vec<&str> = HGEMM_ALL
            .iter()
            .filter(|t| T::kernel(t).is_some())
            .map(|t| t.name())
            .collect();
        let k = T::kernel(t).ok_or_else(|| {
            Error::arg(
                "kernel",
                format!(
                    "{} has no {} kernel; {} has: {}",
                    t.name(),
                    T::DTYPE,
                    T::DTYPE,
                    steps.join(", ")
                ),
            )
        })?;
        if !module.has(k) {
            return Err(Error::arg(
                "kernel",
                format!(
                    "{}'s {} kernel is not in the loaded kernels: it needs sm_90a (a Hopper GPU), and this is {}",
                    t.name(),
                    T::DTYPE,
                    gpu.info().name
                ),
            ));
        }
        Ok((t, k))
    }
}

/// Whether the `mma.sync` step computes `g` sooner than the `wgmma` ones even on Hopper: a
/// `K` of at most 64 (one stage of the TMA steps) and at most 2^21 outputs (about one wave of
/// step 1's tiles on an H100 or H200), where the TMA steps' fixed costs (the tensor maps, the
/// pipeline's fill, the warpgroups' setup) outweigh their faster products.
pub fn prefers_mma(g: &Gemm) -> bool {
    g.k <= 64 && g.m.saturating_mul(g.n) <= 1 << 21
}

/// Whether step 5's 128 x 128 tiles keep `sms` multiprocessors busier than step 4's 128 x 256
/// ones for `g`, multiplied in stages `bk` deep: where the narrow tiles keep the
/// multiprocessors busy over more than 1.2 times the share of their waves that the wide tiles
/// do (few tiles, or a wave and a half) and the wide tiles are not cut along `K` instead
/// (split-K, which fills the multiprocessors either way and pays less for it with fewer
/// tiles), or where `C` is at most 128 columns wide (the wide tiles' second half would only
/// multiply zeros). Elsewhere the wide tiles, which read `A` once for twice the columns, win.
pub fn prefers_narrow(g: &Gemm, sms: usize, bk: usize) -> bool {
    let wide = g.m.div_ceil(128).saturating_mul(g.n.div_ceil(256)).max(1);
    let narrow = g.m.div_ceil(128).saturating_mul(g.n.div_ceil(128)).max(1);
    let busy = |t: usize| {
        let sms = sms.max(1) as f64;
        t as f64 / ((t as f64 / sms).ceil() * sms)
    };
    let split = wide <= sms && split_k(wide, g.k.div_ceil(bk.max(1)), sms).is_some();
    g.n <= 128 || !split && busy(narrow) > 1.2 * busy(wide)
}

/// Checks what the tensor-core kernels need beyond [`Gemm::check_lengths`] for elements of
/// `size` bytes: rows starting on 16-byte boundaries (strides multiples of 16 bytes, addresses
/// 16-byte aligned). `b` is `None` where the kernels read a transposed copy of `B` rather than
/// `B` itself (the copy has rows of its own, and the transposition takes any stride and
/// address).
pub fn check_alignment(g: &Gemm, size: usize, a: u64, b: Option<u64>, c: u64) -> Result<()> {
    let align = 16 / size;
    let ldb = b.map(|_| ("ldb", g.ldb));
    for (arg, ld) in [("lda", g.lda), ("ldc", g.ldc)].into_iter().chain(ldb) {
        if ld % align != 0 {
            return Err(Error::arg(
                arg,
                format!("{ld} is not a multiple of {align}: the tensor-core kernels need rows on 16-byte boundaries (pad the rows)"),
            ));
        }
    }
    for (arg, addr) in [("a", a), ("c", c)].into_iter().chain(b.map(|b| ("b", b))) {
        if addr % 16 != 0 {
            return Err(Error::arg(
                arg,
                format!("starts at device address {addr:#x}, not 16-byte aligned (a view that starts inside a row of 8 elements?)"),
            ));
        }
    }
    Ok(())
}

/// The device address of a buffer, for checks and tensor maps (the launch takes its own).
fn address<T>(buf: &impl DevicePtr<T>, stream: &CudaStream) -> u64 {
    buf.device_ptr(stream).0
}

/// `C = alpha * A @ B + beta * C` with `kernel`, on `stream`, `B` given as `k x n` rows
/// (stride `g.ldb`). Correct under CUDA graph capture: the TMA step's tensor maps travel in
/// memory the graph keeps.
pub fn hgemm<T: Half>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    kernel: HgemmKernel,
    g: &Gemm,
    a: &impl DevicePtr<T>,
    b: &impl DevicePtr<T>,
    c: &mut impl DevicePtrMut<T>,
) -> Result<()> {
    product(gpu, stream, kernel, g, a, (BLayout::Rows, b), c)
}

/// `C = alpha * A @ B + beta * C` as [`hgemm`] does it, with `B` given transposed: `bt` holds
/// `n x k` rows of stride `g.ldb` (`y = x W^T` for a linear layer's weight `W`). TF32 reads it
/// where it is; bf16 and f16 read a transposed copy, whose launch takes `n` up to
/// `65535 * TRANSPOSE_TILE` (a clear error beyond).
pub fn hgemm_bt<T: Half>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    kernel: HgemmKernel,
    g: &Gemm,
    a: &impl DevicePtr<T>,
    bt: &impl DevicePtr<T>,
    c: &mut impl DevicePtrMut<T>,
) -> Result<()> {
    product(gpu, stream, kernel, g, a, (BLayout::Transposed, bt), c)
}

/// The product of [`hgemm`] and [`hgemm_bt`], `B` laid out as `layout` says.
fn product<T: Half>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    kernel: HgemmKernel,
    g: &Gemm,
    a: &impl DevicePtr<T>,
    (layout, b): (BLayout, &impl DevicePtr<T>),
    c: &mut impl DevicePtrMut<T>,
) -> Result<()> {
    g.check_lengths_with(layout, a.len(), b.len(), c.len())?;
    let size = std::mem::size_of::<T>();
    let (pa, pb, pc) = (
        address(a, stream),
        address(b, stream),
        c.device_ptr_mut(stream).0,
    );
    let copied = layout != T::B_READ;
    check_alignment(g, size, pa, (!copied).then_some(pb), pc)?;
    let (t, k) = kernel.resolve::<T>(gpu, g)?;
    // `K` per stage: 128-byte rows for the TMA steps, whatever the element's size.
    let bk = if t.tma {
        t.bk as usize * 2 / size
    } else {
        t.bk as usize
    };
    let sms = gpu.info().multiprocessors as usize;
    let tiles = g.m.div_ceil(t.bm as usize) * g.n.div_ceil(t.bn as usize);
    let split = match kernel {
        HgemmKernel::Split(_, want) => slices_of(g.k.div_ceil(bk), want as usize),
        _ if t.persistent => split_k(tiles, g.k.div_ceil(bk), sms),
        _ => None,
    };
    // The persistent steps count units of work in `u32`; a split's partials are `slices`
    // f32 planes of `m x n`.
    // (A persistent block steps through the units by the grid's size, also in `u32`.)
    let slices = split.map_or(1, |s| s.slices as usize);
    let most = (u32::MAX - sms as u32) as usize;
    let units = tiles
        .checked_mul(slices)
        .filter(|&u| u <= most)
        .ok_or_else(|| {
            let (arg, cut) = if slices > 1 {
                ("k", format!(" cut into {slices} slices of K"))
            } else {
                ("m", String::new())
            };
            Error::arg(
                arg,
                format!(
                    "{} x {} in {tiles} tiles{cut} is above the {most} units of work a launch counts",
                    g.m, g.n
                ),
            )
        })?;
    let partial_bytes = match split {
        Some(_) => Some(
            (g.m.checked_mul(g.n))
                .and_then(|v| v.checked_mul(4 * slices))
                .filter(|&v| v <= isize::MAX as usize)
                .ok_or_else(|| {
                    Error::arg(
                        "k",
                        format!(
                            "{slices} slices of {} x {} partial sums overflow the address space",
                            g.m, g.n
                        ),
                    )
                })?,
        ),
        None => None,
    };
    let tiles = if t.persistent { units.min(sms) } else { units };
    let blocks = u32::try_from(tiles)
        .ok()
        .filter(|&b| b < i32::MAX as u32)
        .ok_or_else(|| {
            Error::arg(
                "m",
                format!(
                    "{} x {} needs {tiles} blocks, above the grid's limit",
                    g.m, g.n
                ),
            )
        })?;
    let module = gpu.kernels()?;
    // `B` the other way round than the kernels read it: a transposed copy made first (rows
    // padded to 16 bytes).
    let transposed = if copied {
        Some(transpose_b(gpu, stream, g, layout, b)?)
    } else {
        None
    };
    let (pb, ldb) = match &transposed {
        Some((bt, ld)) => (bt.floats().addr(), *ld),
        None => (pb, g.ldb),
    };
    let partials = match partial_bytes {
        Some(bytes) => Some(Scratch::new(stream, bytes)?),
        None => None,
    };
    // A loop that multiplies the same operands again finds their maps on the device (for a
    // transposed copy only while the memory pool hands it the same address again).
    let maps = if t.tma {
        Some(
            gpu.uploads()
                .get(stream, &encode_maps::<T>(t, bk, g, (pa, pb, ldb), pc)?)?,
        )
    } else {
        None
    };
    let mut launch = module.prepare(stream, k);
    let params = HgemmParams {
        a: launch.read(a),
        b: match &transposed {
            Some((bt, _)) => DevPtr::from_addr(bt.floats().addr()),
            None => launch.read(b),
        },
        c: launch.write(c),
        maps: maps
            .as_deref()
            .map_or(DevPtr::NULL, |m| launch.read(m).cast()),
        m: g.m as u32,
        n: g.n as u32,
        k: g.k as u32,
        lda: g.lda as u32,
        ldb: ldb as u32,
        ldc: g.ldc as u32,
        alpha: g.alpha,
        beta: g.beta,
        slices: split.map_or(1, |s| s.slices),
        slice_tiles: split.map_or(0, |s| s.slice_tiles),
        partials: partials.as_ref().map_or(DevPtrMut::NULL, |p| p.floats()),
    };
    let cfg = LaunchConfig::new((blocks, 1, 1), (t.threads, 1, 1)).with_shared(t.shared_bytes);
    // SAFETY: `check_lengths` proved each buffer holds its matrix with its stride and
    // `check_alignment` the kernels' alignment, so every access the kernel makes (the TMA's
    // clipped to the maps' bounds, which are the matrices') is inside an allocation; the maps
    // describe `a`, `b` (or its transposed copy, written before on this stream and freed after
    // the product in its order) and `c` and live until the launch has run (stream-ordered
    // free, or the graph's keeping); the partials hold `slices * m * n` floats until the
    // reduction after it has run; `c` is borrowed exclusively so it aliases neither input.
    unsafe { launch.run(cfg, params) }?;
    let (Some(s), Some(partials)) = (split, &partials) else {
        return Ok(());
    };
    let mut launch = module.prepare(stream, T::reduce());
    let reduce = HgemmReduceParams {
        partials: partials.floats().as_const(),
        c: launch.write(c),
        m: params.m,
        n: params.n,
        ldc: params.ldc,
        slices: s.slices,
        alpha: g.alpha,
        beta: g.beta,
    };
    let elements = (g.m * g.n) as u64;
    let blocks = elements
        .div_ceil(HGEMM_REDUCE_BLOCK as u64)
        .min(64 * sms as u64) as u32;
    let cfg = LaunchConfig::new((blocks, 1, 1), (HGEMM_REDUCE_BLOCK, 1, 1));
    // SAFETY: the partials hold the `slices` planes the product just wrote (ordered before on
    // the same stream) and `c` is `m x n` with stride `ldc`, as checked above; the grid-stride
    // loop covers any grid. The launch reads `c` (when `beta` is not 0) after the product
    // kernel, which did not touch it, and later users of `c` on other streams wait for it.
    unsafe { launch.run(cfg, reduce) }
}

/// How a persistent step cuts `K`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Split {
    slices: u32,
    slice_tiles: u32,
}

/// Most slices [`HgemmKernel::Split`] takes.
pub const MAX_SLICES: u32 = 1024;

/// `K`'s `k_tiles` stages cut into at most `want` slices of whole stages, none empty (`None`
/// for one slice).
fn slices_of(k_tiles: usize, want: usize) -> Option<Split> {
    let slice_tiles = k_tiles.div_ceil(want.clamp(1, k_tiles));
    let slices = k_tiles.div_ceil(slice_tiles);
    (slices > 1).then_some(Split {
        slices: slices as u32,
        slice_tiles: slice_tiles as u32,
    })
}

/// Split-K for `tiles` output tiles over `k_tiles` stages of `K` on `sms` multiprocessors,
/// where the tiles fill at most half the multiprocessors. A deep `K` (at least 64 stages) gets
/// enough slices to give every multiprocessor a unit of work, at least 32 stages each, so that
/// the planes' extra traffic and the reduction's launch stay small beside the product. One or
/// two output tiles (small planes) with at least 16 stages get up to 16 slices of at least 2
/// stages: their product is otherwise one multiprocessor's long walk.
fn split_k(tiles: usize, k_tiles: usize, sms: usize) -> Option<Split> {
    if 2 * tiles > sms {
        return None;
    }
    let deep = if k_tiles >= 64 {
        (sms / tiles).min(k_tiles / 32)
    } else {
        0
    };
    let few = if tiles <= 2 && k_tiles >= 16 {
        (k_tiles / 2).min(16)
    } else {
        0
    };
    let want = deep.max(few);
    if want < 2 {
        return None;
    }
    slices_of(k_tiles, want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_mma_only_for_small_shallow_products() {
        let shallow = |m, n, k| prefers_mma(&Gemm::dense(m, n, k));
        for (m, n, k) in [
            (1024, 10, 32),
            (32, 1024, 10),
            (1024, 1024, 32),
            (2048, 1024, 64),
        ] {
            assert!(shallow(m, n, k), "{m} x {n} x {k}");
        }
        // Deeper, or enough outputs to fill the GPU with the TMA step's tiles.
        for (m, n, k) in [
            (1024, 1024, 65),
            (32, 10, 1024),
            (196608, 1024, 32),
            (4096, 4096, 64),
            (usize::MAX, 2, 1),
        ] {
            assert!(!shallow(m, n, k), "{m} x {n} x {k}");
        }
    }

    #[test]
    fn narrow_tiles_where_wide_ones_leave_multiprocessors_idle() {
        let narrow = |m, n, k| prefers_narrow(&Gemm::dense(m, n, k), 132, 64);
        // 32 wide tiles of 132; 1.5 waves; a `C` of at most 128 columns (one tile either way).
        for (m, n, k) in [
            (1024, 1024, 1024),
            (1000, 1000, 1000),
            (8192, 768, 3072),
            (32, 10, 1024),
        ] {
            assert!(narrow(m, n, k), "{m} x {n} x {k}");
        }
        // Whole waves of wide tiles (or nearly); few wide tiles cut along a deep `K`.
        for (m, n, k) in [
            (4096, 4096, 4096),
            (2048, 2048, 2048),
            (8192, 3072, 768),
            (16384, 16384, 1024),
            (4097, 3001, 2999),
            (32, 1024, 196608),
            (128, 1024, 196608),
            (usize::MAX, usize::MAX, 1),
        ] {
            assert!(!narrow(m, n, k), "{m} x {n} x {k}");
        }
    }

    #[test]
    fn explicit_slices_are_whole_stages_none_empty() {
        assert_eq!(slices_of(16, 1), None);
        assert_eq!(slices_of(1, 8), None);
        let s = slices_of(16, 4).unwrap();
        assert_eq!((s.slices, s.slice_tiles), (4, 4));
        // 5 of 16: slices of 4 stages, so 4 slices.
        let s = slices_of(16, 5).unwrap();
        assert_eq!((s.slices, s.slice_tiles), (4, 4));
        let s = slices_of(3, 1000).unwrap();
        assert_eq!((s.slices, s.slice_tiles), (3, 1));
    }

    #[test]
    fn split_k_only_for_few_tiles_and_a_deep_k() {
        // 1024 x 1024 x 1024: 32 tiles, 16 K tiles: whole.
        assert_eq!(split_k(32, 16, 132), None);
        // 256 x 512 x 1024: 4 tiles, 16 K tiles: whole.
        assert_eq!(split_k(4, 16, 132), None);
        // One tile: 32 x 10 x 1024 in 8 slices of 2, 128 x 256 x 4096 in 16 of 4; too
        // shallow to pay for the reduction below 16 stages.
        let s = split_k(1, 16, 132).unwrap();
        assert_eq!((s.slices, s.slice_tiles), (8, 2));
        let s = split_k(1, 64, 132).unwrap();
        assert_eq!((s.slices, s.slice_tiles), (16, 4));
        assert_eq!(split_k(2, 15, 132), None);
        // One tile and a very deep K: a unit per multiprocessor wins over 16 slices.
        let s = split_k(1, 3072, 132).unwrap();
        assert_eq!((s.slices, s.slice_tiles), (96, 32));
        // 32 x 1024 x 196608: 4 tiles, 3072 K tiles: a unit per multiprocessor.
        let s = split_k(4, 3072, 132).unwrap();
        assert_eq!((s.slices, s.slice_tiles), (33, 94));
        // Every slice has work, the last the rest.
        for (tiles, k_tiles) in [(1, 64), (4, 3072), (60, 100), (1, 100_000), (3, 65)] {
            if let Some(s) = split_k(tiles, k_tiles, 132) {
                let (n, t) = (s.slices as usize, s.slice_tiles as usize);
                assert!(
                    n >= 2 && (n - 1) * t < k_tiles && n * t >= k_tiles,
                    "{tiles} {k_tiles}"
                );
            }
        }
        // Enough tiles to fill the GPU: whole.
        assert_eq!(split_k(67, 10_000, 132), None);
    }
}
