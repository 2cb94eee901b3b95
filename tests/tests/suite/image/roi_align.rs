//! `roi_align` and its backward (atomic and deterministic).

use super::*;

/// Whether a box of `boxes` needs more samples per bin than `roi_align` takes (the host refuses
/// such boxes before any launch).
pub(super) fn too_many_samples(boxes: &[[f32; 5]], o: &RoiAlign) -> bool {
    boxes.iter().any(|b| {
        let (gh, gw) = streamline::spec::image::roi_sampling_grid(b, o);
        gh * gw > streamline_abi::image::ROI_MAX_SAMPLES_PER_BIN as i64
    })
}

pub(super) fn roi_case() -> impl Strategy<Value = (Shape, Vec<[f32; 5]>, RoiAlign)> {
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
        let too_many = too_many_samples(&boxes, &o);
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
        let too_many = too_many_samples(&boxes, &o);
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
