//! Static shared memory: arrays whose size is known when the kernel is compiled, allocated for
//! every block of each kernel that uses them, beside the launch's dynamic shared memory
//! ([`crate::shared::dynamic_shared`]).

/// A static shared-memory array of the block: `shared_array!(TILE: [f32; 256])` is a
/// `*mut [f32; 256]`, the same array for every thread of the block and for every evaluation
/// of this line in the kernel.
///
/// Use it inside kernel bodies and [`device!`](crate::device!) functions. The contents are
/// undefined when the block starts (write before reading), threads of the block see each
/// other's writes only after a barrier ([`crate::thread::sync_block`]), and the type must be
/// concrete (not a kernel's generic parameter). The array is a PTX `.shared` variable named
/// after `NAME` and the line and column of the call, which `ptxas` counts in the kernel's
/// static shared memory (`cargo xtask ptx-check` reports it); together with the dynamic shared
/// memory of a launch it must fit the device's limit per block, which the launch checks.
///
/// ```ignore
/// let tile = shared_array!(TILE: [f32; 256]);
/// // SAFETY: `t < 256`; each thread writes its own element before the barrier.
/// unsafe { (*tile)[t] = v };
/// ```
#[macro_export]
#[cfg_attr(
    target_arch = "nvptx64",
    allow_internal_unstable(asm_experimental_arch)
)]
macro_rules! shared_array {
    ($name:ident : [$t:ty; $n:expr]) => {{
        ::core::arch::global_asm!(
            concat!(
                ".shared .align {align} .b8 ",
                stringify!($name), "_", line!(), "_", column!(),
                "[{size}];"
            ),
            align = const ::core::mem::align_of::<[$t; $n]>(),
            size = const ::core::mem::size_of::<[$t; $n]>(),
        );
        let addr: u64;
        // SAFETY: takes the generic address of the array declared above; touches no memory.
        unsafe {
            ::core::arch::asm!(
                concat!(
                    "cvta.shared.u64 {addr}, ",
                    stringify!($name), "_", line!(), "_", column!(),
                    ";"
                ),
                addr = out(reg64) addr,
                options(pure, nomem, nostack, preserves_flags),
            )
        };
        addr as *mut [$t; $n]
    }};
}
