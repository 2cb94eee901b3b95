//! Reference of `roi_align`.

use super::idx;
use streamline::spec::image::{RoiAlign, Shape};

/// torchvision's `roi_align` bilinear rule at `(y, x)` of plane `(n, c)`: 0 if `y < -1`,
/// `y > h`, `x < -1` or `x > w`; otherwise coordinates `<= 0` become 0, those at or past the
/// last row/column become it, and the four neighbours `(floor y, floor x) ..` are blended with
/// weights `(1 - ly)(1 - lx)`, `(1 - ly) lx`, `ly (1 - lx)`, `ly lx`.
fn roi_point(x: &[f64], s: Shape, n: usize, c: usize, y: f64, xx: f64) -> f64 {
    let (h, w) = (s.h as f64, s.w as f64);
    if y < -1.0 || y > h || xx < -1.0 || xx > w {
        return 0.0;
    }
    let (y0, y1, ly) = roi_axis(y, s.h);
    let (x0, x1, lx) = roi_axis(xx, s.w);
    let at = |a: usize, b: usize| x[idx(s, n, c, a, b)];
    (1.0 - ly) * (1.0 - lx) * at(y0, x0)
        + (1.0 - ly) * lx * at(y0, x1)
        + ly * (1.0 - lx) * at(y1, x0)
        + ly * lx * at(y1, x1)
}

/// One axis of [`roi_point`] at `v` (`>= -1`) of a line of `n` pixels: the two neighbours and
/// the weight of the second, with `v <= 0` taken as 0 and `v` at or past the last pixel as it.
fn roi_axis(v: f64, n: usize) -> (usize, usize, f64) {
    let v = v.max(0.0);
    let lo = v.floor() as usize;
    if lo >= n - 1 {
        (n - 1, n - 1, 0.0)
    } else {
        (lo, lo + 1, v - lo as f64)
    }
}

/// A box's start, bin sizes and sampling grid, computed in f32 in torchvision's order (see
/// [`roi_align`]).
struct Geometry {
    sx: f32,
    sy: f32,
    bh: f32,
    bw: f32,
    gh: usize,
    gw: usize,
}

