//! The training-step kernels against their CPU references (`streamline_testing::reference::train`,
//! whose error analysis gives the tolerances): every output element checked, outputs poisoned
//! with guard zones on both sides that must stay untouched, over awkward lengths and shapes
//! (empty, 1, primes, non-multiples of the block and of the transpose tile).

use cudarc::driver::CudaSlice;
use half::bf16;
use proptest::prelude::*;
use streamline::ops::train::{mse_grad, relu, relu_backward, round_bf16, sgd, sgd_pair, transpose};
use streamline_testing::reference::train as reference;
use streamline_tests::{fetch, gpu, gpu_property, poisoned, GUARD};

fn values(n: impl Strategy<Value = usize>) -> impl Strategy<Value = Vec<f32>> {
    n.prop_flat_map(|n| {
        prop::collection::vec(
            prop_oneof![
                4 => -1e3f32..1e3,
                1 => Just(0.0f32),
                1 => Just(-0.0f32),
                1 => -1e-38f32..1e-38,
            ],
            n,
        )
    })
}

fn lengths() -> impl Strategy<Value = usize> {
    prop_oneof![
        2 => 1usize..40,
        2 => prop::sample::select(vec![1usize, 255, 256, 257, 1021, 65_537]),
        1 => 40usize..200_000,
    ]
}

#[test]
fn relu_and_its_gradient_match_bit_for_bit() {
    gpu_property(
        32,
        lengths().prop_flat_map(|n| (values(Just(n)), values(Just(n)))),
        |(x, dy)| {
            let g = gpu().unwrap();
            let s = g.stream();
            let n = x.len();
            let xd = s.clone_htod(&x).unwrap();
            let dyd = s.clone_htod(&dy).unwrap();
            let mut y = poisoned(n);
            let mut dx = poisoned(n);
            {
                let mut yv = y.slice_mut(GUARD..GUARD + n);
                relu(g, s, &xd, &mut yv).unwrap();
                let mut dv = dx.slice_mut(GUARD..GUARD + n);
                relu_backward(g, s, &dyd, &xd, &mut dv).unwrap();
            }
            let (y, dx) = (fetch(&y, n)?, fetch(&dx, n)?);
            for i in 0..n {
                prop_assert_eq!(
                    y[i].to_bits(),
                    reference::relu(x[i]).to_bits(),
                    "relu at {}",
                    i
                );
                prop_assert_eq!(
                    dx[i].to_bits(),
                    reference::relu_backward(dy[i], x[i]).to_bits(),
                    "relu_backward at {}",
                    i
                );
            }
            Ok(())
        },
    );
}

#[test]
fn mse_grad_and_sgd_within_their_bounds() {
    gpu_property(
        32,
        (
            lengths().prop_flat_map(|n| (values(Just(n)), values(Just(n)))),
            prop_oneof![Just(2.0f32 / 7.0), 1e-6f32..10.0, -10.0f32..-1e-6],
        ),
        |((y, t), k)| {
            let g = gpu().unwrap();
            let s = g.stream();
            let n = y.len();
            let yd = s.clone_htod(&y).unwrap();
            let td = s.clone_htod(&t).unwrap();
            let mut d = poisoned(n);
            let mut w = s.clone_htod(&y).unwrap();
            {
                let mut dv = d.slice_mut(GUARD..GUARD + n);
                mse_grad(g, s, &yd, &td, k, &mut dv).unwrap();
                sgd(g, s, &mut w, &td, k).unwrap();
            }
            let d = fetch(&d, n)?;
            let w = s.clone_dtoh(&w).unwrap();
            for i in 0..n {
                let (want, bound) = reference::mse_grad(y[i], t[i], k);
                prop_assert!(
                    ((d[i] as f64) - want).abs() <= bound,
                    "mse_grad at {}: {} vs {} (bound {})",
                    i,
                    d[i],
                    want,
                    bound
                );
                let (want, bound) = reference::sgd(y[i], t[i], k);
                prop_assert!(
                    ((w[i] as f64) - want).abs() <= bound,
                    "sgd at {}: {} vs {} (bound {})",
                    i,
                    w[i],
                    want,
                    bound
                );
            }
            Ok(())
        },
    );
}

