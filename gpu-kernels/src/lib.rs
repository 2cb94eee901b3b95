//! Streamline's GPU kernels. Each module is one kernel family; its parameter structs come from
//! `streamline-abi` so the host launches exactly what is compiled here.
#![no_std]
#![feature(
    abi_ptx,
    stdarch_nvptx,
    f16,
    asm_experimental_arch,
    core_intrinsics,
    gpu_intrinsics,
    gpu_launch_sized_workgroup_mem
)]
#![allow(internal_features)]

pub mod augment;
mod channels;
pub mod gaussian_blur;
pub mod heavy;
mod libdevice;
pub mod matmul;
mod mem;
pub mod normalize;
pub mod resize;
pub mod roi_align;
pub mod rotate;
mod sampling;
pub mod spin;
mod thread;
pub mod to_float;
pub mod train;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees a launch failure instead of a hang.
    unsafe { core::arch::nvptx::trap() }
}
