//! The gradient of `roi_align` with respect to its input: each output bin's gradient, divided
//! by the bin's sample count, goes to the four pixels each of its samples read, with the
//! forward's bilinear weights (torchvision's `roi_align_backward`).
//!
//! Two kernels. [`roi_align_backward`] is torchvision's: a thread per output gradient value
//! adds its shares to the input gradient with atomic adds, so the order of the additions (and
//! the last bits of a pixel that several samples reach) changes from run to run.
//! [`roi_align_backward_deterministic`] gathers instead: a thread per input pixel and group of
//! channels goes over every box of its image in order, passes over those whose sampled span
//! lies more than two pixels away, and sums what the others' bins near the pixel give it. A
//! sample's weight is a product of a row weight and a column weight, and its validity too, so
//! for each output row the thread sums the row weights of that row's samples and, where they
//! reach the pixel, each output column's column weights; the same bits come out on every run.

use crate::sampling::{Roi, RoiTap};
use streamline_abi::image::{RoiAlignBackwardParams, ROI_MAX_SAMPLES_PER_BIN};
use streamline_abi::image::{ROI_ALIGN_BACKWARD, ROI_ALIGN_BACKWARD_DETERMINISTIC};
use streamline_device::atomic::atomic_add_f32;
use streamline_device::kernel;
use streamline_device::math::{floorf, trunc_i32};
use streamline_device::thread::grid_stride;

/// Box `k`'s image (`None` for a batch index outside the batch, which gets no gradient, as
/// its forward output is zeros) and its sampling setup.
///
/// # Safety
/// `p.boxes` must hold `5 * num_boxes` f32 and `k < num_boxes`.
#[inline(always)]
unsafe fn roi_of(p: &RoiAlignBackwardParams, k: usize) -> (Option<u32>, Roi) {
    let bx = p.boxes.as_ptr().wrapping_add(k * 5);
    // SAFETY: box `k` is five f32 inside the array (this function's contract).
    let (bi, coords) = unsafe {
        (
            bx.read(),
            [
                bx.add(1).read(),
                bx.add(2).read(),
                bx.add(3).read(),
                bx.add(4).read(),
            ],
        )
    };
    let img = trunc_i32(bi);
    let roi = Roi::new(
        coords,
        p.spatial_scale,
        p.aligned != 0,
        p.sampling_ratio,
        p.out_h,
        p.out_w,
        ROI_MAX_SAMPLES_PER_BIN,
    );
    let valid = img >= 0 && (img as u32) < p.batch;
    (if valid { Some(img as u32) } else { None }, roi)
}

kernel! {
    #[declared(ROI_ALIGN_BACKWARD)]
    /// # Safety
    /// `p.grad_y` must address `num_boxes * channels * out_h * out_w` f32, `p.boxes`
    /// `5 * num_boxes` f32 and `p.grad_x` `batch * channels * height * width` f32, zeroed
    /// before the launch and used by no other work while it runs; all sizes at least 1.
    pub unsafe fn roi_align_backward(p: RoiAlignBackwardParams) {
        let (h, w) = (p.height as i32, p.width as i32);
        let (oh, ow, ch) = (p.out_h as u64, p.out_w as u64, p.channels as u64);
        let plane = p.height as usize * p.width as usize;
        let gy = p.grad_y.as_ptr();
        let gx = p.grad_x.as_mut_ptr();
        for i in grid_stride(p.num_boxes as u64 * ch * oh * ow) {
            let idx = i as u64;
            let pw = (idx % ow) as u32;
            let ph = (idx / ow % oh) as u32;
            let c = idx / (ow * oh) % ch;
            let k = (idx / (ow * oh * ch)) as usize;
            // SAFETY: `k < num_boxes`.
            let (img, roi) = unsafe { roi_of(&p, k) };
            let Some(img) = img else { continue };
            // SAFETY: `idx` indexes the output gradient.
            let g = unsafe { gy.add(idx as usize).read() };
            let base = (img as u64 * ch + c) as usize * plane;
            let mut iy = 0;
            while iy < roi.grid_h {
                let ty = RoiTap::new(roi.y_of(ph, iy), h);
                let mut ix = 0;
                while ix < roi.grid_w {
                    let tx = RoiTap::new(roi.x_of(pw, ix), w);
                    if ty.valid && tx.valid {
                        let add = |yy: i32, xx: i32, wt: f32| {
                            let o = base + yy as usize * p.width as usize + xx as usize;
                            // SAFETY: `RoiTap` gives rows and columns inside the plane, of
                            // channel `c` of image `img < batch`.
                            unsafe { atomic_add_f32(gx.add(o), g * wt / roi.count) };
                        };
                        add(ty.lo, tx.lo, ty.h * tx.h);
                        add(ty.lo, tx.hi, ty.h * tx.l);
                        add(ty.hi, tx.lo, ty.l * tx.h);
                        add(ty.hi, tx.hi, ty.l * tx.l);
                    }
                    ix += 1;
                }
                iy += 1;
            }
        }
    }
}

