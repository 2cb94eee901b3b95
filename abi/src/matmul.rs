//! FP32 matrix multiply `C = alpha * A @ B + beta * C`, row-major with leading dimensions.
//!
//! The kernels form a progression, each a numbered step that a reader can compare with the one
//! before (see `gpu-kernels/src/matmul/mod.rs`); every step computes the same thing for any shape,
//! so the host can run any of them on any input.

use crate::{declare, params, DevPtr, DevPtrMut, Kernel};
use streamline_device::element::{bf16, Element};

params! {
    /// Parameters of an `sgemm_*` kernel that writes `C` in element type `O`: f32
    /// ([`GemmParams`]) for every step, bf16 for [`SGEMM_8_WIDE_128X128_BF16`].
    ///
    /// `A` is `m x k` with row stride `lda` (elements), `B` is `k x n` with row stride `ldb`, `C` is
    /// `m x n` with row stride `ldc`. When `beta == 0`, `C` is not read (BLAS semantics: its old
    /// contents may be anything, NaN included).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct GemmParamsTo<O: Element> {
        /// Device address of `A`.
        pub a: DevPtr<f32>,
        /// Device address of `B`.
        pub b: DevPtr<f32>,
        /// Device address of `C`.
        pub c: DevPtrMut<O>,
        /// Rows of `A` and `C`.
        pub m: u32,
        /// Columns of `B` and `C`.
        pub n: u32,
        /// Columns of `A`, rows of `B`.
        pub k: u32,
        /// Row stride of `A` in elements (`>= k`).
        pub lda: u32,
        /// Row stride of `B` in elements (`>= n`).
        pub ldb: u32,
        /// Row stride of `C` in elements (`>= n`).
        pub ldc: u32,
        /// Scale of the product.
        pub alpha: f32,
        /// Scale of the old `C`; 0 means `C` is write-only.
        pub beta: f32,
    }
}

/// Parameters of the f32 `sgemm_*` kernels (see [`GemmParamsTo`]).
pub type GemmParams = GemmParamsTo<f32>;

// SAFETY: addresses, u32 and f32 fields whatever `O` is, laid out without padding (checked by
// the test below); every bit pattern is a valid value.
#[cfg(feature = "bytemuck")]
unsafe impl<O: Element> bytemuck::Zeroable for GemmParamsTo<O> {}
// SAFETY: as above.
#[cfg(feature = "bytemuck")]
unsafe impl<O: Element> bytemuck::Pod for GemmParamsTo<O> {}

/// A `GemmParams` field (inside [`SplitKParams`]) passes as its bytes.
impl<O: Element> streamline_device::params::Field for GemmParamsTo<O> {
    const KIND: streamline_device::params::FieldKind = streamline_device::params::FieldKind::Bytes;
}

params! {
    /// Parameters of the split-K kernels: the product `gemm`, whose `K` is cut into `slices`
    /// slices of `k_slice` (the last one shorter), each multiplied by its own blocks (grid `z`) into
    /// its own `m x n` plane of `partials` (row stride [`splitk_row_stride`]`(n)`); `gemm.alpha`,
    /// `gemm.beta` and `gemm.c` are applied by [`SplitKReduceParams`]'s kernel, not here.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct SplitKParams {
        /// The whole product.
        pub gemm: GemmParams,
        /// Device address of `slices * m * splitk_row_stride(n)` floats, one plane per slice.
        pub partials: DevPtrMut<f32>,
        /// Depth of every slice but the last (a multiple of the tile depth).
        pub k_slice: u32,
        /// Number of slices (`ceil(k / k_slice)`).
        pub slices: u32,
    }
}

/// A `SplitKParams` field (inside [`SplitKSgdParams`]) passes as its bytes.
impl streamline_device::params::Field for SplitKParams {
    const KIND: streamline_device::params::FieldKind = streamline_device::params::FieldKind::Bytes;
}

