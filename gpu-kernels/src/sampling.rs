//! Sampling rules shared by the image kernels, each written to follow the PyTorch/torchvision
//! operation it names (the exact definitions are in the host's `reference` modules).

use core::intrinsics::fmaf32;
use streamline_device::math::{ceilf, fast_div, floor_i32, floorf, rint_i32, sincospif, trunc_i32};

/// One axis of torchvision's `roi_align` bilinear sample at coordinate `v` of a line of `n`
/// pixels: the sample is 0 when the point is more than one pixel outside (`v < -1` or
/// `v > n`); otherwise a coordinate below 0 is clamped to 0 and one at or past the last pixel
/// to it, and the two neighbours `lo`, `hi` get weights `h` and `l`.
#[derive(Clone, Copy)]
pub struct RoiTap {
    pub lo: i32,
    pub hi: i32,
    pub l: f32,
    pub h: f32,
    pub valid: bool,
}

impl RoiTap {
    #[inline(always)]
    pub fn new(v: f32, n: i32) -> RoiTap {
        let valid = !(v < -1.0 || v > n as f32);
        let mut v = if v <= 0.0 { 0.0 } else { v };
        // The conversion saturates and maps NaN to 0, so the indices stay inside the line.
        let mut lo = trunc_i32(v);
        let hi;
        if lo >= n - 1 {
            lo = n - 1;
            hi = n - 1;
            v = lo as f32;
        } else {
            hi = lo + 1;
        }
        let l = v - lo as f32;
        RoiTap {
            lo,
            hi,
            l,
            h: 1.0 - l,
            valid,
        }
    }
}

/// torchvision's `roi_align` bilinear sample at `(y, x)` of an `h x w` plane read by `load`
/// (see [`RoiTap`] for each axis): its four neighbours blended, or 0 outside.
///
/// `N` planes at once (`load(k, y, x)` reads plane `k`): the point's neighbours and weights
/// are found once and every plane's four loads are issued together.
#[inline(always)]
pub fn roi_bilinear_n<const N: usize>(
    h: i32,
    w: i32,
    y: f32,
    x: f32,
    load: &impl Fn(usize, i32, i32) -> f32,
) -> [f32; N] {
    let ty = RoiTap::new(y, h);
    let tx = RoiTap::new(x, w);
    let mut out = [0.0f32; N];
    if !(ty.valid && tx.valid) {
        return out;
    }
    let mut v = [[0.0f32; 4]; N];
    for (k, vk) in v.iter_mut().enumerate() {
        *vk = [
            load(k, ty.lo, tx.lo),
            load(k, ty.lo, tx.hi),
            load(k, ty.hi, tx.lo),
            load(k, ty.hi, tx.hi),
        ];
    }
    for (o, vk) in out.iter_mut().zip(v.iter()) {
        *o = blend(&ty, &tx, vk);
    }
    out
}

/// torchvision's blend `w1 v1 + w2 v2 + w3 v3 + w4 v4` of the four neighbours `[(lo, lo),
/// (lo, hi), (hi, lo), (hi, hi)]`, in its order, with the multiply-adds fused as nvcc fuses
/// them by default in torchvision's CUDA kernel.
#[inline(always)]
pub fn blend(ty: &RoiTap, tx: &RoiTap, v: &[f32; 4]) -> f32 {
    let w = [ty.h * tx.h, ty.h * tx.l, ty.l * tx.h, ty.l * tx.l];
    fmaf32(
        w[3],
        v[3],
        fmaf32(w[2], v[2], fmaf32(w[1], v[1], w[0] * v[0])),
    )
}

/// One ROI box in pixel coordinates, with torchvision's derived bin sizes and sampling grid.
#[derive(Clone, Copy)]
pub struct Roi {
    pub start_y: f32,
    pub start_x: f32,
    pub bin_h: f32,
    pub bin_w: f32,
    pub grid_h: i32,
    pub grid_w: i32,
    pub count: f32,
}

