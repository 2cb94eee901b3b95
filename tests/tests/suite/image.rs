//! The image kernels against their CPU references (`streamline_testing::reference::image`, whose
//! module documentation holds the error analysis the tolerances below come from), plus
//! CPU-only properties of the references and the argument checks that run before any device
//! work.
//!
//! Every GPU case poisons its output (and guard zones around it) first and checks that every
//! output element was written and nothing outside it.

use cudarc::driver::{CudaSlice, CudaView};
use proptest::prelude::*;
use streamline::ops::image::*;
use streamline::runtime::Gpu;
use streamline_testing::data::POISON_F32;
use streamline_testing::reference::image as reference;
use streamline_tests::{
    bitwise_eq, bytes, fetch, fetch_shifted, gpu, gpu_property, poisoned, GUARD,
};

/// f32 unit roundoff.
const U: f64 = 1.0 / (1u64 << 24) as f64;
/// Every `got[i]` within `tol` of `want[i]`.
fn close(got: &[f32], want: &[f64], tol: f64, what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        prop_assert!(
            ((*g as f64) - w).abs() <= tol,
            "{}: element {} is {} but the reference gives {} (tolerance {})",
            what,
            i,
            g,
            w,
            tol
        );
    }
    Ok(())
}

fn max_abs(v: &[f32]) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs() as f64))
}

fn upload(v: &[f32]) -> CudaSlice<f32> {
    gpu().unwrap().stream().clone_htod(v).unwrap()
}

/// Image extents: 1, 2, 3, primes, around the 32 x 16 patch and the 32 x 32 tile, and large.
fn extent() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => prop::sample::select(vec![1usize, 2, 3, 5, 7, 13, 16, 17, 31, 32, 33, 47, 64, 97]),
        1 => 1usize..80,
        1 => prop::sample::select(vec![128usize, 131, 256]),
    ]
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        1usize..=3,
        prop::sample::select(vec![1usize, 3, 4]),
        extent(),
        extent(),
    )
        .prop_map(|(n, c, h, w)| Shape::new(n, c, h, w))
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    streamline_testing::data::randn_f32(n, seed)
}

// ---------------------------------------------------------------- to_float

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

// ---------------------------------------------------------------- normalize

#[test]
fn normalize_matches_reference() {
    gpu_property(48, (shape(), any::<u64>(), 0usize..3), |(s, seed, off)| {
        let g = gpu().unwrap();
        let x = values(s.len() + off, seed);
        let mean: Vec<f32> = (0..s.c).map(|c| 0.3 * c as f32 - 0.2).collect();
        let std: Vec<f32> = (0..s.c).map(|c| 0.2 + 0.7 * c as f32).collect();
        let stats = ChannelStats::upload(g.stream(), &mean, &std).unwrap();
        let xd = upload(&x);
        let mut y = poisoned(s.len());
        {
            let xv = xd.slice(off..off + s.len());
            let mut yv = y.slice_mut(GUARD..GUARD + s.len());
            normalize(g, g.stream(), s, &xv, &stats, &mut yv).unwrap();
        }
        let got = fetch(&y, s.len())?;
        let xs: Vec<f64> = x[off..].iter().map(|&v| v as f64).collect();
        let want = reference::normalize(&xs, s, &mean, &std);
        // Two roundings (subtract, divide): |error| <= 2u |result| + u |x - m| / |std|,
        // below 4u (|x| + |m|) / min|std| for every element.
        let tol = 4.0 * U * (max_abs(&x) + 0.5) / 0.2;
        close(&got, &want, tol, "normalize")
    });
}

// ---------------------------------------------------------------- roi_align

fn roi_case() -> impl Strategy<Value = (Shape, Vec<[f32; 5]>, RoiAlign)> {
    (
        shape(),
        1usize..9,
        1usize..9,
        prop::sample::select(vec![-1i32, 0, 1, 2, 4]),
        any::<bool>(),
        prop::sample::select(vec![1.0f32, 0.5, 0.25]),
    )
        .prop_flat_map(|(s, oh, ow, sr, aligned, scale)| {
            let coord = move |ext: usize| {
                let e = ext as f32 / scale;
                prop_oneof![
                    // Whole and quarter pixels partly or wholly outside the image.
                    (-8i32..(4 * e as i32 + 8)).prop_map(|q| q as f32 / 4.0 - 1.0),
                    (-2.0 * e - 2.0..3.0 * e + 2.0),
                ]
            };
            let bx = (
                0..s.n,
                coord(s.w),
                coord(s.h),
                coord(s.w),
                coord(s.h),
                0u8..4,
            )
                .prop_map(|(n, x1, y1, x2, y2, kind)| {
                    let (x1, x2) = (x1.min(x2), x1.max(x2));
                    let (y1, y2) = (y1.min(y2), y1.max(y2));
                    match kind {
                        // Zero-size and degenerate boxes.
                        0 => [n as f32, x1, y1, x1, y1],
                        1 => [n as f32, x1, y1, x2, y1],
                        _ => [n as f32, x1, y1, x2, y2],
                    }
                });
            (
                Just(s),
                prop::collection::vec(bx, 1..6),
                Just(RoiAlign {
                    out_h: oh,
                    out_w: ow,
                    spatial_scale: scale,
                    sampling_ratio: sr,
                    aligned,
                }),
            )
        })
}

#[test]
fn roi_align_matches_reference() {
    gpu_property(64, (roi_case(), any::<u64>()), |((s, boxes, o), seed)| {
        let g = gpu().unwrap();
        let x = values(s.len(), seed);
        let xd = upload(&x);
        let rb = RoiBoxes::upload(g.stream(), &boxes).unwrap();
        let out = Shape::new(boxes.len(), s.c, o.out_h, o.out_w);
        let mut y = poisoned(out.len());
        // A box whose adaptive sampling grid exceeds the bound is refused before any launch.
        let too_many = boxes.iter().any(|b| {
            let (gh, gw) = streamline::spec::image::roi_sampling_grid(b, &o);
            gh * gw > streamline_abi::image::ROI_MAX_SAMPLES_PER_BIN as i64
        });
        {
            let mut yv = y.slice_mut(GUARD..GUARD + out.len());
            let r = roi_align(g, g.stream(), s, &xd, &rb, o, &mut yv);
            if too_many {
                prop_assert!(
                    matches!(
                        r,
                        Err(streamline::error::Error::InvalidArgument { arg: "boxes", .. })
                    ),
                    "{r:?}"
                );
                return Ok(());
            }
            r.unwrap();
        }
        let got = fetch(&y, out.len())?;
        let xs: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let want = reference::roi_align(&xs, s, &boxes, &o);
        close(&got, &want, roi_tolerance(s, &o, &x), "roi_align")
    });
}