params! {
    /// Parameters of the split-K kernels that apply an SGD step to `B` as they read it
    /// (`sgemm_splitk_wide_sgd_*`): `B` is a layer's f32 weights with an update owed,
    /// `B = B - lr * g0` or, for the `pair` kernel, `B = B - lr * (g0 + g1) / 2` (the sum
    /// rounded once in f32, so the two may be swapped without changing a bit), each element
    /// updated exactly as `sgd_f32`, `sgd_f32_bf16` or `sgd_pair_f32` would, written back
    /// to `B` and multiplied in the same pass: the product reads the weights anyway, so the
    /// update costs no pass of its own. The planes of partial products are those of
    /// [`SplitKParams`], of the updated `B`.
    ///
    /// Every element of `B` must be read by one block only: the grid has one row of blocks
    /// (`m` at most the tile's 128 rows); `B` overlaps neither `A` nor the partials. The gradients are laid out as `B` (row stride `ldb`)
    /// and aligned to four elements where `B` is to 16 bytes and `ldb` is a multiple of 4.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct SplitKSgdParams<G: Element> {
        /// The product; `split.gemm.b` is the weights as read.
        pub split: SplitKParams,
        /// The weights as written: the address of `split.gemm.b`.
        pub w: DevPtrMut<f32>,
        /// The gradient; overlapping neither `B` nor the partials.
        pub g0: DevPtr<G>,
        /// The other gradient (the `pair` kernel); unread by the others.
        pub g1: DevPtr<G>,
        /// Learning rate.
        pub lr: f32,
        /// Zero (keeps the struct free of implicit padding).
        pub pad: u32,
    }
}

// SAFETY: `SplitKParams` (72 bytes of addresses and 4-byte fields), three 8-byte addresses, an
// f32 and a u32 whatever `G` is: no padding (checked by the test below), and every bit pattern
// is a valid value.
#[cfg(feature = "bytemuck")]
unsafe impl<G: Element> bytemuck::Zeroable for SplitKSgdParams<G> {}
// SAFETY: as above.
#[cfg(feature = "bytemuck")]
unsafe impl<G: Element> bytemuck::Pod for SplitKSgdParams<G> {}

/// Row stride, in floats, of a plane of split-K partial products with `n` columns: `n` rounded
/// up to 32, so that every row starts on a 128-byte line whatever `n` is.
pub const fn splitk_row_stride(n: u32) -> u32 {
    n.div_ceil(32) * 32
}

/// Whether `sgemm_splitk_reduce` adds four consecutive elements per step (16-byte accesses) for
/// an `m x n` product into `C` at address `c` with row stride `ldc`, partials at `partials`: `n`
/// and `ldc` multiples of 4, both addresses 16-byte aligned, and `m n` below 2^32. The host
/// sizes the grid by it, the kernel chooses its path by it.
pub const fn splitk_reduce_by_quads(m: u32, n: u32, ldc: u32, c: u64, partials: u64) -> bool {
    n.is_multiple_of(4)
        && ldc.is_multiple_of(4)
        && (c | partials).is_multiple_of(16)
        && m as u64 * n as u64 <= u32::MAX as u64
}

params! {
    /// Parameters of `sgemm_splitk_reduce`: `C = alpha * (P_0 + P_1 + ... ) + beta * C`, the planes
    /// summed in slice order for every element, so results do not depend on scheduling.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct SplitKReduceParams {
        /// Device address of the `slices` planes of `m x n` partial products (row stride
        /// [`splitk_row_stride`]`(n)`).
        pub partials: DevPtr<f32>,
        /// Device address of `C`.
        pub c: DevPtrMut<f32>,
        /// Rows of `C`.
        pub m: u32,
        /// Columns of `C`.
        pub n: u32,
        /// Row stride of `C` in elements.
        pub ldc: u32,
        /// Number of planes.
        pub slices: u32,
        /// Scale of the product.
        pub alpha: f32,
        /// Scale of the old `C`; 0 means `C` is write-only.
        pub beta: f32,
    }
}

/// How one kernel tiles `C`: each block of `threads` threads computes a `bm x bn` tile of `C`,
/// walking `K` in steps of `bk`, with `shared_bytes` of dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmTiling {
    /// The kernel.
    pub spec: Kernel<GemmParams>,
    /// Rows of `C` per block.
    pub bm: u32,
    /// Columns of `C` per block.
    pub bn: u32,
    /// Depth of one shared-memory tile along `K`.
    pub bk: u32,
    /// Threads per block along x.
    pub block_x: u32,
    /// Threads per block along y (steps 1 and 2 use a square block, one thread per output).
    pub block_y: u32,
    /// Dynamic shared memory per block in bytes.
    pub shared_bytes: u32,
}

impl GemmTiling {
    /// Threads per block.
    pub const fn threads(&self) -> u32 {
        self.block_x * self.block_y
    }
}

