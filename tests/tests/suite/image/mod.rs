//! The image kernels against their CPU references (`streamline_testing::reference::image`, whose
//! module documentation holds the error analysis the tolerances below come from), plus
//! CPU-only properties of the references and the argument checks that run before any device
//! work.
//!
//! Every GPU case poisons its output (and guard zones around it) first and checks that every
//! output element was written and nothing outside it.

use cudarc::driver::{CudaSlice, CudaView};
use proptest::prelude::*;
use streamline::ops::image::*;
use streamline::runtime::Gpu;
use streamline_testing::data::POISON_F32;
use streamline_testing::reference::image as reference;
use streamline_tests::{
    bitwise_eq, bytes, fetch, fetch_shifted, gpu, gpu_property, poisoned, GUARD,
};

/// f32 unit roundoff.
const U: f64 = 1.0 / (1u64 << 24) as f64;
/// Every `got[i]` within `tol` of `want[i]`.
fn close(got: &[f32], want: &[f64], tol: f64, what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        prop_assert!(
            ((*g as f64) - w).abs() <= tol,
            "{}: element {} is {} but the reference gives {} (tolerance {})",
            what,
            i,
            g,
            w,
            tol
        );
    }
    Ok(())
}

fn max_abs(v: &[f32]) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs() as f64))
}

fn upload(v: &[f32]) -> CudaSlice<f32> {
    gpu().unwrap().stream().clone_htod(v).unwrap()
}

/// Image extents: 1, 2, 3, primes, around the 32 x 16 patch and the 32 x 32 tile, and large.
fn extent() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => prop::sample::select(vec![1usize, 2, 3, 5, 7, 13, 16, 17, 31, 32, 33, 47, 64, 97]),
        1 => 1usize..80,
        1 => prop::sample::select(vec![128usize, 131, 256]),
    ]
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        1usize..=3,
        prop::sample::select(vec![1usize, 3, 4]),
        extent(),
        extent(),
    )
        .prop_map(|(n, c, h, w)| Shape::new(n, c, h, w))
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    streamline_testing::data::randn_f32(n, seed)
}

mod augment;
mod capture;
mod checks;
mod cpu;
mod gaussian_blur;
mod layouts;
mod normalize;
mod ragged;
mod resize;
mod roi_align;
mod rotate;
mod to_float;
