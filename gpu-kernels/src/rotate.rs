//! Per-image rotation about the image centre, like
//! `torchvision.transforms.v2.functional.rotate(img, angle, interpolation, expand=False,
//! fill=...)`, for a whole batch with one angle per image.
//!
//! Input and output are NCHW, or NHWC on either side (`RotateParams::layout`) in kernels of
//! their own, so that the NCHW kernels keep their register count.
//!
//! A block covers a 32-column patch of one image; each thread sets up the image's rotation and
//! its column's terms once, finds each pixel's source point once and samples every channel
//! there. A warp's reads run through the input along the rotated direction of its pixels, and
//! cost the L1 cache about one pass per line they touch: a warp on a row of 32 reads along one
//! input row when the angle is near 0 or 180 degrees, but down 32 rows near 90. So each image's
//! warps take the shape whose reads run most nearly along input rows ([`warp_shape`]), and in
//! NCHW write whole 32-byte sectors whatever the shape. A load that misses L2 fetches the 256
//! bytes around it, which the neighbouring warps read next.

use crate::channels::{for_channels, for_shaped_columns, image_and_column, WarpShape};
use crate::sampling::{nearest_pixel, Bilinear, Rotation};
use core::intrinsics::fmaf32 as fmaf;
use streamline_abi::image::RotateParams;
use streamline_abi::image::{
    ROTATE_BILINEAR, ROTATE_BILINEAR_RELAYOUT, ROTATE_NEAREST, ROTATE_NEAREST_RELAYOUT,
    ROTATE_NHWC_IN, ROTATE_NHWC_OUT,
};
use streamline_device::kernel;
use streamline_device::mem::{ldg_at_line, ldg_line, stg_at};

/// The image's rotation (its angle read from `p.angles`).
#[inline(always)]
fn rotation(p: &RotateParams, n: u32) -> Rotation {
    // SAFETY: `n < batch`; `angles` holds `batch` f32.
    let deg = unsafe { (p.angles as *const f32).add(n as usize).read() };
    Rotation::new(deg, p.height, p.width)
}

/// The warps' shape for a rotation whose output rows run through the input with slope
/// `sin` (per unit of length): rows of 32 within 22.5 degrees of a row, 16 x 2 patches up to
/// 67.5 degrees, and `steep` (narrow, tall patches) beyond, measured per angle on an H200.
#[inline(always)]
fn warp_shape(sin: f32, steep: WarpShape) -> WarpShape {
    let s = sin.abs();
    if s < 0.382_683_43 {
        WarpShape(0)
    } else if s < 0.923_879_5 {
        WarpShape(1)
    } else {
        steep
    }
}

/// Where a layout keeps value `c` of pixel `o` of an image of `channels` planes of `plane`
/// values: `c * ch + o * px`, with `(ch, px)` the layout's strides.
#[derive(Clone, Copy)]
struct Strides {
    ch: u32,
    px: u32,
}

impl Strides {
    /// NCHW (planes one after the other) or, when `nhwc`, pixels with interleaved channels.
    #[inline(always)]
    fn of(nhwc: bool, channels: u32, plane: u32) -> Strides {
        if nhwc {
            Strides {
                ch: 1,
                px: channels,
            }
        } else {
            Strides { ch: plane, px: 1 }
        }
    }
}

/// Calls `pixel(image, out, dst, (sy, sx))` for each of this thread's output pixels (see
/// [`for_shaped_columns`], with the warps shaped by [`warp_shape`] and `steep`): the image's
/// input, the thread's column of the image's output (channel 0), the pixel's row offset in
/// the output and its source point. The output's layout has strides `so`.
#[inline(always)]
fn for_pixels(
    p: &RotateParams,
    steep: WarpShape,
    so: Strides,
    mut pixel: impl FnMut(*const f32, *mut f32, u32, (f32, f32)),
) {
    let plane = p.height * p.width;
    let per_image = |n: u32| {
        let rot = rotation(p, n);
        (warp_shape(rot.sin, steep), rot)
    };
    for_shaped_columns(p.batch, p.height, p.width, p.rows, per_image, |col, rot| {
        let (cx, cy) = rot.col(col.j as i32);
        let (image, out) =
            image_and_column((p.x, p.y), p.channels, (plane, plane), col.n, col.j * so.px);
        col.rows(|i| {
            let (rx, ry) = rot.row(i as i32);
            pixel(
                image,
                out,
                i * p.width * so.px,
                rot.finish(cx + rx, cy + ry),
            );
        });
    });
}

/// Runs `f::<NHWC_IN, NHWC_OUT>` for the launch's layouts (`p.layout`, NHWC on at least one
/// side; any other value is taken as NHWC on both), decided once per launch rather than per
/// value. NCHW in and out has kernels of its own, so that they keep their register count.
macro_rules! with_layouts {
    ($p:expr, $f:ident$(::<$fill:ident>)?($($arg:expr),*)) => {
        match $p.layout & (ROTATE_NHWC_IN | ROTATE_NHWC_OUT) {
            ROTATE_NHWC_IN => $f::<$({ $fill },)? true, false>($($arg),*),
            ROTATE_NHWC_OUT => $f::<$({ $fill },)? false, true>($($arg),*),
            _ => $f::<$({ $fill },)? true, true>($($arg),*),
        }
    };
}

kernel! {
    #[declared(ROTATE_NEAREST)]
    /// Nearest neighbour (torchvision's default): the input pixel nearest to the source point, or
    /// the fill (0 without one) when that pixel lies outside.
    ///
    /// # Safety
    /// `p.x`, `p.y` must address `batch * channels * height * width` f32, `p.angles` `batch` f32;
    /// an image (`channels * height * width`) at most `2^32 - 1` values; grid as
    /// [`for_columns`](crate::channels::for_columns) describes for `p.rows` rows.
    pub unsafe fn rotate_nearest(p: RotateParams) {
        // SAFETY: forwarded.
        unsafe { nearest::<false, false>(&p) }
    }
}

