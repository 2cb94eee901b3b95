//! Memory barriers in shared memory (`mbarrier`): a phase completes when a set number of
//! threads have arrived and, on sm_90, a set number of bytes of asynchronous copies (TMA,
//! [`crate::tma`]) have landed. Waiting on a phase's parity lets producers and consumers of a
//! ring of shared-memory stages hand stages to each other without a block-wide barrier.

use core::arch::asm;

/// An `mbarrier` object: 8 bytes of the block's shared memory, 8-byte aligned, at a 32-bit
/// shared address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MBarrier(pub u32);

impl MBarrier {
    /// Initialises the barrier for phases of `count` arrivals (1..=2^20 - 1).
    ///
    /// # Safety
    /// The address must be an 8-byte aligned, otherwise unused 8 bytes of the block's shared
    /// memory; one thread initialises it, and no thread uses it before the block barrier that
    /// follows [`MBarrier::fence_init`].
    #[inline(always)]
    pub unsafe fn init(self, count: u32) {
        // SAFETY: guaranteed by the caller; writes the barrier's 8 bytes.
        unsafe {
            asm!(
                "mbarrier.init.shared::cta.b64 [{b}], {n};",
                b = in(reg32) self.0,
                n = in(reg32) count,
                options(nostack, preserves_flags)
            )
        }
    }

    /// Makes barriers initialised by this thread visible to the asynchronous copies that will
    /// complete on them (a block barrier must still follow before other threads use them).
    ///
    /// # Safety
    /// Only kernels built for `sm_90` or newer may call it.
    #[inline(always)]
    pub unsafe fn fence_init() {
        // SAFETY: guaranteed by the caller; a fence, touching no memory.
        unsafe {
            asm!(
                "fence.mbarrier_init.release.cluster;",
                options(nostack, preserves_flags)
            )
        }
    }

    /// Arrives on the barrier (one of its `count` arrivals), releasing this thread's earlier
    /// memory accesses to the threads that wait on the phase.
    ///
    /// # Safety
    /// The barrier must be initialised, and its current phase must still lack this arrival.
    #[inline(always)]
    pub unsafe fn arrive(self) {
        // SAFETY: guaranteed by the caller; updates the barrier's state only.
        unsafe {
            asm!(
                "mbarrier.arrive.release.cta.shared::cta.b64 _, [{b}];",
                b = in(reg32) self.0,
                options(nostack, preserves_flags)
            )
        }
    }

    /// Arrives on the barrier and adds `bytes` to the transaction count its current phase waits
    /// for: the phase completes when its arrivals are in and the asynchronous copies that name
    /// this barrier have delivered that many bytes.
    ///
    /// # Safety
    /// As for [`MBarrier::arrive`]; the copies must deliver exactly `bytes` (at most 2^20 - 1)
    /// in this phase. Only kernels built for `sm_90` or newer may call it.
    #[inline(always)]
    pub unsafe fn arrive_expect_tx(self, bytes: u32) {
        // SAFETY: guaranteed by the caller; updates the barrier's state only.
        unsafe {
            asm!(
                "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [{b}], {n};",
                b = in(reg32) self.0,
                n = in(reg32) bytes,
                options(nostack, preserves_flags)
            )
        }
    }

    /// Whether the phase of parity `parity` (0 or 1) has completed; if so, what the arriving
    /// threads wrote before arriving (and the copies delivered) is visible to this thread.
    ///
    /// # Safety
    /// The barrier must be initialised. Only kernels built for `sm_90` or newer may call it.
    #[inline(always)]
    pub unsafe fn try_wait(self, parity: u32) -> bool {
        let done: u32;
        // SAFETY: guaranteed by the caller; reads the barrier's state only.
        unsafe {
            asm!(
                "{{ .reg .pred p; mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [{b}], {q}; selp.u32 {d}, 1, 0, p; }}",
                b = in(reg32) self.0,
                q = in(reg32) parity,
                d = out(reg32) done,
                options(nostack, preserves_flags)
            )
        }
        done != 0
    }

    /// Waits until the phase of parity `parity` has completed (see [`MBarrier::try_wait`]).
    ///
    /// # Safety
    /// As for [`MBarrier::try_wait`]; the phase must be one that will complete, or the thread
    /// waits forever.
    #[inline(always)]
    pub unsafe fn wait(self, parity: u32) {
        // SAFETY: guaranteed by the caller.
        while !unsafe { self.try_wait(parity) } {}
    }
}
