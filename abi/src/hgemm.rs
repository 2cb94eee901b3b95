//! Half-precision matrix multiply on tensor cores: `C = alpha * A @ B + beta * C` with `A`, `B`
//! and `C` in bf16 or f16 (row-major, leading dimensions) and f32 accumulation, as a
//! progression beside the FP32 one (see `gpu-kernels/src/matmul/half/mod.rs`).
//!
//! Steps 3 and 4 also multiply f32 matrices as TF32 (f32 accumulation and output).
//!
//! Every step handles any `m`, `n`, `k`; rows must start on 16-byte boundaries: the three
//! addresses 16-byte aligned and `lda`, `ldb`, `ldc` multiples of 16 bytes (8 16-bit elements,
//! [`HGEMM_ALIGN`]; 4 f32), as the tensor-core loads (and the TMA) require.

use crate::{declare, params, DevPtr, DevPtrMut, Kernel};
use streamline_device::element::{bf16, f16, Element};

/// 16-bit elements per 16 bytes: the alignment of rows (`lda`, `ldb`, `ldc`) the kernels require.
pub const HGEMM_ALIGN: u32 = 8;

params! {
    /// Parameters of every `hgemm_*` kernel.
    ///
    /// `A` is `m x k` with row stride `lda` (elements), `B` is `k x n` with row stride `ldb`, `C` is
    /// `m x n` with row stride `ldc`, all of the kernel's element type. When `beta == 0`, `C` is not
    /// read (BLAS semantics).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct HgemmParams<T: Element> {
        /// Device address of `A`.
        pub a: DevPtr<T>,
        /// Device address of `B`.
        pub b: DevPtr<T>,
        /// Device address of `C`.
        pub c: DevPtrMut<T>,
        /// Device address of three TMA tensor maps (128 bytes each, 64-byte aligned), `A`'s, `B`'s
        /// and `C`'s, for the kernels that copy with the TMA ([`HgemmTiling::tma`]); 0 for the
        /// others.
        pub maps: DevPtr<TensorMap>,
        /// Rows of `A` and `C`.
        pub m: u32,
        /// Columns of `B` and `C`.
        pub n: u32,
        /// Columns of `A`, rows of `B`.
        pub k: u32,
        /// Row stride of `A` in elements (`>= k`, a multiple of 16 bytes).
        pub lda: u32,
        /// Row stride of `B` in elements (`>= n`, a multiple of 16 bytes; `>= k` for a transposed `B`).
        pub ldb: u32,
        /// Row stride of `C` in elements (`>= n`, a multiple of 16 bytes).
        pub ldc: u32,
        /// Scale of the product.
        pub alpha: f32,
        /// Scale of the old `C`; 0 means `C` is write-only.
        pub beta: f32,
        /// Slices `K` is cut into (1: none). With more, a persistent step computes each slice's
        /// unscaled product into its own `m x n` plane of f32 at `partials` (row stride `n`), and
        /// [`HgemmReduceParams`]' kernel finishes `C`.
        pub slices: u32,
        /// `K` tiles (of the step's `bk`) per slice, the last slice taking the rest.
        pub slice_tiles: u32,
        /// Device address of `slices * m * n` f32 (unused when `slices` is 1).
        pub partials: DevPtrMut<f32>,
    }
}

/// The 128 bytes of a TMA tensor map (`CUtensorMap`), as [`HgemmParams::maps`] addresses them.
pub type TensorMap = [u64; 16];

// SAFETY: addresses, u32 and f32 fields whatever `T` is, laid out without padding (checked by
// the test below); every bit pattern is a valid value.
#[cfg(feature = "bytemuck")]
unsafe impl<T: Element> bytemuck::Zeroable for HgemmParams<T> {}
// SAFETY: as above.
#[cfg(feature = "bytemuck")]
unsafe impl<T: Element> bytemuck::Pod for HgemmParams<T> {}

params! {
    /// Parameters of `hgemm_splitk_reduce_*`: `C = alpha * (P_0 + P_1 + ...) + beta * C`, the
    /// planes added in slice order for every element, so results do not depend on scheduling.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct HgemmReduceParams<T: Element> {
        /// Device address of the planes (`slices * m * n` f32, row stride `n`).
        pub partials: DevPtr<f32>,
        /// Device address of `C`.
        pub c: DevPtrMut<T>,
        /// Rows of `C`.
        pub m: u32,
        /// Columns of `C`.
        pub n: u32,
        /// Row stride of `C` in elements.
        pub ldc: u32,
        /// Number of planes.
        pub slices: u32,
        /// Scale of the sum.
        pub alpha: f32,
        /// Scale of the old `C`; 0 means `C` is write-only.
        pub beta: f32,
    }
}

