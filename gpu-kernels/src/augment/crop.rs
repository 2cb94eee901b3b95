//! The crop of one image: where its uint8 pixels lie and how a crop pixel samples them
//! (`roi_align` bins), read either bin by bin from device memory or as the packed pixels and
//! words that the staged input windows hold. Kept apart from the steps because both the crop
//! window's staging and the dyadic path read the input through it.

use super::staging::Window;
use super::tile::{Px, RaggedImage, Setup};
use crate::sampling::{Roi, RoiTap};
use streamline_abi::image::{
    AugmentParams, ImageExtent, AUGMENT_CROP_TAPS, AUGMENT_INPUT_BUDGET, AUGMENT_NHWC_IN,
    EXTENT_WORDS,
};
use streamline_device::mem::{ldg, ldg_u8};

/// The crop stage of one image: its uint8 pixels and the box's `roi_align` sampling rule.
#[derive(Clone, Copy)]
pub(super) struct Crop {
    pub(super) img: *const u8,
    /// Strides in bytes of a row, a pixel and a channel (NCHW or NHWC); an image holds at
    /// most `2^32 - 1` bytes, so offsets inside it fit `u32`.
    pub(super) strides: (u32, u32, u32),
    pub(super) h: i32,
    pub(super) w: i32,
    pub(super) scale: f32,
    pub(super) roi: Roi,
}

/// The staged input window: rows `r0 ..`, columns `c0 ..`, `rows x cols` packed pixels.
#[derive(Clone, Copy)]
pub(super) struct InputWindow {
    pub(super) r0: i32,
    pub(super) c0: i32,
    pub(super) rows: u32,
    pub(super) cols: u32,
}

impl Crop {
    /// The crop stage of image `n` (`n < batch`) with box sampling rule `roi`; in a ragged
    /// batch (`RAGGED`) the image is the one the block's setup record found.
    #[inline(always)]
    pub(super) fn new<const RAGGED: bool>(
        setup: *const Setup,
        p: &AugmentParams,
        n: usize,
        roi: Roi,
    ) -> Crop {
        let c = p.channels;
        let (img, h, w, scale) = if !RAGGED {
            let plane = p.height * p.width;
            let img = p.x.as_ptr().wrapping_add(n * c as usize * plane as usize);
            (img, p.height, p.width, p.scale)
        } else {
            // SAFETY: the setup record's image is written by one thread before the block's
            // first barrier and only read after it.
            let im = unsafe { (*setup).image };
            let off = (im.offset[1] as u64) << 32 | im.offset[0] as u64;
            (
                p.x.as_ptr().wrapping_add(off as usize),
                im.h,
                im.w,
                im.scale,
            )
        };
        let plane = h * w;
        let strides = if p.layout & AUGMENT_NHWC_IN != 0 {
            (w * c, c, 1)
        } else {
            (w, 1, plane)
        };
        Crop {
            img,
            strides,
            h: h as i32,
            w: w as i32,
            scale,
            roi,
        }
    }

    /// The extent of image `n` of a ragged batch, as its device words.
    #[inline(always)]
    fn extent_words(p: &AugmentParams, n: usize) -> [u32; EXTENT_WORDS] {
        let at = p.extents.as_ptr().wrapping_add(EXTENT_WORDS * n);
        // SAFETY: `n < batch` and `p.extents` holds `EXTENT_WORDS * batch` u32 by the kernel's
        // contract.
        unsafe {
            [
                at.read(),
                at.add(1).read(),
                at.add(2).read(),
                at.add(3).read(),
            ]
        }
    }

    /// Whether image `n` of a ragged batch lies inside the input ([`ImageExtent::fits`]).
    #[inline(always)]
    pub(super) fn fits(p: &AugmentParams, n: usize) -> bool {
        ImageExtent::from_words(Self::extent_words(p, n)).fits(p.channels, p.x_bytes)
    }

    /// Image `n` of a ragged batch: its place, height, width and the uint8-to-float
    /// multiplier; where the extent is empty or reaches past the input, a 1 x 1 image at the
    /// input's start with a NaN multiplier, so that nothing is read outside `p.x` (the block's
    /// normalisation then makes the whole image NaN, see `augment_block`).
    #[inline(always)]
    pub(super) fn ragged(p: &AugmentParams, n: usize) -> RaggedImage {
        let words = Self::extent_words(p, n);
        let e = ImageExtent::from_words(words);
        if e.fits(p.channels, p.x_bytes) {
            RaggedImage {
                offset: [words[0], words[1]],
                h: e.height,
                w: e.width,
                scale: p.scale,
            }
        } else {
            RaggedImage {
                offset: [0, 0],
                h: 1,
                w: 1,
                scale: f32::NAN,
            }
        }
    }

    /// Crop pixel `(p, q)`, every channel, straight from device memory: the `roi_align` bin of
    /// the input converted to float on load.
    #[inline(always)]
    pub(super) fn pixel<const C: usize, T: Px>(&self, p: i32, q: i32) -> T {
        let (row, px, ch) = self.strides;
        let (img, scale) = (self.img, self.scale);
        // SAFETY: `Roi::bin_n` loads only pixels inside the `h x w` image, and channel
        // `c < channels` of this image lies inside `p.x` by the kernel's contract.
        let load = |c: usize, yy: i32, xx: i32| unsafe {
            let off = yy as u32 * row + xx as u32 * px + c as u32 * ch;
            ldg_u8(img.add(off as usize)) as f32 * scale
        };
        let v = self
            .roi
            .bin_n::<C>(self.h, self.w, p as u32, q as u32, load);
        let mut out = T::zero();
        for (c, x) in v.iter().enumerate() {
            out.set(c, *x);
        }
        out
    }