/// `roi_align`'s input gradient, atomic and deterministic, against the reference's: each
/// value within `(shares + 16) u` of the sum of its shares' magnitudes (the reference's
/// analysis) plus the coordinate term of [`roi_tolerance`]; every value written; the
/// deterministic kernel the same bits twice, with boxes uploaded or read on the device.
#[test]
fn roi_align_backward_matches_reference() {
    gpu_property(48, (roi_case(), any::<u64>()), |((s, boxes, o), seed)| {
        let g = gpu().unwrap();
        let too_many = boxes.iter().any(|b| {
            let (gh, gw) = streamline::spec::image::roi_sampling_grid(b, &o);
            gh * gw > streamline_abi::image::ROI_MAX_SAMPLES_PER_BIN as i64
        });
        if too_many {
            return Ok(());
        }
        let out = Shape::new(boxes.len(), s.c, o.out_h, o.out_w);
        let gy = values(out.len(), seed);
        let gyd = upload(&gy);
        let rb = RoiBoxes::upload(g.stream(), &boxes).unwrap();
        let gyf: Vec<f64> = gy.iter().map(|&v| v as f64).collect();
        let (want, shares, mags) = reference::roi_align_backward(&gyf, s, &boxes, &o);
        let big = (3 * (s.h + s.w)) as f64 / o.spatial_scale as f64 + 8.0;
        let delta = 8.0 * U * big;
        let mut runs = Vec::new();
        for deterministic in [false, true, true] {
            let mut gx = poisoned(s.len());
            {
                let mut v = gx.slice_mut(GUARD..GUARD + s.len());
                roi_align_backward(g, g.stream(), s, &gyd, &rb, o, &mut v, deterministic).unwrap();
            }
            let got = fetch(&gx, s.len())?;
            for i in 0..got.len() {
                let tol = ((shares[i] as f64 + 16.0) * U + 2.0 * delta) * mags[i] + 1e-30;
                prop_assert!(
                    (got[i] as f64 - want[i]).abs() <= tol,
                    "deterministic {}: value {} is {} but the reference gives {} (tolerance {})",
                    deterministic,
                    i,
                    got[i],
                    want[i],
                    tol
                );
            }
            runs.push(got);
        }
        prop_assert!(
            bitwise_eq(&runs[1], &runs[2]),
            "the deterministic kernel changed bits"
        );
        let flat: Vec<f32> = boxes.iter().flatten().copied().collect();
        let bd = upload(&flat);
        // SAFETY: `bd` outlives the launch, which the fetch below waits for.
        let on = unsafe { RoiBoxes::on_device(&bd, g.stream()) }.unwrap();
        let mut gx = poisoned(s.len());
        {
            let mut v = gx.slice_mut(GUARD..GUARD + s.len());
            roi_align_backward(g, g.stream(), s, &gyd, &on, o, &mut v, true).unwrap();
        }
        prop_assert!(
            bitwise_eq(&fetch(&gx, s.len())?, &runs[1]),
            "boxes on the device differ"
        );
        Ok(())
    });
}

/// Tolerance of `roi_align` against the reference for input `x` of shape `s`.
///
/// The reference computes the sample coordinates in f32 in torchvision's order, as the kernels
/// do, so both take the same side of every y = -1 / y = h (or x) cut-off. The kernels' bilinear
/// weights `l = v - floor(v)`, `1 - l` carry up to a few ulp of the coordinate's magnitude (box
/// coordinates up to 3x the image over the scale): delta <= 8u (|coords| + h + w), moving a
/// sample by at most 2 delta max|x|; each sample's blend adds 8u max|x|, the average u.
fn roi_tolerance(s: Shape, o: &RoiAlign, x: &[f32]) -> f64 {
    let big = (3 * (s.h + s.w)) as f64 / o.spatial_scale as f64 + 8.0;
    let delta = 8.0 * U * big;
    (2.0 * delta + 10.0 * U) * max_abs(x) + 1e-30
}

/// A crop whose neighbouring output rows 4 and 5 sample two input rows apart: f32 rounding
/// gives y = 63.999996 and y = 65.0 for a bin of 0.9999994. The one-sample kernel loads the
/// shared input rows of neighbouring samples once; this case takes its other path, which
/// reads each sample's rows itself. The premise is checked on the CPU first.
#[test]
fn roi_align_samples_two_rows_apart() {
    let (y1, y2) = (59.5f32, 159.49994f32);
    let o = RoiAlign {
        out_h: 100,
        out_w: 24,
        spatial_scale: 1.0,
        sampling_ratio: -1,
        aligned: false,
    };
    let bx = [0.0, 3.0, y1, 27.0, y2];
    let bin = (y2 - y1) / o.out_h as f32;
    let y = |ph: u32| y1 + ph as f32 * bin + 0.5 * bin;
    assert_eq!(roi_sampling_grid(&bx, &o), (1, 1), "not a one-sample box");
    assert_eq!(
        y(5).floor() - y(4).floor(),
        2.0,
        "the rows are not two apart"
    );
    gpu_property(
        8,
        (prop::sample::select(vec![1usize, 3, 4]), any::<u64>()),
        |(c, seed)| {
            let g = gpu().unwrap();
            let s = Shape::new(1, c, 170, 40);
            let x = values(s.len(), seed);
            let rb = RoiBoxes::upload(g.stream(), &[bx]).unwrap();
            let out = Shape::new(1, c, o.out_h, o.out_w);
            let mut yd = poisoned(out.len());
            {
                let mut yv = yd.slice_mut(GUARD..GUARD + out.len());
                roi_align(g, g.stream(), s, &upload(&x), &rb, o, &mut yv).unwrap();
            }
            let got = fetch(&yd, out.len())?;
            let xs: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let want = reference::roi_align(&xs, s, &[bx], &o);
            close(&got, &want, roi_tolerance(s, &o, &x), "roi_align")
        },
    );
}

// ---------------------------------------------------------------- rotate

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

// ---------------------------------------------------------------- gaussian_blur

#[test]
fn gaussian_blur_matches_reference() {
    let case = (
        shape(),
        (0usize..16, 0usize..16),
        prop_oneof![0.05f32..0.5, 0.5f32..3.0, 5.0f32..50.0],
        any::<bool>(),
        (any::<u64>(), 0usize..2),
    );
    gpu_property(64, case, |(s, (a, b), sig, per_image, (seed, shift))| {
        let g = gpu().unwrap();
        // Odd kernel sizes 1..=31 that fit the image (reflect padding).
        let fit = |k: usize, ext: usize| (2 * k + 1).min(2 * ext - 1);
        let (kx, ky) = (fit(a, s.w), fit(b, s.h));
        let x = values(s.len(), seed);
        let pairs: Vec<(f64, f64)> = (0..s.n)
            .map(|i| {
                if per_image {
                    (sig as f64 * (1.0 + i as f64 * 0.5), sig as f64 * 0.7)
                } else {
                    (sig as f64, sig as f64 * 1.3)
                }
            })
            .collect();
        let (got, want) = blur_and_reference(g, s, (&x, 0, shift), (kx, ky), &pairs, per_image)?;
        // Each weight: expf (2 ulp) of an argument with 3 roundings, so ~(2 + 3 |arg|) u
        // relative with |arg| <= 0.5 ((k-1)/2 / sigma)^2 where it still matters (weights that
        // small contribute below u); sums over k taps add k u each; the two passes and the
        // normalisation: below (2 kx + 2 ky + 24) u max|x| plus 4u per unit of |arg| kept
        // small by taking |arg| <= 40 (exp(-40) < u).
        let tol = ((2 * kx + 2 * ky + 24) as f64 + 2.0 * 160.0) * U * max_abs(&x);
        close(&got, &want, tol, "gaussian_blur")
    });
}