// SAFETY: as for `HgemmParams`: no field depends on `T`, no padding (checked below).
#[cfg(feature = "bytemuck")]
unsafe impl<T: Element> bytemuck::Zeroable for HgemmReduceParams<T> {}
// SAFETY: as above.
#[cfg(feature = "bytemuck")]
unsafe impl<T: Element> bytemuck::Pod for HgemmReduceParams<T> {}

/// Threads per block of `hgemm_splitk_reduce_*`.
pub const HGEMM_REDUCE_BLOCK: u32 = 256;

/// A step of the progression: its two kernels (bf16, f16) and how to launch them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HgemmTiling {
    /// The bf16 kernel.
    pub bf16: Kernel<HgemmParams<bf16>>,
    /// The f16 kernel.
    pub f16: Kernel<HgemmParams<f16>>,
    /// The kernel for f32 matrices multiplied as TF32, where the step has one. It reads `B`
    /// transposed (`n x k`, K-major: the tensor cores take TF32 operands only that way), in
    /// boxes of `bk / 2` x `bn` (a 128-byte row of `K` per column of `B`), and `A` in boxes of
    /// `bk / 2` x `bm`.
    pub tf32: Option<Kernel<HgemmParams<f32>>>,
    /// Rows of `C` per block.
    pub bm: u32,
    /// Columns of `C` per block.
    pub bn: u32,
    /// Depth of `K` per stage.
    pub bk: u32,
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory per block, bytes.
    pub shared_bytes: u32,
    /// Whether the kernel reads `A` and `B` through TMA tensor maps (`HgemmParams::maps`):
    /// `A` in boxes of `bk` x `bm`, `B` in boxes of 64 x `bk` (columns x rows), both with the
    /// 128-byte swizzle.
    pub tma: bool,
    /// Whether the kernel walks the tiles with at most one block per multiprocessor (any grid
    /// size works) instead of one block per tile.
    pub persistent: bool,
}

impl HgemmTiling {
    /// The step's name without its type, e.g. `hgemm_2_wgmma`.
    pub fn name(&self) -> &'static str {
        let full = self.bf16.name();
        full.strip_suffix("_bf16").unwrap_or(full)
    }
}

/// Stages of the `mma.sync` step's `cp.async` ring.
pub const MMA_STAGES: u32 = 4;
/// Stages of the `wgmma` steps' TMA ring.
pub const WGMMA_STAGES: u32 = 4;
/// Stages of step 4's ring (its staging area takes the fourth's room).
pub const TMA_STORE_STAGES: u32 = 3;
/// Stages of step 5's ring: its stages and staging area are half step 4's size.
pub const NARROW_STAGES: u32 = 6;