    /// The input window that crop window `win` reads, when each crop pixel is one bilinear
    /// sample (a one-point sampling grid) and the window fits the staging budget. The sample
    /// coordinates grow with the crop row (column), and so do their clamped taps, so the taps
    /// of the first and last row (column) bound the window.
    #[inline(always)]
    pub(super) fn input_window(&self, win: &Window) -> Option<InputWindow> {
        if self.roi.grid_h != 1 || self.roi.grid_w != 1 {
            return None;
        }
        if win.rows > AUGMENT_CROP_TAPS || win.cols > AUGMENT_CROP_TAPS {
            return None;
        }
        let (p1, q1) = (win.p0 + win.rows as i32 - 1, win.q0 + win.cols as i32 - 1);
        let r0 = RoiTap::new(self.roi.y_of_one(win.p0 as u32), self.h).lo;
        let r1 = RoiTap::new(self.roi.y_of_one(p1 as u32), self.h).hi;
        let c0 = RoiTap::new(self.roi.x_of_one(win.q0 as u32), self.w).lo;
        let c1 = RoiTap::new(self.roi.x_of_one(q1 as u32), self.w).hi;
        let rows = (r1 - r0 + 1).max(1) as u32;
        let cols = (c1 - c0 + 1).max(1) as u32;
        if rows as u64 * cols as u64 > AUGMENT_INPUT_BUDGET as u64 {
            return None;
        }
        Some(InputWindow { r0, c0, rows, cols })
    }

    /// Input pixel `(r, c)` (inside the image), every channel packed little-end first.
    #[inline(always)]
    pub(super) fn packed<const C: usize>(&self, r: i32, c: i32) -> u32 {
        let (row, px, ch) = self.strides;
        let base = r as u32 * row + c as u32 * px;
        let mut v = 0u32;
        for k in 0..C {
            // SAFETY: `(r, c)` lies inside the image and `k < channels`: inside `p.x`.
            let b = unsafe { ldg_u8(self.img.add((base + k as u32 * ch) as usize)) };
            v |= (b as u32) << (8 * k);
        }
        v
    }

    /// Channel `k` of input row `r` (inside the image) at columns `c ..= c + 3`, packed little
    /// end first; columns past the image's last read that column instead.
    #[inline(always)]
    pub(super) fn word(&self, r: i32, c: i32, k: u32) -> u32 {
        let (row, px, ch) = self.strides;
        let base = r as u32 * row + k * ch;
        let mut v = 0u32;
        for b in 0..4 {
            let col = (c + b).min(self.w - 1).max(0) as u32;
            // SAFETY: `(r, col)` lies inside the image and `k < channels`: inside `p.x`.
            let x = unsafe { ldg_u8(self.img.add((base + col * px) as usize)) };
            v |= (x as u32) << (8 * b);
        }
        v
    }

    /// Whether every channel row of the input starts 4-byte aligned with one byte a pixel
    /// (NCHW, `p.x` and the width multiples of 4), so that [`Crop::word`] of a column that is
    /// a multiple of 4 can read its word at once ([`Crop::word_at_once`]).
    #[inline(always)]
    pub(super) fn words_aligned(&self) -> bool {
        let (row, px, ch) = self.strides;
        px == 1 && row % 4 == 0 && ch % 4 == 0 && self.img as usize % 4 == 0
    }

    /// [`Crop::word`] of column `c`, a multiple of 4, with one 4-byte load where
    /// [`Crop::words_aligned`]: columns from the image's width on read the last word instead
    /// (the width is a multiple of 4), which callers give no weight.
    #[inline(always)]
    pub(super) fn word_at_once(&self, r: i32, c: i32, k: u32) -> u32 {
        let (row, _, ch) = self.strides;
        let c = c.min(self.w - 4).max(0) as u32;
        let off = r as u32 * row + k * ch + c;
        // SAFETY: `(r, c ..= c + 3)` lie inside the image's row and `k < channels`: inside
        // `p.x`; the address is 4-byte aligned (`words_aligned`).
        unsafe { ldg(self.img.add(off as usize).cast::<f32>()).to_bits() }
    }

    /// Whether the input is NHWC of more than one channel with its rows 4-byte aligned and a
    /// width that is a multiple of 4, so that four pixels from a column that is a multiple of 4
    /// are `C` whole words ([`Crop::pixels_at_once`]).
    #[inline(always)]
    pub(super) fn pixels_aligned(&self) -> bool {
        let (_, px, ch) = self.strides;
        ch == 1 && px > 1 && self.w % 4 == 0 && self.img as usize % 4 == 0
    }

    /// Every channel's [`Crop::word`] of column `c`, a multiple of 4, from `C` 4-byte loads of
    /// the four NHWC pixels, regrouped by channel, where [`Crop::pixels_aligned`]; columns from
    /// the width on read the last four pixels instead, which callers give no weight.
    #[inline(always)]
    pub(super) fn pixels_at_once<const C: usize>(&self, r: i32, c: i32) -> [u32; C] {
        let (row, px, _) = self.strides;
        let c = c.min(self.w - 4).max(0) as u32;
        let off = r as u32 * row + c * px;
        // SAFETY: the four pixels `(r, c ..= c + 3)` lie inside the image: `4 C` bytes inside
        // `p.x` from a 4-byte aligned address (`pixels_aligned`).
        let w: [u32; C] = core::array::from_fn(|i| unsafe {
            ldg(self.img.add(off as usize + 4 * i).cast::<f32>()).to_bits()
        });
        core::array::from_fn(|k| {
            let mut v = 0u32;
            for j in 0..4 {
                let i = j * C + k;
                v |= ((w[i / 4] >> (8 * (i % 4))) & 0xff) << (8 * j);
            }
            v
        })
    }
}