/// Channels one thread of [`roi_align_backward_deterministic`] sums: it finds each box's
/// weights for its pixel once for all of them.
const GROUP: usize = 4;

kernel! {
    #[declared(ROI_ALIGN_BACKWARD_DETERMINISTIC)]
    /// # Safety
    /// As for [`roi_align_backward`], but `p.grad_x` need not be zeroed: every value of it is
    /// written.
    pub unsafe fn roi_align_backward_deterministic(p: RoiAlignBackwardParams) {
        let (h, w) = (p.height as i32, p.width as i32);
        let hw = p.height as u64 * p.width as u64;
        let groups = (p.channels as usize).div_ceil(GROUP) as u64;
        let gy = p.grad_y.as_ptr();
        let gx = p.grad_x.as_mut_ptr();
        let bin_len = p.out_h as usize * p.out_w as usize;
        for i in grid_stride(p.batch as u64 * groups * hw) {
            let idx = i as u64;
            let xx = (idx % p.width as u64) as i32;
            let yy = (idx / p.width as u64 % p.height as u64) as i32;
            let c0 = (idx / hw % groups) as usize * GROUP;
            let n = (idx / (hw * groups)) as u32;
            let cn = (p.channels as usize - c0).min(GROUP);
            let mut acc = [0.0f32; GROUP];
            let mut k = 0;
            while k < p.num_boxes as usize {
                // SAFETY: `k < num_boxes`.
                if unsafe { may_reach(&p, k, n, yy, xx) } {
                    // SAFETY: `k < num_boxes`.
                    let (img, roi) = unsafe { roi_of(&p, k) };
                    if img == Some(n) {
                        let grads = gy.wrapping_add((k * p.channels as usize + c0) * bin_len);
                        let (ph0, ph1) = bins_near(yy, roi.start_y, roi.bin_h, p.out_h);
                        let (pw0, pw1) = bins_near(xx, roi.start_x, roi.bin_w, p.out_w);
                        let mut ph = ph0;
                        while ph <= ph1 {
                            let mut wy = 0.0f32;
                            let mut iy = 0;
                            while iy < roi.grid_h {
                                wy += share(RoiTap::new(roi.y_of(ph, iy), h), yy);
                                iy += 1;
                            }
                            if wy != 0.0 {
                                let mut pw = pw0;
                                while pw <= pw1 {
                                    let mut wx = 0.0f32;
                                    let mut ix = 0;
                                    while ix < roi.grid_w {
                                        wx += share(RoiTap::new(roi.x_of(pw, ix), w), xx);
                                        ix += 1;
                                    }
                                    if wx != 0.0 {
                                        let wt = wy * wx;
                                        let o = (ph * p.out_w + pw) as usize;
                                        // A constant trip count keeps `acc` in registers.
                                        let mut c = 0;
                                        while c < GROUP {
                                            if c < cn {
                                                // SAFETY: bin `(ph, pw)` of channel `c0 + c` of
                                                // box `k`, `c0 + c < channels`.
                                                let g =
                                                    unsafe { grads.add(c * bin_len + o).read() };
                                                acc[c] += wt * (g / roi.count);
                                            }
                                            c += 1;
                                        }
                                    }
                                    pw += 1;
                                }
                            }
                            ph += 1;
                        }
                    }
                }
                k += 1;
            }
            let base = (n as usize * p.channels as usize + c0) * hw as usize
                + yy as usize * p.width as usize
                + xx as usize;
            let mut c = 0;
            while c < GROUP {
                if c < cn {
                    // SAFETY: channel `c0 + c < channels` of image `n < batch`, pixel `(yy, xx)`.
                    unsafe { gx.add(base + c * hw as usize).write(acc[c]) };
                }
                c += 1;
            }
        }
    }
}

