//! Shared helpers of the property tests: the public ones of `streamline::testing`.

pub use streamline::testing::{gpu, gpu_config, gpu_property};
