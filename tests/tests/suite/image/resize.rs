//! `resize`, small shapes and batches whose threads take several rows.

use super::*;

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
