//! Resizing every plane of a batch, like `torch.nn.functional.interpolate` (as
//! `torchvision.transforms.v2.functional.resize` calls it): bilinear with
//! `align_corners=False`, its antialiased variant, and `nearest`.
//!
//! A block covers a 32-column patch of one image's output; each thread finds its column's
//! horizontal taps once, each row's vertical taps once, and reads every channel through them,
//! so a warp writes 32 consecutive values of a row.

use crate::channels::{for_channels, for_columns};
use crate::libdevice::{floor_i32, trunc_i32};
use crate::mem::{ldg_at, stg_at};
use crate::sampling::LinearTaps;
use streamline_abi::image::{ResizeParams, IMAGE_ROWS_PER_THREAD as ROWS};

/// Writes `value(plane_in_base)` for every channel of output pixel `(n, i, j)`.
#[inline(always)]
fn each_channel(p: &ResizeParams, n: u32, i: u32, j: u32, value: impl Fn(*const f32) -> f32) {
    let plane_in = p.in_h as usize * p.in_w as usize;
    let plane_out = p.out_h as usize * p.out_w as usize;
    let plane = |c: u32| n as usize * p.channels as usize + c as usize;
    let o = i * p.out_w + j;
    for_channels(
        p.channels,
        |c| value((p.x as *const f32).wrapping_add(plane(c) * plane_in)),
        // SAFETY: `n < batch`, `c < channels`, `i < out_h`, `j < out_w`.
        |c, v| unsafe { stg_at((p.y as *mut f32).wrapping_add(plane(c) * plane_out), o, v) },
    );
}

/// Bilinear, `align_corners=False`: source `scale * (d + 0.5) - 0.5` clamped below at 0, with
/// `scale = in / out`; the upper neighbour is the pixel itself on the last row/column.
///
/// # Safety
/// `p.x` must address `batch * channels * in_h * in_w` f32, `p.y`
/// `batch * channels * out_h * out_w` f32, all sizes at least 1; grid as
/// [`for_columns`] describes for `IMAGE_ROWS_PER_THREAD` rows.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn resize_bilinear(p: ResizeParams) {
    let sh = p.in_h as f32 / p.out_h as f32;
    let sw = p.in_w as f32 / p.out_w as f32;
    for_columns::<ROWS>(p.batch, p.out_h, p.out_w, |col| {
        let tx = LinearTaps::new(sw, col.j, p.in_w);
        let (c0, c1) = (tx.i0 as u32, tx.i1 as u32);
        col.rows(|i| {
            let ty = LinearTaps::new(sh, i, p.in_h);
            let (r0, r1) = (ty.i0 as u32 * p.in_w, ty.i1 as u32 * p.in_w);
            each_channel(&p, col.n, i, col.j, |src| {
                // SAFETY: the taps lie in `[0, in_h) x [0, in_w)`, so every offset is inside
                // the plane.
                let at = |o: u32| unsafe { ldg_at(src, o) };
                ty.l0 * (tx.l0 * at(r0 + c0) + tx.l1 * at(r0 + c1))
                    + ty.l1 * (tx.l0 * at(r1 + c0) + tx.l1 * at(r1 + c1))
            });
        });
    });
}

/// torch's antialiased bilinear filter along one axis: output `d` covers input
/// `[min, min + size)` with triangle weights of support `max(scale, 1)`, normalised by their
/// sum.
#[derive(Clone, Copy)]
struct AaSpan {
    min: i32,
    size: i32,
    center: f32,
    invscale: f32,
    inv_total: f32,
}

impl AaSpan {
    #[inline(always)]
    fn new(scale: f32, d: u32, n_in: u32) -> AaSpan {
        let support = if scale >= 1.0 { scale } else { 1.0 };
        let center = scale * (d as f32 + 0.5);
        let invscale = if scale >= 1.0 { 1.0 / scale } else { 1.0 };
        let lo = trunc_i32(center - support + 0.5);
        let min = if lo > 0 { lo } else { 0 };
        let hi = trunc_i32(center + support + 0.5);
        let hi = if hi < n_in as i32 { hi } else { n_in as i32 };
        let mut span = AaSpan {
            min,
            size: hi - min,
            center,
            invscale,
            inv_total: 1.0,
        };
        let mut total = 0.0f32;
        let mut k = 0;
        while k < span.size {
            total += span.raw(k);
            k += 1;
        }
        span.inv_total = if total != 0.0 { 1.0 / total } else { 1.0 };
        span
    }

