//! Per-image rotation about the image centre, like
//! `torchvision.transforms.v2.functional.rotate(img, angle, interpolation, expand=False,
//! fill=...)`, for a whole batch with one angle per image.
//!
//! Nearest: a block covers a 32-column patch of one image; each thread sets up the image's
//! rotation and its column's terms once, finds each pixel's source point once and samples every
//! channel there, so a warp writes 32 consecutive values of a row and reads a short rotated run
//! of the input (cached in L1). Bilinear reads four neighbours per channel: its blocks stage the
//! source window of a 32 x 32 patch in shared memory first (see [`rotate_bilinear`]).

use crate::channels::{for_channels, for_columns, image_and_column};
use crate::sampling::{nearest_pixel, Bilinear, Rotation};
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;
use streamline_abi::image::{RotateParams, IMAGE_BLOCK_X, IMAGE_BLOCK_Y};
use streamline_abi::image::{
    ROTATE_BILINEAR, ROTATE_NEAREST, ROTATE_PATCH_ROWS, ROTATE_STAGED_CHANNELS, ROTATE_WINDOW,
};
use streamline_device::kernel;
use streamline_device::math::floor_i32;
use streamline_device::mem::{copy_async, copy_wait, ldg_at, shared_addr, stg_at};
use streamline_device::thread::{block_xyz, grid_z, sync_block, thread_xy};

/// The image's rotation (its angle read from `p.angles`).
#[inline(always)]
fn rotation(p: &RotateParams, n: u32) -> Rotation {
    // SAFETY: `n < batch`; `angles` holds `batch` f32.
    let deg = unsafe { (p.angles as *const f32).add(n as usize).read() };
    Rotation::new(deg, p.height, p.width)
}

kernel! {
    #[declared(ROTATE_NEAREST)]
    /// Nearest neighbour (torchvision's default): the input pixel nearest to the source point, or
    /// the fill (0 without one) when that pixel lies outside.
    ///
    /// # Safety
    /// `p.x`, `p.y` must address `batch * channels * height * width` f32, `p.angles` `batch` f32;
    /// an image (`channels * height * width`) at most `2^32 - 1` values; grid as [`for_columns`]
    /// describes for `p.rows` rows.
    pub unsafe fn rotate_nearest(p: RotateParams) {
        let plane = p.height * p.width;
        let (h, w) = (p.height as i32, p.width as i32);
        let fill = if p.has_fill != 0 { p.fill } else { 0.0 };
        for_columns(p.batch, p.height, p.width, p.rows, |col| {
            let rot = rotation(&p, col.n);
            let (cx, cy) = rot.col(col.j as i32);
            let (image, out) = image_and_column((p.x, p.y), p.channels, (plane, plane), col.n, col.j);
            col.rows(|i| {
                let (rx, ry) = rot.row(i as i32);
                let (sy, sx) = rot.finish(cx + rx, cy + ry);
                let src = nearest_pixel(sy, sx, h, w).map(|(yi, xi)| yi as u32 * p.width + xi as u32);
                let dst = i * p.width;
                for_channels(
                    p.channels,
                    |c| match src {
                        // SAFETY: `nearest_pixel` returns only pixels inside the plane of channel
                        // `c < channels`.
                        Some(o) => unsafe { ldg_at(image, c * plane + o) },
                        None => fill,
                    },
                    // SAFETY: `i < height`, `j < width`, `c < channels`, `n < batch`.
                    |c, v| unsafe { stg_at(out, c * plane + dst, v) },
                );
            });
        });
    }
}