impl Roi {
    /// torchvision's `roi_align` box setup for box `(x1, y1, x2, y2)`. The sampling grid is
    /// clamped so that `grid_h * grid_w <= max_samples` whatever the box holds (the host
    /// refuses boxes beyond that before they reach the device).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        b: [f32; 4],
        spatial_scale: f32,
        aligned: bool,
        sampling_ratio: i32,
        out_h: u32,
        out_w: u32,
        max_samples: u32,
    ) -> Roi {
        let offset = if aligned { 0.5 } else { 0.0 };
        let start_x = b[0] * spatial_scale - offset;
        let start_y = b[1] * spatial_scale - offset;
        let end_x = b[2] * spatial_scale - offset;
        let end_y = b[3] * spatial_scale - offset;
        let mut roi_w = end_x - start_x;
        let mut roi_h = end_y - start_y;
        if !aligned {
            roi_w = if roi_w > 1.0 { roi_w } else { 1.0 };
            roi_h = if roi_h > 1.0 { roi_h } else { 1.0 };
        }
        let bin_h = roi_h / out_h as f32;
        let bin_w = roi_w / out_w as f32;
        let max = max_samples as i32;
        let mut grid_h = if sampling_ratio > 0 {
            sampling_ratio
        } else {
            trunc_i32(ceilf(roi_h / out_h as f32))
        };
        let mut grid_w = if sampling_ratio > 0 {
            sampling_ratio
        } else {
            trunc_i32(ceilf(roi_w / out_w as f32))
        };
        grid_h = grid_h.max(0).min(max);
        grid_w = grid_w.max(0).min(max / grid_h.max(1));
        let n = grid_h * grid_w;
        Roi {
            start_y,
            start_x,
            bin_h,
            bin_w,
            grid_h,
            grid_w,
            count: (if n > 1 { n } else { 1 }) as f32,
        }
    }

    /// Row coordinate of sample `iy` of output row `ph` (torchvision's arithmetic).
    #[inline(always)]
    pub fn y_of(&self, ph: u32, iy: i32) -> f32 {
        self.start_y + ph as f32 * self.bin_h + (iy as f32 + 0.5) * self.bin_h / self.grid_h as f32
    }

    /// Column coordinate of sample `ix` of output column `pw` (torchvision's arithmetic).
    #[inline(always)]
    pub fn x_of(&self, pw: u32, ix: i32) -> f32 {
        self.start_x + pw as f32 * self.bin_w + (ix as f32 + 0.5) * self.bin_w / self.grid_w as f32
    }

    /// [`Roi::y_of`] of a box whose grid has one row (`grid_h == 1`): the same value, without
    /// the division by the grid.
    #[inline(always)]
    pub fn y_of_one(&self, ph: u32) -> f32 {
        self.start_y + ph as f32 * self.bin_h + 0.5 * self.bin_h
    }

    /// [`Roi::x_of`] of a box whose grid has one column (`grid_w == 1`).
    #[inline(always)]
    pub fn x_of_one(&self, pw: u32) -> f32 {
        self.start_x + pw as f32 * self.bin_w + 0.5 * self.bin_w
    }

    /// Average of the bin `(ph, pw)` over its sampling grid, sampling with [`roi_bilinear_n`],
    /// for `N` planes at once (`load(k, y, x)` reads plane `k`): the sampling points are found
    /// once for all planes.
    #[inline(always)]
    pub fn bin_n<const N: usize>(
        &self,
        h: i32,
        w: i32,
        ph: u32,
        pw: u32,
        load: impl Fn(usize, i32, i32) -> f32,
    ) -> [f32; N] {
        let mut acc = [0.0f32; N];
        let mut iy = 0;
        while iy < self.grid_h {
            let y = self.y_of(ph, iy);
            let mut ix = 0;
            while ix < self.grid_w {
                let x = self.x_of(pw, ix);
                let v = roi_bilinear_n::<N>(h, w, y, x, &load);
                for k in 0..N {
                    acc[k] += v[k];
                }
                ix += 1;
            }
            iy += 1;
        }
        // A division by 1 changes nothing: skipped (the one-sample boxes of a crop).
        if self.count != 1.0 {
            for a in acc.iter_mut() {
                *a /= self.count;
            }
        }
        acc
    }
}

/// The inverse map of torchvision's `rotate` (expand=False, centre of the image) for an image
/// of `h x w`: output pixel `(i, j)` samples the input at `source(i, j)` (pixel-centre
/// coordinates as `grid_sample(align_corners=False)` unnormalises them).
#[derive(Clone, Copy)]
pub struct Rotation {
    /// The sine of the angle: how steeply an output row runs through the input.
    pub sin: f32,
    t00: f32,
    t01: f32,
    t10: f32,
    t11: f32,
    hf: f32,
    wf: f32,
}

impl Rotation {
    /// Rotation by `degrees` counter-clockwise.
    #[inline(always)]
    pub fn new(degrees: f32, h: u32, w: u32) -> Rotation {
        let (s, c) = sincospif(degrees / 180.0);
        let wf = w as f32;
        let hf = h as f32;
        // torchvision's inverse matrix [[cos, -sin, 0], [sin, cos, 0]], each row divided by
        // half the image size as `_affine_grid` does.
        let half_w = 0.5 * wf;
        let half_h = 0.5 * hf;
        Rotation {
            sin: s,
            t00: c / half_w,
            t01: -s / half_w,
            t10: s / half_h,
            t11: c / half_h,
            hf,
            wf,
        }
    }