// `blur_and_reference`'s shifts 0 and 1 give outputs 4 bytes off and 8-byte aligned only for
// an odd guard (device buffers start 256-byte aligned).
const _: () = assert!(GUARD % 2 == 1);

/// `gaussian_blur` of `x` (shape `s`, read `lead` floats into its device buffer) into a
/// poisoned output written `shift` floats later than usual (1 and 0 differ in whether pairs of
/// outputs are 8-byte aligned), and its f64 reference: sigmas `pairs` per image, or the first
/// pair for every image. The sigmas are rounded to f32 first, as the kernel gets them.
fn blur_and_reference(
    g: &Gpu,
    s: Shape,
    (x, lead, shift): (&[f32], usize, usize),
    (kx, ky): (usize, usize),
    pairs: &[(f64, f64)],
    per_image: bool,
) -> Result<(Vec<f32>, Vec<f64>), TestCaseError> {
    let flat: Vec<f32> = pairs
        .iter()
        .flat_map(|&(p, q)| [p as f32, q as f32])
        .collect();
    let per = PerImage::upload(g.stream(), "sigma", &flat).unwrap();
    let sigma = if per_image {
        Sigma::PerImage(&per)
    } else {
        Sigma::Global(flat[0], flat[1])
    };
    let mut padded = vec![f32::NAN; lead];
    padded.extend_from_slice(x);
    let xd = upload(&padded);
    let mut y = poisoned(s.len() + shift);
    {
        let mut yv = y.slice_mut(GUARD + shift..GUARD + shift + s.len());
        let xv = xd.slice(lead..);
        gaussian_blur(g, g.stream(), s, &xv, (kx, ky), sigma, &mut yv).unwrap();
    }
    let got = fetch_shifted(&y, s.len(), shift)?;
    let rounded: Vec<(f64, f64)> = (0..s.n)
        .map(|i| {
            let j = if per_image { 2 * i } else { 0 };
            (flat[j] as f64, flat[j + 1] as f64)
        })
        .collect();
    let xs: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    Ok((got, reference::gaussian_blur(&xs, s, kx, ky, &rounded)))
}

/// Batches of thousands of tiles, more than the device holds blocks at once, edge tiles and
/// sigmas per image included, which the small shapes of `gaussian_blur_matches_reference`
/// never reach; both tiles of the fast path (whole rows of planes 129 to 256 wide, 128 x 64
/// otherwise), tiles running past the plane's right side, odd widths, inputs that start 4 or 8
/// bytes into their buffer, and outputs whose pairs of values are 8-byte aligned or not.
#[test]
fn gaussian_blur_large_batches_match_reference() {
    let Some(g) = gpu() else { return };
    let cases = [
        (Shape::new(48, 3, 200, 300), 7, true, 0, 1),
        (Shape::new(700, 1, 70, 130), 15, false, 0, 0),
        (Shape::new(2100, 1, 16, 16), 3, true, 0, 1),
        (Shape::new(40, 3, 256, 256), 7, true, 0, 1),
        (Shape::new(40, 3, 256, 256), 7, true, 0, 0),
        (Shape::new(9, 2, 99, 129), 13, false, 0, 1),
        (Shape::new(9, 3, 33, 255), 7, true, 1, 1),
        (Shape::new(30, 3, 60, 132), 7, true, 0, 1),
        (Shape::new(12, 2, 45, 100), 5, false, 0, 0),
        (Shape::new(20, 3, 64, 256), 7, true, 1, 1),
        (Shape::new(6, 1, 50, 300), 9, false, 2, 1),
    ];
    for (s, k, per_image, lead, shift) in cases {
        let x = values(s.len(), s.n as u64 + k as u64);
        let pairs: Vec<(f64, f64)> = (0..s.n)
            .map(|i| {
                let a = if per_image {
                    0.6 + (i % 7) as f64 * 0.4
                } else {
                    1.7
                };
                (a, a * 0.8)
            })
            .collect();
        let (got, want) =
            blur_and_reference(g, s, (&x, lead, shift), (k, k), &pairs, per_image).unwrap();
        // As in `gaussian_blur_matches_reference`.
        let tol = ((4 * k + 24) as f64 + 2.0 * 160.0) * U * max_abs(&x);
        close(&got, &want, tol, "gaussian_blur").unwrap();
    }
}

// ---------------------------------------------------------------- resize

#[test]
fn resize_matches_reference() {
    let case = (
        shape(),
        extent(),
        extent(),
        prop::sample::select(vec![
            ResizeMode::Bilinear,
            ResizeMode::BilinearAntialias,
            ResizeMode::Nearest,
        ]),
        any::<u64>(),
    );
    gpu_property(64, case, |(s, oh, ow, mode, seed)| {
        let g = gpu().unwrap();
        let x = values(s.len(), seed);
        let xd = upload(&x);
        let out = s.with_size(oh, ow);
        let mut y = poisoned(out.len());
        {
            let mut yv = y.slice_mut(GUARD..GUARD + out.len());
            resize(g, g.stream(), s, &xd, (oh, ow), mode, &mut yv).unwrap();
        }
        let got = fetch(&y, out.len())?;
        let xs: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let want = reference::resize(&xs, s, oh, ow, mode);
        let tol = match mode {
            // torch's f32 index rule on both sides: exact.
            ResizeMode::Nearest => 0.0,
            // Source coordinate: 3 roundings of a value below max(h, w): delta <= 4u max(h,w);
            // the blend moves by 2 delta max|x| per axis, its arithmetic adds 8u max|x|.
            ResizeMode::Bilinear => (16.0 * U * (s.h.max(s.w) + 1) as f64 + 8.0 * U) * max_abs(&x),
            // As bilinear, plus m taps per axis each with a weight normalised by a sum of m
            // terms: (2m + 8)u per axis, m <= 2 scale + 3.
            ResizeMode::BilinearAntialias => {
                let m = |i: usize, o: usize| 2.0 * (i as f64 / o as f64).max(1.0) + 3.0;
                let taps = m(s.h, oh) + m(s.w, ow);
                (16.0 * U * (s.h.max(s.w) + 1) as f64 + (2.0 * taps + 16.0) * U) * max_abs(&x)
            }
        };
        close(&got, &want, tol, "resize")
    });
}

/// Batches large enough that a thread of bilinear resize computes several consecutive output
/// rows (two and four on a GPU of 132 multiprocessors), which the small shapes of
/// `resize_matches_reference` never reach: an upscale, whose rows reuse the input rows the
/// thread blended last, and a 3x downscale, whose rows skip input rows.
#[test]
fn resize_large_batches_match_reference() {
    let Some(g) = gpu() else { return };
    for n in [1100, 2200] {
        for (h, w) in [(20, 20), (128, 128)] {
            let s = Shape::new(n, 1, h, w);
            let x = values(s.len(), n as u64 + h as u64);
            let xd = upload(&x);
            let (oh, ow) = (42, 40);
            let out = s.with_size(oh, ow);
            let mut y = poisoned(out.len());
            {
                let mut yv = y.slice_mut(GUARD..GUARD + out.len());
                resize(
                    g,
                    g.stream(),
                    s,
                    &xd,
                    (oh, ow),
                    ResizeMode::Bilinear,
                    &mut yv,
                )
                .unwrap();
            }
            let got = fetch(&y, out.len()).unwrap();
            let xs: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let want = reference::resize(&xs, s, oh, ow, ResizeMode::Bilinear);
            // As in `resize_matches_reference`.
            let tol = (16.0 * U * (h.max(w) + 1) as f64 + 8.0 * U) * max_abs(&x);
            close(&got, &want, tol, "resize").unwrap();
        }
    }
}