    /// Unnormalised weight of tap `k`: the triangle `max(0, 1 - |t|)`.
    #[inline(always)]
    fn raw(&self, k: i32) -> f32 {
        let t = ((k + self.min) as f32 - self.center + 0.5) * self.invscale;
        let t = if t < 0.0 { -t } else { t };
        if t < 1.0 {
            1.0 - t
        } else {
            0.0
        }
    }

    #[inline(always)]
    fn weight(&self, k: i32) -> f32 {
        self.raw(k) * self.inv_total
    }
}

/// Antialiased bilinear (torch's `_upsample_bilinear2d_aa`): separable triangle filter whose
/// support widens by the downscale factor, rows blended first, then columns.
///
/// # Safety
/// As for [`resize_bilinear`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn resize_bilinear_aa(p: ResizeParams) {
    let sh = p.in_h as f32 / p.out_h as f32;
    let sw = p.in_w as f32 / p.out_w as f32;
    let w_in = p.in_w;
    for_columns::<ROWS>(p.batch, p.out_h, p.out_w, |col| {
        let sx = AaSpan::new(sw, col.j, p.in_w);
        let nx = sx.size;
        // Upscaling (and mild downscaling) has at most two taps per axis: their weights are
        // found once (per column, per row) for every channel.
        let wx = [sx.weight(0), if nx > 1 { sx.weight(1) } else { 0.0 }];
        let cols = [sx.min as u32, (sx.min + (nx > 1) as i32) as u32];
        col.rows(|i| {
            let sy = AaSpan::new(sh, i, p.in_h);
            let ny = sy.size;
            if (1..=2).contains(&nx) && (1..=2).contains(&ny) {
                // The same operations in the same order as the general loop below.
                let wy = [sy.weight(0), if ny > 1 { sy.weight(1) } else { 0.0 }];
                let rows = [
                    sy.min as u32 * w_in,
                    (sy.min + (ny > 1) as i32) as u32 * w_in,
                ];
                each_channel(&p, col.n, i, col.j, |src| {
                    // SAFETY: the spans lie inside `[0, in_h) x [0, in_w)`.
                    let at = |r: usize, c: usize| unsafe { ldg_at(src, rows[r] + cols[c]) };
                    let column = |c: usize| {
                        let t = 0.0f32 + at(0, c) * wy[0];
                        if ny > 1 {
                            t + at(1, c) * wy[1]
                        } else {
                            t
                        }
                    };
                    let acc = 0.0f32 + column(0) * wx[0];
                    if nx > 1 {
                        acc + column(1) * wx[1]
                    } else {
                        acc
                    }
                });
                return;
            }
            each_channel(&p, col.n, i, col.j, |src| {
                let mut acc = 0.0f32;
                let mut kx = 0;
                while kx < sx.size {
                    let c = (sx.min + kx) as u32;
                    let mut t = 0.0f32;
                    let mut ky = 0;
                    while ky < sy.size {
                        let r = (sy.min + ky) as u32;
                        // SAFETY: the spans lie inside `[0, in_h) x [0, in_w)`.
                        t += unsafe { ldg_at(src, r * w_in + c) } * sy.weight(ky);
                        ky += 1;
                    }
                    acc += t * sx.weight(kx);
                    kx += 1;
                }
                acc
            });
        });
    });
}

/// Nearest (torch's `nearest`): source `min(floor(d * scale), in - 1)` with `scale = in / out`
/// in f32.
///
/// # Safety
/// As for [`resize_bilinear`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn resize_nearest(p: ResizeParams) {
    let sh = p.in_h as f32 / p.out_h as f32;
    let sw = p.in_w as f32 / p.out_w as f32;
    for_columns::<ROWS>(p.batch, p.out_h, p.out_w, |col| {
        let xi = floor_i32(col.j as f32 * sw).max(0).min(p.in_w as i32 - 1) as u32;
        col.rows(|i| {
            let yi = floor_i32(i as f32 * sh).max(0).min(p.in_h as i32 - 1) as u32;
            let o = yi * p.in_w + xi;
            // SAFETY: `yi < in_h`, `xi < in_w`.
            each_channel(&p, col.n, i, col.j, |src| unsafe { ldg_at(src, o) });
        });
    });
}
