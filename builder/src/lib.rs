//! Builds Streamline's GPU kernels (`gpu-kernels/`, Rust) into PTX, one file per architecture.
//!
//! rustc's `nvptx64-nvidia-cuda` target emits LLVM bitcode and hands it to a linker. The
//! standard library and the usual bitcode linker are not shipped for that target, so the build
//! compiles `core` itself (`-Zbuild-std=core`) and names *this crate's caller* as the linker: a
//! program that calls [`link::run_if_invoked_as_linker`] first thing in `main` turns into the
//! link step when rustc runs it. That step links libdevice in (`--only-needed`), internalizes
//! everything but the kernel entry points, optimizes and runs `llc` for the architecture.
//!
//! The same code serves `cargo xtask build-kernels` and the host's `build.rs`, so the PTX that
//! the `streamline` binary embeds is always built from the current sources.

pub mod build;
pub mod link;
pub mod manifest;
pub mod ptxas;
pub mod tools;

pub use build::{build_kernels, BuildOptions, BuiltArch, DEFAULT_ARCHS};
pub use manifest::{source_hash, EntryInfo, Manifest, ParamInfo};
