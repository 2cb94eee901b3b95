//! Reference of `rotate`.

use super::idx;
use std::collections::HashMap;
use streamline::spec::image::{Interp, Shape};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_by_90_maps_top_right_to_bottom_right() {
        // Counter-clockwise: the output's top-right corner shows the input's bottom-right.
        let (y, x) = rotation_source(90.0, 5, 5, 0, 4);
        assert!(
            (y - 4.0).abs() < 1e-12 && (x - 4.0).abs() < 1e-12,
            "{y} {x}"
        );
    }
}
