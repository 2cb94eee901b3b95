//! The generic softmax kernel against its f64 reference: the embedded code holds both
//! instances with the host's parameter layout (everywhere), the reference's own properties
//! (everywhere), and on a GPU every element of random matrices of awkward shapes matches within
//! the written bound, for f32 and bf16, with every output written and the guards untouched.

use proptest::prelude::*;
use softmax::{bf16, path, reference, tolerance, Elem, Path, KERNELS};
use softmax_kernels::{
    softmax as kernel, softmax_held as held_kernel, softmax_long as long_kernel,
};
use streamline_testing::{compare, gpu, gpu_property};

/// Awkward widths: one column, around a warp, the warp/block switch, past a power of two.
const COLS: [usize; 8] = [1, 31, 33, 1000, 1024, 1025, 4097, 1];

#[test]
fn the_embedded_code_holds_both_instances() {
    for a in KERNELS.archs {
        let major = a.arch[3..4].parse().unwrap();
        let image = KERNELS.image_for_driver(major, 0, None).unwrap();
        let f = image.entry(kernel::<f32>()).unwrap();
        let b = image.entry(kernel::<bf16>()).unwrap();
        assert_eq!(
            (f.name.as_str(), b.name.as_str()),
            ("softmax_f32", "softmax_bf16")
        );
        assert_eq!(f.params[0].size, 24);
        assert_eq!(b.bounds.map(|b| b.max_threads), Some(256));
        let f = image.entry(held_kernel::<f32>()).unwrap();
        let b = image.entry(held_kernel::<bf16>()).unwrap();
        assert_eq!(
            (f.name.as_str(), b.name.as_str()),
            ("softmax_held_f32", "softmax_held_bf16")
        );
        let f = image.entry(long_kernel::<f32>()).unwrap();
        let b = image.entry(long_kernel::<bf16>()).unwrap();
        assert_eq!(
            (f.name.as_str(), b.name.as_str()),
            ("softmax_long_f32", "softmax_long_bf16")
        );
        assert_eq!(b.bounds.map(|b| b.max_threads), Some(1024));
    }
}

#[test]
fn rows_take_the_held_or_long_kernel_only_when_whole_chunks_and_aligned() {
    assert_eq!(path::<f32>(1000, 0x1000, 0x2000), Path::Held);
    assert_eq!(path::<bf16>(1024, 0x1000, 0x2010), Path::Held);
    assert_eq!(path::<f32>(16384, 0x1000, 0x2000), Path::Long);
    assert_eq!(path::<bf16>(32768, 0x1000, 0x2000), Path::Long);
    assert_eq!(
        path::<f32>(16380, 0x1000, 0x2000),
        Path::Any,
        "fewer than 64 KiB a row"
    );
    assert_eq!(
        path::<bf16>(16384, 0x1000, 0x2000),
        Path::Any,
        "fewer than 64 KiB a row"
    );
    assert_eq!(
        path::<f32>(1028, 0x1000, 0x2000),
        Path::Any,
        "more than a warp's columns"
    );
    assert_eq!(
        path::<f32>(1001, 0x1000, 0x2000),
        Path::Any,
        "rows not whole chunks"
    );
    assert_eq!(
        path::<bf16>(1004, 0x1000, 0x2000),
        Path::Any,
        "rows not whole chunks"
    );
    assert_eq!(
        path::<f32>(4098, 0x1000, 0x2000),
        Path::Any,
        "rows not whole chunks"
    );
    assert_eq!(
        path::<f32>(1000, 0x1004, 0x2000),
        Path::Any,
        "x not aligned"
    );
    assert_eq!(
        path::<bf16>(5000, 0x1000, 0x2008),
        Path::Any,
        "y not aligned"
    );
}

proptest! {
    #[test]
    fn the_reference_rows_sum_to_one(cols in 1usize..300, rows in 1usize..5, seed in any::<u64>()) {
        let x = input(rows * cols, seed, 16.0);
        let y = reference(&x, cols);
        for row in y.chunks(cols) {
            prop_assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            prop_assert!(row.iter().all(|&v| v > 0.0 && v <= 1.0));
        }
    }
}

/// `n` values spread over `[-spread/2, spread/2)`, from `seed`.
fn input(n: usize, seed: u64, spread: f64) -> Vec<f64> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * spread
        })
        .collect()
}

