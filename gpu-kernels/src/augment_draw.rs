//! The fused augmentation's random draw, made on the device so that a captured CUDA graph
//! draws anew at every replay: each image's crop box, angle and blur sigma from Philox4x32-10
//! (the formula is on `AugmentDrawParams`), then the generator's counter advanced by one.
//!
//! One block: every thread reads the counter, draws its images, and only after the block's
//! barrier does thread 0 write the next counter, so no image of this launch sees it.

use streamline_abi::image::{AugmentDrawParams, AUGMENT_DRAW, AUGMENT_DRAW_BLOCK, EXTENT_WORDS};
use streamline_device::kernel;
use streamline_device::math::fmaf;
use streamline_device::random::{below, philox4x32_10, unit_f32};
use streamline_device::thread::{sync_block, thread_xy};

kernel! {
    #[declared(AUGMENT_DRAW)]
    /// # Safety
    /// `p.state` must address four u32 and `p.draw` `6 * p.batch` f32 on the device, neither
    /// used by other work while this runs, and `p.extents` null or `EXTENT_WORDS * p.batch`
    /// u32 (with `p.side` at least 1); one block of `AUGMENT_DRAW_BLOCK` threads.
    pub unsafe fn augment_draw(p: AugmentDrawParams) {
        let state = p.state.as_mut_ptr();
        // SAFETY: `state` holds four u32 by the contract; they are written only after the
        // barrier below, which every thread reaches after these reads.
        let (key, t) = unsafe {
            (
                [state.read(), state.add(1).read()],
                [state.add(2).read(), state.add(3).read()],
            )
        };
        let n = p.batch as usize;
        let draw = p.draw.as_mut_ptr();
        let batch_sigma = philox4x32_10([t[0], t[1], 0, 0], key)[3];
        let mut i = thread_xy().0 as usize;
        while i < n {
            let w = philox4x32_10([t[0], t[1], i as u32, 0], key);
            let top = below(w[0], p.max_top.wrapping_add(1).max(1)) as f32;
            let left = below(w[1], p.max_left.wrapping_add(1).max(1)) as f32;
            let angle = fmaf(2.0 * p.degrees, unit_f32(w[2]), -p.degrees);
            let s = if p.per_image_sigma != 0 { w[3] } else { batch_sigma };
            let sigma = fmaf(p.sigma_span, unit_f32(s), p.sigma_lo);
            let bx = if p.extents.addr() == 0 {
                [left, top, left + p.crop_w as f32, top + p.crop_h as f32]
            } else {
                // SAFETY: `i < batch`; `p.extents` holds `EXTENT_WORDS * batch` u32.
                let (h, w) = unsafe {
                    let e = p.extents.as_ptr().add(EXTENT_WORDS * i);
                    (e.add(2).read(), e.add(3).read())
                };
                let m = h.min(w);
                let f = m as f32 / p.side as f32;
                let x1 = fmaf(left, f, (w - m) as f32 * 0.5);
                let y1 = fmaf(top, f, (h - m) as f32 * 0.5);
                [x1, y1, fmaf(p.crop_w as f32, f, x1), fmaf(p.crop_h as f32, f, y1)]
            };
            // SAFETY: `i < batch`; `draw` holds `4 batch` box values, then `batch` angles and
            // `batch` sigmas.
            unsafe {
                let b = draw.add(4 * i);
                b.write(bx[0]);
                b.add(1).write(bx[1]);
                b.add(2).write(bx[2]);
                b.add(3).write(bx[3]);
                draw.add(4 * n + i).write(angle);
                draw.add(5 * n + i).write(sigma);
            }
            i += AUGMENT_DRAW_BLOCK as usize;
        }
        // SAFETY: every thread of the one block reaches this barrier once.
        unsafe { sync_block() };
        if thread_xy().0 == 0 {
            let next = ((t[1] as u64) << 32 | t[0] as u64).wrapping_add(1);
            // SAFETY: the state's counter words; every read of them happened before the barrier.
            unsafe {
                state.add(2).write(next as u32);
                state.add(3).write((next >> 32) as u32);
            }
        }
    }
}
