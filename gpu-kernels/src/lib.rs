//! Streamline's GPU kernels. Each module is one kernel family; every kernel is defined with
//! `streamline_device::kernel!` against its declaration in `streamline-abi`, so the host
//! launches exactly what is compiled here. Built for `nvptx64-nvidia-cuda` only.
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
pub mod augment_draw;
mod channels;
pub mod gaussian_blur;
pub mod heavy;
pub mod matmul;
pub mod normalize;
pub mod probe;
pub mod resize;
pub mod roi_align;
pub mod roi_align_backward;
pub mod rotate;
mod sampling;
pub mod spin;
pub mod to_float;
pub mod train;
