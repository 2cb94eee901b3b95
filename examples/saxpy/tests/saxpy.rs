//! The saxpy kernel against its CPU reference: the embedded PTX declares it with the host's
//! parameter layout (everywhere), and on a GPU every element of random inputs of awkward
//! lengths matches within the bound, with the guard zones around the output untouched.

use proptest::prelude::*;
use saxpy_kernels::saxpy as SAXPY;
use streamline::testing::{check_written, compare, gpu, gpu_property, poisoned};

#[test]
fn the_embedded_ptx_holds_the_declared_kernel() {
    for (arch, _, _) in saxpy::KERNELS.archs {
        let major = arch[3..4].parse().unwrap();
        let image = saxpy::KERNELS.image_for(major, 0).unwrap();
        let entry = image.entry(SAXPY).unwrap();
        assert_eq!(entry.params[0].size, 32);
    }
}

#[test]
fn saxpy_matches_the_reference() {
    const GUARD: usize = 7;
    let strategy = (
        prop_oneof![0usize..300, 1000usize..70_000],
        -4.0f32..4.0,
        any::<u64>(),
    );
    gpu_property(32, strategy, |(n, a, seed)| {
        let gpu = gpu().unwrap();
        let module = gpu.load(&saxpy::KERNELS).unwrap();
        let s = gpu.stream();
        let x: Vec<f32> = (0..n)
            .map(|i| ((i as u64 ^ seed) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let y: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.5).collect();
        let mut ybuf = poisoned(n, GUARD);
        ybuf[GUARD..GUARD + n].copy_from_slice(&y);
        let xd = s.clone_htod(&x).unwrap();
        let mut yd = s.clone_htod(&ybuf).unwrap();
        {
            let mut view = yd.slice_mut(GUARD..GUARD + n);
            saxpy::saxpy(&module, s, a, &xd, &mut view).unwrap();
        }
        let out = s.clone_dtoh(&yd).unwrap();
        let got = check_written(&out, GUARD).map_err(TestCaseError::fail)?;
        compare(got, &saxpy::reference(a, &x, &y), saxpy::TOLERANCE)
            .map_err(TestCaseError::fail)?;
        Ok(())
    });
}

#[test]
fn lengths_that_differ_are_refused() {
    let Some(gpu) = gpu() else { return };
    let module = gpu.load(&saxpy::KERNELS).unwrap();
    let s = gpu.stream();
    let x = s.clone_htod(&[1.0f32; 4]).unwrap();
    let mut y = s.clone_htod(&[1.0f32; 5]).unwrap();
    let e = saxpy::saxpy(&module, s, 1.0, &x, &mut y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`y`") && e.contains("differs"), "{e}");
}
