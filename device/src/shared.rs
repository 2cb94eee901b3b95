//! The block's dynamic shared memory: its size is chosen per launch on the host (`shared_bytes`
//! of the launch configuration) and every thread of the block sees the same bytes.
//!
//! Block barriers ([`crate::thread::sync_block`]) order writes to it before reads by other
//! threads; [`crate::mem::shared_addr`], [`crate::mem::lds`], [`crate::mem::sts`] and
//! [`crate::mem::copy_async`] access it through 32-bit shared addresses.

/// The start of the block's dynamic shared memory, aligned for `T`.
///
/// The memory holds as many bytes as the launch asked for (possibly none): a kernel must not
/// touch more than its launch configuration gives it, which its safety contract states.
#[inline(always)]
pub fn dynamic_shared<T>() -> *mut T {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
}