    /// Source `(y, x)` in input pixel coordinates for output pixel `(i, j)`.
    #[inline(always)]
    pub fn source(&self, i: i32, j: i32) -> (f32, f32) {
        let (cx, cy) = self.col(j);
        let (rx, ry) = self.row(i);
        self.finish(cx + rx, cy + ry)
    }

    /// Column `j`'s terms of the normalised source `(gx, gy)`: the source of `(i, j)` is
    /// `finish(col(j) + row(i))`, so a block can tabulate the two parts.
    #[inline(always)]
    pub fn col(&self, j: i32) -> (f32, f32) {
        // The base grid: pixel centres relative to the image centre.
        let bx = j as f32 + (1.0 - self.wf) * 0.5;
        (bx * self.t00, bx * self.t10)
    }

    /// Row `i`'s terms of the normalised source `(gx, gy)` (see [`Rotation::col`]).
    #[inline(always)]
    pub fn row(&self, i: i32) -> (f32, f32) {
        let by = i as f32 + (1.0 - self.hf) * 0.5;
        (by * self.t01, by * self.t11)
    }

    /// The smallest and largest source coordinates `((ymin, ymax), (xmin, xmax))` over the
    /// output rows `i0 ..= i1` and columns `j0 ..= j1`. Each computed source coordinate is a
    /// rounded sum of a term of the column and a term of the row, each rounded monotonically,
    /// so it is monotonic in the row and in the column separately, and its extremes over the
    /// rectangle are those of the four corners, exactly.
    #[inline(always)]
    pub fn bounds(&self, (i0, i1): (i32, i32), (j0, j1): (i32, i32)) -> ((f32, f32), (f32, f32)) {
        let (ay, ax) = self.source(i0, j0);
        let (by, bx) = self.source(i0, j1);
        let (cy, cx) = self.source(i1, j0);
        let (dy, dx) = self.source(i1, j1);
        (
            (ay.min(by).min(cy.min(dy)), ay.max(by).max(cy.max(dy))),
            (ax.min(bx).min(cx.min(dx)), ax.max(bx).max(cx.max(dx))),
        )
    }

    /// Bounds on the input columns that the bilinear reads of the output rectangle `i0 ..= i1`
    /// x `j0 ..= j1` make in each input row (see [`ColumnSpans`]). The rectangle's source points
    /// fill a rotated rectangle of the input, and a row `r` is read by the points with `r - 1
    /// <= y < r + 1`; each side pair of the rotated rectangle bounds `x` between two lines in
    /// `y`, which are evaluated over that band widened by half a pixel each side (`r - 1.5 <= y
    /// <= r + 1.5`), and widened in `x` by a pixel for the rounding of the computed source
    /// points and by one more for the columns `floor(x)` and `floor(x) + 1` that a read takes.
    /// A side pair that runs within `2^-10` of the rows (a sine or cosine below that) bounds
    /// nothing. A line's rounding (the hardware's divisions, 2 ulp, and the sums) grows with its
    /// slope `k` and the coordinates, about `|k| (w + h) 2^-22`, while the band widens it by
    /// `1.5 |k|`: the rounding stays inside for images of up to millions of rows.
    #[inline(always)]
    pub fn column_spans(&self, (i0, i1): (i32, i32), (j0, j1): (i32, i32)) -> ColumnSpans {
        const BAND: f32 = 1.5;
        const MARGIN: f32 = 2.0;
        const FLAT: f32 = 1.0 / 1024.0;
        let (s, c) = (self.sin, self.t11 * (0.5 * self.hf));
        let (xc, yc) = ((self.wf - 1.0) * 0.5, (self.hf - 1.0) * 0.5);
        // The rectangle in centred coordinates: `bx = c X + s Y` in `b0 ..= b1` and `by = c Y -
        // s X` in `c0 ..= c1`, with `X = x - xc` and `Y = y - yc`.
        let (b0, b1) = (j0 as f32 - xc, j1 as f32 - xc);
        let (c0, c1) = (i0 as f32 - yc, i1 as f32 - yc);
        // One side pair: `x = a + k y` and `x = b + k y`, lowered and raised to cover the band.
        let pair = |k: f32, a: f32, b: f32| {
            let widen = k.abs() * BAND + MARGIN;
            (k, a.min(b) - widen, a.max(b) + widen)
        };
        let open = (0.0, f32::NEG_INFINITY, f32::INFINITY);
        let u = if c.abs() >= FLAT {
            // x = xc + (bx + s yc) / c - (s / c) y
            let at = |b: f32| xc + fast_div(b + s * yc, c);
            pair(fast_div(-s, c), at(b0), at(b1))
        } else {
            open
        };
        let v = if s.abs() >= FLAT {
            // x = xc - (by + c yc) / s + (c / s) y
            let at = |b: f32| xc - fast_div(b + c * yc, s);
            pair(fast_div(c, s), at(c0), at(c1))
        } else {
            open
        };
        ColumnSpans {
            slope_u: u.0,
            lo_u: u.1,
            hi_u: u.2,
            slope_v: v.0,
            lo_v: v.1,
            hi_v: v.2,
        }
    }

