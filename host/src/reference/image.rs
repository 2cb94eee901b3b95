//! CPU references of the image operations: plain loops over NCHW `Vec`s, values in f64, each
//! written from torchvision's definition (given in each function's documentation, coordinate
//! conventions included) and sharing no code with the kernels.
//!
//! # Error analysis (what the GPU tests allow)
//!
//! The kernels compute in f32 with the same formulas as PyTorch's CUDA kernels. For an output
//! that is a weighted sum `sum_k w_k v_k` of `m` inputs with weights `w_k >= 0` summing to at
//! most 1 (every op here except normalize), each weight carries a relative error of a few ulp
//! (`u = 2^-24`) from its f32 computation and the sum `m` roundings, so the absolute error is at
//! most about `(m + 8) u max|v|`. Where a weight depends on a source coordinate computed in f32
//! (rotation, resize, roi_align), the coordinate has an absolute error `delta` of a few ulp of
//! its magnitude (`~ 4 u (h + w)`), which moves a bilinear result by at most `2 delta max|v|`.
//! Nearest-neighbour choices are discontinuous: where the exact source coordinate lies within
//! `delta` of a rounding tie or of the image border, either neighbour (or the fill) is a
//! correct answer; [`rotate`] reports those pixels with every value they may take.

use crate::ops::image::{AugmentConfig, AugmentDraw, Interp, ResizeMode, RoiAlign, Shape};
use std::collections::HashMap;

fn idx(s: Shape, n: usize, c: usize, y: usize, x: usize) -> usize {
    ((n * s.c + c) * s.h + y) * s.w + x
}

/// `ToDtype(float32, scale)`: `f32(x) * f32(1/255)` with scale (one rounding), else `f32(x)`.
pub fn to_float(x: &[u8], scale: bool) -> Vec<f32> {
    let s = (1.0f64 / 255.0) as f32 as f64;
    x.iter()
        .map(|&v| {
            if scale {
                (v as f64 * s) as f32
            } else {
                v as f32
            }
        })
        .collect()
}

/// `Normalize(mean, std)`: `(x - mean[c]) / std[c]`.
pub fn normalize(x: &[f64], s: Shape, mean: &[f32], std: &[f32]) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for n in 0..s.n {
        for c in 0..s.c {
            for i in 0..s.h * s.w {
                let k = (n * s.c + c) * s.h * s.w + i;
                y[k] = (x[k] - mean[c] as f64) / std[c] as f64;
            }
        }
    }
    y
}

/// torchvision's `roi_align` bilinear rule at `(y, x)` of plane `(n, c)`: 0 if `y < -1`,
/// `y > h`, `x < -1` or `x > w`; otherwise coordinates `<= 0` become 0, those at or past the
/// last row/column become it, and the four neighbours `(floor y, floor x) ..` are blended with
/// weights `(1 - ly)(1 - lx)`, `(1 - ly) lx`, `ly (1 - lx)`, `ly lx`.
fn roi_point(x: &[f64], s: Shape, n: usize, c: usize, y: f64, xx: f64) -> f64 {
    let (h, w) = (s.h as f64, s.w as f64);
    if y < -1.0 || y > h || xx < -1.0 || xx > w {
        return 0.0;
    }
    let y = y.max(0.0);
    let xx = xx.max(0.0);
    let (mut y0, mut x0) = (y.floor() as usize, xx.floor() as usize);
    let (y1, x1);
    let (mut yy, mut xv) = (y, xx);
    if y0 >= s.h - 1 {
        y0 = s.h - 1;
        y1 = s.h - 1;
        yy = y0 as f64;
    } else {
        y1 = y0 + 1;
    }
    if x0 >= s.w - 1 {
        x0 = s.w - 1;
        x1 = s.w - 1;
        xv = x0 as f64;
    } else {
        x1 = x0 + 1;
    }
    let ly = yy - y0 as f64;
    let lx = xv - x0 as f64;
    let at = |a: usize, b: usize| x[idx(s, n, c, a, b)];
    (1.0 - ly) * (1.0 - lx) * at(y0, x0)
        + (1.0 - ly) * lx * at(y0, x1)
        + ly * (1.0 - lx) * at(y1, x0)
        + ly * lx * at(y1, x1)
}

