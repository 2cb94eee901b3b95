//! Shared helpers of the property tests: the public ones of `streamline_testing`, and poisoned
//! output buffers with guard zones.

use cudarc::driver::CudaSlice;
use proptest::prelude::*;
use streamline_testing::data::POISON_F32;
pub use streamline_testing::{gpu, gpu_config, gpu_property};

/// Poisoned values on each side of an output, which a kernel must leave untouched.
pub const GUARD: usize = 13;

/// The f32 poison: an output element nothing wrote.
pub fn poison() -> f32 {
    f32::from_bits(POISON_F32)
}

/// A poisoned device buffer of `n` values with guard zones on both sides.
pub fn poisoned(n: usize) -> CudaSlice<f32> {
    let g = gpu().expect("GPU checked by the caller");
    g.stream()
        .clone_htod(&vec![poison(); n + 2 * GUARD])
        .unwrap()
}

/// Downloads the `n` values between the guards, checking the guards are intact and every
/// element was written.
pub fn fetch(buf: &CudaSlice<f32>, n: usize) -> Result<Vec<f32>, TestCaseError> {
    fetch_shifted(buf, n, 0)
}

/// [`fetch`] for an output written `shift` values past the front guard of a buffer of
/// [`poisoned`]`(n + shift)`: those values are checked untouched as well.
pub fn fetch_shifted(
    buf: &CudaSlice<f32>,
    n: usize,
    shift: usize,
) -> Result<Vec<f32>, TestCaseError> {
    let g = gpu().expect("GPU checked by the caller");
    let all = g.stream().clone_dtoh(buf).unwrap();
    let front = GUARD + shift;
    prop_assert!(
        all[..front]
            .iter()
            .chain(&all[front + n..])
            .all(|v| v.to_bits() == POISON_F32),
        "wrote outside the output"
    );
    let out = all[front..front + n].to_vec();
    let unwritten = out.iter().filter(|v| v.to_bits() == POISON_F32).count();
    prop_assert_eq!(unwritten, 0, "{} of {} outputs unwritten", unwritten, n);
    Ok(out)
}

/// Whether `a` and `b` hold the same values bit for bit (NaN payloads and the sign of zero
/// included), for results that must not differ by a rounding.
pub fn bitwise_eq(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// `n` pseudo-random bytes from `seed`, every value reachable.
pub fn bytes(n: usize, seed: u64) -> Vec<u8> {
    (0..n)
        .map(|i| (seed.wrapping_mul(i as u64 + 1) >> 17) as u8)
        .collect()
}
