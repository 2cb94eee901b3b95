//! Safe launchers, one module per kernel family (the same names as in `gpu-kernels/src`).
//! Each checks lengths and shapes, computes the launch configuration with checked
//! conversions, takes outputs as `&mut` so cudarc's stream tracking orders the launch after
//! earlier work on them, and holds the only `unsafe` launch of its kernel: most through
//! [`Module::prepare`](crate::Module::prepare), the path a user's kernel takes.

pub mod heavy;
pub mod hgemm;
pub mod image;
pub mod matmul;
pub mod probe;
pub mod spin;
pub mod train;

/// The error of an elementwise launcher (ours or a user's) whose output `y` (of `y_len`
/// elements) does not match its input `x` (of `x_len`).
pub fn check_same_len(x_len: usize, y_len: usize) -> crate::Result<()> {
    if x_len != y_len {
        return Err(crate::Error::arg(
            "y",
            format!("length {y_len} differs from the length of x, {x_len}"),
        ));
    }
    Ok(())
}