/// `torchvision.ops.roi_align`: for box `[b, x1, y1, x2, y2]`, with `off = 0.5` if `aligned`
/// else 0, the box starts at `(x1 s - off, y1 s - off)` (`s` the spatial scale) and has size
/// `(x2 - x1) s` by `(y2 - y1) s`, each at least 1 when not aligned. Bin `(ph, pw)` of an
/// `out_h x out_w` grid averages `gh x gw` samples (the sampling ratio, or `ceil(size / out)`
/// per axis when it is `<= 0`) at `start + p * bin + (i + 0.5) * bin / g`, each by
/// `roi_point`; the average divides by `max(gh * gw, 1)`. Output: `boxes x c x out_h x out_w`.
pub fn roi_align(x: &[f64], s: Shape, boxes: &[[f32; 5]], o: &RoiAlign) -> Vec<f64> {
    let out = Shape::new(boxes.len(), s.c, o.out_h, o.out_w);
    let mut y = vec![0.0; out.len()];
    let sc = o.spatial_scale as f64;
    let off = if o.aligned { 0.5 } else { 0.0 };
    for (k, b) in boxes.iter().enumerate() {
        let n = b[0] as usize;
        let sx = b[1] as f64 * sc - off;
        let sy = b[2] as f64 * sc - off;
        let mut rw = b[3] as f64 * sc - off - sx;
        let mut rh = b[4] as f64 * sc - off - sy;
        if !o.aligned {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let bh = rh / o.out_h as f64;
        let bw = rw / o.out_w as f64;
        let gh = if o.sampling_ratio > 0 {
            o.sampling_ratio as usize
        } else {
            bh.ceil() as usize
        };
        let gw = if o.sampling_ratio > 0 {
            o.sampling_ratio as usize
        } else {
            bw.ceil() as usize
        };
        let count = (gh * gw).max(1) as f64;
        for c in 0..s.c {
            for ph in 0..o.out_h {
                for pw in 0..o.out_w {
                    let mut acc = 0.0;
                    for iy in 0..gh {
                        let yy = sy + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                        for ix in 0..gw {
                            let xx = sx + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                            acc += roi_point(x, s, n, c, yy, xx);
                        }
                    }
                    y[idx(out, k, c, ph, pw)] = acc / count;
                }
            }
        }
    }
    y
}

/// Result of [`rotate`]: the value at the exact source point, and for pixels whose source lies
/// within the coordinate tolerance of a nearest-neighbour tie or of the border, every value the
/// pixel may correctly take.
pub struct Rotated {
    /// Values at the exact source points.
    pub values: Vec<f64>,
    /// Index -> acceptable values, for the ambiguous pixels.
    pub ambiguous: HashMap<usize, Vec<f64>>,
}

/// The exact source point of output pixel `(i, j)` for a rotation by `deg` degrees
/// counter-clockwise of an `h x w` image about its centre (torchvision's `rotate`,
/// `expand=False`): with `bx = j - (w - 1) / 2`, `by = i - (h - 1) / 2`, the source is
/// `x = cos(a) bx - sin(a) by + (w - 1) / 2`, `y = sin(a) bx + cos(a) by + (h - 1) / 2`
/// (the inverse matrix applied to pixel centres, as `_affine_grid` and
/// `grid_sample(align_corners=False)` compose it).
pub fn rotation_source(deg: f64, h: usize, w: usize, i: usize, j: usize) -> (f64, f64) {
    let a = deg.to_radians();
    let (sn, cs) = a.sin_cos();
    let bx = j as f64 - (w as f64 - 1.0) / 2.0;
    let by = i as f64 - (h as f64 - 1.0) / 2.0;
    (
        sn * bx + cs * by + (h as f64 - 1.0) / 2.0,
        cs * bx - sn * by + (w as f64 - 1.0) / 2.0,
    )
}

/// `rotate(img, angle, interpolation, expand=False, fill)` per image. Nearest: the input pixel
/// at `(round(y), round(x))` (ties to even) if inside, else the fill (0 without one). Bilinear
/// (`grid_sample` with zero padding): `v = sum` of the in-bounds neighbours times their
/// weights; with a fill, `mask * (v - fill) + fill`, `mask` the sum of those weights.
/// `delta` is the coordinate tolerance for reporting ambiguous nearest pixels (0: none).
pub fn rotate(
    x: &[f64],
    s: Shape,
    angles: &[f32],
    mode: Interp,
    fill: Option<f32>,
    delta: f64,
) -> Rotated {
    let mut values = vec![0.0; s.len()];
    let mut ambiguous = HashMap::new();
    let f = fill.unwrap_or(0.0) as f64;
    let inside = |a: f64, b: f64| a >= 0.0 && b >= 0.0 && a < s.h as f64 && b < s.w as f64;
    for n in 0..s.n {
        for i in 0..s.h {
            for j in 0..s.w {
                let (sy, sx) = rotation_source(angles[n] as f64, s.h, s.w, i, j);
                for c in 0..s.c {
                    let at = |a: i64, b: i64| x[idx(s, n, c, a as usize, b as usize)];
                    let nearest = |yy: f64, xx: f64| {
                        let (a, b) = (round_half_even(yy), round_half_even(xx));
                        if inside(a, b) {
                            at(a as i64, b as i64)
                        } else {
                            f
                        }
                    };
                    let k = idx(s, n, c, i, j);
                    match mode {
                        Interp::Nearest => {
                            values[k] = nearest(sy, sx);
                            if delta > 0.0 {
                                let mut alts = Vec::new();
                                for dy in [-delta, 0.0, delta] {
                                    for dx in [-delta, 0.0, delta] {
                                        let v = nearest(sy + dy, sx + dx);
                                        if !alts.contains(&v) {
                                            alts.push(v);
                                        }
                                    }
                                }
                                if alts.len() > 1 {
                                    ambiguous.insert(k, alts);
                                }
                            }
                        }
                        Interp::Bilinear => {
                            let (fy, fx) = (sy.floor(), sx.floor());
                            let (ly, lx) = (sy - fy, sx - fx);
                            let mut v = 0.0;
                            let mut mask = 0.0;
                            for (dy, wy) in [(0.0, 1.0 - ly), (1.0, ly)] {
                                for (dx, wx) in [(0.0, 1.0 - lx), (1.0, lx)] {
                                    if inside(fy + dy, fx + dx) {
                                        v += wy * wx * at((fy + dy) as i64, (fx + dx) as i64);
                                        mask += wy * wx;
                                    }
                                }
                            }
                            values[k] = if fill.is_some() {
                                mask * (v - f) + f
                            } else {
                                v
                            };
                        }
                    }
                }
            }
        }
    }
    Rotated { values, ambiguous }
}

fn round_half_even(v: f64) -> f64 {
    let r = v.round();
    if (v - v.trunc()).abs() == 0.5 {
        2.0 * (v / 2.0).round()
    } else {
        r
    }
}

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
    let mut y = vec![0.0; x.len()];
    let (rx, ry) = ((kx / 2) as i64, (ky / 2) as i64);
    for n in 0..s.n {
        let wx = gaussian_weights(kx, sigmas[n].0);
        let wy = gaussian_weights(ky, sigmas[n].1);
        for c in 0..s.c {
            for i in 0..s.h {
                for j in 0..s.w {
                    let mut acc = 0.0;
                    for (a, wya) in wy.iter().enumerate() {
                        let yy = reflect(i as i64 + a as i64 - ry, s.h);
                        for (b, wxb) in wx.iter().enumerate() {
                            let xx = reflect(j as i64 + b as i64 - rx, s.w);
                            acc += wya * wxb * x[idx(s, n, c, yy, xx)];
                        }
                    }
                    y[idx(s, n, c, i, j)] = acc;
                }
            }
        }
    }
    y
}

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
        for c in 0..s.c {
            for i in 0..out_h {
                for j in 0..out_w {
                    let mut acc = 0.0;
                    for &(a, wa) in &ty[i] {
                        for &(b, wb) in &tx[j] {
                            acc += wa * wb * x[idx(s, n, c, a, b)];
                        }
                    }
                    y[idx(out, n, c, i, j)] = acc;
                }
            }
        }
    }
    y
}

