//! cuBLAS's product on the same inputs, the peer every tensor-core figure is measured against.

use super::Half;
use crate::error::{Error, Result};
use crate::spec::matmul::{BLayout, Gemm};
use cudarc::cublas::{result as blas, sys as blas_sys, CudaBlas};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use std::sync::Arc;

/// cuBLAS's tensor-core product on one stream (`cublasGemmEx`, f32 compute, TF32 products for
/// f32), for comparisons on the same inputs.
pub struct CublasHalf {
    blas: CudaBlas,
    stream: Arc<CudaStream>,
}

impl CublasHalf {
    /// Loads cuBLAS and binds a handle to `stream`; a clear error when the library is absent.
    pub fn new(stream: Arc<CudaStream>) -> Result<CublasHalf> {
        // SAFETY: only tries to open the shared library.
        if !unsafe { blas_sys::is_culib_present() } {
            return Err(Error::MissingLibrary {
                library: "cuBLAS",
                reason: "libcublas.so was not found on the library path (install the CUDA toolkit's cuBLAS or add its directory to LD_LIBRARY_PATH)".into(),
            });
        }
        let blas = CudaBlas::new(stream.clone()).map_err(|source| Error::Cublas {
            op: "cublasCreate",
            source,
        })?;
        Ok(CublasHalf { blas, stream })
    }

    /// `C = alpha * A @ B + beta * C`, row-major, as `C^T = B^T A^T` in cuBLAS's column-major
    /// terms, with `alpha` and `beta` in f32; `B` laid out as `layout` says (cuBLAS reads a
    /// transposed `B` where it is, as its `op(B)`).
    pub fn gemm<T: Half>(
        &self,
        g: &Gemm,
        layout: BLayout,
        a: &impl DevicePtr<T>,
        b: &impl DevicePtr<T>,
        c: &mut impl DevicePtrMut<T>,
    ) -> Result<()> {
        g.check_lengths_with(layout, a.len(), b.len(), c.len())?;
        let op_b = match layout {
            BLayout::Rows => blas_sys::cublasOperation_t::CUBLAS_OP_N,
            BLayout::Transposed => blas_sys::cublasOperation_t::CUBLAS_OP_T,
        };
        let stream = &self.stream;
        let (pa, _ra) = a.device_ptr(stream);
        let (pb, _rb) = b.device_ptr(stream);
        let (pc, _rc) = c.device_ptr_mut(stream);
        // SAFETY: the lengths were checked against the shape and strides (all within i32 by
        // `validate`), so cuBLAS's accesses stay inside the three buffers; `alpha` and `beta`
        // are f32 as the f32 compute type requires.
        unsafe {
            blas::gemm_ex(
                *self.blas.handle(),
                op_b,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                g.n as i32,
                g.m as i32,
                g.k as i32,
                (&g.alpha) as *const f32 as *const _,
                pb as *const _,
                T::BLAS,
                g.ldb as i32,
                pa as *const _,
                T::BLAS,
                g.lda as i32,
                (&g.beta) as *const f32 as *const _,
                pc as *mut _,
                T::BLAS,
                g.ldc as i32,
                T::COMPUTE,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|source| Error::Cublas {
            op: "cublasGemmEx",
            source,
        })
    }
}
