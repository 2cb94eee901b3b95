//! Builds a crate of Rust GPU kernels into PTX, one file per architecture, from any crate's
//! `build.rs` ([`Builder`]), with no CUDA toolkit or LLVM installed.
//!
//! rustc's `nvptx64-nvidia-cuda` target emits LLVM bitcode and hands it to a linker. The
//! standard library and the usual bitcode linker are not shipped for that target, so the build
//! compiles `core` itself (`-Zbuild-std=core`) and names *this crate's caller* as the linker: a
//! program that calls [`link::run_if_invoked_as_linker`] first thing in `main` turns into the
//! link step when rustc runs it. That step links libdevice in (`--only-needed`), internalizes
//! everything but the kernel entry points, optimizes and runs `llc` for the architecture.
//!
//! The kernels declare themselves in the PTX (`streamline_device::kernel!` leaves a record per
//! kernel); the build pairs every entry point with its declaration, writes the launch bounds and
//! a manifest of entry points and parameter layouts that the host checks when it loads the PTX.
//! The same code serves `cargo xtask build-kernels`, Streamline's own `build.rs` and a user's.

pub mod arch;
pub mod build;
pub mod link;
pub mod manifest;
pub mod ptxas;
pub mod template;
pub mod tools;

pub use arch::Arch;
pub use build::{check_arch, Builder, Built, BuiltArch, ARCHS_WITH_SM90A, DEFAULT_ARCHS};
pub use manifest::{BoundsInfo, EntryInfo, Manifest, ParamInfo};
