//! `torchvision.ops.roi_align` on a batch: one output `channels x out_h x out_w` per box, each
//! bin the average of bilinear samples on the box's sampling grid (see
//! [`crate::sampling::Roi`]).
//!
//! A block covers a 32 x 32 patch of one box's output; each thread computes four rows of it
//! for every channel, so the box setup is done once per thread and a warp writes 32
//! consecutive values of a row.

use crate::libdevice::trunc_i32;
use crate::mem::ldg;
use crate::sampling::Roi;
use crate::thread::{block_x, thread_xy};
use streamline_abi::image::{
    RoiAlignParams, IMAGE_BLOCK_X, IMAGE_BLOCK_Y, ROI_MAX_SAMPLES_PER_BIN, ROI_ROWS_PER_THREAD,
};

/// # Safety
/// `p.x` must address `batch * channels * height * width` f32, `p.boxes` `5 * num_boxes` f32,
/// `p.y` `num_boxes * channels * out_h * out_w` f32; all sizes at least 1 and the grid
/// `ceil(out_w / 32) * ceil(out_h / 32) * num_boxes` blocks of 32 x 8 threads.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn roi_align(p: RoiAlignParams) {
    let rows_per_block = IMAGE_BLOCK_Y * ROI_ROWS_PER_THREAD;
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
    let x = p.x as *const f32;
    let y = p.y as *mut f32;
    let mut r = 0;
    while r < ROI_ROWS_PER_THREAD {
        let ph = (t / tiles_x.max(1)) * rows_per_block + r * IMAGE_BLOCK_Y + ty;
        if ph < p.out_h {
            let mut c = 0;
            while c < p.channels {
                let group = Group {
                    p: &p,
                    x,
                    y,
                    valid,
                    img: img as usize,
                    k: k as usize,
                    first: c as usize,
                    ph,
                    pw,
                    roi: &roi,
                };
                // SAFETY: forwarded from this kernel's contract.
                c += unsafe {
                    match p.channels - c {
                        1 => group.run::<1>(),
                        2 => group.run::<2>(),
                        3 => group.run::<3>(),
                        _ => group.run::<4>(),
                    }
                };
            }
        }
        r += 1;
    }
}

/// Up to four channels of one output pixel, computed from one set of sampling points and
/// written after all their loads are issued.
struct Group<'a> {
    p: &'a RoiAlignParams,
    x: *const f32,
    y: *mut f32,
    valid: bool,
    img: usize,
    k: usize,
    first: usize,
    ph: u32,
    pw: u32,
    roi: &'a Roi,
}

impl Group<'_> {
    /// Computes and stores channels `first..first + N`; returns `N`.
    ///
    /// # Safety
    /// As for [`roi_align`]; `first + N <= channels`, `ph < out_h`, `pw < out_w`, and when
    /// `valid`, `img < batch`.
    #[inline(always)]
    unsafe fn run<const N: usize>(&self) -> u32 {
        let p = self.p;
        let plane_in = p.height as usize * p.width as usize;
        let plane_out = p.out_h as usize * p.out_w as usize;
        let channels = p.channels as usize;
        let v = if self.valid {
            let src = self
                .x
                .wrapping_add((self.img * channels + self.first) * plane_in);
            // SAFETY: `bin_n` only loads indices inside the `h x w` plane of channels
            // `first..first + N` of image `img < batch`.
            self.roi.bin_n::<N>(
                p.height as i32,
                p.width as i32,
                self.ph,
                self.pw,
                |c, yy, xx| unsafe {
                    ldg(src.add(c * plane_in + yy as usize * p.width as usize + xx as usize))
                },
            )
        } else {
            [0.0; N]
        };
        for (c, &value) in v.iter().enumerate() {
            let o = (self.k * channels + self.first + c) * plane_out
                + self.ph as usize * p.out_w as usize
                + self.pw as usize;
            // SAFETY: `k < num_boxes`, channel below `channels`, `ph < out_h`, `pw < out_w`.
            unsafe { self.y.add(o).write(value) };
        }
        N as u32
    }
}