declare! {
    const NAIVE: Kernel<GemmParams> = Kernel::new("sgemm_1_naive");
    const TILED: Kernel<GemmParams> = Kernel::new("sgemm_2_tiled");
    const BLOCKED: Kernel<GemmParams> = Kernel::new("sgemm_3_blocked");
    const VECTORIZED: Kernel<GemmParams> = Kernel::new("sgemm_4_vectorized");
    const PIPELINED_128X128: Kernel<GemmParams> =
        Kernel::new("sgemm_5_pipelined_128x128").with_bounds(256, 2);
    const PIPELINED_128X64: Kernel<GemmParams> = Kernel::new("sgemm_5_pipelined_128x64");
    const PIPELINED_64X64: Kernel<GemmParams> = Kernel::new("sgemm_5_pipelined_64x64");
    const ASYNC_128X128: Kernel<GemmParams> =
        Kernel::new("sgemm_6_async_128x128").with_bounds(256, 1);
    const SWIZZLED_128X128: Kernel<GemmParams> =
        Kernel::new("sgemm_7_swizzled_128x128").with_bounds(256, 2);
    const WIDE_128X128: Kernel<GemmParams> =
        Kernel::new("sgemm_8_wide_128x128").with_bounds(128, 2);
    /// Step 8 writing `C` in bf16: each f32 result rounded once, to nearest even (a gradient
    /// that travels and is applied in bf16, with no f32 copy in memory).
    pub const SGEMM_8_WIDE_128X128_BF16: Kernel<GemmParamsTo<bf16>> =
        Kernel::new("sgemm_8_wide_128x128_bf16").with_bounds(128, 2);
    const SPLITK_128X128: Kernel<SplitKParams> =
        Kernel::new("sgemm_splitk_128x128").with_bounds(256, 2);
    const SPLITK_WIDE_128X128: Kernel<SplitKParams> =
        Kernel::new("sgemm_splitk_wide_128x128").with_bounds(128, 2);
    const DOT_1X16: Kernel<GemmParams> = Kernel::new("sgemm_dot_1x16").with_bounds(256, 1);
    /// Split-K with step 8's tiles, `B` updated by an f32 gradient as it is read (see
    /// [`SplitKSgdParams`]).
    pub const SGEMM_SPLITK_WIDE_SGD_F32: Kernel<SplitKSgdParams<f32>> =
        Kernel::new("sgemm_splitk_wide_sgd_f32").with_bounds(128, 2);
    /// The same by the mean of two f32 gradients.
    pub const SGEMM_SPLITK_WIDE_SGD_PAIR_F32: Kernel<SplitKSgdParams<f32>> =
        Kernel::new("sgemm_splitk_wide_sgd_pair_f32").with_bounds(128, 2);
    /// The same by a bf16 gradient (widened exactly).
    pub const SGEMM_SPLITK_WIDE_SGD_BF16: Kernel<SplitKSgdParams<bf16>> =
        Kernel::new("sgemm_splitk_wide_sgd_bf16").with_bounds(128, 2);
    const SPLITK_64X64: Kernel<SplitKParams> = Kernel::new("sgemm_splitk_64x64");
    const SPLITK_32X128: Kernel<SplitKParams> = Kernel::new("sgemm_splitk_32x128");
    /// The split-K reduction (see [`SplitKReduceParams`]).
    pub const SGEMM_SPLITK_REDUCE: Kernel<SplitKReduceParams> =
        Kernel::new("sgemm_splitk_reduce");
}

/// Threads per block of `sgemm_splitk_reduce`.
pub const SPLITK_REDUCE_BLOCK: u32 = 256;

/// How a split-K kernel tiles each slice's product (as [`GemmTiling`] for the other steps), and
/// how many of its blocks one multiprocessor holds at once (from its registers and threads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitKTiling {
    /// The kernel.
    pub spec: Kernel<SplitKParams>,
    /// Rows of `C` per block.
    pub bm: u32,
    /// Columns of `C` per block.
    pub bn: u32,
    /// Depth of one shared-memory tile along `K`.
    pub bk: u32,
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory per block in bytes.
    pub shared_bytes: u32,
    /// Blocks resident per multiprocessor (one wave of the grid is this times the SMs).
    pub blocks_per_sm: u32,
}

/// Split-K with step 5's 128 x 128 tiles (the 64 rows and more of a skinny product).
pub const SGEMM_SPLITK_128X128: SplitKTiling = SplitKTiling {
    spec: SPLITK_128X128,
    bm: 128,
    bn: 128,
    bk: 8,
    threads: 256,
    shared_bytes: blocked_smem(128, 128, 8, A_PAD, 2),
    blocks_per_sm: 2,
};

