//! The heavy kernel against the f64 CPU reference (`streamline_testing::reference::heavy`, whose module
//! documentation holds the error analysis behind the bound used here).
//!
//! Each GPU case runs on views at random element offsets inside larger buffers, so every
//! alignment of input and output (and mismatched alignments) is exercised; the output buffer is
//! poisoned first and its guard elements around the view must stay poisoned.

use cudarc::driver::CudaSlice;
use half::{bf16, f16};
use proptest::prelude::*;
use streamline::ops::heavy::heavy;
use streamline_testing::data::HeavyHost;
use streamline_tests::{gpu, gpu_property};

const GUARD: usize = 19;

/// Runs the kernel on `x` placed at `x_off`, output at `y_off`, and checks every element.
fn check_gpu<T: HeavyHost + std::fmt::Debug>(
    x: &[T],
    x_off: usize,
    y_off: usize,
) -> Result<(), TestCaseError> {
    let Some(gpu) = gpu() else { return Ok(()) };
    let s = gpu.stream();
    let n = x.len();
    let mut xbuf = vec![T::from_f32(0.5); x_off + n + GUARD];
    xbuf[x_off..x_off + n].copy_from_slice(x);
    let xd: CudaSlice<T> = s.clone_htod(&xbuf).unwrap();
    let mut yd: CudaSlice<T> = s.clone_htod(&vec![T::poison(); y_off + n + GUARD]).unwrap();
    {
        let xv = xd.slice(x_off..x_off + n);
        let mut yv = yd.slice_mut(y_off..y_off + n);
        heavy(gpu, s, &xv, &mut yv).unwrap();
    }
    let y = s.clone_dtoh(&yd).unwrap();
    prop_assert!(
        y[..y_off]
            .iter()
            .chain(&y[y_off + n..])
            .all(|v| v.is_poison()),
        "wrote outside the output view"
    );
    let out = &y[y_off..y_off + n];
    let unwritten = out.iter().filter(|v| v.is_poison()).count();
    prop_assert_eq!(unwritten, 0, "{} of {} outputs unwritten", unwritten, n);
    let c = T::compare(x, out);
    prop_assert!(
        c.failures == 0,
        "{} of {} outside the bound; first (index, x, got, want) = {:?}",
        c.failures,
        n,
        c.first_failure
    );
    Ok(())
}

/// Lengths: empty, tiny, primes, around the vector widths and the block size, and large.
fn length() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..=40,
        3 => prop::sample::select(vec![1usize, 2, 3, 5, 7, 31, 127, 255, 256, 257, 1021, 4093, 65537, 1_000_003]),
        3 => 41usize..20_000,
        1 => 100_000usize..2_000_000,
    ]
}

/// f32 inputs: the seed's normal range, larger magnitudes up to the Payne-Hanek path, any bit
/// pattern (huge, subnormal, NaN, ±inf), special values and points next to the poles of tan.
fn f32_value() -> impl Strategy<Value = f32> + Clone {
    let specials = vec![
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        1e-40,
        -1e-45,
        f32::MAX,
        f32::MIN,
        105_615.0,
        105_616.0,
        -3e5,
        6.9e12,
        7.0e12,
        2e19,
    ];
    prop_oneof![
        4 => -4.0f32..4.0,
        2 => -1e4f32..1e4,
        1 => -1e7f32..1e7,
        2 => any::<u32>().prop_map(f32::from_bits),
        1 => prop::sample::select(specials),
        1 => (0u32..20_000, -2i32..=2).prop_map(|(k, d)| {
            // The f32 next to the pole (k + 1/2)·π, moved by d ulps.
            let p = ((k as f64 + 0.5) * std::f64::consts::PI) as f32;
            f32::from_bits((p.to_bits() as i32 + d) as u32)
        }),
    ]
}

/// f16 inputs: any bit pattern (all f16 values, NaN and ±inf included) and the normal range.
fn f16_value() -> impl Strategy<Value = f16> + Clone {
    prop_oneof![
        2 => any::<u16>().prop_map(f16::from_bits),
        2 => (-4.0f32..4.0).prop_map(f16::from_f32),
        1 => (-200.0f32..200.0).prop_map(f16::from_f32),
    ]
}

/// bf16 inputs: any bit pattern (every bf16 value, NaN and ±inf included) and the normal range.
fn bf16_value() -> impl Strategy<Value = bf16> + Clone {
    prop_oneof![
        2 => any::<u16>().prop_map(bf16::from_bits),
        2 => (-4.0f32..4.0).prop_map(bf16::from_f32),
        1 => (-200.0f32..200.0).prop_map(bf16::from_f32),
    ]
}

fn vec_of<T: std::fmt::Debug>(
    value: impl Strategy<Value = T> + Clone,
) -> impl Strategy<Value = Vec<T>> {
    length().prop_flat_map(move |n| prop::collection::vec(value.clone(), n))
}

#[test]
fn heavy_f32_matches_reference() {
    gpu_property(
        64,
        (vec_of(f32_value()), 0usize..9, 0usize..9),
        |(x, xo, yo)| check_gpu(&x, xo, yo),
    );
}

#[test]
fn heavy_f16_matches_reference() {
    gpu_property(
        64,
        (vec_of(f16_value()), 0usize..17, 0usize..17),
        |(x, xo, yo)| check_gpu(&x, xo, yo),
    );
}

#[test]
fn heavy_bf16_matches_reference() {
    gpu_property(
        64,
        (vec_of(bf16_value()), 0usize..17, 0usize..17),
        |(x, xo, yo)| check_gpu(&x, xo, yo),
    );
}

/// Every bf16 value, at once.
#[test]
fn heavy_bf16_every_value() {
    let x: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
    check_gpu(&x, 0, 0).unwrap();
}

/// A large array (past any L2) of the seed's normal inputs, misaligned output.
#[test]
fn heavy_large_normal_inputs() {
    let n = (1 << 25) + 3;
    check_gpu(&f32::randn(n, 11), 0, 1).unwrap();
    check_gpu(&f16::randn(n, 12), 3, 3).unwrap();
    check_gpu(&bf16::randn(n, 13), 5, 2).unwrap();
}

/// Every f16 value, at once.
#[test]
fn heavy_f16_every_value() {
    let x: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    check_gpu(&x, 0, 0).unwrap();
}

/// Mismatched lengths are refused with an error naming the argument, before any launch.
#[test]
fn heavy_rejects_mismatched_lengths() {
    let Some(gpu) = gpu() else { return };
    let s = gpu.stream();
    let x: CudaSlice<f32> = s.clone_htod(&[1.0f32; 10]).unwrap();
    let mut y: CudaSlice<f32> = s.clone_htod(&[f32::poison(); 9]).unwrap();
    let e = heavy(gpu, s, &x, &mut y).unwrap_err().to_string();
    assert!(e.contains("`y`") && e.contains("length 9"), "{e}");
    assert!(
        s.clone_dtoh(&y).unwrap().iter().all(|v| v.is_poison()),
        "nothing may be written"
    );
}
