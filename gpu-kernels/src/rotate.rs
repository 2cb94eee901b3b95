//! Per-image rotation about the image centre, like
//! `torchvision.transforms.v2.functional.rotate(img, angle, interpolation, expand=False,
//! fill=...)`, for a whole batch with one angle per image.
//!
//! A block covers a 32 x 16 patch of one image; each thread computes the source coordinates of
//! its pixels once and samples every channel there, so a warp writes 32 consecutive values of
//! a row and reads a short rotated run of the input (cached in L1).

use crate::channels::{for_channels, for_pixels};
use crate::mem::ldg;
use crate::sampling::{nearest_pixel, Bilinear, Rotation};
use streamline_abi::image::RotateParams;

/// The image's rotation (its angle read from `p.angles`).
#[inline(always)]
fn rotation(p: &RotateParams, n: u32) -> Rotation {
    // SAFETY: `n < batch`; `angles` holds `batch` f32.
    let deg = unsafe { (p.angles as *const f32).add(n as usize).read() };
    Rotation::new(deg, p.height, p.width)
}

/// Nearest neighbour (torchvision's default): the input pixel nearest to the source point, or
/// the fill (0 without one) when that pixel lies outside.
///
/// # Safety
/// `p.x`, `p.y` must address `batch * channels * height * width` f32, `p.angles` `batch` f32;
/// grid `ceil(width / 32) * ceil(height / 16) * batch` blocks of 32 x 8 threads.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rotate_nearest(p: RotateParams) {
    let plane = p.height as usize * p.width as usize;
    let (h, w) = (p.height as i32, p.width as i32);
    let fill = if p.has_fill != 0 { p.fill } else { 0.0 };
    let x = p.x as *const f32;
    let y = p.y as *mut f32;
    // Every pixel of a block belongs to one image: its rotation is set up once.
    let mut rot = None;
    for_pixels(p.batch, p.height, p.width, |n, i, j| {
        let (sy, sx) = rot
            .get_or_insert_with(|| rotation(&p, n))
            .source(i as i32, j as i32);
        let src = nearest_pixel(sy, sx, h, w);
        let base = |c: u32| (n as usize * p.channels as usize + c as usize) * plane;
        for_channels(
            p.channels,
            |c| match src {
                // SAFETY: `nearest_pixel` returns only pixels inside the plane.
                Some((yi, xi)) => unsafe {
                    ldg(x.add(base(c) + yi as usize * p.width as usize + xi as usize))
                },
                None => fill,
            },
            // SAFETY: `i < height`, `j < width`, `c < channels`, `n < batch`.
            |c, v| unsafe {
                y.add(base(c) + i as usize * p.width as usize + j as usize)
                    .write(v)
            },
        );
    });
}

/// Bilinear: the four neighbours of the source point, those outside counting as 0; with a fill,
/// torchvision's `mask * (value - fill) + fill` where `mask` is the weight of the neighbours
/// inside.
///
/// # Safety
/// As for [`rotate_nearest`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rotate_bilinear(p: RotateParams) {
    let plane = p.height as usize * p.width as usize;
    let (h, w) = (p.height as i32, p.width as i32);
    let x = p.x as *const f32;
    let y = p.y as *mut f32;
    // Every pixel of a block belongs to one image: its rotation is set up once.
    let mut rot = None;
    for_pixels(p.batch, p.height, p.width, |n, i, j| {
        let (sy, sx) = rot
            .get_or_insert_with(|| rotation(&p, n))
            .source(i as i32, j as i32);
        let bl = Bilinear::new(sy, sx, h, w);
        let mask = bl.mask();
        let base = |c: u32| (n as usize * p.channels as usize + c as usize) * plane;
        for_channels(
            p.channels,
            |c| {
                // SAFETY: `Bilinear::sample` loads only neighbours inside the plane.
                let v = bl.sample(|yy, xx| unsafe {
                    ldg(x.add(base(c) + yy as usize * p.width as usize + xx as usize))
                });
                if p.has_fill != 0 {
                    (v - p.fill) * mask + p.fill
                } else {
                    v
                }
            },
            // SAFETY: `i < height`, `j < width`, `c < channels`, `n < batch`.
            |c, v| unsafe {
                y.add(base(c) + i as usize * p.width as usize + j as usize)
                    .write(v)
            },
        );
    });
}
