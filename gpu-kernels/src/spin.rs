//! Wait on the device's global timer, then copy: an access of controlled duration, used to
//! test that cross-stream waits cover every reader of a buffer.

use streamline_abi::spin::SpinCopyParams;
use streamline_abi::spin::SPIN_COPY_F32;
use streamline_device::kernel;
use streamline_device::thread::global_x;

/// Nanoseconds of the device-wide `%globaltimer` clock. Neither `pure` nor `nomem`: every call
/// reads the register anew, and no memory access moves across it.
#[inline(always)]
fn now_ns() -> u64 {
    let t: u64;
    // SAFETY: reading a special register has no side effects on memory.
    unsafe {
        core::arch::asm!(
            "mov.u64 {t}, %globaltimer;",
            t = out(reg64) t,
            options(nostack, preserves_flags)
        )
    };
    t
}

kernel! {
    #[declared(SPIN_COPY_F32)]
    /// Every thread waits `p.spin_ns` nanoseconds, then the grid copies `p.n` f32 from `p.x` to
    /// `p.y`. The input is read with volatile loads so that no read can move before the wait.
    ///
    /// # Safety
    /// `p.x` must address `p.n` readable f32 and `p.y` `p.n` writable f32 on the device, not
    /// overlapping.
    pub unsafe fn spin_copy_f32(p: SpinCopyParams) {
        let start = now_ns();
        while now_ns().wrapping_sub(start) < p.spin_ns {}
        let x = p.x.as_ptr();
        let y = p.y.as_mut_ptr();
        let (first, stride) = global_x();
        let mut i = first;
        while i < p.n {
            // SAFETY: `i < n`, and the host validated that both ranges hold `n` elements.
            unsafe { y.add(i as usize).write(x.add(i as usize).read_volatile()) };
            i += stride;
        }
    }
}
