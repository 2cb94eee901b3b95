//! Streamline: custom GPU kernels written in Rust, launched over CUDA streams.
//!
//! - [`runtime`]: finds the driver, picks and validates embedded or on-disk machine code and PTX (ours and
//!   yours, see [`include_kernels!`]), loads modules, checks and launches any [`Kernel`].
//! - [`ops`]: one safe launcher per kernel family.
//! - [`spec`]: what an operation is asked to do, and the checks that need no device.
//! - [`timing`]: CUDA-event timing and the statistics the benchmarks report.
//! - [`engine`]: stream pools, cross-stream buffer safety, pipelines, CUDA graphs, timelines.
//! - [`jpeg`]: JPEG files decoded on the GPU (nvJPEG) into ragged batches.
//! - [`multi`]: several GPUs, of one process or of many: collectives over NCCL on engine
//!   streams and buffers.
//!
//! This is the crate a program or a kernel crate depends on. Testing lives beside it, in
//! `streamline-testing` (property-test helpers, the CPU references of our kernels, random
//! inputs), the seeds' scenarios in `streamline-scenarios` and the `streamline` command in
//! `streamline-cli`, so that depending on the library builds none of their dependencies.

pub mod engine;
pub mod error;
pub mod jpeg;
pub mod multi;
pub mod ops;
pub mod runtime;
pub mod spec;
pub mod timing;

// `include_kernels!` names the crate `::streamline`, here too.
extern crate self as streamline;

pub use cudarc;
pub use error::{Error, Result};
pub use runtime::{EmbeddedArch, EmbeddedModule, Gpu, Launch, LaunchConfig, Module};
pub use streamline_device::{DevPtr, DevPtrMut, Kernel, LaunchBounds};
