//! The tensor-core probes against their CPU references (`streamline_testing::reference::probe`,
//! written from the PTX ISA's fragment layouts): every register of `ldmatrix.x4`, plain and
//! transposed, bit for bit, and one `mma.sync` per operand type (bf16, f16, tf32) with every
//! lane's fragments built from the documented layout, within its bound, every output element
//! written (poisoned first), over random inputs.

use half::{bf16, f16};
use proptest::prelude::*;
use streamline::ops::probe::{ldmatrix_x4, mma, MmaElement};
use streamline_testing::reference::probe as reference;
use streamline_tests::{gpu, gpu_property, poison};

#[test]
fn ldmatrix_lanes_hold_the_documented_elements() {
    gpu_property(
        16,
        (prop::collection::vec(any::<u16>(), 256), any::<bool>()),
        |(m, transposed)| {
            let g = gpu().unwrap();
            let s = g.stream();
            let src = s.clone_htod(&m).unwrap();
            let mut out = s.clone_htod(&[0xdead_beef_u32; 128]).unwrap();
            ldmatrix_x4(g, s, &src, &mut out, transposed).unwrap();
            let got = s.clone_dtoh(&out).unwrap();
            prop_assert_eq!(got, reference::ldmatrix_x4(&m, transposed));
            Ok(())
        },
    );
}

/// One probe product of `a` and `b` (as f32 in `af`, `bf`) against the reference.
fn product<T: MmaElement>(a: &[T], b: &[T], af: &[f32], bf: &[f32]) -> Result<(), TestCaseError> {
    let g = gpu().unwrap();
    let s = g.stream();
    let (ad, bd) = (s.clone_htod(a).unwrap(), s.clone_htod(b).unwrap());
    let mut d = s.clone_htod(&[poison(); 128]).unwrap();
    mma(g, s, &ad, &bd, &mut d).unwrap();
    let d = s.clone_dtoh(&d).unwrap();
    let want = reference::mma(af, bf, T::K);
    for (i, (got, w)) in d.iter().zip(&want).enumerate() {
        prop_assert!(
            got.to_bits() != poison().to_bits(),
            "d[{}] was not written",
            i
        );
        prop_assert!(
            ((*got as f64) - w.value).abs() <= w.bound,
            "d[{}] (row {}, column {}) = {} against {} (bound {})",
            i,
            i / 8,
            i % 8,
            got,
            w.value,
            w.bound
        );
    }
    Ok(())
}

fn values(n: usize) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-4.0f32..4.0, n)
}

#[test]
fn mma_fragments_as_documented_give_the_product() {
    gpu_property(16, (values(256), values(128)), |(a, b)| {
        let (ah, bh): (Vec<bf16>, Vec<bf16>) = (
            a.iter().map(|&v| bf16::from_f32(v)).collect(),
            b.iter().map(|&v| bf16::from_f32(v)).collect(),
        );
        let (af, bf): (Vec<f32>, Vec<f32>) = (
            ah.iter().map(|v| v.to_f32()).collect(),
            bh.iter().map(|v| v.to_f32()).collect(),
        );
        product(&ah, &bh, &af, &bf)?;
        let (ah, bh): (Vec<f16>, Vec<f16>) = (
            a.iter().map(|&v| f16::from_f32(v)).collect(),
            b.iter().map(|&v| f16::from_f32(v)).collect(),
        );
        let (af, bf): (Vec<f32>, Vec<f32>) = (
            ah.iter().map(|v| v.to_f32()).collect(),
            bh.iter().map(|v| v.to_f32()).collect(),
        );
        product(&ah, &bh, &af, &bf)?;
        // tf32: the low 13 bits of the significand cleared, so every value is exact in tf32.
        let tf32 = |v: &f32| f32::from_bits(v.to_bits() & !0x1fff);
        let (at, bt): (Vec<f32>, Vec<f32>) = (
            a[..128].iter().map(tf32).collect(),
            b[..64].iter().map(tf32).collect(),
        );
        product(&at, &bt, &at, &bt)
    });
}

#[test]
fn probe_buffers_of_the_wrong_size_name_the_argument() {
    let Some(g) = gpu() else { return };
    let s = g.stream();
    let src = s.clone_htod(&[0u16; 255]).unwrap();
    let mut out = s.clone_htod(&[0u32; 128]).unwrap();
    let e = ldmatrix_x4(g, s, &src, &mut out, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`src`") && e.contains("256"), "{e}");
    let a = s.clone_htod(&[0f32; 128]).unwrap();
    let b = s.clone_htod(&[0f32; 63]).unwrap();
    let mut d = s.clone_htod(&[0f32; 128]).unwrap();
    let e = mma(g, s, &a, &b, &mut d).unwrap_err().to_string();
    assert!(e.contains("`b`") && e.contains("64"), "{e}");
}
