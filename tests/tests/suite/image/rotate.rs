//! `rotate`: nearest and bilinear, every pair of layouts, the staged kernel against the gathering one.

use super::*;

fn angle() -> impl Strategy<Value = f32> {
    prop_oneof![
        2 => prop::sample::select(vec![0.0f32, 90.0, 180.0, -45.0, 45.0, -90.0, 270.0]),
        2 => -180.0f32..180.0,
        1 => -720.0f32..720.0,
    ]
}

#[test]
fn rotate_matches_reference() {
    gpu_property(
        64,
        (
            shape(),
            prop::collection::vec(angle(), 3),
            any::<bool>(),
            prop::option::of(-2.0f32..2.0),
            (any::<bool>(), any::<bool>()),
            any::<u64>(),
        ),
        |(s, ang, nearest, fill, (nhwc_in, nhwc_out), seed)| {
            let mode = if nearest {
                Interp::Nearest
            } else {
                Interp::Bilinear
            };
            let layouts = (layout(nhwc_in), layout(nhwc_out));
            let x = values(s.len(), seed);
            rotate_checked(s, &x, &ang[..s.n], mode, fill, layouts)
        },
    );
}

fn layout(nhwc: bool) -> Layout {
    if nhwc {
        Layout::Nhwc
    } else {
        Layout::Nchw
    }
}

/// Batches of many images, planes that end inside a block (one only 13 rows tall), and angles
/// around every turn, so that each image's warps take each of their shapes (rows of 32 near 0
/// and 180 degrees, patches elsewhere) beside images that take another.
#[test]
fn rotate_large_batches_match_reference() {
    if gpu().is_none() {
        return;
    }
    let cases = [
        Shape::new(40, 3, 256, 256),
        Shape::new(300, 3, 70, 45),
        Shape::new(7, 1, 13, 200),
    ];
    for (i, s) in cases.into_iter().enumerate() {
        let x = values(s.len(), 5 + i as u64);
        let angles: Vec<f32> = (0..s.n).map(|k| k as f32 * 23.7 % 400.0 - 200.0).collect();
        for mode in [Interp::Nearest, Interp::Bilinear] {
            for fill in [None, Some(-0.75)] {
                let layouts = (Layout::Nchw, Layout::Nchw);
                rotate_checked(s, &x, &angles, mode, fill, layouts)
                    .unwrap_or_else(|e| panic!("{s:?}, {mode:?}, fill {fill:?}: {e}"));
            }
        }
    }
}

/// Every pair of layouts gives the NCHW rotation's values bitwise (the same arithmetic on the
/// same values), over batches whose warps take every shape, with and without a fill, and
/// matches the reference.
#[test]
fn rotate_layouts_match_nchw_bitwise() {
    let Some(g) = gpu() else {
        return;
    };
    // Channels in one group of the kernels (3, 4), in two (5: four, then one) and 2; the layouts
    // differ only where there is more than one channel.
    let cases = [
        Shape::new(12, 3, 256, 256),
        Shape::new(40, 4, 37, 70),
        Shape::new(9, 5, 13, 50),
        Shape::new(6, 2, 20, 33),
    ];
    for (i, s) in cases.into_iter().enumerate() {
        let x = values(s.len(), 40 + i as u64);
        let angles: Vec<f32> = (0..s.n).map(|k| k as f32 * 31.3 % 400.0 - 200.0).collect();
        let a = PerImage::upload(g.stream(), "angles", &angles).unwrap();
        for mode in [Interp::Nearest, Interp::Bilinear] {
            for fill in [None, Some(0.5)] {
                let nchw = (Layout::Nchw, Layout::Nchw);
                let want = rotate_in_layouts(s, &x, &a, mode, fill, nchw).unwrap();
                for (from, to) in [
                    (Layout::Nhwc, Layout::Nhwc),
                    (Layout::Nhwc, Layout::Nchw),
                    (Layout::Nchw, Layout::Nhwc),
                ] {
                    let what = format!("{s:?} {mode:?} fill {fill:?} {from}->{to}");
                    let got = rotate_in_layouts(s, &x, &a, mode, fill, (from, to))
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert!(bitwise_eq(&got, &want), "{what}: differs from NCHW");
                    rotate_checked(s, &x, &angles, mode, fill, (from, to))
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                }
            }
        }
    }
}

