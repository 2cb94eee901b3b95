//! Builds `kernels/` to PTX; `include_kernels!("color_jitter_kernels")` embeds it.
fn main() {
    streamline_builder::Builder::new("kernels").build_or_exit();
}
