//! The single operations in NHWC, the layout image decoders produce and CV-CUDA computes in:
//! `resize_relayout`, `roi_align_relayout`, `gaussian_blur_in` and `normalize_in` run the NCHW
//! kernels' arithmetic in the same order with each layout's strides, so their values equal the
//! NCHW kernels' bitwise (which their own tests hold to the CPU references); normalisation is
//! also held to its reference directly. Every output is poisoned first and checked written.

use super::roi_align::{roi_case, too_many_samples};
use super::*;
use cudarc::driver::CudaViewMut;

/// The layout pairs of the operations that convert as they go; the same-layout operations
/// take NHWC to NHWC.
fn layouts() -> impl Strategy<Value = (Layout, Layout)> {
    prop::sample::select(vec![
        (Layout::Nhwc, Layout::Nhwc),
        (Layout::Nhwc, Layout::Nchw),
        (Layout::Nchw, Layout::Nhwc),
    ])
}

/// `x` (NCHW values of shape `s`) stored in layout `from` on the device.
fn stored(x: &[f32], s: Shape, from: Layout) -> CudaSlice<f32> {
    upload(&reference::relayout(x, s, Layout::Nchw, from))
}

/// Runs `op` into a poisoned buffer of `out` values laid out `to`, checks that every element
/// was written and nothing around them, and returns the values as NCHW.
fn run(
    out: Shape,
    to: Layout,
    op: impl FnOnce(&mut CudaViewMut<f32>),
) -> Result<Vec<f32>, TestCaseError> {
    let mut y = poisoned(out.len());
    {
        let mut yv = y.slice_mut(GUARD..GUARD + out.len());
        op(&mut yv);
    }
    Ok(reference::relayout(
        &fetch(&y, out.len())?,
        out,
        to,
        Layout::Nchw,
    ))
}

#[test]
fn resize_layouts_match_nchw_bitwise() {
    let modes = prop::sample::select(vec![
        ResizeMode::Bilinear,
        ResizeMode::BilinearAntialias,
        ResizeMode::Nearest,
    ]);
    let case = (shape(), extent(), extent(), modes, layouts(), any::<u64>());
    gpu_property(48, case, |(s, oh, ow, mode, (from, to), seed)| {
        let g = gpu().unwrap();
        let x = values(s.len(), seed);
        let out = s.with_size(oh, ow);
        let nchw = Layout::Nchw;
        let want = run(out, nchw, |y| {
            resize(g, g.stream(), s, &upload(&x), (oh, ow), mode, y).unwrap()
        })?;
        let xd = stored(&x, s, from);
        let got = run(out, to, |y| {
            resize_relayout(g, g.stream(), s, (&xd, from), (oh, ow), mode, (y, to)).unwrap()
        })?;
        prop_assert!(
            bitwise_eq(&got, &want),
            "{s:?} -> {oh} x {ow} {mode:?} {from} -> {to}: differs from NCHW"
        );
        Ok(())
    });
}

#[test]
fn roi_align_layouts_match_nchw_bitwise() {
    gpu_property(
        48,
        (roi_case(), layouts(), any::<u64>()),
        |(case, (from, to), seed)| {
            let (s, boxes, o) = case;
            let g = gpu().unwrap();
            let too_many = too_many_samples(&boxes, &o);
            if too_many {
                return Ok(());
            }
            roi_layouts_agree(g, s, &values(s.len(), seed), &boxes, o, (from, to))
        },
    );
}

/// The crop case CV-CUDA's `crop_flip_normalize_reformat` covers (one sample per bin, the
/// kernel of its own), with batches whose threads take several rows.
#[test]
fn roi_align_crops_in_layouts_match_nchw_bitwise() {
    let Some(g) = gpu() else { return };
    for (n, c, side, crop) in [(40, 3, 256, 128), (7, 4, 61, 33), (300, 1, 20, 20)] {
        let s = Shape::new(n, c, side, side);
        let boxes: Vec<[f32; 5]> = (0..n)
            .map(|i| {
                let x0 = ((i * 37) % (side - crop + 1)) as f32;
                let y0 = ((i * 11) % (side - crop + 1)) as f32;
                [i as f32, x0, y0, x0 + crop as f32, y0 + crop as f32]
            })
            .collect();
        let o = RoiAlign {
            out_h: crop,
            out_w: crop,
            spatial_scale: 1.0,
            sampling_ratio: 0,
            aligned: false,
        };
        for pair in [
            (Layout::Nhwc, Layout::Nchw),
            (Layout::Nhwc, Layout::Nhwc),
            (Layout::Nchw, Layout::Nhwc),
        ] {
            roi_layouts_agree(g, s, &values(s.len(), n as u64), &boxes, o, pair).unwrap();
        }
    }
}