// ---------------------------------------------------------------- augment

fn augment_case() -> impl Strategy<Value = (Shape, AugmentConfig, (Layout, Layout), u64)> {
    (
        1usize..=3,
        prop::sample::select(vec![1usize, 2, 3, 4]),
        prop::sample::select(vec![
            (8usize, 5usize, 9usize),
            (33, 16, 40),
            (64, 32, 64),
            (40, 40, 71),
            (37, 20, 33),
            // Enlarged exactly twofold: with whole-pixel boxes, the kernels whose crop and
            // resize are composed in integers (`augment_dyadic`), boxes at the image's last
            // row and column included.
            (37, 18, 36),
            (9, 4, 8),
            // Not enlarged: a 7-tap kernel's 38 x 38 haloed tile needs more crop pixels than a
            // window holds, so it goes through them in parts, at every angle.
            (100, 100, 100),
        ]),
        // Every kernel past the 7-tap fast path needs more than 48 KiB of shared memory (the
        // opt-in path); 9 is the smallest of them, 33 and more have weights written by more
        // than one warp, 63 is the largest (capped below by the output size).
        prop::sample::select(vec![1usize, 3, 5, 7, 9, 15, 31, 33, 63]),
        any::<bool>(),
        any::<bool>(),
        (any::<bool>(), any::<bool>()),
        any::<u64>(),
    )
        .prop_map(
            |(n, c, (side, crop, size), k, nearest, scale, (nhwc_in, nhwc_out), seed)| {
                let mut cfg = augment_cfg(c, size, crop, k.min(2 * size - 1), nearest);
                cfg.scale = scale;
                cfg.mean = (0..c).map(|i| 0.1 * i as f32).collect();
                cfg.std = (0..c).map(|i| 0.5 + 0.25 * i as f32).collect();
                let layout = |nhwc: bool| if nhwc { Layout::Nhwc } else { Layout::Nchw };
                (
                    Shape::new(n, c, side, side),
                    cfg,
                    (layout(nhwc_in), layout(nhwc_out)),
                    seed,
                )
            },
        )
}

#[test]
fn augment_fused_matches_reference_and_chain() {
    // The fused kernel's strip: the GPU's default, one tile per block, or several (the last
    // strip of a column shorter than the others where 3 does not divide the tiles).
    let strip = prop::sample::select(vec![None, Some(1), Some(2), Some(3), Some(8)]);
    // Whole-pixel boxes of the crop's size (a random crop: every crop pixel the mean of four
    // input pixels), or boxes a third of a pixel shorter (crop pixels blended with weights of
    // any fraction).
    let cases = (augment_case(), strip, any::<bool>());
    gpu_property(40, cases, |(case, strip, shorter)| {
        let (s, cfg, (lin, lout), seed) = case;
        let g = gpu().unwrap();
        let st = g.stream();
        // The input as stored (layout `lin`) and as the reference reads it (NCHW).
        let stored: Vec<u8> = (0..s.len())
            .map(|i| ((i as u64).wrapping_mul(2654435761) ^ seed) as u8)
            .collect();
        let bytes = reference::relayout(&stored, s, lin, Layout::Nchw);
        let mut draw = AugmentDraw::random(&cfg, s.n, s.h, s.w, seed);
        if shorter {
            for b in &mut draw.boxes {
                b[2] -= 1.0 / 3.0;
                b[3] -= 1.0 / 3.0;
            }
        }
        let aug = Augment::new(st, s, &cfg, &draw)
            .unwrap()
            .with_layouts(lin, lout)
            .with_strip(strip)
            .unwrap();
        let out = aug.output_shape();
        let x: CudaSlice<u8> = st.clone_htod(&stored).unwrap();
        let mut fused = poisoned(out.len());
        let mut chain = poisoned(out.len());
        let mut scratch = None;
        {
            let mut fv = fused.slice_mut(GUARD..GUARD + out.len());
            match aug.run_fused(g, st, &x, &mut fv) {
                // A GPU with less shared memory per block than this kernel size needs refuses
                // it by name before launching (H100/H200 take every size).
                Err(streamline::error::Error::InvalidArgument {
                    arg: "kernel_size", ..
                }) => return Ok(()),
                r => r.unwrap(),
            }
            let mut cv = chain.slice_mut(GUARD..GUARD + out.len());
            let ran = aug.run_separate(g, st, &x, &mut scratch, &mut cv);
            // The chain writes NCHW only, and says so naming the argument.
            match lout {
                Layout::Nchw => ran.unwrap(),
                Layout::Nhwc => prop_assert!(
                    matches!(
                        ran,
                        Err(streamline::error::Error::InvalidArgument {
                            arg: "output layout",
                            ..
                        })
                    ),
                    "{:?}",
                    ran
                ),
            }
        }
        let f = reference::relayout(&fetch(&fused, out.len())?, out, lout, Layout::Nchw);
        let c = match lout {
            Layout::Nchw => Some(fetch(&chain, out.len())?),
            Layout::Nhwc => None,
        };
        // The error budget of `reference::augment_bound` (stds of at least 0.5 here).
        let vmax = if cfg.scale { 1.0 } else { 255.0 };
        let (delta, tol) = reference::augment_bound(&cfg);
        let (want, amb) = reference::augment(&bytes, s, &cfg, &draw, delta);
        for i in 0..out.len() {
            if amb[i] {
                // A nearest-neighbour tie within delta: the value of either neighbour is
                // right; both stay within the data range.
                let lim = vmax / 0.5 + 1.0;
                prop_assert!(f[i].is_finite() && (f[i] as f64).abs() <= lim);
                continue;
            }
            prop_assert!(
                ((f[i] as f64) - want[i]).abs() <= tol,
                "fused element {} is {} but the reference gives {} (tolerance {})",
                i,
                f[i],
                want[i],
                tol
            );
            if let Some(c) = &c {
                prop_assert!(
                    ((c[i] as f64) - want[i]).abs() <= tol,
                    "chain element {} is {} but the reference gives {} (tolerance {})",
                    i,
                    c[i],
                    want[i],
                    tol
                );
            }
        }
        Ok(())
    });
}