/// Split-K with step 8's 128 x 128 tiles (128 threads of 8 x 16 outputs).
pub const SGEMM_SPLITK_WIDE_128X128: SplitKTiling = SplitKTiling {
    spec: SPLITK_WIDE_128X128,
    threads: 128,
    ..SGEMM_SPLITK_128X128
};

/// Split-K with step 5's 64 x 64 tiles.
pub const SGEMM_SPLITK_64X64: SplitKTiling = SplitKTiling {
    spec: SPLITK_64X64,
    bm: 64,
    bn: 64,
    bk: 8,
    threads: 64,
    shared_bytes: blocked_smem(64, 64, 8, A_PAD, 2),
    // About 130 registers per thread: 7 blocks of 64 threads fill the 64K registers of an SM.
    blocks_per_sm: 7,
};

/// Split-K with 32 x 128 tiles: products of at most 32 rows (a training batch) waste no rows.
pub const SGEMM_SPLITK_32X128: SplitKTiling = SplitKTiling {
    spec: SPLITK_32X128,
    bm: 32,
    bn: 128,
    bk: 8,
    threads: 64,
    shared_bytes: blocked_smem(32, 128, 8, A_PAD, 2),
    // About 160 registers per thread: 6 blocks of 64 threads.
    blocks_per_sm: 6,
};

/// Padding (in floats) added to each row of the transposed `A` tile of steps 4 and 5, so the
/// transposing stores of one warp fall into distinct banks (see the kernel).
pub const A_PAD: u32 = 4;

/// Shared bytes of a register-blocked tiling: `stages` copies of a transposed `A` tile
/// (`bk x (bm + pad)`) and a `B` tile (`bk x bn`).
const fn blocked_smem(bm: u32, bn: u32, bk: u32, pad: u32, stages: u32) -> u32 {
    stages * bk * (bm + pad + bn) * 4
}

/// Step 1: one thread per element of `C`, reading `A` and `B` straight from global memory.
pub const SGEMM_1_NAIVE: GemmTiling = GemmTiling {
    spec: NAIVE,
    bm: 16,
    bn: 16,
    bk: 1,
    block_x: 16,
    block_y: 16,
    shared_bytes: 0,
};

/// Step 2: 32 x 32 tiles of `A` and `B` staged in shared memory, one element of `C` per thread.
pub const SGEMM_2_TILED: GemmTiling = GemmTiling {
    spec: TILED,
    bm: 32,
    bn: 32,
    bk: 32,
    block_x: 32,
    block_y: 32,
    shared_bytes: 2 * 32 * 32 * 4,
};

/// Step 3: 128 x 128 block tiles, 8 x 8 outputs per thread held in registers.
pub const SGEMM_3_BLOCKED: GemmTiling = GemmTiling {
    spec: BLOCKED,
    bm: 128,
    bn: 128,
    bk: 8,
    block_x: 256,
    block_y: 1,
    shared_bytes: blocked_smem(128, 128, 8, 0, 1),
};

/// Step 4: step 3 with 16-byte global and shared accesses and a bank-conflict-free layout.
pub const SGEMM_4_VECTORIZED: GemmTiling = GemmTiling {
    spec: VECTORIZED,
    bm: 128,
    bn: 128,
    bk: 8,
    block_x: 256,
    block_y: 1,
    shared_bytes: blocked_smem(128, 128, 8, A_PAD, 1),
};

/// Step 5, large tiles: step 4 with two shared stages, the next tile's global loads in flight
/// while the current one is multiplied. Bounded to 128 registers per thread so that two blocks
/// (16 warps) share a multiprocessor; the assembler fits it without spilling for sm_90 (for
/// sm_80 it spills a few words, within `cargo xtask ptx-check`'s allowance).
pub const SGEMM_5_PIPELINED_128X128: GemmTiling = GemmTiling {
    spec: PIPELINED_128X128,
    bm: 128,
    bn: 128,
    bk: 8,
    block_x: 256,
    block_y: 1,
    shared_bytes: blocked_smem(128, 128, 8, A_PAD, 2),
};

/// Step 5, medium tiles (more blocks for shapes that would leave SMs idle with 128 x 128).
pub const SGEMM_5_PIPELINED_128X64: GemmTiling = GemmTiling {
    spec: PIPELINED_128X64,
    bm: 128,
    bn: 64,
    bk: 8,
    block_x: 128,
    block_y: 1,
    shared_bytes: blocked_smem(128, 64, 8, A_PAD, 2),
};

