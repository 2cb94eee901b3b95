//! A copy that first waits on the device clock: a reader (or writer) whose duration the host
//! controls, for testing that cross-stream waits cover every access of a buffer.

use crate::{declare, params, DevPtr, DevPtrMut};

params! {
    /// Parameters of `spin_copy_f32`: every thread waits until `spin_ns` nanoseconds of the device's
    /// global timer have passed since it started, then the grid copies `n` f32 values from device
    /// address `x` to device address `y`. The two ranges must not overlap.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[cfg_attr(feature = "bytemuck", derive(bytemuck::Pod, bytemuck::Zeroable))]
    pub struct SpinCopyParams {
        /// Device address of the input.
        pub x: DevPtr<f32>,
        /// Device address of the output.
        pub y: DevPtrMut<f32>,
        /// Number of f32 elements.
        pub n: u64,
        /// Nanoseconds each thread waits before it reads.
        pub spin_ns: u64,
    }
}

declare! {
    /// Wait, then copy f32.
    pub const SPIN_COPY_F32: Kernel<SpinCopyParams> = Kernel::new("spin_copy_f32");
}

/// Threads per block of `spin_copy_f32`.
pub const SPIN_COPY_BLOCK: u32 = 256;

/// Longest wait the host accepts (10 s), so that a wrong argument cannot hang the device.
pub const SPIN_MAX_NS: u64 = 10_000_000_000;