/// Seed 003's exact workload: 256 x 256 images, crop 128, blur 7, batch 32.
#[test]
fn augment_seed003_batch() {
    let Some(g) = gpu() else { return };
    let st = g.stream();
    let s = Shape::new(32, 3, 256, 256);
    let cfg = AugmentConfig::seed003(256, 3);
    let draw = AugmentDraw::random(&cfg, s.n, s.h, s.w, 3);
    let aug = Augment::new(st, s, &cfg, &draw).unwrap();
    let bytes: Vec<u8> = (0..s.len()).map(|i| (i * 7 % 251) as u8).collect();
    let x: CudaSlice<u8> = st.clone_htod(&bytes).unwrap();
    let out = aug.output_shape();
    let mut fused = poisoned(out.len());
    let mut chain = poisoned(out.len());
    let mut scratch = None;
    {
        let mut fv = fused.slice_mut(GUARD..GUARD + out.len());
        aug.run_fused(g, st, &x, &mut fv).unwrap();
        let mut cv = chain.slice_mut(GUARD..GUARD + out.len());
        aug.run_separate(g, st, &x, &mut scratch, &mut cv).unwrap();
    }
    let f = fetch(&fused, out.len()).unwrap();
    let c = fetch(&chain, out.len()).unwrap();
    // Same stages, same f32 rules: the two differ only by the blur's summation order
    // ((4k + 24)u of 255) except near nearest-neighbour ties, where a blurred window may take
    // the other neighbour (at most 255 times the largest weight); require that of nearly all.
    let tol = (4.0 * 7.0 + 24.0) * U * 255.0 * 4.0;
    let off = f
        .iter()
        .zip(&c)
        .filter(|(a, b)| ((**a - **b) as f64).abs() > tol)
        .count();
    assert!(
        off * 1000 <= out.len(),
        "{off} of {} fused values differ from the chain by more than {tol}",
        out.len()
    );
    // The layouts change the addressing only: NHWC in or out gives the same bits.
    let nhwc: Vec<u8> = reference::relayout(&bytes, s, Layout::Nchw, Layout::Nhwc);
    let xh: CudaSlice<u8> = st.clone_htod(&nhwc).unwrap();
    for (lin, lout) in [
        (Layout::Nhwc, Layout::Nchw),
        (Layout::Nhwc, Layout::Nhwc),
        (Layout::Nchw, Layout::Nhwc),
    ] {
        let aug = Augment::new(st, s, &cfg, &draw)
            .unwrap()
            .with_layouts(lin, lout);
        let src = if lin == Layout::Nhwc { &xh } else { &x };
        let mut y = poisoned(out.len());
        {
            let mut yv = y.slice_mut(GUARD..GUARD + out.len());
            aug.run_fused(g, st, src, &mut yv).unwrap();
        }
        let got = reference::relayout(&fetch(&y, out.len()).unwrap(), out, lout, Layout::Nchw);
        assert!(
            bitwise_eq(&got, &f),
            "{lin} in, {lout} out differs from NCHW in and out"
        );
    }
    // The strip changes which block rotates a row, not how: every strip gives the same bits
    // (3 leaves a shorter strip at the bottom of each column of 8 tiles).
    for strip in [1, 2, 3, 8] {
        let aug = Augment::new(st, s, &cfg, &draw)
            .unwrap()
            .with_strip(Some(strip))
            .unwrap();
        let mut y = poisoned(out.len());
        {
            let mut yv = y.slice_mut(GUARD..GUARD + out.len());
            aug.run_fused(g, st, &x, &mut yv).unwrap();
        }
        let got = fetch(&y, out.len()).unwrap();
        assert!(
            bitwise_eq(&got, &f),
            "strips of {strip} tiles differ from the default"
        );
    }
    // A strip of no tiles is refused by name.
    assert!(matches!(
        Augment::new(st, s, &cfg, &draw)
            .unwrap()
            .with_strip(Some(0)),
        Err(streamline::error::Error::InvalidArgument { arg: "strip", .. })
    ));
}

/// Seed 003's augmentation of `c` channels to `size`, with crop side `crop`, kernel size `k`
/// and nearest (or bilinear) rotation.
fn augment_cfg(c: usize, size: usize, crop: usize, k: usize, nearest: bool) -> AugmentConfig {
    let mut cfg = AugmentConfig::seed003(size, c);
    cfg.crop = crop;
    cfg.kernel_size = k;
    cfg.interp = if nearest {
        Interp::Nearest
    } else {
        Interp::Bilinear
    };
    cfg
}

/// The fused kernel reads its uint8 input at any byte alignment (a view into a larger buffer,
/// say): the same images from an aligned buffer and from one a byte into another give the same
/// bits, in both input layouts, for every channel count, one tile and strips per block, windows
/// at every border and, with a crop no larger than its output, parts of the haloed tile.
#[test]
fn augment_input_at_any_alignment() {
    let Some(g) = gpu() else { return };
    let st = g.stream();
    // (images, channels, side, crop, size, kernel size, nearest)
    let cases = [
        (3, 3, 256, 128, 256, 7, true),
        (2, 1, 64, 40, 96, 5, false),
        (2, 2, 48, 24, 80, 7, true),
        (2, 4, 32, 32, 64, 3, false),
        (1, 3, 80, 80, 80, 7, true),
        (1, 3, 64, 40, 100, 15, true),
    ];
    for (n, c, side, crop, size, k, nearest) in cases {
        let s = Shape::new(n, c, side, side);
        let cfg = augment_cfg(c, size, crop, k, nearest);
        let draw = AugmentDraw::random(&cfg, n, side, side, (side * c + k) as u64);
        let stored: Vec<u8> = (0..s.len()).map(|i| (i * 29 % 251) as u8).collect();
        let out = s.with_size(size, size);
        for layout in [Layout::Nchw, Layout::Nhwc] {
            let bytes = if layout == Layout::Nhwc {
                reference::relayout(&stored, s, Layout::Nchw, Layout::Nhwc)
            } else {
                stored.clone()
            };
            let aligned: CudaSlice<u8> = st.clone_htod(&bytes).unwrap();
            let mut shifted_bytes = vec![0u8];
            shifted_bytes.extend_from_slice(&bytes);
            let shifted: CudaSlice<u8> = st.clone_htod(&shifted_bytes).unwrap();
            let shifted = shifted.slice(1..);
            for strip in [1, 2, 3] {
                let aug = Augment::new(st, s, &cfg, &draw)
                    .unwrap()
                    .with_layouts(layout, Layout::Nchw)
                    .with_strip(Some(strip))
                    .unwrap();
                let run = |x: &CudaView<u8>| {
                    let mut y = poisoned(out.len());
                    {
                        let mut yv = y.slice_mut(GUARD..GUARD + out.len());
                        aug.run_fused(g, st, x, &mut yv).unwrap();
                    }
                    fetch(&y, out.len()).unwrap()
                };
                let (a, b) = (run(&aligned.slice(..)), run(&shifted));
                assert!(
                    bitwise_eq(&a, &b),
                    "case {s:?} {layout} crop {crop} size {size} k {k} strip {strip}: the \
                     aligned input gives other bits than the same bytes one byte on"
                );
            }
        }
    }
}