#[test]
fn round_bf16_is_exact_and_sgd_by_a_bf16_gradient_within_its_bound() {
    // A NaN: never the rounding of the (finite) inputs, so an element left at it was not written.
    const POISON: u16 = 0x7fc1;
    gpu_property(
        32,
        (
            lengths().prop_flat_map(|n| (values(Just(n)), values(Just(n)))),
            prop_oneof![Just(0.1f32), 1e-6f32..10.0, -10.0f32..-1e-6],
        ),
        |((x, w0), lr)| {
            // Ties both ways (also among the subnormals) and overflow, in front of every case.
            let edges = [
                0x3f80_8000,
                0x3f81_8000,
                0x0000_8000,
                0x0001_8000,
                0x7f7f_8000,
            ]
            .map(f32::from_bits)
            .into_iter()
            .chain([f32::MAX, -0.0, f32::INFINITY]);
            let x: Vec<f32> = edges.clone().chain(x).collect();
            let w0: Vec<f32> = edges.map(|_| 1.0).chain(w0).collect();
            let g = gpu().unwrap();
            let s = g.stream();
            let n = x.len();
            let xd = s.clone_htod(&x).unwrap();
            let mut y = s
                .clone_htod(&vec![bf16::from_bits(POISON); n + 2 * GUARD])
                .unwrap();
            let mut w = s.clone_htod(&w0).unwrap();
            {
                let mut yv = y.slice_mut(GUARD..GUARD + n);
                round_bf16(g, s, &xd, &mut yv).unwrap();
                sgd(g, s, &mut w, &yv, lr).unwrap();
            }
            let y: Vec<u16> = s
                .clone_dtoh(&y)
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            let w = s.clone_dtoh(&w).unwrap();
            prop_assert!(
                y[..GUARD]
                    .iter()
                    .chain(&y[GUARD + n..])
                    .all(|&b| b == POISON),
                "a guard was written"
            );
            for i in 0..n {
                let got = y[GUARD + i];
                prop_assert_eq!(got, reference::round_bf16(x[i]), "round_bf16 at {}", i);
                let gv = reference::bf16_value(got) as f32;
                if !gv.is_finite() {
                    continue;
                }
                let (want, bound) = reference::sgd(w0[i], gv, lr);
                prop_assert!(
                    ((w[i] as f64) - want).abs() <= bound,
                    "sgd by bf16 at {}: {} vs {} (bound {})",
                    i,
                    w[i],
                    want,
                    bound
                );
            }
            Ok(())
        },
    );
}

/// The update by the mean of two gradients, f32 and bf16: within its bound of the f64 update,
/// the same bits whichever gradient comes first (as two GPUs pass them), and nothing written
/// around the weights it updates (guard zones of a marked value on both sides).
#[test]
fn sgd_pair_within_its_bound_and_the_same_bits_either_way() {
    gpu_property(
        32,
        (
            lengths().prop_flat_map(|n| (values(Just(n)), values(Just(n)), values(Just(n)))),
            prop_oneof![Just(0.1f32), 1e-6f32..10.0, -10.0f32..-1e-6],
            any::<bool>(),
        ),
        |((w0, a, b), lr, half)| {
            let g = gpu().unwrap();
            let s = g.stream();
            let n = w0.len();
            // The gradients as the kernel reads them: bf16 ones widened back exactly.
            let widen = |v: &[f32]| -> Vec<f32> {
                if half {
                    v.iter().map(|&x| bf16::from_f32(x).to_f32()).collect()
                } else {
                    v.to_vec()
                }
            };
            let (a, b) = (widen(&a), widen(&b));
            const MARK: f32 = 7.25;
            let around: Vec<f32> = [MARK; GUARD]
                .into_iter()
                .chain(w0.iter().copied())
                .chain([MARK; GUARD])
                .collect();
            let mut ab = s.clone_htod(&around).unwrap();
            let mut ba = s.clone_htod(&around).unwrap();
            {
                let mut abv = ab.slice_mut(GUARD..GUARD + n);
                let mut bav = ba.slice_mut(GUARD..GUARD + n);
                if half {
                    let to =
                        |v: &[f32]| -> Vec<bf16> { v.iter().map(|&x| bf16::from_f32(x)).collect() };
                    let (ad, bd) = (
                        s.clone_htod(&to(&a)).unwrap(),
                        s.clone_htod(&to(&b)).unwrap(),
                    );
                    sgd_pair(g, s, &mut abv, (&ad, &bd), lr).unwrap();
                    sgd_pair(g, s, &mut bav, (&bd, &ad), lr).unwrap();
                } else {
                    let (ad, bd) = (s.clone_htod(&a).unwrap(), s.clone_htod(&b).unwrap());
                    sgd_pair(g, s, &mut abv, (&ad, &bd), lr).unwrap();
                    sgd_pair(g, s, &mut bav, (&bd, &ad), lr).unwrap();
                }
            }
            let ab = s.clone_dtoh(&ab).unwrap();
            let ba = s.clone_dtoh(&ba).unwrap();
            for w in [&ab, &ba] {
                prop_assert!(
                    w[..GUARD].iter().chain(&w[GUARD + n..]).all(|&v| v == MARK),
                    "a guard was written"
                );
            }
            for i in 0..n {
                let got = ab[GUARD + i];
                prop_assert_eq!(got.to_bits(), ba[GUARD + i].to_bits(), "order at {}", i);
                let (want, bound) = reference::sgd_pair(w0[i], (a[i], b[i]), lr);
                prop_assert!(
                    ((got as f64) - want).abs() <= bound,
                    "sgd_pair at {}: {} vs {} (bound {})",
                    i,
                    got,
                    want,
                    bound
                );
            }
            Ok(())
        },
    );
}