kernel! {
    #[declared(ROTATE_BILINEAR)]
    /// Bilinear: the four neighbours of the source point, those outside counting as 0; with a fill,
    /// torchvision's `mask * (value - fill) + fill` where `mask` is the weight of the neighbours
    /// inside.
    ///
    /// A block covers a 32 x 32 patch of one image. It copies the source window of the patch (up
    /// to four channels at a time) into shared memory with `cp.async`, all of a thread's copies in
    /// flight at once, and then samples there: a warp's sixteen reads of a pixel's neighbours
    /// along a rotated line hit shared-memory banks rather than a cache line each.
    ///
    /// # Safety
    /// `p.x`, `p.y` must address `batch * channels * height * width` f32, `p.angles` `batch` f32;
    /// an image (`channels * height * width`) at most `2^32 - 1` values; grid `(ceil(width / 32),
    /// ceil(height / 32), min(batch, 65535))` blocks of 32 x 8 threads with
    /// `rotate_shared_bytes(channels)` bytes of dynamic shared memory (`p.rows` is not read).
    pub unsafe fn rotate_bilinear(p: RotateParams) {
        let (bx, by, bz) = block_xyz();
        let (tx, ty) = thread_xy();
        let (h, w) = (p.height as i32, p.width as i32);
        let plane = p.height * p.width;
        let (j0, i0) = ((bx * IMAGE_BLOCK_X) as i32, (by * ROTATE_PATCH_ROWS) as i32);
        let j = j0 + tx as i32;
        let win = gpu_launch_sized_workgroup_mem::<f32>();
        let lin = ty * IMAGE_BLOCK_X + tx;
        let mut n = bz;
        while n < p.batch {
            let rot = rotation(&p, n);
            // The source window: the patch's corners' source points bound every source point
            // (each coordinate is monotonic in the row and in the column), widened to the
            // bilinear neighbours and a pixel each side, clamped into the image.
            let (i1, j1) = ((i0 + ROTATE_PATCH_ROWS as i32 - 1).min(h - 1), (j0 + 31).min(w - 1));
            let (ay, ax) = rot.source(i0, j0);
            let (by_, bx_) = rot.source(i0, j1);
            let (cy, cx) = rot.source(i1, j0);
            let (dy, dx) = rot.source(i1, j1);
            let span = |a: f32, b: f32, c: f32, d: f32, n: i32| {
                let lo = floor_i32(a.min(b).min(c.min(d))).saturating_sub(1).max(0).min(n - 1);
                let hi = floor_i32(a.max(b).max(c.max(d))).saturating_add(2).max(0).min(n - 1);
                (lo, hi.max(lo))
            };
            let (wy0, wy1) = span(ay, by_, cy, dy, h);
            let (wx0, wx1) = span(ax, bx_, cx, dx, w);
            // At most 48 x 48 (`ROTATE_WINDOW`); capped so that no copy leaves the buffer
            // whatever the parameters hold.
            let cols = ((wx1 - wx0 + 1) as u32).min(48);
            let rows = ((wy1 - wy0 + 1) as u32).min(ROTATE_WINDOW / cols);
            let image = (p.x as *const f32).wrapping_add(n as usize * p.channels as usize * plane as usize);
            let out = (p.y as *mut f32).wrapping_add(n as usize * p.channels as usize * plane as usize);
            let mut c0 = 0;
            while c0 < p.channels {
                let group = (p.channels - c0).min(ROTATE_STAGED_CHANNELS);
                if c0 > 0 {
                    // SAFETY: every thread of the block reaches this barrier; the previous
                    // group's reads are done before its window is overwritten.
                    unsafe { sync_block() };
                }
                let total = rows * cols;
                let mut k = lin;
                while k < total {
                    let (r, c) = (k / cols, k % cols);
                    let src = (wy0 as u32 + r) * p.width + wx0 as u32 + c;
                    let mut g = 0;
                    while g < group {
                        // SAFETY: `(wy0 + r, wx0 + c)` lies inside the image, channel
                        // `c0 + g < channels`; `g * ROTATE_WINDOW + k` lies inside the window
                        // (`k < rows * cols <= ROTATE_WINDOW`).
                        unsafe {
                            copy_async(
                                shared_addr(win.wrapping_add((g * ROTATE_WINDOW + k) as usize)),
                                image,
                                (c0 + g) * plane + src,
                            )
                        };
                        g += 1;
                    }
                    k += IMAGE_BLOCK_X * IMAGE_BLOCK_Y;
                }
                // SAFETY: built for sm_80 and newer; every thread reaches the barrier, which
                // publishes the window.
                unsafe {
                    copy_wait();
                    sync_block();
                }
                if j < w {
                    let (cxj, cyj) = rot.col(j);
                    let mut r = 0;
                    while r < ROTATE_PATCH_ROWS / IMAGE_BLOCK_Y {
                        let i = i0 + (ty + r * IMAGE_BLOCK_Y) as i32;
                        if i < h {
                            let (rx, ry) = rot.row(i);
                            let (sy, sx) = rot.finish(cxj + rx, cyj + ry);
                            let bl = Bilinear::new(sy, sx, h, w);
                            let mask = bl.mask();
                            let dst = i as u32 * p.width + j as u32;
                            let mut g = 0;
                            while g < group {
                                let base = win.wrapping_add((g * ROTATE_WINDOW) as usize);
                                // SAFETY: clamped into the staged window (a no-op for every
                                // neighbour inside the image: the window covers them).
                                let v = bl.sample(|yy, xx| unsafe {
                                    let rr = (yy - wy0).max(0).min(rows as i32 - 1) as u32;
                                    let cc = (xx - wx0).max(0).min(cols as i32 - 1) as u32;
                                    *base.add((rr * cols + cc) as usize)
                                });
                                let v = if p.has_fill != 0 {
                                    (v - p.fill) * mask + p.fill
                                } else {
                                    v
                                };
                                // SAFETY: `i < height`, `j < width`, `c0 + g < channels`,
                                // `n < batch`.
                                unsafe { stg_at(out, (c0 + g) * plane + dst, v) };
                                g += 1;
                            }
                        }
                        r += 1;
                    }
                }
                c0 += group;
            }
            n += grid_z();
            if n < p.batch {
                // SAFETY: every thread of the block reaches this barrier (`n` is the block's).
                unsafe { sync_block() };
            }
        }
    }
}