/// A NaN pattern no arithmetic of the kernel makes, for f32 and bf16.
trait Poison: Elem + Copy {
    const POISON: Self;
    fn from_f64(v: f64) -> Self;
    fn to_f32(self) -> f32;
}
impl Poison for f32 {
    const POISON: f32 = f32::from_bits(0x7fd1_5eed);
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn to_f32(self) -> f32 {
        self
    }
}
impl Poison for bf16 {
    const POISON: bf16 = bf16::from_bits(0x7fd1);
    fn from_f64(v: f64) -> bf16 {
        bf16::from_f64(v)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
}

/// Softmax of a `rows x cols` matrix on the GPU into a poisoned output with guard zones
/// of `guard` elements each side, checked against the reference.
fn check<T: Poison>(rows: usize, cols: usize, seed: u64, guard: usize) -> Result<(), String> {
    let gpu = gpu().unwrap();
    let module = gpu.load(&KERNELS).unwrap();
    let s = gpu.stream();
    let n = rows * cols;
    // The input's values as the kernel sees them (rounded to T), for the reference.
    let x: Vec<T> = input(n, seed, 16.0).into_iter().map(T::from_f64).collect();
    let xd = s.clone_htod(&x).unwrap();
    let mut yd = s.clone_htod(&vec![T::POISON; n + 2 * guard]).unwrap();
    {
        let mut y = yd.slice_mut(guard..guard + n);
        softmax::softmax(&module, s, (rows, cols), &xd, &mut y).map_err(|e| e.to_string())?;
    }
    let out = s.clone_dtoh(&yd).unwrap();
    let poisoned = |v: T| v.to_f32().to_bits() == T::POISON.to_f32().to_bits();
    if let Some(i) = (0..guard)
        .chain(guard + n..n + 2 * guard)
        .find(|&i| !poisoned(out[i]))
    {
        return Err(format!("guard element {i} was overwritten"));
    }
    if let Some(i) = (0..n).find(|&i| poisoned(out[guard + i])) {
        let (r, c) = (i / cols, i % cols);
        return Err(format!(
            "{rows} x {cols}: element {i} (row {r}, column {c}) was not written"
        ));
    }
    let got: Vec<f32> = out[guard..guard + n].iter().map(|&v| v.to_f32()).collect();
    let xf: Vec<f64> = x.iter().map(|&v| v.to_f32() as f64).collect();
    compare(&got, &reference(&xf, cols), tolerance::<T>(cols, 16.0))
        .map_err(|e| format!("{rows} x {cols}: {e}"))
}

fn shapes() -> impl Strategy<Value = (usize, usize, u64, usize)> {
    (
        prop_oneof![1usize..4, 4usize..70],
        prop_oneof![prop::sample::select(COLS.to_vec()), 1usize..2000],
        any::<u64>(),
        0usize..9,
    )
}

#[test]
fn softmax_f32_matches_the_reference() {
    gpu_property(32, shapes(), |(rows, cols, seed, guard)| {
        check::<f32>(rows, cols, seed, guard).map_err(TestCaseError::fail)
    });
}

#[test]
fn softmax_bf16_matches_the_reference() {
    gpu_property(32, shapes(), |(rows, cols, seed, guard)| {
        check::<bf16>(rows, cols, seed, guard).map_err(TestCaseError::fail)
    });
}

/// Shapes the held rows' kernel takes: whole 16-byte chunks of both types (8 columns at a
/// time) up to a warp's 1024, outputs at an aligned guard offset.
fn held_shapes() -> impl Strategy<Value = (usize, usize, u64, usize)> {
    (
        prop_oneof![1usize..4, 4usize..70],
        (1usize..=128).prop_map(|c| 8 * c),
        any::<u64>(),
        prop::sample::select(vec![0usize, 8, 16]),
    )
}

#[test]
fn held_rows_match_the_reference() {
    gpu_property(32, held_shapes(), |(rows, cols, seed, guard)| {
        check::<f32>(rows, cols, seed, guard).map_err(TestCaseError::fail)?;
        check::<bf16>(rows, cols, seed, guard).map_err(TestCaseError::fail)
    });
}

/// Shapes the long rows' kernel takes for `T`: whole 16-byte chunks, from 64 KiB a row to past
/// two groups of a block's loads (`lanes` elements a chunk), outputs at an aligned guard offset.
fn long_shapes(lanes: usize) -> impl Strategy<Value = (usize, usize, u64, usize)> {
    (
        1usize..4,
        (4096usize..=10_000).prop_map(move |c| lanes * c),
        any::<u64>(),
        prop::sample::select(vec![0usize, 8, 16]),
    )
}

#[test]
fn long_rows_match_the_reference() {
    gpu_property(12, long_shapes(4), |(rows, cols, seed, guard)| {
        check::<f32>(rows, cols, seed, guard).map_err(TestCaseError::fail)
    });
    gpu_property(12, long_shapes(8), |(rows, cols, seed, guard)| {
        check::<bf16>(rows, cols, seed, guard).map_err(TestCaseError::fail)
    });
}

#[test]
fn a_long_and_a_wide_matrix_match_the_reference() {
    if gpu().is_none() {
        return;
    }
    check::<f32>(4096, 1000, 7, 4).unwrap();
    check::<bf16>(3, 40_000, 9, 3).unwrap();
    check::<f32>(5, 40_000, 11, 0).unwrap();
    check::<bf16>(2, 131_072, 13, 8).unwrap();
    check::<f32>(3, 16_384, 17, 4).unwrap();
}

/// Rows holding NaN or infinities on each kernel's path (rows a warp holds, long rows, and
/// unaligned rows of the generic kernel), f32: every output is NaN exactly where the f64
/// reference's is, and the others are within the bound. One long row's NaN all fall in one
/// thread's chunks, which hold nothing else but negative infinities.
#[test]
fn nan_and_infinities_match_the_reference() {
    let Some(gpu) = gpu() else { return };
    let module = gpu.load(&KERNELS).unwrap();
    let s = gpu.stream();
    for cols in [1000usize, 16_384, 1001] {
        let rows = 6;
        let mut x = input(rows * cols, 5, 16.0);
        let row = |r: usize| r * cols..(r + 1) * cols;
        x[row(1).start + 7] = f64::NAN;
        x[row(2).start + 3] = f64::INFINITY;
        x[row(3)].fill(f64::NEG_INFINITY);
        x[row(4).start + 11] = f64::NEG_INFINITY;
        // Thread 5's chunks of a long row (chunks 5, 1029, 2053, 3077 of four f32 each): NaN in
        // the first, negative infinities in the rest.
        for (k, c) in [5usize, 1029, 2053, 3077].into_iter().enumerate() {
            for e in 4 * c..(4 * c + 4).min(cols) {
                x[row(5).start + e] = if k == 0 { f64::NAN } else { f64::NEG_INFINITY };
            }
        }
        let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let xd = s.clone_htod(&xf).unwrap();
        let mut yd = s.clone_htod(&vec![0.0f32; rows * cols]).unwrap();
        softmax::softmax(&module, s, (rows, cols), &xd, &mut yd).unwrap();
        let got = s.clone_dtoh(&yd).unwrap();
        let want = reference(&xf.iter().map(|&v| v as f64).collect::<Vec<_>>(), cols);
        let bound = match tolerance::<f32>(cols, 16.0) {
            streamline_testing::Tolerance::Relative { rel, .. } => rel,
            t => panic!("unexpected tolerance {t:?}"),
        };
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let (r, c) = (i / cols, i % cols);
            assert_eq!(
                g.is_nan(),
                w.is_nan(),
                "{cols} columns, row {r}, column {c}: {g} against {w}"
            );
            if !w.is_nan() {
                assert!(
                    (g as f64 - w).abs() <= bound * w.abs(),
                    "{cols} columns, row {r}, column {c}: {g} against {w}"
                );
            }
        }
        assert!(
            got[row(5)].iter().all(|v| v.is_nan()),
            "{cols} columns: a NaN spreads over its row"
        );
    }
}

#[test]
fn a_shape_that_does_not_match_the_buffers_is_refused() {
    let Some(gpu) = gpu() else { return };
    let module = gpu.load(&KERNELS).unwrap();
    let s = gpu.stream();
    let x = s.clone_htod(&[1.0f32; 12]).unwrap();
    let mut y = s.clone_htod(&[0.0f32; 12]).unwrap();
    let e = softmax::softmax(&module, s, (5, 3), &x, &mut y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`x`") && e.contains("5 x 3"), "{e}");
}