/// Strips of tiles through every path of the kernels: the 7-tap kernels' parts (a crop not
/// enlarged), the wider kernels (staged and through parts), bilinear rotation, the halo rows
/// kept in a ring and copied up, NHWC in and out, and image heights that leave the last strip
/// of a column short. Every strip gives the bits of one tile per block.
#[test]
fn augment_strips_match_one_tile() {
    let Some(g) = gpu() else { return };
    let st = g.stream();
    // (images, channels, side, crop, size, kernel size, nearest, layouts)
    let nchw = (Layout::Nchw, Layout::Nchw);
    let cases = [
        (2, 3, 100, 100, 100, 7, true, nchw),
        (2, 3, 70, 40, 140, 31, true, nchw),
        (1, 2, 64, 32, 150, 15, false, nchw),
        (3, 4, 90, 50, 97, 7, false, (Layout::Nhwc, Layout::Nhwc)),
        (2, 1, 48, 30, 200, 63, true, (Layout::Nchw, Layout::Nhwc)),
        // The nearest 7-tap strips that copy their halo rows up (1, 2 and 4 channels): a short
        // last strip, the window in parts (a crop not enlarged), a kernel of fewer taps.
        (2, 1, 100, 50, 100, 7, true, nchw),
        (2, 2, 90, 90, 90, 7, true, (Layout::Nhwc, Layout::Nchw)),
        (2, 4, 100, 100, 100, 7, true, nchw),
        (2, 4, 120, 60, 150, 5, true, (Layout::Nhwc, Layout::Nhwc)),
    ];
    for (n, c, side, crop, size, k, nearest, (lin, lout)) in cases {
        let s = Shape::new(n, c, side, side);
        let cfg = augment_cfg(c, size, crop, k, nearest);
        let draw = AugmentDraw::random(&cfg, n, side, side, (side * k) as u64);
        let stored: Vec<u8> = (0..s.len()).map(|i| (i * 37 % 253) as u8).collect();
        let x: CudaSlice<u8> = st.clone_htod(&stored).unwrap();
        let out = s.with_size(size, size);
        let run = |strip: usize| {
            let aug = Augment::new(st, s, &cfg, &draw)
                .unwrap()
                .with_layouts(lin, lout)
                .with_strip(Some(strip))
                .unwrap();
            let mut y = poisoned(out.len());
            {
                let mut yv = y.slice_mut(GUARD..GUARD + out.len());
                aug.run_fused(g, st, &x, &mut yv).unwrap();
            }
            fetch(&y, out.len()).unwrap()
        };
        let one = run(1);
        for strip in [2, 3, 8] {
            assert!(
                bitwise_eq(&run(strip), &one),
                "case {s:?} crop {crop} size {size} k {k}: strips of {strip} differ from one tile"
            );
        }
    }
}

// ---------------------------------------------------------------- GPU identities

/// Rotation by 0 (nearest) copies the input, blur of a constant is that constant.
#[test]
fn gpu_identities() {
    gpu_property(16, (shape(), any::<u64>()), |(s, seed)| {
        let g = gpu().unwrap();
        let x = values(s.len(), seed);
        let xd = upload(&x);
        let a = PerImage::upload(g.stream(), "angles", &vec![0.0; s.n]).unwrap();
        let mut y = poisoned(s.len());
        {
            let mut yv = y.slice_mut(GUARD..GUARD + s.len());
            rotate(g, g.stream(), s, &xd, &a, Interp::Nearest, None, &mut yv).unwrap();
        }
        prop_assert_eq!(fetch(&y, s.len())?, x);
        let cst = upload(&vec![3.25f32; s.len()]);
        let k = (2 * s.h.min(s.w) - 1).min(7);
        let mut y = poisoned(s.len());
        {
            let mut yv = y.slice_mut(GUARD..GUARD + s.len());
            gaussian_blur(
                g,
                g.stream(),
                s,
                &cst,
                (k, k),
                Sigma::Global(1.5, 1.5),
                &mut yv,
            )
            .unwrap();
        }
        // Weights normalised in f32 sum to 1 within (k + 4)u per axis.
        let tol = 2.0 * (k as f64 + 4.0) * U * 3.25;
        close(
            &fetch(&y, s.len())?,
            &vec![3.25; s.len()],
            tol,
            "blur of a constant",
        )
    });
}

// ---------------------------------------------------------------- bad input (GPU)

/// `roi_align` remembers the last call's box checks; a call with another batch or other options
/// checks the boxes again.
#[test]
fn roi_align_checks_boxes_again_for_another_batch_or_options() {
    let Some(g) = gpu() else { return };
    let rb = RoiBoxes::upload(g.stream(), &[[3.0, 0.0, 0.0, 4.0, 4.0]]).unwrap();
    let mut o = RoiAlign {
        out_h: 2,
        out_w: 2,
        spatial_scale: 1.0,
        sampling_ratio: -1,
        aligned: false,
    };
    let mut y = upload(&[0.0; 4]);
    let mut call = |shape: Shape, o: RoiAlign| {
        let x = upload(&vec![1.0; shape.len()]);
        roi_align(g, g.stream(), shape, &x, &rb, o, &mut y).map_err(|e| e.to_string())
    };
    let four = Shape::new(4, 1, 8, 8);
    call(four, o).unwrap();
    let e = call(Shape::new(2, 1, 8, 8), o).unwrap_err();
    assert!(e.contains("batch index 3 is out of range 0..2"), "{e}");
    // A scale that makes the box need more than the allowed samples per bin.
    o.spatial_scale = 1e5;
    let e = call(four, o).unwrap_err();
    assert!(e.contains("samples per bin"), "{e}");
}

