//! What a product is handed besides the matrices: `B` transposed when it comes the other way
//! round than the kernels read it, and a TMA step's tensor maps of `A`, `B` and `C`.

use super::Half;
use crate::error::{DriverContext, Error, Result};
use crate::ops::matmul::Scratch;
use crate::runtime::{Gpu, LaunchConfig};
use cudarc::driver::sys::{
    self, CUtensorMap, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion,
    CUtensorMapSwizzle,
};
use cudarc::driver::{CudaStream, DevicePtr};
use std::sync::Arc;
use streamline_abi::hgemm::HgemmTiling;
use streamline_abi::train::{
    transpose_shared_bytes, TransposeParams, TRANSPOSE_ROWS, TRANSPOSE_TILE,
};

use crate::spec::matmul::{BLayout, Gemm};

/// `B` (laid out as `layout` says, row stride `g.ldb`) transposed into scratch on `stream`
/// (the other layout), freed in the stream's order; returns it and its row stride, rounded up
/// to 16 bytes.
pub(super) fn transpose_b<'s, T: Half>(
    gpu: &Gpu,
    stream: &'s Arc<CudaStream>,
    g: &Gemm,
    layout: BLayout,
    b: &impl DevicePtr<T>,
) -> Result<(Scratch<'s>, usize)> {
    let (rows, cols) = match layout {
        BLayout::Rows => (g.k, g.n),
        BLayout::Transposed => (g.n, g.k),
    };
    let t = TRANSPOSE_TILE as usize;
    if rows.div_ceil(t) > 65_535 {
        let arg = if layout == BLayout::Rows { "k" } else { "n" };
        return Err(Error::arg(
            arg,
            format!(
                "{rows} is above the {} that the transposition of B into the {} kernels' layout takes",
                65_535 * t,
                T::DTYPE
            ),
        ));
    }
    let size = std::mem::size_of::<T>();
    let ld = rows.next_multiple_of(16 / size);
    let bytes = ld
        .checked_mul(cols)
        .and_then(|v| v.checked_mul(size))
        .filter(|&v| v <= isize::MAX as usize)
        .ok_or_else(|| Error::arg("b", "B transposed overflows the address space"))?;
    let bt = Scratch::new(stream, bytes)?;
    let mut launch = gpu.kernels()?.prepare(stream, T::transpose());
    let p = TransposeParams {
        x: launch.read(b),
        y: bt.floats().cast(),
        rows: rows as u32,
        cols: cols as u32,
        ldx: g.ldb as u32,
        ldy: ld as u32,
    };
    let grid = (cols.div_ceil(t) as u32, rows.div_ceil(t) as u32, 1);
    let cfg = LaunchConfig::new(grid, (TRANSPOSE_TILE, TRANSPOSE_ROWS, 1))
        .with_shared(transpose_shared_bytes(size as u32));
    // SAFETY: `B` holds `(rows - 1) * ldb + cols` elements (the caller's `check_lengths_with`
    // for this layout) and the scratch `cols` rows of `ld >= rows` elements of the same size;
    // the grid (at most 65535 rows of blocks, checked) and block are the kernel's contract and
    // the shared memory its tile for this element size.
    unsafe { launch.run(cfg, p) }?;
    Ok((bt, ld))
}

/// The tensor maps of `A`, `B` (at `b`, row stride `ldb`) and `C` for the TMA step `t` with
/// stages `bk` deep: `A` in boxes of `bk` x `bm` (columns x rows), `B` in boxes of 64 x `bk`,
/// `C` in boxes of 128 bytes x 64, 128-byte swizzled, zeros read and nothing written outside
/// the matrices. For a transposed `B` (TF32: `n x k`), boxes of `bk` x `bn`.
pub(super) fn encode_maps<T: Half>(
    t: &HgemmTiling,
    bk: usize,
    g: &Gemm,
    (a, b, ldb): (u64, u64, usize),
    c: u64,
) -> Result<Vec<u64>> {
    let bk = bk as u32;
    let a_map = encode::<T>(a, g.k, g.m, g.lda, [bk, t.bm])?;
    let b_map = if T::B_READ == BLayout::Transposed {
        encode::<T>(b, g.k, g.n, ldb, [bk, t.bn])?
    } else {
        encode::<T>(b, g.n, g.k, ldb, [64, bk])?
    };
    let c_cols = (128 / std::mem::size_of::<T>()) as u32;
    let c_map = encode::<T>(c, g.n, g.m, g.ldc, [c_cols, 64])?;
    Ok([a_map, b_map, c_map]
        .iter()
        .flat_map(|m| m.opaque)
        .collect())
}

/// A 2-D tensor map of a row-major `rows x cols` matrix of `T` at `addr`, row stride `ld`.
fn encode<T: Half>(
    addr: u64,
    cols: usize,
    rows: usize,
    ld: usize,
    boxes: [u32; 2],
) -> Result<CUtensorMap> {
    let dims = [cols as u64, rows as u64];
    let strides = [(ld * std::mem::size_of::<T>()) as u64];
    let element_strides = [1u32, 1];
    let mut map = std::mem::MaybeUninit::<CUtensorMap>::zeroed();
    // SAFETY: every pointer addresses a local array of the rank's length (strides: rank - 1);
    // the driver only encodes the description into `map`, reading no device memory.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            T::TMA,
            2,
            addr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .op("cuTensorMapEncodeTiled")?;
    // SAFETY: zero-initialised and then written by the driver; plain bytes either way.
    Ok(unsafe { map.assume_init() })
}
