//! Builds `kernels/` to PTX for the GPUs we embed; `include_kernels!("saxpy_kernels")` picks it up.
fn main() {
    streamline_builder::Builder::new("kernels").build_or_exit();
}