#[test]
fn launchers_refuse_mismatched_lengths_and_write_nothing() {
    let Some(g) = gpu() else { return };
    let st = g.stream();
    let s = Shape::new(2, 3, 5, 7);
    let x = upload(&vec![1.0; s.len()]);
    let mut y = poisoned(s.len() - 1);
    let a = PerImage::upload(st, "angles", &[0.0, 1.0]).unwrap();
    let e = rotate(g, st, s, &x, &a, Interp::Nearest, None, &mut y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`y`"), "{e}");
    let few = PerImage::upload(st, "angles", &[0.0]).unwrap();
    let mut y2 = poisoned(s.len() - 2 * GUARD);
    let e = resize(g, st, s, &x, (0, 3), ResizeMode::Bilinear, &mut y2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`size`"), "{e}");
    let mut y3 = poisoned(s.len() - 2 * GUARD);
    let e = rotate(g, st, s, &x, &few, Interp::Nearest, None, &mut y3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`angles`") || e.contains("`y`"), "{e}");
    assert!(st
        .clone_dtoh(&y)
        .unwrap()
        .iter()
        .all(|v| v.to_bits() == POISON_F32));
}

// ---------------------------------------------------------------- bad input (no GPU)

#[test]
fn bad_arguments_are_named_without_a_device() {
    let s = Shape::new(2, 3, 8, 8);
    let o = RoiAlign {
        out_h: 4,
        out_w: 4,
        spatial_scale: 1.0,
        sampling_ratio: -1,
        aligned: false,
    };
    let err = |r: streamline::Result<Shape>| r.unwrap_err().to_string();
    let e = err(check_roi_align(s, &[[2.0, 0.0, 0.0, 4.0, 4.0]], &o));
    assert!(
        e.contains("`boxes`") && e.contains("out of range 0..2"),
        "{e}"
    );
    let e = err(check_roi_align(s, &[[0.0, f32::NAN, 0.0, 4.0, 4.0]], &o));
    assert!(e.contains("`boxes`") && e.contains("finite"), "{e}");
    let e = err(check_roi_align(s, &[[0.0, 5.0, 0.0, 4.0, 4.0]], &o));
    assert!(e.contains("x1 <= x2"), "{e}");
    let e = err(check_roi_align(
        s,
        &[[0.0, 0.0, 0.0, 4.0, 4.0]],
        &RoiAlign { out_h: 0, ..o },
    ));
    assert!(e.contains("`output_size`"), "{e}");
    let e = err(check_roi_align(
        s,
        &[[0.0, 0.0, 0.0, 1e6, 1e6]],
        &RoiAlign {
            out_h: 1,
            out_w: 1,
            ..o
        },
    ));
    assert!(e.contains("samples per bin"), "{e}");
    let e = err(check_roi_align(Shape::new(0, 3, 8, 8), &[[0.0; 5]], &o));
    assert!(e.contains("`x`") && e.contains("zero extent"), "{e}");
    // A pixel's offset inside its image must fit 32 bits: 5 x 2^15 x 2^15 values do not.
    let e = err(check_roi_align(
        Shape::new(1, 5, 1 << 15, 1 << 15),
        &[[0.0; 5]],
        &o,
    ));
    assert!(e.contains("`x`") && e.contains("2^32 - 1"), "{e}");
    let e = err(check_roi_align(
        s,
        &[[0.0; 5]],
        &RoiAlign {
            out_h: 3 << 14,
            out_w: 1 << 15,
            ..o
        },
    ));
    assert!(e.contains("`output_size`") && e.contains("2^32 - 1"), "{e}");

    let e = check_kernel_size("kernel_size", 4, 8, "width")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`kernel_size`") && e.contains("odd"), "{e}");
    let e = check_kernel_size("kernel_size", 0, 8, "width")
        .unwrap_err()
        .to_string();
    assert!(e.contains("odd"), "{e}");
    let e = check_kernel_size("kernel_size", 9, 4, "width")
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least 5"), "{e}");
    for bad in [0.0f32, -1.0, f32::NAN, f32::INFINITY] {
        let e = check_sigma("sigma", bad).unwrap_err().to_string();
        assert!(e.contains("`sigma`") && e.contains("> 0"), "{e}");
    }

    let shape = Shape::new(4, 3, 64, 64);
    let ok = AugmentConfig::seed003(64, 3);
    ok.check(shape).unwrap();
    let bad = |f: &dyn Fn(&mut AugmentConfig), arg: &str| {
        let mut c = ok.clone();
        f(&mut c);
        let e = c.check(shape).unwrap_err().to_string();
        assert!(e.contains(&format!("`{arg}`")), "{arg}: {e}");
    };
    bad(&|c| c.crop = 65, "crop");
    bad(&|c| c.crop = 0, "crop");
    bad(&|c| c.size = 10, "size");
    bad(&|c| c.kernel_size = 8, "kernel_size");
    bad(&|c| c.sigma = (0.0, 2.0), "sigma");
    bad(&|c| c.mean = vec![0.0], "mean");
    bad(&|c| c.std = vec![1.0, 0.0, 1.0], "std");
    bad(&|c| c.degrees = f32::NAN, "degrees");
    let e = ok.check(Shape::new(1, 5, 64, 64)).unwrap_err().to_string();
    assert!(e.contains("channels"), "{e}");
}

// ---------------------------------------------------------------- CPU-only properties

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..Default::default() })]

    /// A blur of a constant image is that constant (the weights sum to 1, reflection keeps
    /// every tap inside).
    #[test]
    fn reference_blur_of_constant_is_constant(
        s in shape(), a in 0usize..16, sig in 0.05f64..40.0, v in -100.0f64..100.0
    ) {
        let k = (2 * a + 1).min(2 * s.h.min(s.w) - 1);
        let x = vec![v; s.len()];
        let y = reference::gaussian_blur(&x, s, k, k, &vec![(sig, sig); s.n]);
        for o in y {
            prop_assert!((o - v).abs() <= 1e-12 * v.abs().max(1.0));
        }
    }

    /// Rotation by 0 degrees (nearest) is the identity.
    #[test]
    fn reference_rotate_by_zero_is_identity(s in shape(), seed in any::<u64>()) {
        let x: Vec<f64> = values(s.len(), seed).iter().map(|&v| v as f64).collect();
        let r = reference::rotate(&x, s, &vec![0.0; s.n], Interp::Nearest, None, 0.0);
        prop_assert_eq!(r.values, x);
    }

    /// roi_align with `aligned=true`, a box covering the image and the output the image's size
    /// is the identity: every sample lands on a pixel centre.
    #[test]
    fn reference_roi_align_full_box_is_identity(s in shape(), seed in any::<u64>()) {
        let x: Vec<f64> = values(s.len(), seed).iter().map(|&v| v as f64).collect();
        let boxes: Vec<[f32; 5]> =
            (0..s.n).map(|n| [n as f32, 0.0, 0.0, s.w as f32, s.h as f32]).collect();
        let o = RoiAlign { out_h: s.h, out_w: s.w, spatial_scale: 1.0, sampling_ratio: -1, aligned: true };
        let y = reference::roi_align(&x, s, &boxes, &o);
        for (a, b) in y.iter().zip(&x) {
            prop_assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{} vs {}", a, b);
        }
    }

    /// Normalize then un-normalize (`x * std + mean`) gives back the input.
    #[test]
    fn reference_normalize_round_trips(
        s in shape(), seed in any::<u64>(), m in -3.0f32..3.0, sd in 0.01f32..10.0
    ) {
        let x: Vec<f64> = values(s.len(), seed).iter().map(|&v| v as f64).collect();
        let mean = vec![m; s.c];
        let std: Vec<f32> = (0..s.c).map(|c| sd * (c + 1) as f32).collect();
        let y = reference::normalize(&x, s, &mean, &std);
        for (i, (a, b)) in y.iter().zip(&x).enumerate() {
            let c = (i / (s.h * s.w)) % s.c;
            let back = a * std[c] as f64 + mean[c] as f64;
            prop_assert!((back - b).abs() <= 1e-12 * (b.abs() + m.abs() as f64 + 1.0));
        }
    }

    /// The separable resize reference with equal sizes is the identity in every mode.
    #[test]
    fn reference_resize_same_size_is_identity(s in shape(), seed in any::<u64>()) {
        let x: Vec<f64> = values(s.len(), seed).iter().map(|&v| v as f64).collect();
        for mode in [ResizeMode::Bilinear, ResizeMode::BilinearAntialias, ResizeMode::Nearest] {
            let y = reference::resize(&x, s, s.h, s.w, mode);
            for (a, b) in y.iter().zip(&x) {
                prop_assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0));
            }
        }
    }
}

// ---------------------------------------------------------------- under the engine's capture

