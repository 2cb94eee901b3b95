//! `torchvision.ops.roi_align` on a batch: one output `channels x out_h x out_w` per box, each
//! bin the average of bilinear samples on the box's sampling grid (see
//! [`crate::sampling::Roi`]).
//!
//! A block covers a 32 x 16 patch of one box's output; each thread computes two rows of it
//! for every channel, so the box setup is done once per thread and a warp writes 32
//! consecutive values of a row.

use crate::channels::for_channels;
use crate::libdevice::trunc_i32;
use crate::mem::ldg;
use crate::sampling::Roi;
use crate::thread::{block_x, thread_xy};
use streamline_abi::image::{
    RoiAlignParams, IMAGE_BLOCK_X, IMAGE_BLOCK_Y, IMAGE_ROWS_PER_THREAD, ROI_MAX_SAMPLES_PER_BIN,
};

/// # Safety
/// `p.x` must address `batch * channels * height * width` f32, `p.boxes` `5 * num_boxes` f32,
/// `p.y` `num_boxes * channels * out_h * out_w` f32; all sizes at least 1 and the grid
/// `ceil(out_w / 32) * ceil(out_h / 16) * num_boxes` blocks of 32 x 8 threads.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn roi_align(p: RoiAlignParams) {
    let rows_per_block = IMAGE_BLOCK_Y * IMAGE_ROWS_PER_THREAD;
    let tiles_x = p.out_w.div_ceil(IMAGE_BLOCK_X);
    let tiles_y = p.out_h.div_ceil(rows_per_block);
    let b = block_x();
    let per_box = (tiles_x * tiles_y).max(1);
    let k = b / per_box;
    let t = b % per_box;
    let (tx, ty) = thread_xy();
    let pw = (t % tiles_x.max(1)) * IMAGE_BLOCK_X + tx;
    if k >= p.num_boxes || pw >= p.out_w {
        return;
    }
    let bx = (p.boxes as *const f32).wrapping_add(k as usize * 5);
    // SAFETY: `k < num_boxes`; each box is 5 f32.
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
    // torchvision truncates the batch index; one outside the batch (refused by the host)
    // gives zeros rather than a read outside the input.
    let img = trunc_i32(bi);
    let valid = img >= 0 && (img as u32) < p.batch;
    let roi = Roi::new(
        coords,
        p.spatial_scale,
        p.aligned != 0,
        p.sampling_ratio,
        p.out_h,
        p.out_w,
        ROI_MAX_SAMPLES_PER_BIN,
    );
    let (h, w) = (p.height as i32, p.width as i32);
    let plane_in = p.height as usize * p.width as usize;
    let plane_out = p.out_h as usize * p.out_w as usize;
    let x = p.x as *const f32;
    let y = p.y as *mut f32;
    let mut r = 0;
    while r < IMAGE_ROWS_PER_THREAD {
        let ph = (t / tiles_x.max(1)) * rows_per_block + r * IMAGE_BLOCK_Y + ty;
        if ph < p.out_h {
            let plane = |c: u32| k as usize * p.channels as usize + c as usize;
            for_channels(
                p.channels,
                |c| {
                    if !valid {
                        return 0.0;
                    }
                    let src = x
                        .wrapping_add((img as usize * p.channels as usize + c as usize) * plane_in);
                    // SAFETY: `roi.bin` only loads indices inside the `h x w` plane of image
                    // `img < batch`.
                    roi.bin(h, w, ph, pw, |yy, xx| unsafe {
                        ldg(src.add(yy as usize * p.width as usize + xx as usize))
                    })
                },
                |c, v| {
                    let o = plane(c) * plane_out + ph as usize * p.out_w as usize + pw as usize;
                    // SAFETY: `k < num_boxes`, `c < channels`, `ph < out_h`, `pw < out_w`.
                    unsafe { y.add(o).write(v) };
                },
            );
        }
        r += 1;
    }
}
