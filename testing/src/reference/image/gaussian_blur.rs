//! Reference of `gaussian_blur`.

use super::separable;
use streamline::spec::image::Shape;

/// torchvision's 1-D Gaussian kernel of size `k`: `exp(-0.5 (t / sigma)^2)` for
/// `t = -(k-1)/2 ..= (k-1)/2`, divided by its sum.
pub fn gaussian_weights(k: usize, sigma: f64) -> Vec<f64> {
    let r = (k / 2) as f64;
    let e: Vec<f64> = (0..k)
        .map(|t| (-0.5 * ((t as f64 - r) / sigma).powi(2)).exp())
        .collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|v| v / sum).collect()
}

/// Reflect padding without repeating the edge (`pad(mode="reflect")`), for `|overhang| < n`.
pub fn reflect(i: i64, n: usize) -> usize {
    let n = n as i64;
    let r = if i < 0 { -i } else { i };
    (if r >= n { 2 * (n - 1) - r } else { r }) as usize
}

/// `gaussian_blur(img, [kx, ky], [sx, sy])`: reflect-pad by `kx/2` left and right, `ky/2` top
/// and bottom, then the 2-D convolution with `wy[a] * wx[b]` ([`gaussian_weights`]); `sigmas`
/// holds `(sx, sy)` per image.
pub fn gaussian_blur(x: &[f64], s: Shape, kx: usize, ky: usize, sigmas: &[(f64, f64)]) -> Vec<f64> {
    assert_eq!(sigmas.len(), s.n, "one (sx, sy) per image");
    let mut y = vec![0.0; x.len()];
    // Tap `t` of output index `i` reads the reflected input index `i + t - r`.
    let taps = |len: usize, k: usize, sigma: f64| -> Vec<Vec<(usize, f64)>> {
        let w = gaussian_weights(k, sigma);
        let r = (k / 2) as i64;
        (0..len)
            .map(|i| {
                w.iter()
                    .enumerate()
                    .map(|(t, &wt)| (reflect(i as i64 + t as i64 - r, len), wt))
                    .collect()
            })
            .collect()
    };
    for (n, &(sx, sy)) in sigmas.iter().enumerate().take(s.n) {
        let ty = taps(s.h, ky, sy);
        let tx = taps(s.w, kx, sx);
        separable(x, (s, s), n, (&ty, &tx), &mut y);
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_match_torchvision_k3() {
        // torchvision: GaussianBlur(3, sigma=1) kernel1d = [0.27406862, 0.45186276, 0.27406862].
        let w = gaussian_weights(3, 1.0);
        for (a, b) in w.iter().zip([0.27406862, 0.45186276, 0.27406862]) {
            assert!((a - b).abs() < 1e-7, "{w:?}");
        }
    }

    #[test]
    fn reflect_does_not_repeat_the_edge() {
        assert_eq!(
            (-3..8).map(|i| reflect(i, 5)).collect::<Vec<_>>(),
            vec![3, 2, 1, 0, 1, 2, 3, 4, 3, 2, 1]
        );
    }
}