/// Every launcher whose parameters are uploaded per call, with the uploads inside a capture
/// of the engine: each replay (after new input values and poisoned outputs) equals the eager
/// calls on the same inputs bit for bit, and the augmentation drawn on the device draws at
/// every replay what the same sequence of eager runs draws.
#[test]
fn uploads_inside_a_capture_replay_as_eager_calls() {
    use streamline::engine::{DeviceBuffer, StreamPool};
    use streamline::Result;
    gpu_property(
        6,
        (1usize..=4, 8usize..=70, 8usize..=70, any::<u64>()),
        |(n, h, w, seed)| {
            let g = gpu().unwrap();
            let pool = StreamPool::with_streams(g, 1).unwrap();
            let st = pool.stream(0).unwrap();
            let s = Shape::new(n, 3, h, w);
            let angles: Vec<f32> = (0..n).map(|i| 37.0 * i as f32 - 50.0).collect();
            let pairs: Vec<f32> = (0..2 * n).map(|i| 0.3 + 0.2 * i as f32).collect();
            let boxes: Vec<[f32; 5]> = (0..n)
                .map(|i| [i as f32, 0.5, 1.0, w as f32 - 2.0, h as f32 - 1.5])
                .collect();
            let (mean, std) = ([0.4, 0.5, 0.6], [0.2, 0.3, 0.25]);
            let crop = h.min(w) / 2;
            let cfg = AugmentConfig {
                crop,
                size: 2 * crop,
                ..AugmentConfig::seed003(2 * crop, 3)
            };
            let draw = AugmentDraw::random_per_image(&cfg, n, h, w, seed);
            let o = RoiAlign {
                out_h: 5,
                out_w: 6,
                spatial_scale: 1.0,
                sampling_ratio: -1,
                aligned: false,
            };
            let aug_len = cfg.size * cfg.size * 3 * n;
            let lens = [
                s.len(),
                s.len(),
                s.len(),
                n * 3 * 30,
                aug_len,
                aug_len,
                n * 3 * 30,
            ];
            let flat: Vec<f32> = boxes.iter().flatten().copied().collect();
            let on_device = DeviceBuffer::from_slice(&pool, 0, &flat).unwrap();
            let calls = |x: &DeviceBuffer<f32>,
                         x8: &DeviceBuffer<u8>,
                         rng: &std::sync::Arc<DeviceRng>,
                         y: &mut [DeviceBuffer<f32>]|
             -> Result<()> {
                let stats = ChannelStats::upload(st, &mean, &std)?;
                normalize(g, st, s, x, &stats, &mut y[0])?;
                let a = PerImage::upload(st, "angles", &angles)?;
                rotate(g, st, s, x, &a, Interp::Bilinear, Some(2.0), &mut y[1])?;
                let p = PerImage::upload(st, "sigma", &pairs)?;
                gaussian_blur(g, st, s, x, (5, 7), Sigma::PerImage(&p), &mut y[2])?;
                let b = RoiBoxes::upload(st, &boxes)?;
                roi_align(g, st, s, x, &b, o, &mut y[3])?;
                Augment::new(st, s, &cfg, &draw)?.run_fused(g, st, x8, &mut y[4])?;
                Augment::drawn_on_device(st, s, &cfg, rng, true)?
                    .run_fused(g, st, x8, &mut y[5])?;
                // SAFETY: `on_device` outlives every launch and graph of this test.
                let d = unsafe { RoiBoxes::on_device(&on_device, st)? };
                roi_align(g, st, s, x, &d, o, &mut y[6])
            };
            let data = |r: u64| {
                (
                    values(s.len(), seed ^ r),
                    bytes(s.len(), seed.wrapping_add(r)),
                )
            };
            let (v, b) = data(0);
            let mut x = DeviceBuffer::from_slice(&pool, 0, &v).unwrap();
            let mut x8 = DeviceBuffer::from_slice(&pool, 0, &b).unwrap();
            let poison = |len: usize| vec![f32::from_bits(POISON_F32); len];
            let mut ys: Vec<DeviceBuffer<f32>> = lens
                .iter()
                .map(|&l| DeviceBuffer::from_slice(&pool, 0, &poison(l)).unwrap())
                .collect();
            let mut want: Vec<DeviceBuffer<f32>> = lens
                .iter()
                .map(|&l| DeviceBuffer::zeros(&pool, 0, l).unwrap())
                .collect();
            let eager_rng = DeviceRng::new(st, seed).unwrap();
            let captured_rng = DeviceRng::new(st, seed).unwrap();
            pool.synchronize().unwrap();
            let cap = pool.begin_capture(0).unwrap();
            calls(&x, &x8, &captured_rng, &mut ys).unwrap();
            let graph = cap.end().unwrap();
            // The graph keeps the generator (made before the capture) alive on its own.
            drop(captured_rng);
            for r in 0..3u64 {
                let (v, b) = data(r + 1);
                streamline::engine::memory::h2d(st, &v, &mut x).unwrap();
                streamline::engine::memory::h2d(st, &b, &mut x8).unwrap();
                for (y, &l) in ys.iter_mut().zip(&lens) {
                    streamline::engine::memory::h2d(st, &poison(l), y).unwrap();
                }
                calls(&x, &x8, &eager_rng, &mut want).unwrap();
                graph.launch().unwrap();
                pool.synchronize().unwrap();
                for (i, (y, e)) in ys.iter().zip(&want).enumerate() {
                    let (y, e) = (y.to_vec(st).unwrap(), e.to_vec(st).unwrap());
                    prop_assert!(
                        !y.iter().any(|v| v.to_bits() == POISON_F32),
                        "replay {}, output {}: unwritten",
                        r,
                        i
                    );
                    prop_assert!(
                        bitwise_eq(&y, &e),
                        "replay {}, output {}: differs from eager",
                        r,
                        i
                    );
                }
            }
            prop_assert_eq!(eager_rng.draws(st).unwrap(), 3);
            // The boxes on the device give the uploaded boxes' results.
            let (a, b) = (want[3].to_vec(st).unwrap(), want[6].to_vec(st).unwrap());
            prop_assert!(
                bitwise_eq(&a, &b),
                "boxes on the device differ from uploaded ones"
            );
            Ok(())
        },
    );
}

/// The device's draw is the CPU reference's, bit for bit, and advances once per run.
#[test]
fn device_draws_match_the_reference() {
    gpu_property(
        12,
        (
            1usize..=300,
            20usize..=90,
            20usize..=90,
            any::<u64>(),
            any::<bool>(),
        ),
        |(n, h, w, seed, per_image)| {
            let g = gpu().unwrap();
            let st = g.stream();
            let s = Shape::new(n, 1, h, w);
            let crop = h.min(w) / 3;
            let cfg = AugmentConfig {
                crop,
                size: 2 * crop,
                degrees: 30.0,
                sigma: (0.2, 1.7),
                ..AugmentConfig::seed003(2 * crop, 1)
            };
            let rng = DeviceRng::new(st, seed).unwrap();
            let aug = Augment::drawn_on_device(st, s, &cfg, &rng, per_image).unwrap();
            let x: CudaSlice<u8> = st.clone_htod(&bytes(s.len(), seed)).unwrap();
            let mut y: CudaSlice<f32> = st.alloc_zeros(aug.output_shape().len()).unwrap();
            for k in 0..3u64 {
                aug.run_fused(g, st, &x, &mut y).unwrap();
                let got = aug.last_draw(st).unwrap();
                let want = reference::augment_device_draw(&cfg, (n, h, w), seed, k, per_image);
                prop_assert_eq!(&got, &want, "draw {}", k);
            }
            prop_assert_eq!(rng.draws(st).unwrap(), 3);
            prop_assert!(aug.run_separate(g, st, &x, &mut None, &mut y).is_err());
            Ok(())
        },
    );
}