/// Seed 003's transform composed from the references above: to float, `roi_align` crop
/// (aligned=False, sampling_ratio=-1), resize up (antialiased bilinear), rotate (zero fill),
/// blur, normalize. Returns the values and, for nearest rotation, the set of outputs whose blur
/// window contains an ambiguous rotated pixel (see [`rotate`]).
pub fn augment(
    x: &[u8],
    s: Shape,
    cfg: &AugmentConfig,
    draw: &AugmentDraw,
    delta: f64,
) -> (Vec<f64>, Vec<bool>) {
    let f: Vec<f64> = to_float(x, cfg.scale).iter().map(|&v| v as f64).collect();
    let boxes: Vec<[f32; 5]> = draw
        .boxes
        .iter()
        .enumerate()
        .map(|(i, b)| [i as f32, b[0], b[1], b[2], b[3]])
        .collect();
    let o = RoiAlign {
        out_h: cfg.crop,
        out_w: cfg.crop,
        spatial_scale: 1.0,
        sampling_ratio: -1,
        aligned: false,
    };
    let crop = roi_align(&f, s, &boxes, &o);
    let cs = s.with_size(cfg.crop, cfg.crop);
    let z = resize(&crop, cs, cfg.size, cfg.size, ResizeMode::BilinearAntialias);
    let os = s.with_size(cfg.size, cfg.size);
    let r = rotate(&z, os, &draw.angles, cfg.interp, None, delta);
    let sig: Vec<(f64, f64)> = draw.sigmas.iter().map(|&v| (v as f64, v as f64)).collect();
    let k = cfg.kernel_size;
    let b = gaussian_blur(&r.values, os, k, k, &sig);
    let y = normalize(&b, os, &cfg.mean, &cfg.std);
    // Outputs depending on an ambiguous rotated pixel.
    let mut amb = vec![false; os.len()];
    let rad = (k / 2) as i64;
    for &key in r.ambiguous.keys() {
        let j = key % os.w;
        let i = (key / os.w) % os.h;
        let plane = key / (os.w * os.h);
        for a in -rad..=rad {
            for bb in -rad..=rad {
                // Every output whose reflected window reaches (i, j).
                for (oi, oj) in [(i as i64 + a, j as i64 + bb)] {
                    for ri in [oi, -oi, 2 * (os.h as i64 - 1) - oi] {
                        for rj in [oj, -oj, 2 * (os.w as i64 - 1) - oj] {
                            if ri >= 0 && rj >= 0 && (ri as usize) < os.h && (rj as usize) < os.w {
                                amb[(plane * os.h + ri as usize) * os.w + rj as usize] = true;
                            }
                        }
                    }
                }
            }
        }
    }
    (y, amb)
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

    #[test]
    fn rotation_by_90_maps_top_right_to_bottom_right() {
        // Counter-clockwise: the output's top-right corner shows the input's bottom-right.
        let (y, x) = rotation_source(90.0, 5, 5, 0, 4);
        assert!(
            (y - 4.0).abs() < 1e-12 && (x - 4.0).abs() < 1e-12,
            "{y} {x}"
        );
    }

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
