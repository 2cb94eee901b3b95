//! The saxpy kernel against its CPU reference: the embedded code declares it with the host's
//! parameter layout (everywhere), and on a GPU every element of random inputs of awkward
//! lengths matches within the bound, with the guard zones around the output untouched.

use proptest::prelude::*;
use saxpy_kernels::saxpy as SAXPY;
use streamline_testing::{check_written, compare, gpu, gpu_property, poisoned};

#[test]
fn the_embedded_code_holds_the_declared_kernel() {
    for a in saxpy::KERNELS.archs {
        let major = a.arch[3..4].parse().unwrap();
        let image = saxpy::KERNELS.image_for_driver(major, 0, None).unwrap();
        assert!(image.cubin.is_some(), "{} has machine code", a.arch);
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

/// A buffer written by one of Streamline's kernels on one stream and read by the user's kernel
/// on another is waited for: `spin_copy` holds its write for 20 ms, and saxpy, queued right
/// after on another stream of the pool, still sees the copied values.
#[test]
fn a_write_on_another_stream_is_waited_for() {
    use streamline::engine::{DeviceBuffer, StreamPool};
    use streamline::ops::spin::spin_copy;
    let Some(gpu) = gpu() else { return };
    let module = gpu.load(&saxpy::KERNELS).unwrap();
    let pool = StreamPool::with_streams(gpu, 2).unwrap();
    let n = 100_000;
    let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let src_d = DeviceBuffer::from_slice(&pool, 0, &src).unwrap();
    let mut x = DeviceBuffer::<f32>::zeros(&pool, 0, n).unwrap();
    let mut y = DeviceBuffer::from_slice(&pool, 1, &vec![1.0f32; n]).unwrap();
    pool.synchronize().unwrap();
    let (a, b) = (pool.stream(0).unwrap(), pool.stream(1).unwrap());
    spin_copy(gpu, a, &src_d, &mut x, 20_000_000).unwrap();
    saxpy::saxpy(&module, b, 2.0, &x, &mut y).unwrap();
    let got = y.to_vec(b).unwrap();
    let want = saxpy::reference(2.0, &src, &vec![1.0; n]);
    compare(&got, &want, saxpy::TOLERANCE).unwrap();
}