/// The staged bilinear kernel (NCHW, input 16-byte aligned, width a multiple of 4, at most 4
/// channels) gives the bits of the kernel that gathers from device memory, which the same input
/// read one float into its buffer takes: tiles cut by the image's right and bottom sides,
/// windows cut by every side, 1 to 4 channels, angles around every turn and beyond, with and
/// without a fill; nearest rotation, which always gathers, alike. The reference tests above run
/// the staged kernel wherever their shapes allow.
#[test]
fn rotate_staged_matches_gather_bitwise() {
    let Some(g) = gpu() else {
        return;
    };
    // Angles around every turn and beyond, 90 and -0.0 first, unless a case names its own.
    let cases: [(Shape, &[f32]); 7] = [
        (Shape::new(24, 3, 256, 256), &[]),
        (Shape::new(30, 1, 45, 100), &[]),
        (Shape::new(17, 2, 33, 36), &[]),
        (Shape::new(11, 4, 70, 4), &[]),
        (Shape::new(9, 3, 1, 64), &[]),
        (Shape::new(5, 4, 300, 8), &[]),
        // Source rows far from 0 at angles near the axes, where bounds on the columns each
        // window row is read in round worst.
        (Shape::new(4, 1, 65536, 64), &[89.94, 0.06, -75.6, 14.4]),
    ];
    for (i, (s, named)) in cases.into_iter().enumerate() {
        let x = values(s.len(), 70 + i as u64);
        let angles: Vec<f32> = if named.is_empty() {
            let mut a: Vec<f32> = (0..s.n).map(|k| k as f32 * 37.9 % 800.0 - 400.0).collect();
            a[0] = 90.0;
            a[1] = -0.0;
            a
        } else {
            named.to_vec()
        };
        let a = PerImage::upload(g.stream(), "angles", &angles).unwrap();
        let mut padded = vec![f32::NAN];
        padded.extend_from_slice(&x);
        let (aligned, shifted) = (upload(&x), upload(&padded));
        for mode in [Interp::Nearest, Interp::Bilinear] {
            for fill in [None, Some(-0.25)] {
                let what = format!("{s:?} {mode:?} fill {fill:?}");
                let run = |xv: &CudaView<f32>| {
                    let mut y = poisoned(s.len());
                    {
                        let mut yv = y.slice_mut(GUARD..GUARD + s.len());
                        rotate(g, g.stream(), s, xv, &a, mode, fill, &mut yv).unwrap();
                    }
                    fetch(&y, s.len()).unwrap_or_else(|e| panic!("{what}: {e}"))
                };
                let staged = run(&aligned.slice(..));
                let gathered = run(&shifted.slice(1..));
                assert!(
                    bitwise_eq(&staged, &gathered),
                    "{what}: the staged kernel differs from the gathering one"
                );
            }
        }
    }
}

/// `x` (NCHW) stored in layout `from`, rotated on the device into layout `to` (a poisoned
/// buffer, every element checked written), returned as NCHW.
fn rotate_in_layouts(
    s: Shape,
    x: &[f32],
    angles: &PerImage,
    mode: Interp,
    fill: Option<f32>,
    (from, to): (Layout, Layout),
) -> Result<Vec<f32>, TestCaseError> {
    let g = gpu().unwrap();
    let xd = upload(&reference::relayout(x, s, Layout::Nchw, from));
    let mut y = poisoned(s.len());
    {
        let mut yv = y.slice_mut(GUARD..GUARD + s.len());
        let (xl, yl) = ((&xd, from), (&mut yv, to));
        rotate_relayout(g, g.stream(), s, xl, angles, mode, fill, yl).unwrap();
    }
    Ok(reference::relayout(
        &fetch(&y, s.len())?,
        s,
        to,
        Layout::Nchw,
    ))
}

/// Rotates `x` on the device from and to `layouts` and checks the result against the
/// reference: nearest bitwise (or one of the candidates where the source point lies within the
/// coordinate error of a rounding boundary), bilinear within the bound below.
fn rotate_checked(
    s: Shape,
    x: &[f32],
    angles: &[f32],
    mode: Interp,
    fill: Option<f32>,
    layouts: (Layout, Layout),
) -> Result<(), TestCaseError> {
    let g = gpu().unwrap();
    let a = PerImage::upload(g.stream(), "angles", angles).unwrap();
    let got = rotate_in_layouts(s, x, &a, mode, fill, layouts)?;
    let xs: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    // Source coordinates: the angle's f32 rounding and sincospi (1 ulp), the division
    // by half the size and three products/sums, then the unnormalisation: together
    // below 32u (h + w + 2) in pixels (angles up to 720 degrees included).
    let delta = 32.0
        * U
        * (s.h + s.w + 2) as f64
        * (1.0 + angles.iter().fold(0.0f32, |m, a| m.max(a.abs())) as f64 / 180.0);
    let r = reference::rotate(&xs, s, angles, mode, fill, delta);
    let vmax = max_abs(x).max(fill.unwrap_or(0.0).abs() as f64);
    match mode {
        Interp::Nearest => {
            for (i, g) in got.iter().enumerate() {
                let g = *g as f64;
                let ok = match r.ambiguous.get(&i) {
                    Some(alts) => alts.contains(&g),
                    None => g == r.values[i],
                };
                prop_assert!(
                    ok,
                    "rotate nearest: element {} is {} but the reference gives {} (or {:?})",
                    i,
                    g,
                    r.values[i],
                    r.ambiguous.get(&i)
                );
            }
            Ok(())
        }
        Interp::Bilinear => {
            // A coordinate error delta moves a blend by at most 2 delta max|x| (the
            // weights are linear in it, including those of neighbours crossing the
            // border); the blend and the fill add about 12u max(|x|, |fill|).
            let tol = (4.0 * delta + 16.0 * U) * vmax;
            close(&got, &r.values, tol, "rotate bilinear")
        }
    }
}
