//! `spin_copy_f32`: after its wait, an exact copy. The reference is the identity: every output
//! element must be bit-identical to its input (NaN payloads included), every element of the
//! view written, nothing outside it.

use cudarc::driver::CudaSlice;
use proptest::prelude::*;
use std::time::Instant;
use streamline::ops::spin::spin_copy;
use streamline_testing::data::POISON_F32;
use streamline_tests::{gpu, gpu_property};

fn check(x: &[u32], x_off: usize, y_off: usize, spin_ns: u64) -> Result<(), TestCaseError> {
    let Some(gpu) = gpu() else { return Ok(()) };
    const GUARD: usize = 7;
    let s = gpu.stream();
    let n = x.len();
    let mut xb = vec![0.25f32; x_off + n + GUARD];
    for (d, &b) in xb[x_off..].iter_mut().zip(x) {
        *d = f32::from_bits(b);
    }
    let xd: CudaSlice<f32> = s.clone_htod(&xb).unwrap();
    let mut yd: CudaSlice<f32> = s
        .clone_htod(&vec![f32::from_bits(POISON_F32); y_off + n + GUARD])
        .unwrap();
    {
        let xv = xd.slice(x_off..x_off + n);
        let mut yv = yd.slice_mut(y_off..y_off + n);
        spin_copy(gpu, s, &xv, &mut yv, spin_ns).unwrap();
    }
    let y = s.clone_dtoh(&yd).unwrap();
    prop_assert!(
        y[..y_off]
            .iter()
            .chain(&y[y_off + n..])
            .all(|v| v.to_bits() == POISON_F32),
        "wrote outside the view"
    );
    for (i, (&want, got)) in x.iter().zip(&y[y_off..]).enumerate() {
        prop_assert_eq!(got.to_bits(), want, "element {} of {}", i, n);
    }
    Ok(())
}

#[test]
fn spin_copy_is_an_exact_copy() {
    let len = prop_oneof![
        3 => 0usize..40,
        2 => prop::sample::select(vec![1usize, 255, 256, 257, 1021, 65537]),
        1 => 40usize..300_000,
    ];
    gpu_property(
        48,
        (
            len.prop_flat_map(|n| prop::collection::vec(any::<u32>(), n)),
            0usize..5,
            0usize..5,
            prop::sample::select(vec![0u64, 1, 1000, 100_000]),
        ),
        |(x, xo, yo, spin)| check(&x, xo, yo, spin),
    );
}

/// The wait really happens on the device: 20 ms of spin take at least 20 ms.
#[test]
fn spin_copy_waits() {
    let Some(gpu) = gpu() else { return };
    let s = gpu.stream();
    let x: CudaSlice<f32> = s.clone_htod(&[1.0f32; 1]).unwrap();
    let mut y: CudaSlice<f32> = s.clone_htod(&[0.0f32; 1]).unwrap();
    s.synchronize().unwrap();
    let t = Instant::now();
    spin_copy(gpu, s, &x, &mut y, 20_000_000).unwrap();
    s.synchronize().unwrap();
    assert!(t.elapsed().as_secs_f64() >= 0.020, "{:?}", t.elapsed());
    assert_eq!(s.clone_dtoh(&y).unwrap(), [1.0]);
}

#[test]
fn spin_copy_rejects_bad_arguments() {
    let Some(gpu) = gpu() else { return };
    let s = gpu.stream();
    let x: CudaSlice<f32> = s.clone_htod(&[1.0f32; 4]).unwrap();
    let mut y: CudaSlice<f32> = s.clone_htod(&[0.0f32; 3]).unwrap();
    let e = spin_copy(gpu, s, &x, &mut y, 0).unwrap_err().to_string();
    assert!(e.contains("`y`"), "{e}");
    let mut y: CudaSlice<f32> = s.clone_htod(&[0.0f32; 4]).unwrap();
    let e = spin_copy(gpu, s, &x, &mut y, 11_000_000_000)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`spin_ns`"), "{e}");
    assert_eq!(s.clone_dtoh(&y).unwrap(), [0.0; 4], "nothing written");
}
