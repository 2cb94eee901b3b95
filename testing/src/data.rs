//! Inputs and output checks shared by the tests, the CLI and the benchmarks.

use half::{bf16, f16};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Bit pattern written into outputs before a run: a quiet NaN with a payload that no
/// arithmetic produces (the GPU's NaNs carry the canonical payload), so an unwritten element
/// is told apart from a computed NaN.
pub const POISON_F32: u32 = 0x7FA5_A5A5;
/// The f16 poison: a NaN with a payload the conversion from f32 never produces.
pub const POISON_F16: u16 = 0x7E5A;
/// The bf16 poison: a NaN no arithmetic produces.
pub const POISON_BF16: u16 = 0x7FA5;

/// One standard normal sample (Box–Muller), the distribution of `torch.randn`.
fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = 1.0 - rng.gen::<f64>();
    let u2: f64 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// `n` standard-normal values scaled by `1 / sqrt(fan_in)`: weights of a layer with `fan_in`
/// inputs whose outputs keep unit scale.
pub fn fan_in_weights(n: usize, fan_in: usize, seed: u64) -> Vec<f32> {
    let f = 1.0 / (fan_in as f32).sqrt();
    randn_f32(n, seed).into_iter().map(|v| v * f).collect()
}

/// `n` standard-normal f32 values (never all zero), deterministic in `seed`.
pub fn randn_f32(n: usize, seed: u64) -> Vec<f32> {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 20;
    let mut v = vec![0f32; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, c)| {
        let mut rng = StdRng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for x in c {
            *x = standard_normal(&mut rng) as f32;
        }
    });
    v
}

/// `n` standard-normal f16 values, deterministic in `seed`.
pub fn randn_f16(n: usize, seed: u64) -> Vec<f16> {
    randn_f32(n, seed).into_iter().map(f16::from_f32).collect()
}

/// Element types the heavy kernel is tested and benchmarked with, as the host sees them.
pub trait HeavyHost: streamline::ops::heavy::HeavyElement + bytemuck::Pod + Send + Sync {
    /// `n` standard-normal values.
    fn randn(n: usize, seed: u64) -> Vec<Self>;
    /// The poison value (see [`POISON_F32`]).
    fn poison() -> Self;
    /// Whether `self` still holds the poison bit pattern.
    fn is_poison(&self) -> bool;
    /// Element-by-element comparison with the CPU reference.
    fn compare(x: &[Self], y: &[Self]) -> crate::reference::heavy::Comparison;
    /// Converts from f32 (rounding to nearest for f16).
    fn from_f32(v: f32) -> Self;
}

impl HeavyHost for f32 {
    fn randn(n: usize, seed: u64) -> Vec<Self> {
        randn_f32(n, seed)
    }
    fn poison() -> Self {
        f32::from_bits(POISON_F32)
    }
    fn is_poison(&self) -> bool {
        self.to_bits() == POISON_F32
    }
    fn compare(x: &[Self], y: &[Self]) -> crate::reference::heavy::Comparison {
        crate::reference::heavy::compare_f32(x, y)
    }
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl HeavyHost for f16 {
    fn randn(n: usize, seed: u64) -> Vec<Self> {
        randn_f16(n, seed)
    }
    fn poison() -> Self {
        f16::from_bits(POISON_F16)
    }
    fn is_poison(&self) -> bool {
        self.to_bits() == POISON_F16
    }
    fn compare(x: &[Self], y: &[Self]) -> crate::reference::heavy::Comparison {
        crate::reference::heavy::compare_f16(x, y)
    }
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
}

impl HeavyHost for bf16 {
    fn randn(n: usize, seed: u64) -> Vec<Self> {
        randn_f32(n, seed).into_iter().map(bf16::from_f32).collect()
    }
    fn poison() -> Self {
        bf16::from_bits(POISON_BF16)
    }
    fn is_poison(&self) -> bool {
        self.to_bits() == POISON_BF16
    }
    fn compare(x: &[Self], y: &[Self]) -> crate::reference::heavy::Comparison {
        crate::reference::heavy::compare_bf16(x, y)
    }
    fn from_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
}

/// Number of elements of `y` still holding the poison value.
pub fn count_unwritten<T: HeavyHost>(y: &[T]) -> usize {
    use rayon::prelude::*;
    y.par_iter().filter(|v| v.is_poison()).count()
}
