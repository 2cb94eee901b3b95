//! Safe launchers, one module per kernel family (the same names as in `gpu-kernels/src`).
//! Each checks lengths and shapes, computes the launch configuration with checked
//! conversions, takes outputs as `&mut` so cudarc's stream tracking orders the launch after
//! earlier work on them, and holds the only `unsafe` launch of its kernel.

pub mod heavy;
pub mod image;
pub mod matmul;
pub mod spin;
pub mod train;
