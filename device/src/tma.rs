//! The Tensor Memory Accelerator (sm_90): one thread asks for a whole tile of a 2-D tensor
//! and the hardware copies it from global to shared memory, applying the shared-memory swizzle
//! and zero-filling what lies outside the tensor, then reports the bytes on an
//! [`MBarrier`](crate::barrier::MBarrier).
//!
//! The copy is described by a tensor map: 128 opaque bytes the host encodes (with the driver's
//! `cuTensorMapEncodeTiled`: the tensor's address, sizes and row stride, the tile's size and the
//! swizzle) and places in global memory, 64-byte aligned; the kernel receives its address.

use core::arch::asm;

/// Makes a tensor map in global memory written before the kernel started (by the host) safe
/// to use by this thread's copies, and fetches it into the cache.
///
/// # Safety
/// `map` must be the generic address of a tensor map in global memory, 64-byte aligned, that
/// nothing writes while the kernel runs. Only kernels built for `sm_90` or newer may call it.
#[inline(always)]
pub unsafe fn acquire_map(map: u64) {
    // SAFETY: guaranteed by the caller; a fence and a prefetch of the map's 128 bytes.
    unsafe {
        asm!(
            "fence.proxy.tensormap::generic.acquire.gpu [{m}], 128;",
            "prefetch.tensormap [{m}];",
            m = in(reg64) map,
            options(nostack, preserves_flags)
        )
    }
}

/// Starts copying the tile of the 2-D tensor described by `map` whose first element has
/// coordinates `(x, y)` (`x` along the contiguous dimension, in elements) to shared memory at
/// `dst`; the bytes count towards the current phase of `bar`'s transactions. Elements outside
/// the tensor arrive as zeros (and still count).
///
/// # Safety
/// `map` as for [`acquire_map`]; `dst` must be a shared address aligned as the map's swizzle
/// requires (1024 bytes for the 128-byte swizzle), with the tile's bytes free until `bar`'s
/// phase completes; `bar` must be initialised and expect the bytes
/// ([`MBarrier::arrive_expect_tx`](crate::barrier::MBarrier::arrive_expect_tx)).
#[inline(always)]
pub unsafe fn load_2d(dst: u32, map: u64, x: i32, y: i32, bar: u32) {
    // SAFETY: guaranteed by the caller; reads the tensor through the map, writes the tile at
    // `dst`, and completes transactions on `bar`.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}}}], [{b}];",
            d = in(reg32) dst,
            m = in(reg64) map,
            x = in(reg32) x,
            y = in(reg32) y,
            b = in(reg32) bar,
            options(nostack, preserves_flags)
        )
    }
}

/// Starts copying a tile from shared memory at `src` to the 2-D tensor described by `map`, its
/// first element at coordinates `(x, y)`; the parts outside the tensor are not written. The
/// copy joins this thread's current bulk group ([`commit`], [`wait_read`]).
///
/// # Safety
/// `map` as for [`acquire_map`], describing memory nothing else accesses while the copy runs;
/// `src` a shared address aligned as the map's swizzle requires, holding the tile in the
/// map's layout, written by this block and made visible to the copy ([`fence_shared`] by the
/// writers, then a barrier); `src` must stay unchanged until [`wait_read`] says it was read.
#[inline(always)]
pub unsafe fn store_2d(map: u64, src: u32, x: i32, y: i32) {
    // SAFETY: guaranteed by the caller; reads the tile at `src`, writes the tensor.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [{m}, {{{x}, {y}}}], [{s}];",
            m = in(reg64) map,
            x = in(reg32) x,
            y = in(reg32) y,
            s = in(reg32) src,
            options(nostack, preserves_flags)
        )
    }
}

/// Closes this thread's group of bulk copies started since the last commit ([`store_2d`]).
///
/// # Safety
/// Only kernels built for `sm_90` or newer may call it.
#[inline(always)]
pub unsafe fn commit() {
    // SAFETY: guaranteed by the caller; marks a group, touching no memory.
    unsafe {
        asm!(
            "cp.async.bulk.commit_group;",
            options(nostack, preserves_flags)
        )
    }
}

/// Waits until at most `N` of this thread's committed bulk groups still read their shared
/// memory (the older ones' sources may be overwritten).
///
/// # Safety
/// Only kernels built for `sm_90` or newer may call it.
#[inline(always)]
pub unsafe fn wait_read<const N: u32>() {
    // SAFETY: guaranteed by the caller; waits, touching no memory of its own.
    unsafe {
        asm!(
            "cp.async.bulk.wait_group.read {n};",
            n = const N,
            options(nostack, preserves_flags)
        )
    }
}

/// Waits until at most `N` of this thread's committed bulk groups are still in flight (the
/// older ones' writes are done).
///
/// # Safety
/// Only kernels built for `sm_90` or newer may call it.
#[inline(always)]
pub unsafe fn wait_all<const N: u32>() {
    // SAFETY: guaranteed by the caller; waits, touching no memory of its own.
    unsafe {
        asm!(
            "cp.async.bulk.wait_group {n};",
            n = const N,
            options(nostack, preserves_flags)
        )
    }
}

/// Makes this thread's earlier shared-memory writes visible to the asynchronous copies
/// ([`store_2d`]) issued after the next barrier.
///
/// # Safety
/// Only kernels built for `sm_90` or newer may call it.
#[inline(always)]
pub unsafe fn fence_shared() {
    // SAFETY: a fence, touching no memory.
    unsafe {
        asm!(
            "fence.proxy.async.shared::cta;",
            options(nostack, preserves_flags)
        )
    }
}