/// `roi_align_relayout` of `x` (NCHW values) in the layouts `(from, to)` against `roi_align`
/// in NCHW, bitwise.
fn roi_layouts_agree(
    g: &Gpu,
    s: Shape,
    x: &[f32],
    boxes: &[[f32; 5]],
    o: RoiAlign,
    (from, to): (Layout, Layout),
) -> Result<(), TestCaseError> {
    let rb = RoiBoxes::upload(g.stream(), boxes).unwrap();
    let out = Shape::new(boxes.len(), s.c, o.out_h, o.out_w);
    let nchw = Layout::Nchw;
    let want = run(out, nchw, |y| {
        roi_align(g, g.stream(), s, &upload(x), &rb, o, y).unwrap()
    })?;
    let xd = stored(x, s, from);
    let got = run(out, to, |y| {
        roi_align_relayout(g, g.stream(), s, (&xd, from), &rb, o, (y, to)).unwrap()
    })?;
    prop_assert!(
        bitwise_eq(&got, &want),
        "{s:?} {o:?} {from} -> {to}: differs from NCHW"
    );
    Ok(())
}

#[test]
fn gaussian_blur_nhwc_matches_nchw_bitwise() {
    let case = (
        shape(),
        (0usize..16, 0usize..16),
        prop_oneof![0.05f32..0.5, 0.5f32..3.0],
        any::<u64>(),
    );
    gpu_property(48, case, |(s, (a, b), sig, seed)| {
        let g = gpu().unwrap();
        // Odd kernel sizes 1..=31 that fit the image (reflect padding), square ones (the fast
        // path) one time in two.
        let fit = |k: usize, ext: usize| (2 * k + 1).min(2 * ext - 1);
        let (kx, ky) = if seed % 2 == 0 {
            let k = fit(a, s.w.min(s.h));
            (k, k)
        } else {
            (fit(a, s.w), fit(b, s.h))
        };
        blur_layouts_agree(g, s, &values(s.len(), seed), (kx, ky), sig)
    });
}

/// Both tiles of the fast path (whole rows of planes 129 to 256 wide, 128 x 64 otherwise), the
/// general path, and batches of thousands of tiles.
#[test]
fn gaussian_blur_nhwc_large_batches_match_nchw_bitwise() {
    let Some(g) = gpu() else { return };
    for (s, k) in [
        (Shape::new(40, 3, 256, 256), 7),
        (Shape::new(9, 3, 33, 255), 7),
        (Shape::new(30, 4, 60, 132), 5),
        (Shape::new(6, 2, 50, 300), 9),
        (Shape::new(700, 1, 70, 130), 15),
    ] {
        let x = values(s.len(), k as u64);
        blur_layouts_agree(g, s, &x, (k, k), 1.5).unwrap();
    }
}

/// `gaussian_blur_in` NHWC of `x` (NCHW values) against `gaussian_blur` in NCHW, bitwise.
fn blur_layouts_agree(
    g: &Gpu,
    s: Shape,
    x: &[f32],
    k: (usize, usize),
    sig: f32,
) -> Result<(), TestCaseError> {
    let sigma = || Sigma::Global(sig, sig * 1.3);
    let nchw = Layout::Nchw;
    let want = run(s, nchw, |y| {
        gaussian_blur(g, g.stream(), s, &upload(x), k, sigma(), y).unwrap()
    })?;
    let nhwc = Layout::Nhwc;
    let xd = stored(x, s, nhwc);
    let got = run(s, nhwc, |y| {
        gaussian_blur_in(g, g.stream(), nhwc, s, &xd, k, sigma(), y).unwrap()
    })?;
    prop_assert!(
        bitwise_eq(&got, &want),
        "{s:?} kernel {k:?} sigma {sig}: NHWC differs from NCHW"
    );
    Ok(())
}

#[test]
fn normalize_nhwc_matches_nchw_and_reference() {
    gpu_property(48, (shape(), any::<u64>(), 0usize..3), |(s, seed, off)| {
        let g = gpu().unwrap();
        let x = values(s.len(), seed);
        let mean: Vec<f32> = (0..s.c).map(|c| 0.3 * c as f32 - 0.2).collect();
        let std: Vec<f32> = (0..s.c).map(|c| 0.2 + 0.7 * c as f32).collect();
        let stats = ChannelStats::upload(g.stream(), &mean, &std).unwrap();
        let nchw = Layout::Nchw;
        let want = run(s, nchw, |y| {
            normalize(g, g.stream(), s, &upload(&x), &stats, y).unwrap()
        })?;
        // Inputs `off` values into their buffer: vectors of 4 aligned or not.
        let nhwc = Layout::Nhwc;
        let mut lead = vec![f32::NAN; off];
        lead.extend(reference::relayout(&x, s, nchw, nhwc));
        let xd = upload(&lead);
        let got = run(s, nhwc, |y| {
            let xv = xd.slice(off..);
            normalize_in(g, g.stream(), nhwc, s, &xv, &stats, y).unwrap()
        })?;
        prop_assert!(bitwise_eq(&got, &want), "{s:?}: NHWC differs from NCHW");
        let xs: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let reference = reference::normalize(&xs, s, &mean, &std);
        // As in `normalize_matches_reference`.
        let tol = 4.0 * U * (max_abs(&x) + 0.5) / 0.2;
        close(&got, &reference, tol, "normalize NHWC")
    });
}
