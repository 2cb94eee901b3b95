//! Streamline's test suite: every kernel against its independent CPU reference, the launch and
//! kernel-image checks, the engine's cross-stream safety, pipelines and a project written from
//! the docs. One test binary of modules (GPU tests skip without a driver); run a part with a
//! module's name as the filter, e.g. `cargo test -p streamline-tests image::`.

mod engine;
mod heavy;
mod hgemm;
mod image;
mod jpeg;
mod kernel_image;
mod launch;
mod matmul;
mod matmul_after_sgd;
mod matmul_to_bf16;
mod multi;
mod out_of_tree;
mod pipeline_props;
mod probe;
mod spin;
mod streaming;
mod train;
