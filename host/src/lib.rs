//! Streamline: custom GPU kernels written in Rust, launched over CUDA streams.
//!
//! - [`runtime`]: finds the driver, picks and validates the embedded PTX, loads the kernels.
//! - [`ops`]: one safe launcher per kernel family.
//! - [`reference`]: independent CPU references and the error bounds the kernels must meet.
//! - [`timing`]: CUDA-event timing and the statistics the benchmarks report.
//! - [`data`]: random inputs and output poisoning for tests and benchmarks.
//! - [`engine`]: stream pools, cross-stream buffer safety, pipelines, CUDA graphs, timelines.

pub mod data;
pub mod engine;
pub mod error;
pub mod ops;
pub mod reference;
pub mod runtime;
pub mod scenarios;
pub mod timing;

pub use error::{Error, Result};
pub use runtime::Gpu;
