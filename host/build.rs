//! Builds Streamline's own kernels (`gpu-kernels/`) from the current sources and embeds their
//! PTX in the library (`include_kernels!("gpu_kernels")`), exactly as a user's `build.rs`
//! builds theirs.

fn main() {
    streamline_builder::Builder::new("../gpu-kernels")
        .default_archs(streamline_builder::ARCHS_WITH_SM90A)
        .build_or_exit();
}
