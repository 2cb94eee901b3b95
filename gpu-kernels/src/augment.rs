//! Seed 003's augmentation in one kernel: uint8 to float, ROI-align crop, bilinear resize up,
//! rotation, Gaussian blur and normalisation, with the intermediates never written to device
//! memory.
//!
//! Each output pixel is computed by composing the inverse maps: a block owns a 32 x 32 tile of
//! one output image. For every pixel of the tile and its blur halo (reflected at the border of
//! the rotated image) it finds the rotation's source point in the resized image, whose value is
//! the bilinear blend of crop values, each of which is a `roi_align` bin of the uint8 input
//! converted to float on load. Those rotated values, every channel, go to shared memory; the
//! block then blurs them separably there (see [`crate::gaussian_blur::blur_tile`]) and writes
//! `(blurred - mean) / std`. Every stage follows the rules of the separate kernels, so the
//! fused result equals the chain up to rounding.

use crate::gaussian_blur::{blur_tile, write_weights};
use crate::mem::ldg_u8;
use crate::sampling::{nearest_pixel, reflect, Bilinear, LinearTaps, Roi, Rotation};
use crate::thread::{block_x, thread_xy};
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;
use streamline_abi::image::{
    AugmentParams, IMAGE_BLOCK_X, IMAGE_BLOCK_Y, ROI_MAX_SAMPLES_PER_BIN, TILE,
};

/// The stages before the rotation for one image: crop box and resize scales.
struct Source {
    img: *const u8,
    plane: usize,
    h: i32,
    w: i32,
    width: usize,
    scale: f32,
    roi: Roi,
    crop_h: u32,
    crop_w: u32,
    sh: f32,
    sw: f32,
}

impl Source {
    /// Value of the resized crop at pixel `(zi, zj)` of channel `c` (in range by contract).
    #[inline(always)]
    fn resized(&self, c: u32, zi: i32, zj: i32) -> f32 {
        let ty = LinearTaps::new(self.sh, zi as u32, self.crop_h);
        let tx = LinearTaps::new(self.sw, zj as u32, self.crop_w);
        let src = self.img.wrapping_add(c as usize * self.plane);
        let width = self.width;
        let scale = self.scale;
        // SAFETY: `roi_bilinear` loads only indices inside the `h x w` plane of this image.
        let load = |yy: i32, xx: i32| unsafe {
            ldg_u8(src.add(yy as usize * width + xx as usize)) as f32 * scale
        };
        let crop = |p: i32, q: i32| self.roi.bin(self.h, self.w, p as u32, q as u32, load);
        ty.l0 * (tx.l0 * crop(ty.i0, tx.i0) + tx.l1 * crop(ty.i0, tx.i1))
            + ty.l1 * (tx.l0 * crop(ty.i1, tx.i0) + tx.l1 * crop(ty.i1, tx.i1))
    }
}

