//! Independent CPU references, one module per kernel family: plain loops in f64, written from
//! the operation's definition and sharing no code with the kernels.

pub mod heavy;
pub mod hgemm;
pub mod image;
pub mod matmul;
pub mod probe;
pub mod train;