    /// Source `(y, x)` in input pixels from the normalised source: `grid_sample`'s
    /// unnormalisation with `align_corners=False`.
    #[inline(always)]
    pub fn finish(&self, gx: f32, gy: f32) -> (f32, f32) {
        let x = ((gx + 1.0) * self.wf - 1.0) * 0.5;
        let y = ((gy + 1.0) * self.hf - 1.0) * 0.5;
        (y, x)
    }

    /// The nearest pixel to [`Rotation::finish`]'s source point, as [`nearest_pixel`] rounds
    /// it, for planes of at most [`NEAREST_MAX_SIDE`] rows and columns and with no conversion
    /// instruction: `(yi, xi)`, each the rounded coordinate (ties to even) where that lies in
    /// `0 .. NEAREST_MAX_SIDE`, and `NEAREST_MAX_SIDE` or more otherwise (NaN included), so
    /// that `yi < h && xi < w` says whether the pixel lies inside an `h x w` plane.
    #[inline(always)]
    pub fn finish_nearest(&self, gx: f32, gy: f32) -> (u32, u32) {
        // `t / 2` is exact, and adding `1.5 * 2^23` rounds it to an integer (ties to even, as
        // the adder rounds) held in the low bits: the sum's bits less the constant's are that
        // integer while the sum stays in `[2^23, 2^24)`. A rounded value of `2^22` or more
        // leaves that range upwards (bits of `2^24` and more: a difference of `2^22` or more),
        // a negative one downwards (a negative difference, or a sign bit: `2^31` and more as
        // `u32`), and so does NaN (whose bits lie above those of infinity).
        const MAGIC: f32 = 12582912.0;
        let half = |g: f32, n: f32| {
            let t = (g + 1.0) * n - 1.0;
            fmaf32(t, 0.5, MAGIC)
                .to_bits()
                .wrapping_sub(MAGIC.to_bits())
        };
        (half(gy, self.hf), half(gx, self.wf))
    }
}

/// The largest side of a plane that [`Rotation::finish_nearest`] serves.
pub const NEAREST_MAX_SIDE: u32 = 1 << 22;

/// Bounds on the input columns that a rotated output rectangle's bilinear reads make in each
/// input row ([`Rotation::column_spans`]): the reads lie between the larger of two lower lines and
/// the smaller of two upper lines in the row index, each line a side pair of the rectangle.
#[derive(Clone, Copy)]
pub struct ColumnSpans {
    slope_u: f32,
    lo_u: f32,
    hi_u: f32,
    slope_v: f32,
    lo_v: f32,
    hi_v: f32,
}

impl ColumnSpans {
    /// Whether the reads in input row `r` can touch a column of `first ..= last` (integers):
    /// whether that range meets the lines' interval at `r`, which already holds every column a
    /// read takes (see [`Rotation::column_spans`]).
    #[inline(always)]
    pub fn touches(&self, r: i32, first: f32, last: f32) -> bool {
        let y = r as f32;
        last >= fmaf32(self.slope_u, y, self.lo_u)
            && last >= fmaf32(self.slope_v, y, self.lo_v)
            && first <= fmaf32(self.slope_u, y, self.hi_u)
            && first <= fmaf32(self.slope_v, y, self.hi_v)
    }
}

/// Whether `(y, x)` lies inside an `h x w` plane.
#[inline(always)]
pub fn inside(y: i32, x: i32, h: i32, w: i32) -> bool {
    y >= 0 && y < h && x >= 0 && x < w
}

