//! Streamline: custom GPU kernels written in Rust, launched over CUDA streams.
//!
//! - [`runtime`]: finds the driver, picks and validates embedded or on-disk machine code and PTX (ours and
//!   yours, see [`include_kernels!`]), loads modules, checks and launches any [`Kernel`].
//! - [`ops`]: one safe launcher per kernel family.
//! - [`reference`]: independent CPU references and the error bounds the kernels must meet.
//! - [`timing`]: CUDA-event timing and the statistics the benchmarks report.
//! - [`data`]: random inputs and output poisoning for tests and benchmarks.
//! - [`testing`]: property-test helpers for kernels, ours and yours.
//! - [`engine`]: stream pools, cross-stream buffer safety, pipelines, CUDA graphs, timelines.

pub mod data;
pub mod engine;
pub mod error;
pub mod ops;
pub mod reference;
pub mod runtime;
pub mod spec;
pub mod testing;
pub mod timing;

// `include_kernels!` names the crate `::streamline`, here too.
extern crate self as streamline;

pub use cudarc;
pub use error::{Error, Result};
pub use runtime::{EmbeddedArch, EmbeddedModule, Gpu, Launch, LaunchConfig, Module};
pub use streamline_device::{Kernel, LaunchBounds};