/// Step 5, small tiles (small or skinny products).
pub const SGEMM_5_PIPELINED_64X64: GemmTiling = GemmTiling {
    spec: PIPELINED_64X64,
    bm: 64,
    bn: 64,
    bk: 8,
    block_x: 64,
    block_y: 1,
    shared_bytes: blocked_smem(64, 64, 8, A_PAD, 2),
};

/// Step 6: 128 x 128 x 16 tiles copied from global to shared memory by `cp.async` into three
/// stages (no staging registers), `A` row-major with swizzled 16-byte chunks; one block per SM
/// (its register count).
pub const SGEMM_6_ASYNC_128X128: GemmTiling = GemmTiling {
    spec: ASYNC_128X128,
    bm: 128,
    bn: 128,
    bk: 16,
    block_x: 256,
    block_y: 1,
    shared_bytes: 3 * (128 * 16 + 16 * 128) * 4,
};

/// Step 7: step 5's 128 x 128 tiles with the blocks in a swizzled order (bands of block rows
/// walked column by column) for L2 reuse.
pub const SGEMM_7_SWIZZLED_128X128: GemmTiling = GemmTiling {
    spec: SWIZZLED_128X128,
    ..SGEMM_5_PIPELINED_128X128
};

/// Step 8: step 5's 128 x 128 tiles computed by 128 threads of 8 x 16 outputs, two blocks
/// per multiprocessor.
pub const SGEMM_8_WIDE_128X128: GemmTiling = GemmTiling {
    spec: WIDE_128X128,
    block_x: 128,
    ..SGEMM_5_PIPELINED_128X128
};

/// Every matmul kernel, in the order of the progression.
pub const SGEMM_ALL: [GemmTiling; 10] = [
    SGEMM_1_NAIVE,
    SGEMM_2_TILED,
    SGEMM_3_BLOCKED,
    SGEMM_4_VECTORIZED,
    SGEMM_5_PIPELINED_128X128,
    SGEMM_5_PIPELINED_128X64,
    SGEMM_5_PIPELINED_64X64,
    SGEMM_6_ASYNC_128X128,
    SGEMM_7_SWIZZLED_128X128,
    SGEMM_8_WIDE_128X128,
];

/// Sixteen outputs of one row of `C` per block, `K` split across the block's 256 threads
/// (small products: one launch, no partial products in memory).
pub const SGEMM_DOT_1X16: GemmTiling = GemmTiling {
    spec: DOT_1X16,
    bm: 1,
    bn: 16,
    bk: 256,
    block_x: 256,
    block_y: 1,
    // One sum of 16 columns per warp.
    shared_bytes: 8 * 16 * 4,
};

/// Every kernel that computes a whole product in one launch: the progression ([`SGEMM_ALL`])
/// and [`SGEMM_DOT_1X16`].
pub const SGEMM_WHOLE: [GemmTiling; SGEMM_ALL.len() + 1] = {
    let mut all = [SGEMM_DOT_1X16; SGEMM_ALL.len() + 1];
    let mut i = 0;
    while i < SGEMM_ALL.len() {
        all[i] = SGEMM_ALL[i];
        i += 1;
    }
    all
};

/// Every split-K kernel.
pub const SGEMM_SPLITK_ALL: [SplitKTiling; 4] = [
    SGEMM_SPLITK_128X128,
    SGEMM_SPLITK_WIDE_128X128,
    SGEMM_SPLITK_64X64,
    SGEMM_SPLITK_32X128,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_structs_have_no_padding() {
        let sum = |f: &[streamline_device::params::FieldInfo]| f.iter().map(|f| f.size).sum();
        use streamline_device::params::ParamFields;
        assert_eq!(
            core::mem::size_of::<GemmParams>(),
            sum(<GemmParams as ParamFields>::FIELDS)
        );
        assert_eq!(
            core::mem::size_of::<GemmParamsTo<bf16>>(),
            sum(<GemmParamsTo<bf16> as ParamFields>::FIELDS)
        );
        assert_eq!(
            core::mem::size_of::<SplitKSgdParams<f32>>(),
            sum(<SplitKSgdParams<f32> as ParamFields>::FIELDS)
        );
        assert_eq!(
            core::mem::size_of::<SplitKSgdParams<bf16>>(),
            sum(<SplitKSgdParams<bf16> as ParamFields>::FIELDS)
        );
    }
}
