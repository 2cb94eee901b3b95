//! The gradient of `roi_align` with respect to its input: each output bin's gradient, divided
//! by the bin's sample count, goes to the four pixels each of its samples read, with the
//! forward's bilinear weights (torchvision's `roi_align_backward`).
//!
//! Two kernels. [`roi_align_backward`] is torchvision's: a thread per output gradient value
//! adds its shares to the input gradient with atomic adds, so the order of the additions (and
//! the last bits of a pixel that several samples reach) changes from run to run.
//! [`roi_align_backward_deterministic`] gathers instead: a thread per input gradient value goes
//! over every box of its image in order and sums what the box's bins give its pixel. A sample's
//! weight is a product of a row weight and a column weight, and its validity too, so for each
//! output row the thread sums the row weights of that row's samples and, where they reach the
//! pixel, each output column's column weights; the same bits come out on every run.

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
    let bx = (p.boxes as *const f32).wrapping_add(k * 5);
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
        let gy = p.grad_y as *const f32;
        let gx = p.grad_x as *mut f32;
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

kernel! {
    #[declared(ROI_ALIGN_BACKWARD_DETERMINISTIC)]
    /// # Safety
    /// As for [`roi_align_backward`], but `p.grad_x` need not be zeroed: every value of it is
    /// written.
    pub unsafe fn roi_align_backward_deterministic(p: RoiAlignBackwardParams) {
        let (h, w) = (p.height as i32, p.width as i32);
        let (hw, ch) = (p.height as u64 * p.width as u64, p.channels as u64);
        let gy = p.grad_y as *const f32;
        let gx = p.grad_x as *mut f32;
        let bin_len = p.out_h as usize * p.out_w as usize;
        for i in grid_stride(p.batch as u64 * ch * hw) {
            let idx = i as u64;
            let xx = (idx % p.width as u64) as i32;
            let yy = (idx / p.width as u64 % p.height as u64) as i32;
            let c = idx / hw % ch;
            let n = (idx / (hw * ch)) as u32;
            let mut acc = 0.0f32;
            let mut k = 0;
            while k < p.num_boxes as usize {
                // SAFETY: `k < num_boxes`.
                let (img, roi) = unsafe { roi_of(&p, k) };
                let reaches = |v: i32, start: f32, bin: f32, bins: u32, n: i32| {
                    // Samples lie in `[start, start + bins * bin]`; each reaches the two pixels
                    // around it, or pixel 0 or `n - 1` where clamped.
                    let lo = floorf(start.min((n - 1) as f32)) - 2.0;
                    let hi = start + bins as f32 * bin + 2.0;
                    (v as f32) >= lo && (v as f32) <= hi
                };
                if img == Some(n)
                    && reaches(yy, roi.start_y, roi.bin_h, p.out_h, h)
                    && reaches(xx, roi.start_x, roi.bin_w, p.out_w, w)
                {
                    let grads = gy.wrapping_add((k * p.channels as usize + c as usize) * bin_len);
                    let mut ph = 0;
                    while ph < p.out_h {
                        let mut wy = 0.0f32;
                        let mut iy = 0;
                        while iy < roi.grid_h {
                            wy += share(RoiTap::new(roi.y_of(ph, iy), h), yy);
                            iy += 1;
                        }
                        if wy != 0.0 {
                            let mut pw = 0;
                            while pw < p.out_w {
                                let mut wx = 0.0f32;
                                let mut ix = 0;
                                while ix < roi.grid_w {
                                    wx += share(RoiTap::new(roi.x_of(pw, ix), w), xx);
                                    ix += 1;
                                }
                                if wx != 0.0 {
                                    let o = (ph * p.out_w + pw) as usize;
                                    // SAFETY: bin `(ph, pw)` of channel `c` of box `k`.
                                    let g = unsafe { grads.add(o).read() };
                                    acc += wy * wx * (g / roi.count);
                                }
                                pw += 1;
                            }
                        }
                        ph += 1;
                    }
                }
                k += 1;
            }
            // SAFETY: `idx` indexes the input gradient.
            unsafe { gx.add(idx as usize).write(acc) };
        }
    }
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
