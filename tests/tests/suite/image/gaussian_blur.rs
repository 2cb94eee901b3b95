//! `gaussian_blur`, small shapes and batches of thousands of tiles.

use super::*;

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
