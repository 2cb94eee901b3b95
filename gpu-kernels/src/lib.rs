//! Streamline's GPU kernels. Each module is one kernel family; its parameter structs come from
//! `streamline-abi` so the host launches exactly what is compiled here.
#![no_std]
#![feature(abi_ptx, stdarch_nvptx, f16, link_llvm_intrinsics)]
// `link_llvm_intrinsics` reads the %globaltimer register (spin.rs); core::arch::nvptx has no
// wrapper for it.
#![allow(internal_features)]

pub mod heavy;
mod libdevice;
pub mod spin;
mod thread;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees a launch failure instead of a hang.
    unsafe { core::arch::nvptx::trap() }
}
