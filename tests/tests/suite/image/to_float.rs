//! `to_float`, plain and between layouts.

use super::*;

#[test]
fn to_float_matches_reference() {
    gpu_property(
        48,
        (
            prop_oneof![0usize..100, 100usize..300_000],
            0usize..17,
            any::<bool>(),
            any::<u64>(),
        ),
        |(n, off, scale, seed)| {
            let g = gpu().unwrap();
            let bytes = bytes(n + off, seed);
            let x: CudaSlice<u8> = g.stream().clone_htod(&bytes).unwrap();
            let mut y = poisoned(n);
            {
                let xv = x.slice(off..off + n);
                let mut yv = y.slice_mut(GUARD..GUARD + n);
                to_float(g, g.stream(), &xv, &mut yv, scale).unwrap();
            }
            let got = fetch(&y, n)?;
            // One rounding of an exact product on both sides: bitwise equal.
            let want = reference::to_float(&bytes[off..], scale);
            prop_assert!(bitwise_eq(&got, &want));
            Ok(())
        },
    );
}

/// NHWC to NCHW and back in one pass: bitwise the reference's conversion, rearranged.
#[test]
fn to_float_relayout_matches_reference() {
    gpu_property(
        32,
        (
            shape(),
            any::<bool>(),
            prop::sample::select(vec![1usize, 2, 3, 4, 5]),
            any::<bool>(),
            any::<u64>(),
        ),
        |(s, to_nchw, c, scale, seed)| {
            let s = Shape { c, ..s };
            let (from, to) = if to_nchw {
                (Layout::Nhwc, Layout::Nchw)
            } else {
                (Layout::Nchw, Layout::Nhwc)
            };
            let g = gpu().unwrap();
            let bytes = bytes(s.len(), seed);
            let x: CudaSlice<u8> = g.stream().clone_htod(&bytes).unwrap();
            let mut y = poisoned(s.len());
            {
                let mut yv = y.slice_mut(GUARD..GUARD + s.len());
                to_float_relayout(g, g.stream(), s, (&x, from), (&mut yv, to), scale).unwrap();
            }
            let got = fetch(&y, s.len())?;
            let want = reference::relayout(&reference::to_float(&bytes, scale), s, from, to);
            prop_assert!(bitwise_eq(&got, &want));
            Ok(())
        },
    );
}
