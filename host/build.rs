//! Builds Streamline's own kernels (`gpu-kernels/`) from the current sources and embeds their
//! PTX in the library (`include_kernels!("gpu_kernels")`), exactly as a user's `build.rs`
//! builds theirs.

fn main() {
    streamline_builder::Builder::new("../gpu-kernels").build_or_exit();
}