/// Whether box `k` may give pixel `(yy, xx)` of image `n` a share, from its raw coordinates
/// (no division): `false` only where none of its samples can reach the pixel. A sample at `v`
/// reaches pixels `floor(v)` and `floor(v) + 1`, pixel 0 for `-1 <= v <= 0` and the last pixel
/// for `v` past it, so a pixel more than two away from the box's sampled span gets nothing.
/// Coordinates that compare false (NaN) are let through, to the exact setup.
///
/// # Safety
/// `p.boxes` must hold `5 * num_boxes` f32 and `k < num_boxes`.
#[inline(always)]
unsafe fn may_reach(p: &RoiAlignBackwardParams, k: usize, n: u32, yy: i32, xx: i32) -> bool {
    let bx = p.boxes.as_ptr().wrapping_add(k * 5);
    // SAFETY: box `k` is five f32 inside the array (this function's contract).
    let b = unsafe {
        [
            bx.read(),
            bx.add(1).read(),
            bx.add(2).read(),
            bx.add(3).read(),
            bx.add(4).read(),
        ]
    };
    if trunc_i32(b[0]) != n as i32 {
        return false;
    }
    let off = if p.aligned != 0 { 0.5 } else { 0.0 };
    let outside = |v: i32, a: f32, z: f32, last: i32| {
        let s = a * p.spatial_scale - off;
        let mut r = z * p.spatial_scale - off - s;
        if p.aligned == 0 && !(r > 1.0) {
            r = 1.0;
        }
        let (lo, hi) = if r < 0.0 { (s + r, s) } else { (s, s + r) };
        if (s + r).is_nan() {
            return false;
        }
        let v = v as f32;
        v < floorf(lo.min(last as f32)) - 2.0 || v > hi + 2.0
    };
    !(outside(yy, b[2], b[4], p.height as i32 - 1) || outside(xx, b[1], b[3], p.width as i32 - 1))
}

/// The output bins along one axis whose samples may reach pixel `v`: those whose span
/// `[start + i bin, start + (i + 1) bin]` meets `[v - 2, v + 2]`, one more on each side for
/// the rounding of the samples' coordinates; all `bins` where `bin` is not a positive number.
#[inline(always)]
fn bins_near(v: i32, start: f32, bin: f32, bins: u32) -> (u32, u32) {
    let last = bins as i32 - 1;
    if !(bin > 0.0) {
        return (0, last as u32);
    }
    // Clamped in f32 before the conversion, so no bin index can overflow.
    let at = |d: f32| {
        let b = floorf((v as f32 + d - start) / bin);
        trunc_i32(b.max(-1.0).min(bins as f32))
    };
    (
        (at(-2.0) - 1).clamp(0, last) as u32,
        (at(2.0) + 1).clamp(0, last) as u32,
    )
}

/// The weight that a sample's tap along one axis gives pixel `v` of that axis: the low
/// neighbour's, the high one's, both where clamped onto one pixel, none outside the line.
#[inline(always)]
fn share(t: RoiTap, v: i32) -> f32 {
    if !t.valid {
        return 0.0;
    }
    let mut s = 0.0;
    if t.lo == v {
        s += t.h;
    }
    if t.hi == v {
        s += t.l;
    }
    s
}
