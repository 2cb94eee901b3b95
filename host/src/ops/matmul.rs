//! FP32 matrix multiply `C = alpha * A @ B + beta * C` (row-major, leading dimensions), with
//! our kernels and, for comparison on the same inputs, cuBLAS SGEMM.

use crate::error::{Error, Result};
use crate::runtime::Gpu;
use cudarc::cublas::{sys as blas_sys, CudaBlas, Gemm as _, GemmConfig};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use std::sync::Arc;
use streamline_abi::matmul::{
    GemmParams, GemmTiling, SGEMM_5_PIPELINED_128X128, SGEMM_5_PIPELINED_128X64,
    SGEMM_5_PIPELINED_64X64, SGEMM_ALL,
};

/// Largest dimension or leading dimension a kernel accepts (`i32::MAX`, cuBLAS's limit too).
pub const MAX_DIM: usize = i32::MAX as usize;

/// The shape, strides and scalars of one product `C = alpha * A @ B + beta * C`.
///
/// `A` is `m x k` with row stride `lda`, `B` is `k x n` with row stride `ldb`, `C` is `m x n`
/// with row stride `ldc` (all in elements, row-major). With `beta == 0`, `C` is write-only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub alpha: f32,
    pub beta: f32,
}

impl Gemm {
    /// `C = A @ B` for dense (unpadded) matrices.
    pub fn dense(m: usize, n: usize, k: usize) -> Gemm {
        Gemm {
            m,
            n,
            k,
            lda: k,
            ldb: n,
            ldc: n,
            alpha: 1.0,
            beta: 0.0,
        }
    }

    /// Floating-point operations of the product (`2 m n k`).
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// Elements a buffer must hold for a `rows x cols` matrix with row stride `ld`.
    fn span(arg: &'static str, rows: usize, cols: usize, ld: usize) -> Result<usize> {
        (rows - 1)
            .checked_mul(ld)
            .and_then(|v| v.checked_add(cols))
            .filter(|&v| v <= isize::MAX as usize / 4)
            .ok_or_else(|| {
                Error::arg(
                    arg,
                    format!(
                        "a {rows} x {cols} matrix with row stride {ld} overflows the address space"
                    ),
                )
            })
    }

    /// Checks dimensions and strides; returns the elements `A`, `B` and `C` must hold.
    pub fn validate(&self) -> Result<(usize, usize, usize)> {
        for (arg, v) in [("m", self.m), ("n", self.n), ("k", self.k)] {
            if v == 0 || v > MAX_DIM {
                return Err(Error::arg(
                    arg,
                    format!("{v} is outside the allowed range 1..={MAX_DIM}"),
                ));
            }
        }
        for (arg, ld, cols) in [
            ("lda", self.lda, self.k),
            ("ldb", self.ldb, self.n),
            ("ldc", self.ldc, self.n),
        ] {
            if ld < cols || ld > MAX_DIM {
                return Err(Error::arg(
                    arg,
                    format!("{ld} is outside the allowed range {cols}..={MAX_DIM} (at least the row length)"),
                ));
            }
        }
        Ok((
            Self::span("a", self.m, self.k, self.lda)?,
            Self::span("b", self.k, self.n, self.ldb)?,
            Self::span("c", self.m, self.n, self.ldc)?,
        ))
    }

    /// Checks that buffers of these lengths hold the matrices.
    pub fn check_lengths(&self, a: usize, b: usize, c: usize) -> Result<()> {
        let (na, nb, nc) = self.validate()?;
        for (arg, have, need) in [("a", a, na), ("b", b, nb), ("c", c, nc)] {
            if have < need {
                return Err(Error::arg(
                    arg,
                    format!(
                        "holds {have} elements; the shape {}x{}x{} with its strides needs at least {need}",
                        self.m, self.n, self.k
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Which kernel computes a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// The shape rule of [`choose`].
    Auto,
    /// One step of the progression (see `gpu-kernels/src/matmul.rs`).
    Fixed(&'static GemmTiling),
}

impl Kernel {
    /// Parses `auto` or a kernel name with or without its `sgemm_` prefix (`1_naive`,
    /// `5_pipelined_64x64`, ...).
    pub fn parse(s: &str) -> Result<Kernel> {
        if s == "auto" {
            return Ok(Kernel::Auto);
        }
        let name = s.strip_prefix("sgemm_").unwrap_or(s);
        SGEMM_ALL
            .iter()
            .find(|t| t.spec.name().strip_prefix("sgemm_") == Some(name))
            .map(Kernel::Fixed)
            .ok_or_else(|| {
                let names: Vec<&str> = SGEMM_ALL
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

/// The launch rule: the largest pipelined tile whose grid gives at least 90% of the
/// multiprocessors a block, because an idle SM costs more than a smaller tile's extra shared
/// traffic; 64 x 64 when even 128 x 64 would leave more idle (small, skinny and flat products).
/// On an H200 (132 SMs) this picks 128 x 64 at 1024 (128 blocks) and 128 x 128 from 2048 up,
/// the fastest of the three at each of those sizes in `streamline matmul --kernel all`.
pub fn choose(m: usize, n: usize, multiprocessors: u32) -> &'static GemmTiling {
    let blocks = |t: &GemmTiling| m.div_ceil(t.bm as usize) * n.div_ceil(t.bn as usize);
    let enough = (multiprocessors as usize * 9).div_ceil(10);
    [&SGEMM_5_PIPELINED_128X128, &SGEMM_5_PIPELINED_128X64]
        .into_iter()
        .find(|t| blocks(t) >= enough)
        .unwrap_or(&SGEMM_5_PIPELINED_64X64)
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
    let t = match kernel {
        Kernel::Auto => choose(g.m, g.n, gpu.info().multiprocessors),
        Kernel::Fixed(t) => t,
    };
    let grid = grid(t, g.m, g.n)?;
    let (ap, _ra) = a.device_ptr(stream);
    let (bp, _rb) = b.device_ptr(stream);
    let (cp, _wc) = c.device_ptr_mut(stream);
    let params = GemmParams {
        a: ap,
        b: bp,
        c: cp,
        m: g.m as u32,
        n: g.n as u32,
        k: g.k as u32,
        lda: g.lda as u32,
        ldb: g.ldb as u32,
        ldc: g.ldc as u32,
        alpha: g.alpha,
        beta: g.beta,
    };
    // SAFETY: `check_lengths` proved each buffer holds its matrix with its stride, so every
    // in-bounds access the kernel makes is inside an allocation; `c` is borrowed exclusively so
    // it aliases neither input, and the guards order the launch after earlier work on all
    // three buffers. The shared size and block shape are the tiling's own.
    unsafe {
        gpu.launch_shared(
            stream,
            t.spec,
            grid,
            (t.block_x, t.block_y, 1),
            t.shared_bytes,
            params,
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
