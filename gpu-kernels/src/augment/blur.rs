//! Step 3, blurring, normalising and storing: the layout of the horizontally blurred rows, and
//! the vertical pass over them with the normalisation and the store straight to the output (the
//! horizontal pass runs in `augment_block`, between the barriers around it). Both passes read
//! only what the rotation left in shared memory, so that no intermediate image reaches device
//! memory.

use super::tile::{Px, Shared, Tile, Weights};
use super::DYADIC;
use core::intrinsics::fmaf32 as fmaf;
use streamline_abi::image::{
    AugmentParams, AUGMENT_FAST_RADIUS, AUGMENT_HBUF_PITCH, AUGMENT_NHWC_OUT, TILE,
};

/// Row pitch, in f32, of the horizontally blurred rows held as one plane per channel (the
/// dyadic 3-channel kernels, [`planes`]): a multiple of 4 for 16-byte stores, an odd number of
/// 16-byte units so that consecutive rows fall in other banks.
pub(super) const PLANE_PITCH: usize = 36;
const _: () = assert!(PLANE_PITCH >= TILE as usize && PLANE_PITCH % 8 == 4);

/// Whether a kernel instance keeps its horizontally blurred rows as one f32 plane per channel
/// instead of one padded slot per pixel: the dyadic kernels with three channels, whose slots
/// would move a fourth word for nothing through the busiest pipe (shared memory).
pub(super) const fn planes(rot: u8, c: usize) -> bool {
    rot == DYADIC && c == 3
}

/// Taps of the fast path's blur (`2 AUGMENT_FAST_RADIUS + 1`).
pub(super) const FAST_TAPS: usize = 2 * AUGMENT_FAST_RADIUS as usize + 1;

impl<const STRIP: bool, const COPY: bool> Tile<STRIP, COPY> {
    /// Step 3's vertical pass over the horizontally blurred rows in the scratch region, the
    /// normalisation (`norm` the weights' [`Weights::norm`]) and the store of image `nu`'s
    /// outputs (columns from `x0`): each warp takes `ROWS` consecutive output rows of the tile,
    /// one column per thread (`tx`, `ty`). Where the warps' rows overrun the tile (the one-tile
    /// kernels' seven warps of five), the reads past the blurred rows are clamped into them
    /// and the sums of rows past the tile are not stored.
    ///
    /// # Safety
    /// The scratch region must hold the tile's blurred rows and the setup record the block's
    /// values, both written before the last barrier; the kernels' contract for `p`, `nu <
    /// batch`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn vblur_store<
        const C: usize,
        T: Px,
        const FAST: bool,
        const ROWS: usize,
        const ROT: u8,
    >(
        &self,
        p: &AugmentParams,
        wts: &Weights<FAST>,
        norm: f32,
        s: &Shared<T>,
        nu: usize,
        (tx, ty): (usize, usize),
        x0: i32,
    ) {
        // The planes are read on the fast path only (the dyadic kernels').
        const { assert!(!planes(ROT, C) || FAST) };
        let r = ((self.side - TILE) / 2) as i32;
        let (hp, side) = (AUGMENT_HBUF_PITCH as usize, self.side as usize);
        let first = ty * ROWS;
        let in_rows = |row: usize| if STRIP { row } else { row.min(side - 1) };
        let mut acc = [[0.0f32; C]; ROWS];
        if FAST {
            // Each blurred row read once, into the sums of every output row it reaches.
            for u in 0..ROWS + FAST_TAPS - 1 {
                // SAFETY: `in_rows(first + u) < TILE + 2 r = side`, `tx < TILE`: inside the
                // blurred rows.
                // With `planes`, one plane per channel (`side * PLANE_PITCH` f32 each).
                let v: [f32; C] = unsafe {
                    let row = in_rows(first + u);
                    if planes(ROT, C) {
                        let f = s.scratch as *const f32;
                        core::array::from_fn(|c| *f.add((c * side + row) * PLANE_PITCH + tx))
                    } else {
                        let v = *s.scratch.add(row * hp + tx);
                        core::array::from_fn(|c| v.get(c))
                    }
                };
                for (i, a) in acc.iter_mut().enumerate() {
                    if u >= i && u - i < FAST_TAPS {
                        let wt = wts.at(u - i);
                        for (c, x) in a.iter_mut().enumerate() {
                            *x = fmaf(v[c], wt, *x);
                        }
                    }
                }
            }
        } else {
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: `in_rows(first + i + t) < TILE + 2 r = side`, `tx < TILE`: inside the
                // blurred rows.
                *a = wts
                    .dot::<C, T>(|t| unsafe { *s.scratch.add(in_rows(first + i + t) * hp + tx) });
            }
        }
        // Offsets inside an image fit `u32` (at most `2^32 - 1` values).
        let (oh, ow, cu) = (p.out_h, p.out_w, C as u32);
        let (row_o, px_o, ch_o) = if p.layout & AUGMENT_NHWC_OUT != 0 {
            (ow * cu, cu, 1)
        } else {
            (ow, 1, oh * ow)
        };
        let dst =
            p.y.as_mut_ptr()
                .wrapping_add(nu * C * oh as usize * ow as usize);
        let gx = x0 as u32 + tx as u32;
        let y0 = (self.top + r) as u32;
        // The channels' statistics read into registers before the first store (the compiler
        // would read them again after every store, which could alias them); then a pixel's
        // channels one after the other, so that NHWC output fills each pixel's bytes at once.
        // SAFETY: as above.
        let stats: [(f32, f32); C] =
            core::array::from_fn(|c| unsafe { ((*s.setup).mean[c], (*s.setup).inv_std[c]) });
        // A tile wholly inside the image stores without checking each value's position.
        let store = |checked: bool| {
            for (i, a) in acc.iter().enumerate() {
                let gy = y0 + (first + i) as u32;
                let in_tile = STRIP || first + i < TILE as usize;
                if in_tile && (!checked || (gy < oh && gx < ow)) {
                    for (c, (mean, inv_std)) in stats.iter().enumerate() {
                        let y = fmaf(a[c], norm, -mean) * inv_std;
                        let at = gy * row_o + gx * px_o + c as u32 * ch_o;
                        // SAFETY: `gy < out_h` and `gx < out_w` (checked, or the whole tile lies
                        // inside), `c < channels`, `n < batch`: inside `p.y`.
                        unsafe { dst.add(at as usize).write(y) };
                    }
                }
            }
        };
        if y0 + TILE <= oh && x0 as u32 + TILE <= ow {
            store(false);
        } else {
            store(true);
        }
    }
}
