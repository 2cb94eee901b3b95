//! Builds `kernels/` (both instances of the generic kernel) to PTX and machine code;
//! `include_kernels!("softmax_kernels")` picks it up.
fn main() {
    streamline_builder::Builder::new("kernels").build_or_exit();
}