declare! {
    /// Step 1: `mma.sync` (m16n8k16) from `ldmatrix` fragments, `cp.async` stages, 128 x 128
    /// block tile, eight warps of 64 x 32.
    pub const HGEMM_1_MMA_BF16: Kernel<HgemmParams<bf16>> = Kernel::new("hgemm_1_mma_bf16").with_bounds(256, 1);
    /// [`HGEMM_1_MMA_BF16`] for f16.
    pub const HGEMM_1_MMA_F16: Kernel<HgemmParams<f16>> = Kernel::new("hgemm_1_mma_f16").with_bounds(256, 1);
    /// Step 2: warp-specialised `wgmma` (m64n256k16) fed by the TMA through an `mbarrier` ring;
    /// one producer warpgroup, two consumer warpgroups, 128 x 256 block tile. sm_90a only.
    pub const HGEMM_2_WGMMA_BF16: Kernel<HgemmParams<bf16>> = Kernel::new("hgemm_2_wgmma_bf16").with_bounds(384, 1).only_on("sm_90a");
    /// [`HGEMM_2_WGMMA_BF16`] for f16.
    pub const HGEMM_2_WGMMA_F16: Kernel<HgemmParams<f16>> = Kernel::new("hgemm_2_wgmma_f16").with_bounds(384, 1).only_on("sm_90a");
    /// Step 3: step 2 persistent, one block per multiprocessor walking the tiles, the next
    /// tile's stages loading during the last one's stores. sm_90a only.
    pub const HGEMM_3_PERSISTENT_BF16: Kernel<HgemmParams<bf16>> = Kernel::new("hgemm_3_persistent_bf16").with_bounds(384, 1).only_on("sm_90a");
    /// [`HGEMM_3_PERSISTENT_BF16`] for f16.
    pub const HGEMM_3_PERSISTENT_F16: Kernel<HgemmParams<f16>> = Kernel::new("hgemm_3_persistent_f16").with_bounds(384, 1).only_on("sm_90a");
    /// [`HGEMM_3_PERSISTENT_BF16`] for f32 multiplied as TF32, with `B` transposed (K-major,
    /// see [`HgemmTiling::tf32`]). sm_90a only.
    pub const HGEMM_3_PERSISTENT_TF32: Kernel<HgemmParams<f32>> = Kernel::new("hgemm_3_persistent_tf32").with_bounds(384, 1).only_on("sm_90a");
    /// Step 4: step 3 with the results written through a staging area of shared memory by the
    /// TMA (where `beta` is 0), three stages. sm_90a only.
    pub const HGEMM_4_TMA_STORE_BF16: Kernel<HgemmParams<bf16>> = Kernel::new("hgemm_4_tma_store_bf16").with_bounds(384, 1).only_on("sm_90a");
    /// [`HGEMM_4_TMA_STORE_BF16`] for f16.
    pub const HGEMM_4_TMA_STORE_F16: Kernel<HgemmParams<f16>> = Kernel::new("hgemm_4_tma_store_f16").with_bounds(384, 1).only_on("sm_90a");
    /// [`HGEMM_4_TMA_STORE_BF16`] for f32 multiplied as TF32, `B` transposed as for
    /// [`HGEMM_3_PERSISTENT_TF32`]. sm_90a only.
    pub const HGEMM_4_TMA_STORE_TF32: Kernel<HgemmParams<f32>> = Kernel::new("hgemm_4_tma_store_tf32").with_bounds(384, 1).only_on("sm_90a");
    /// Step 5: step 4 with 128 x 128 tiles (`m64n128` products), for products whose 128 x 256
    /// tiles would leave multiprocessors idle. sm_90a only.
    pub const HGEMM_5_NARROW_BF16: Kernel<HgemmParams<bf16>> = Kernel::new("hgemm_5_narrow_bf16").with_bounds(384, 1).only_on("sm_90a");
    /// [`HGEMM_5_NARROW_BF16`] for f16.
    pub const HGEMM_5_NARROW_F16: Kernel<HgemmParams<f16>> = Kernel::new("hgemm_5_narrow_f16").with_bounds(384, 1).only_on("sm_90a");
    /// [`HGEMM_5_NARROW_BF16`] for f32 multiplied as TF32, `B` transposed as for
    /// [`HGEMM_3_PERSISTENT_TF32`]. sm_90a only.
    pub const HGEMM_5_NARROW_TF32: Kernel<HgemmParams<f32>> = Kernel::new("hgemm_5_narrow_tf32").with_bounds(384, 1).only_on("sm_90a");
    /// The sum of split-K planes into a bf16 `C` (see [`HgemmReduceParams`]).
    pub const HGEMM_SPLITK_REDUCE_BF16: Kernel<HgemmReduceParams<bf16>> = Kernel::new("hgemm_splitk_reduce_bf16").with_bounds(256, 1);
    /// [`HGEMM_SPLITK_REDUCE_BF16`] into an f16 `C`.
    pub const HGEMM_SPLITK_REDUCE_F16: Kernel<HgemmReduceParams<f16>> = Kernel::new("hgemm_splitk_reduce_f16").with_bounds(256, 1);
    /// [`HGEMM_SPLITK_REDUCE_BF16`] into an f32 `C` (the TF32 product's).
    pub const HGEMM_SPLITK_REDUCE_F32: Kernel<HgemmReduceParams<f32>> = Kernel::new("hgemm_splitk_reduce_f32").with_bounds(256, 1);
}

/// Step 1's launch: 128 x 128 x 32 tiles, [`MMA_STAGES`] stages of `A` (128 x 32) and `B`
/// (32 x 128).
pub const HGEMM_1_MMA: HgemmTiling = HgemmTiling {
    bf16: HGEMM_1_MMA_BF16,
    f16: HGEMM_1_MMA_F16,
    tf32: None,
    bm: 128,
    bn: 128,
    bk: 32,
    threads: 256,
    shared_bytes: MMA_STAGES * (128 * 32 + 32 * 128) * 2,
    tma: false,
    persistent: false,
};