/// # Safety
/// `p.x` must address `batch * channels * height * width` bytes, `p.y`
/// `batch * channels * out_h * out_w` f32, `p.boxes` `4 * batch` f32, `p.angles` and
/// `p.sigmas` `batch` f32, `p.stats` `2 * channels` f32; `1 <= channels <=
/// AUGMENT_MAX_CHANNELS`, `ksize` odd, at most `MAX_KERNEL_SIZE`, `ksize / 2 < min(out_h,
/// out_w)`; grid `ceil(out_w / 32) * ceil(out_h / 32) * batch` blocks of 32 x 8 threads with
/// `augment_shared_bytes(channels, ksize)` bytes of dynamic shared memory.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn augment(p: AugmentParams) {
    let tiles_x = p.out_w.div_ceil(TILE);
    let tiles_y = p.out_h.div_ceil(TILE);
    let b = block_x();
    let per_image = (tiles_x * tiles_y).max(1);
    let n = b / per_image;
    let t = b % per_image;
    // The whole block takes the same branch: `n` depends on the block only.
    if n >= p.batch {
        return;
    }
    let nu = n as usize;
    // SAFETY: `n < batch`; the per-image arrays hold `batch` entries (boxes 4 each).
    let (bx, angle, sigma) = unsafe {
        let bp = (p.boxes as *const f32).add(4 * nu);
        (
            [
                bp.read(),
                bp.add(1).read(),
                bp.add(2).read(),
                bp.add(3).read(),
            ],
            (p.angles as *const f32).add(nu).read(),
            (p.sigmas as *const f32).add(nu).read(),
        )
    };
    let plane = p.height as usize * p.width as usize;
    let src = Source {
        img: (p.x as *const u8).wrapping_add(nu * p.channels as usize * plane),
        plane,
        h: p.height as i32,
        w: p.width as i32,
        width: p.width as usize,
        scale: p.scale,
        roi: Roi::new(
            bx,
            1.0,
            false,
            -1,
            p.crop_h,
            p.crop_w,
            ROI_MAX_SAMPLES_PER_BIN,
        ),
        crop_h: p.crop_h,
        crop_w: p.crop_w,
        sh: p.crop_h as f32 / p.out_h as f32,
        sw: p.crop_w as f32 / p.out_w as f32,
    };
    let rot = Rotation::new(angle, p.out_h, p.out_w);
    let (oh, ow) = (p.out_h as i32, p.out_w as i32);
    let r = (p.ksize / 2) as i32;
    let tile = TILE as usize;
    let side = tile + 2 * r as usize;
    let chan = p.channels as usize;
    let smem = gpu_launch_sized_workgroup_mem::<f32>();
    let rotated = smem;
    let hbuf = smem.wrapping_add(chan * side * side);
    let wts = hbuf.wrapping_add(side * tile);
    // SAFETY: `wts` is `ksize` f32 of the launch's shared memory, read after the first barrier
    // inside `blur_tile`.
    unsafe { write_weights(wts, p.ksize, sigma) };
    let y0 = ((t / tiles_x.max(1)) * TILE) as i32;
    let x0 = ((t % tiles_x.max(1)) * TILE) as i32;

    // The rotated image over the tile and its halo, every channel.
    let (tx, ty) = thread_xy();
    let mut i = ty as usize;
    while i < side {
        let gi = reflect(y0 - r + i as i32, oh);
        let mut j = tx as usize;
        while j < side {
            let gj = reflect(x0 - r + j as i32, ow);
            let (sy, sx) = rot.source(gi, gj);
            let at = |c: usize| rotated.wrapping_add((c * side + i) * side + j);
            if p.nearest != 0 {
                let px = nearest_pixel(sy, sx, oh, ow);
                let mut c = 0;
                while c < chan {
                    let v = match px {
                        Some((zi, zj)) => src.resized(c as u32, zi, zj),
                        None => 0.0,
                    };
                    // SAFETY: `c < channels`, `i, j < side`: inside the rotated tile.
                    unsafe { *at(c) = v };
                    c += 1;
                }
            } else {
                let bl = Bilinear::new(sy, sx, oh, ow);
                let mut c = 0;
                while c < chan {
                    let v = bl.sample(|zi, zj| src.resized(c as u32, zi, zj));
                    // SAFETY: as above.
                    unsafe { *at(c) = v };
                    c += 1;
                }
            }
            j += IMAGE_BLOCK_X as usize;
        }
        i += IMAGE_BLOCK_Y as usize;
    }

    let stats = p.stats as *const f32;
    let out_plane = p.out_h as usize * p.out_w as usize;
    let out_w = p.out_w as usize;
    let mut c = 0;
    while c < chan {
        // SAFETY: `c < channels`; `stats` holds `2 * channels` f32.
        let (mean, std) = unsafe { (stats.add(c).read(), stats.add(chan + c).read()) };
        let dst = (p.y as *mut f32).wrapping_add((nu * chan + c) * out_plane);
        // The rotated tile of channel `c` is already in place; `blur_tile`'s first barrier
        // publishes it (and, for channel 0, the weights).
        // SAFETY: every thread runs this loop with the same `c`; the buffers are sized by the
        // host (`augment_shared_bytes`).
        unsafe {
            blur_tile(
                (oh, ow),
                (y0, x0),
                (r, r),
                rotated.wrapping_add(c * side * side),
                hbuf,
                wts,
                wts,
                |_, _, _| {},
                // SAFETY: `blur_tile` stores only pixels inside the output plane.
                |yy, xx, v| {
                    dst.add(yy as usize * out_w + xx as usize)
                        .write((v - mean) / std)
                },
            )
        };
        c += 1;
    }
}