kernel! {
    #[declared(ROTATE_NEAREST_RELAYOUT)]
    /// [`rotate_nearest`] in the layouts `p.layout` names (NHWC on at least one side).
    ///
    /// # Safety
    /// As for [`rotate_nearest`], in the layouts `p.layout` names.
    pub unsafe fn rotate_nearest_relayout(p: RotateParams) {
        // SAFETY: forwarded.
        unsafe { with_layouts!(p, nearest(&p)) }
    }
}

/// [`rotate_nearest`] for one pair of layouts.
///
/// # Safety
/// As for [`rotate_nearest`], in these layouts.
#[inline(always)]
unsafe fn nearest<const NHWC_IN: bool, const NHWC_OUT: bool>(p: &RotateParams) {
    let plane = p.height * p.width;
    let (si, so) = (
        Strides::of(NHWC_IN, p.channels, plane),
        Strides::of(NHWC_OUT, p.channels, plane),
    );
    let (h, w) = (p.height as i32, p.width as i32);
    let fill = if p.has_fill != 0 { p.fill } else { 0.0 };
    // Near 90 degrees, 8 x 4 patches.
    for_pixels(p, WarpShape(2), so, |image, out, dst, (sy, sx)| {
        let src =
            nearest_pixel(sy, sx, h, w).map(|(yi, xi)| (yi as u32 * p.width + xi as u32) * si.px);
        for_channels(
            p.channels,
            |c| match src {
                // SAFETY: `nearest_pixel` returns only pixels inside the image, `c < channels`.
                Some(o) => unsafe { ldg_at_line(image, c * si.ch + o) },
                None => fill,
            },
            // SAFETY: the pixel is in the image (`for_pixels`), `c < channels`.
            |c, v| unsafe { stg_at(out, c * so.ch + dst, v) },
        );
    });
}

kernel! {
    #[declared(ROTATE_BILINEAR)]
    /// Bilinear: the four neighbours of the source point, those outside counting as 0; with a fill,
    /// torchvision's `mask * (value - fill) + fill` where `mask` is the weight of the neighbours
    /// inside.
    ///
    /// # Safety
    /// As for [`rotate_nearest`].
    pub unsafe fn rotate_bilinear(p: RotateParams) {
        // SAFETY: forwarded.
        unsafe {
            if p.has_fill != 0 {
                bilinear::<true, false, false>(&p)
            } else {
                bilinear::<false, false, false>(&p)
            }
        }
    }
}

kernel! {
    #[declared(ROTATE_BILINEAR_RELAYOUT)]
    /// [`rotate_bilinear`] in the layouts `p.layout` names (NHWC on at least one side).
    ///
    /// # Safety
    /// As for [`rotate_nearest`], in the layouts `p.layout` names.
    pub unsafe fn rotate_bilinear_relayout(p: RotateParams) {
        // SAFETY: forwarded.
        unsafe {
            if p.has_fill != 0 {
                with_layouts!(p, bilinear::<true>(&p))
            } else {
                with_layouts!(p, bilinear::<false>(&p))
            }
        }
    }
}

/// [`rotate_bilinear`] with or without a fill, decided once per launch rather than per value,
/// in one pair of layouts. A pixel's neighbours are addressed from one pointer per row and
/// channel, the east ones one pixel on, and blended by fused multiply-adds in torch's order
/// (north-west, north-east, south-west, south-east).
///
/// # Safety
/// As for [`rotate_nearest`], in these layouts.
#[inline(always)]
unsafe fn bilinear<const FILL: bool, const NHWC_IN: bool, const NHWC_OUT: bool>(p: &RotateParams) {
    let plane = p.height * p.width;
    let (si, so) = (
        Strides::of(NHWC_IN, p.channels, plane),
        Strides::of(NHWC_OUT, p.channels, plane),
    );
    let (h, w) = (p.height as i32, p.width as i32);
    // Near 90 degrees, 4 x 8 patches.
    for_pixels(p, WarpShape(3), so, |image, out, dst, (sy, sx)| {
        let bl = Bilinear::new(sy, sx, h, w);
        let mask = if FILL { bl.mask() } else { 0.0 };
        // The north-west neighbour of channel 0 and the one below it; only neighbours inside
        // the image are read, so the pointers may lie outside it.
        let nw =
            image.wrapping_offset((bl.y0 as isize * w as isize + bl.x0 as isize) * si.px as isize);
        let sw = nw.wrapping_add((p.width * si.px) as usize);
        let east = si.px as usize;
        for_channels(
            p.channels,
            |c| {
                let c = (c * si.ch) as usize;
                let (n, s) = (nw.wrapping_add(c), sw.wrapping_add(c));
                let mut v = 0.0f32;
                // SAFETY: each neighbour is read only when inside the image, `c < channels`.
                unsafe {
                    if bl.inside[0] {
                        v = fmaf(ldg_line(n), bl.w[0], v);
                    }
                    if bl.inside[1] {
                        v = fmaf(ldg_line(n.wrapping_add(east)), bl.w[1], v);
                    }
                    if bl.inside[2] {
                        v = fmaf(ldg_line(s), bl.w[2], v);
                    }
                    if bl.inside[3] {
                        v = fmaf(ldg_line(s.wrapping_add(east)), bl.w[3], v);
                    }
                }
                if FILL {
                    (v - p.fill) * mask + p.fill
                } else {
                    v
                }
            },
            // SAFETY: the pixel is in the image (`for_pixels`), `c < channels`.
            |c, v| unsafe { stg_at(out, c * so.ch + dst, v) },
        );
    });
}
