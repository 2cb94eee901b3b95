//! Probes of the tensor-core building blocks of `streamline_device::mma`: kernels of one warp
//! that run one `ldmatrix` or one `mma.sync` on given inputs and write what the lanes hold, so
//! that the fragment layouts the device API documents are tested against plain CPU loops.

use crate::{declare, params, DevPtr, DevPtrMut};
use streamline_device::element::{bf16, f16, Element};

params! {
    /// Parameters of `probe_ldmatrix_x4` and `probe_ldmatrix_x4_trans`: four 8 x 8 matrices of
    /// 16-bit values at `src` (256 values, one matrix after the other, each row-major); lane
    /// `l` loads row `l % 8` of matrix `l / 8`, and writes its four registers to
    /// `out[4 l..4 l + 4]` (128 values).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct LdmatrixProbeParams {
        /// Device address of the 256 input values.
        pub src: DevPtr<u16>,
        /// Device address of the 128 registers written.
        pub out: DevPtrMut<u32>,
    }
}

params! {
    /// Parameters of the `mma.sync` probes over operands `T` (bf16 and f16: `m16n8k16`; f32
    /// holding tf32 values: `m16n8k8`): `d = a b` for the row-major `16 x K` matrix `a` and
    /// `K x 8` matrix `b`, each lane building its fragments as the device API documents them,
    /// `d` (16 x 8 f32, row-major) written from the accumulator fragments.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct MmaProbeParams<T: Element> {
        /// Device address of `a`.
        pub a: DevPtr<T>,
        /// Device address of `b`.
        pub b: DevPtr<T>,
        /// Device address of `d`.
        pub d: DevPtrMut<f32>,
    }
}

// SAFETY: three 8-byte addresses whatever `T` is: no padding, and every bit pattern (zeros
// included) is a valid value.
#[cfg(feature = "bytemuck")]
unsafe impl<T: Element> bytemuck::Zeroable for MmaProbeParams<T> {}
// SAFETY: as above.
#[cfg(feature = "bytemuck")]
unsafe impl<T: Element> bytemuck::Pod for MmaProbeParams<T> {}

declare! {
    /// One `ldmatrix.x4` per lane.
    pub const PROBE_LDMATRIX_X4: Kernel<LdmatrixProbeParams> = Kernel::new("probe_ldmatrix_x4");
    /// One `ldmatrix.x4.trans` per lane.
    pub const PROBE_LDMATRIX_X4_TRANS: Kernel<LdmatrixProbeParams> =
        Kernel::new("probe_ldmatrix_x4_trans");
    /// One `mma.sync.m16n8k16` on bf16 operands.
    pub const PROBE_MMA_BF16: Kernel<MmaProbeParams<bf16>> = Kernel::new("probe_mma_bf16");
    /// One `mma.sync.m16n8k16` on f16 operands.
    pub const PROBE_MMA_F16: Kernel<MmaProbeParams<f16>> = Kernel::new("probe_mma_f16");
    /// One `mma.sync.m16n8k8` on tf32 operands.
    pub const PROBE_MMA_TF32: Kernel<MmaProbeParams<f32>> = Kernel::new("probe_mma_tf32");
}