/// Step 2's launch: 128 x 256 x 64 tiles, [`WGMMA_STAGES`] stages of `A` (16 KiB) and `B`
/// (32 KiB), their barriers, and 1 KiB to align the stages to 1024 bytes.
pub const HGEMM_2_WGMMA: HgemmTiling = HgemmTiling {
    bf16: HGEMM_2_WGMMA_BF16,
    f16: HGEMM_2_WGMMA_F16,
    tf32: None,
    bm: 128,
    bn: 256,
    bk: 64,
    threads: 384,
    shared_bytes: WGMMA_STAGES * (128 * 64 + 64 * 256) * 2 + 2 * 8 * WGMMA_STAGES + 1024,
    tma: true,
    persistent: false,
};

/// Step 3's launch: step 2's tiles and shared memory, at most one block per multiprocessor.
pub const HGEMM_3_PERSISTENT: HgemmTiling = HgemmTiling {
    bf16: HGEMM_3_PERSISTENT_BF16,
    f16: HGEMM_3_PERSISTENT_F16,
    tf32: Some(HGEMM_3_PERSISTENT_TF32),
    persistent: true,
    ..HGEMM_2_WGMMA
};

/// Step 4's launch: step 3's, with [`TMA_STORE_STAGES`] stages and 64 KiB of staging.
pub const HGEMM_4_TMA_STORE: HgemmTiling = HgemmTiling {
    bf16: HGEMM_4_TMA_STORE_BF16,
    f16: HGEMM_4_TMA_STORE_F16,
    tf32: Some(HGEMM_4_TMA_STORE_TF32),
    shared_bytes: TMA_STORE_STAGES * (128 * 64 + 64 * 256) * 2
        + 2 * 64 * 256 * 2
        + 2 * 8 * TMA_STORE_STAGES
        + 1024,
    ..HGEMM_3_PERSISTENT
};

/// Step 5's launch: step 4's with 128 x 128 tiles, [`NARROW_STAGES`] stages of `A` and `B`
/// (16 KiB each) and 32 KiB of staging.
pub const HGEMM_5_NARROW: HgemmTiling = HgemmTiling {
    bf16: HGEMM_5_NARROW_BF16,
    f16: HGEMM_5_NARROW_F16,
    tf32: Some(HGEMM_5_NARROW_TF32),
    bn: 128,
    shared_bytes: NARROW_STAGES * (128 * 64 + 64 * 128) * 2
        + 2 * 64 * 128 * 2
        + 2 * 8 * NARROW_STAGES
        + 1024,
    ..HGEMM_4_TMA_STORE
};

/// Every step, in order.
pub const HGEMM_ALL: &[HgemmTiling] = &[
    HGEMM_1_MMA,
    HGEMM_2_WGMMA,
    HGEMM_3_PERSISTENT,
    HGEMM_4_TMA_STORE,
    HGEMM_5_NARROW,
];

/// The block of a grid of `tiles_m x tiles_n` output tiles that block `id` computes, in groups
/// of [`GROUP_ROWS`] tile rows walked column by column, so that the blocks resident together
/// share panels of `A` and `B` in L2.
pub const fn grouped_tile(id: u32, tiles_m: u32, tiles_n: u32) -> (u32, u32) {
    let per_group = GROUP_ROWS * tiles_n;
    let first = (id / per_group) * GROUP_ROWS;
    let rows = if tiles_m - first < GROUP_ROWS {
        tiles_m - first
    } else {
        GROUP_ROWS
    };
    let i = id % per_group;
    (first + i % rows, i / rows)
}

/// Tile rows per group of [`grouped_tile`].
pub const GROUP_ROWS: u32 = 8;

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn parameter_structs_have_no_padding() {
        let sum = |f: &[streamline_device::params::FieldInfo]| f.iter().map(|f| f.size).sum();
        use streamline_device::params::ParamFields;
        assert_eq!(
            core::mem::size_of::<HgemmParams<bf16>>(),
            sum(<HgemmParams<bf16> as ParamFields>::FIELDS)
        );
        assert_eq!(
            core::mem::size_of::<HgemmReduceParams<f16>>(),
            sum(<HgemmReduceParams<f16> as ParamFields>::FIELDS)
        );
    }

    #[test]
    fn grouped_tiles_cover_the_grid_once() {
        for (tm, tn) in [(1, 1), (3, 5), (8, 8), (9, 3), (17, 33), (64, 32)] {
            let mut seen = std::vec![false; (tm * tn) as usize];
            for id in 0..tm * tn {
                let (r, c) = grouped_tile(id, tm, tn);
                assert!(r < tm && c < tn, "{tm}x{tn} {id}");
                let i = (r * tn + c) as usize;
                assert!(!seen[i], "{tm}x{tn}: ({r},{c}) twice");
                seen[i] = true;
            }
        }
    }
}