impl Geometry {
    fn of(b: &[f32; 5], o: &RoiAlign) -> Geometry {
        let sc = o.spatial_scale;
        let off = if o.aligned { 0.5f32 } else { 0.0 };
        let sx = b[1] * sc - off;
        let sy = b[2] * sc - off;
        let mut rw = (b[3] * sc - off) - sx;
        let mut rh = (b[4] * sc - off) - sy;
        if !o.aligned {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let grid = |r: f32, out: usize| {
            if o.sampling_ratio > 0 {
                o.sampling_ratio as usize
            } else {
                (r / out as f32).ceil().max(0.0) as usize
            }
        };
        Geometry {
            sx,
            sy,
            bh: rh / o.out_h as f32,
            bw: rw / o.out_w as f32,
            gh: grid(rh, o.out_h),
            gw: grid(rw, o.out_w),
        }
    }

    /// Row coordinate of sample `iy` of output row `ph`, in torchvision's f32 arithmetic.
    fn y(&self, ph: usize, iy: usize) -> f32 {
        self.sy + ph as f32 * self.bh + (iy as f32 + 0.5) * self.bh / self.gh as f32
    }

    /// Column coordinate of sample `ix` of output column `pw`.
    fn x(&self, pw: usize, ix: usize) -> f32 {
        self.sx + pw as f32 * self.bw + (ix as f32 + 0.5) * self.bw / self.gw as f32
    }
}

/// `torchvision.ops.roi_align`: for box `[b, x1, y1, x2, y2]`, with `off = 0.5` if `aligned`
/// else 0, the box starts at `(x1 s - off, y1 s - off)` (`s` the spatial scale) and has size
/// `(x2 s - off) - (x1 s - off)` by the same in y, each at least 1 when not aligned. Bin
/// `(ph, pw)` of an `out_h x out_w` grid averages `gh x gw` samples (the sampling ratio, or
/// `ceil(size / out)` per axis when it is `<= 0`) at `start + p * bin + (i + 0.5) * bin / g`,
/// each by `roi_point`; the average divides by `max(gh * gw, 1)`. Output: `boxes x c x out_h x
/// out_w`.
///
/// The box geometry and the sample coordinates are computed in f32, in torchvision's order of
/// operations, as torchvision does for f32 inputs: a sample exactly on the `y = -1` (or `h`,
/// `x`) cut-off is inside or outside by that arithmetic's rounding, which f64 would decide
/// differently. The blending is in f64.
pub fn roi_align(x: &[f64], s: Shape, boxes: &[[f32; 5]], o: &RoiAlign) -> Vec<f64> {
    let out = Shape::new(boxes.len(), s.c, o.out_h, o.out_w);
    let mut y = vec![0.0; out.len()];
    for (k, b) in boxes.iter().enumerate() {
        let n = b[0] as usize;
        let geo = Geometry::of(b, o);
        let (gh, gw) = (geo.gh, geo.gw);
        let count = (gh * gw).max(1) as f64;
        for c in 0..s.c {
            for ph in 0..o.out_h {
                for pw in 0..o.out_w {
                    let mut acc = 0.0;
                    for iy in 0..gh {
                        let yy = geo.y(ph, iy);
                        for ix in 0..gw {
                            let xx = geo.x(pw, ix);
                            acc += roi_point(x, s, n, c, yy as f64, xx as f64);
                        }
                    }
                    y[idx(out, k, c, ph, pw)] = acc / count;
                }
            }
        }
    }
    y
}

/// The gradient of [`roi_align`] with respect to its input, for the output gradient `gy`
/// (`boxes x c x out_h x out_w`): every sample of bin `(ph, pw)` of box `k` adds
/// `gy[k, c, ph, pw] w / count` to each of the four pixels a sample blends, `w` being
/// that pixel's weight there (torchvision's `roi_align_backward`; a box whose batch index is
/// outside the batch adds nothing). The geometry is computed in f32 as in [`roi_align`], the
/// weights and sums in f64.
///
/// Returns the gradient, and per input value the number of shares it received and the sum of
/// their magnitudes, from which a result computed in f32 is bounded: within
/// `(shares + 16) u sum` of the exact value (each share rounds a product and a quotient, and
/// the sum adds one rounding per share).
pub fn roi_align_backward(
    gy: &[f64],
    s: Shape,
    boxes: &[[f32; 5]],
    o: &RoiAlign,
) -> (Vec<f64>, Vec<u32>, Vec<f64>) {
    let out = Shape::new(boxes.len(), s.c, o.out_h, o.out_w);
    let mut gx = vec![0.0; s.len()];
    let mut shares = vec![0u32; s.len()];
    let mut mags = vec![0.0; s.len()];
    for (k, b) in boxes.iter().enumerate() {
        // The batch index truncated, as torchvision and the kernels take it.
        let t = b[0].trunc();
        if t.is_nan() || t < 0.0 || t as usize >= s.n {
            continue;
        }
        let n = b[0] as usize;
        let geo = Geometry::of(b, o);
        let (gh, gw) = (geo.gh, geo.gw);
        let count = (gh * gw).max(1) as f64;
        for c in 0..s.c {
            for ph in 0..o.out_h {
                for pw in 0..o.out_w {
                    let g = gy[idx(out, k, c, ph, pw)] / count;
                    for iy in 0..gh {
                        let yy = geo.y(ph, iy);
                        for ix in 0..gw {
                            let xx = geo.x(pw, ix);
                            let (y, x) = (yy as f64, xx as f64);
                            if y < -1.0 || y > s.h as f64 || x < -1.0 || x > s.w as f64 {
                                continue;
                            }
                            let (y0, y1, ly) = roi_axis(y, s.h);
                            let (x0, x1, lx) = roi_axis(x, s.w);
                            for (a, bb, wt) in [
                                (y0, x0, (1.0 - ly) * (1.0 - lx)),
                                (y0, x1, (1.0 - ly) * lx),
                                (y1, x0, ly * (1.0 - lx)),
                                (y1, x1, ly * lx),
                            ] {
                                let i = idx(s, n, c, a, bb);
                                gx[i] += g * wt;
                                shares[i] += 1;
                                mags[i] += (g * wt).abs();
                            }
                        }
                    }
                }
            }
        }
    }
    (gx, shares, mags)
}
