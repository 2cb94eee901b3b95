//! Reference of `resize`.

use super::separable;
use streamline::spec::image::{ResizeMode, Shape};

/// Taps `(index, weight)` of one output index `d` along an axis resized from `n_in` to `n_out`.
///
/// - Bilinear (`align_corners=False`): source `u = (n_in / n_out)(d + 0.5) - 0.5`, clamped
///   below at 0; `i0 = floor(u)`, `i1 = i0 + 1` unless `i0` is the last index; weights
///   `1 - (u - i0)`, `u - i0`.
/// - Antialiased bilinear (torch's `_upsample_bilinear2d_aa`): with `scale = n_in / n_out`,
///   `support = max(scale, 1)`, `center = scale (d + 0.5)`, inputs
///   `[trunc(center - support + 0.5) max 0, trunc(center + support + 0.5) min n_in)` with
///   weights `max(0, 1 - |(i - center + 0.5) / max(scale, 1)|)` divided by their sum.
/// - Nearest (torch's `nearest`): `min(floor(d * scale), n_in - 1)` with `scale` and the
///   product rounded to f32 (torch's own arithmetic, which decides the index at exact
///   multiples).
pub fn resize_taps(mode: ResizeMode, n_in: usize, n_out: usize, d: usize) -> Vec<(usize, f64)> {
    let scale = n_in as f64 / n_out as f64;
    match mode {
        ResizeMode::Bilinear => {
            let u = (scale * (d as f64 + 0.5) - 0.5).max(0.0);
            let i0 = u.floor() as usize;
            let i1 = if i0 < n_in - 1 { i0 + 1 } else { i0 };
            let l = u - i0 as f64;
            vec![(i0, 1.0 - l), (i1, l)]
        }
        ResizeMode::BilinearAntialias => {
            let support = scale.max(1.0);
            let center = scale * (d as f64 + 0.5);
            let lo = ((center - support + 0.5).trunc() as i64).max(0) as usize;
            let hi = ((center + support + 0.5).trunc() as usize).min(n_in);
            let inv = 1.0 / scale.max(1.0);
            let taps: Vec<(usize, f64)> = (lo..hi)
                .map(|i| {
                    let t = ((i as f64 - center + 0.5) * inv).abs();
                    (i, if t < 1.0 { 1.0 - t } else { 0.0 })
                })
                .collect();
            let total: f64 = taps.iter().map(|t| t.1).sum();
            taps.into_iter()
                .map(|(i, w)| (i, if total != 0.0 { w / total } else { w }))
                .collect()
        }
        ResizeMode::Nearest => {
            let sc = n_in as f32 / n_out as f32;
            let i = ((d as f32 * sc).floor() as usize).min(n_in - 1);
            vec![(i, 1.0)]
        }
    }
}

/// `resize` of every plane to `out_h x out_w`: the separable product of [`resize_taps`]
/// along y and x.
pub fn resize(x: &[f64], s: Shape, out_h: usize, out_w: usize, mode: ResizeMode) -> Vec<f64> {
    let out = s.with_size(out_h, out_w);
    let mut y = vec![0.0; out.len()];
    let ty: Vec<_> = (0..out_h)
        .map(|d| resize_taps(mode, s.h, out_h, d))
        .collect();
    let tx: Vec<_> = (0..out_w)
        .map(|d| resize_taps(mode, s.w, out_w, d))
        .collect();
    for n in 0..s.n {
        separable(x, (s, out), n, (&ty, &tx), &mut y);
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_resize_uses_torch_f32_indices() {
        // 3 -> 7: floor(d * 3/7).
        let idx: Vec<usize> = (0..7)
            .map(|d| resize_taps(ResizeMode::Nearest, 3, 7, d)[0].0)
            .collect();
        assert_eq!(idx, vec![0, 0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn antialias_equals_bilinear_when_enlarging() {
        for (n_in, n_out) in [(1, 5), (3, 7), (128, 256), (5, 5)] {
            for d in 0..n_out {
                let a = resize_taps(ResizeMode::BilinearAntialias, n_in, n_out, d);
                let b = resize_taps(ResizeMode::Bilinear, n_in, n_out, d);
                let val = |t: &[(usize, f64)]| -> Vec<f64> {
                    let mut v = vec![0.0; n_in];
                    for &(i, w) in t {
                        v[i] += w;
                    }
                    v
                };
                let (va, vb) = (val(&a), val(&b));
                for (p, q) in va.iter().zip(&vb) {
                    assert!((p - q).abs() < 1e-12, "{n_in}->{n_out} d={d}: {a:?} {b:?}");
                }
            }
        }
    }
}