/// `grid_sample(mode="nearest", padding_mode="zeros")`: the in-bounds pixel nearest to
/// `(y, x)` (ties to even), or `None`.
#[inline(always)]
pub fn nearest_pixel(y: f32, x: f32, h: i32, w: i32) -> Option<(i32, i32)> {
    let yi = rint_i32(y);
    let xi = rint_i32(x);
    // NaN coordinates must not pass as pixel 0: they compare false here.
    let finite = !y.is_nan() && !x.is_nan();
    if finite && inside(yi, xi, h, w) {
        Some((yi, xi))
    } else {
        None
    }
}

/// `grid_sample(mode="bilinear", padding_mode="zeros")` at `(y, x)`: the four neighbours with
/// their weights (north-west, north-east, south-west, south-east); neighbours outside the plane
/// have `inside == false`.
#[derive(Clone, Copy)]
pub struct Bilinear {
    pub y0: i32,
    pub x0: i32,
    pub w: [f32; 4],
    pub inside: [bool; 4],
}

impl Bilinear {
    #[inline(always)]
    pub fn new(y: f32, x: f32, h: i32, w: i32) -> Bilinear {
        let fy = floorf(y);
        let fx = floorf(x);
        let y0 = floor_i32(y);
        let x0 = floor_i32(x);
        let y1 = y0.wrapping_add(1);
        let x1 = x0.wrapping_add(1);
        let finite = !y.is_nan() && !x.is_nan();
        // torch: nw = (x_se - x) * (y_se - y), ne = (x - x_sw) * (y_sw - y),
        // sw = (x_ne - x) * (y - y_ne), se = (x - x_nw) * (y - y_nw).
        let (ex1, ey1) = (fx + 1.0, fy + 1.0);
        Bilinear {
            y0,
            x0,
            w: [
                (ex1 - x) * (ey1 - y),
                (x - fx) * (ey1 - y),
                (ex1 - x) * (y - fy),
                (x - fx) * (y - fy),
            ],
            // Each row and column is checked once (one unsigned comparison covers both
            // bounds), and the four neighbours combine them.
            inside: {
                let (r0, r1) = (
                    finite && (y0 as u32) < h as u32,
                    finite && (y1 as u32) < h as u32,
                );
                let (c0, c1) = ((x0 as u32) < w as u32, (x1 as u32) < w as u32);
                [r0 && c0, r0 && c1, r1 && c0, r1 && c1]
            },
        }
    }

    /// Sum of the weights of the neighbours inside the plane (the `mask` torchvision uses for
    /// its fill).
    #[inline(always)]
    pub fn mask(&self) -> f32 {
        let mut m = 0.0f32;
        if self.inside[0] {
            m += self.w[0];
        }
        if self.inside[1] {
            m += self.w[1];
        }
        if self.inside[2] {
            m += self.w[2];
        }
        if self.inside[3] {
            m += self.w[3];
        }
        m
    }
}

/// Linear interpolation taps of torch's `upsample_bilinear2d` (align_corners=False) along one
/// axis: output index `d` of a resize from `n_in` to `n_out` reads `i0` and `i0 + step` with
/// weights `l0`, `l1`.
#[derive(Clone, Copy)]
pub struct LinearTaps {
    pub i0: i32,
    pub i1: i32,
    pub l0: f32,
    pub l1: f32,
}

impl LinearTaps {
    /// `scale = n_in / n_out` (f32, as torch computes it).
    #[inline(always)]
    pub fn new(scale: f32, d: u32, n_in: u32) -> LinearTaps {
        let s = scale * (d as f32 + 0.5) - 0.5;
        let s = if s < 0.0 { 0.0 } else { s };
        let i0 = trunc_i32(s);
        let step = if i0 < n_in as i32 - 1 { 1 } else { 0 };
        let l1 = s - i0 as f32;
        LinearTaps {
            i0,
            i1: i0 + step,
            l0: 1.0 - l1,
            l1,
        }
    }
}

/// Reflect padding without repeating the edge (`torch.nn.functional.pad(mode="reflect")`):
/// index `i` of a line of `n` values, for `-(n-1) <= i <= 2(n-1)`; anything further out is
/// clamped into the line so that no read ever leaves it.
#[inline(always)]
pub fn reflect(i: i32, n: i32) -> i32 {
    let r = if i < 0 { -i } else { i };
    let r = if r >= n { 2 * (n - 1) - r } else { r };
    r.max(0).min(n - 1)
}

/// Unnormalised Gaussian weight of tap `t` of a kernel of radius `r` and standard deviation
/// `sigma`: `exp(-0.5 * ((t - r) / sigma)^2)`.
#[inline(always)]
pub fn gauss(t: u32, r: u32, sigma: f32) -> f32 {
    let x = (t as f32 - r as f32) / sigma;
    streamline_device::math::expf(-0.5 * x * x)
}