#[test]
fn transpose_is_exact_over_awkward_shapes() {
    let dim = prop_oneof![
        2 => 1usize..70,
        1 => prop::sample::select(vec![1usize, 31, 32, 33, 63, 64, 65, 97, 129, 257, 1031]),
    ];
    gpu_property(48, (dim.clone(), dim), |(rows, cols)| {
        let g = gpu().unwrap();
        let s = g.stream();
        let n = rows * cols;
        let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
        let xd = s.clone_htod(&x).unwrap();
        let mut y = poisoned(n);
        {
            let mut yv = y.slice_mut(GUARD..GUARD + n);
            transpose(g, s, rows, cols, &xd, &mut yv).unwrap();
        }
        let y = fetch(&y, n)?;
        let want = reference::transpose(&x, rows, cols);
        for i in 0..n {
            prop_assert_eq!(
                y[i].to_bits(),
                want[i].to_bits(),
                "element {} of {}x{}",
                i,
                rows,
                cols
            );
        }
        Ok(())
    });
}

#[test]
fn bad_arguments_are_rejected_before_any_launch() {
    let Some(g) = gpu() else { return };
    let s = g.stream();
    let x: CudaSlice<f32> = s.clone_htod(&[1.0f32; 6]).unwrap();
    let mut y: CudaSlice<f32> = s.clone_htod(&[0.0f32; 5]).unwrap();
    let e = relu(g, s, &x, &mut y).unwrap_err().to_string();
    assert!(e.contains("`y`"), "{e}");
    let e = transpose(g, s, 2, 3, &x, &mut y).unwrap_err().to_string();
    assert!(e.contains("`y`"), "{e}");
    let e = transpose(g, s, 0, 3, &x, &mut y).unwrap_err().to_string();
    assert!(e.contains("`rows`"), "{e}");
    let e = sgd(g, s, &mut y, &x, 0.1).unwrap_err().to_string();
    assert!(e.contains("`g`"), "{e}");
    let y5: CudaSlice<f32> = s.clone_htod(&[0.0f32; 5]).unwrap();
    let e = sgd_pair(g, s, &mut y, (&y5, &x), 0.1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`b`"), "{e}");
    let e = sgd_pair(g, s, &mut y, (&y5, &y5), f32::INFINITY)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`lr`"), "{e}");
    let mut z: CudaSlice<f32> = s.clone_htod(&[0.0f32; 6]).unwrap();
    let e = mse_grad(g, s, &x, &x, f32::NAN, &mut z)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`scale`"), "{e}");
    let mut h: CudaSlice<bf16> = s.clone_htod(&[bf16::ZERO; 5]).unwrap();
    let e = round_bf16(g, s, &x, &mut h).unwrap_err().to_string();
    assert!(e.contains("`y`"), "{e}");
    assert_eq!(s.clone_dtoh(&y).unwrap(), [0.0; 5], "nothing written");
    assert_eq!(
        s.clone_dtoh(&h).unwrap(),
        [bf16::ZERO; 5],
        "nothing written"
    );
}
