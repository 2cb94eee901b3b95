//! What an operation is asked to do, apart from running it: shapes, options, random draws and
//! the checks that need no device. The launchers in [`crate::ops`] and the CPU references in
//! `streamline_testing::reference` both depend on this module and not on each other; the CLI and
//! the Python package call the same checks.

pub mod image;
pub mod matmul;
