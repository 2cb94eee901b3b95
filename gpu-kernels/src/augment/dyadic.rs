//! The dyadic path (`augment_dyadic_*`): where every crop box is whole-pixel, of the crop's size
//! and enlarged exactly twofold, the crop and the resize composed in integers, so that the block
//! stages the input window itself instead of a crop window and each rotated pixel sums its nine
//! input bytes per channel exactly. Its staging, its rotation and its strips' copy of their
//! blurred halo rows take the place of the crop window's throughout, so they are kept together
//! here rather than spread over the steps whose work they replace.

use super::blur::{planes, PLANE_PITCH};
use super::crop::{Crop, InputWindow};
use super::divisors::SmallDiv;
use super::staging::Window;
use super::taps::Axis;
use super::tile::{Px, Shared, SumSlot, Tile};
use super::{lane, lane_for, threads, DYADIC};
use crate::sampling::{Rotation, NEAREST_MAX_SIDE};
use streamline_abi::image::{
    augment_dyadic_taps, AUGMENT_DYADIC_MAX_SIDE, AUGMENT_DYADIC_STAGE_BYTES, AUGMENT_FAST_RADIUS,
    AUGMENT_HBUF_PITCH, TILE,
};
use streamline_device::math::dp4a;
use streamline_device::mem::{lds, lds2, lds4};

// The dyadic kernels round their source points with `Rotation::finish_nearest`.
const _: () = assert!(AUGMENT_DYADIC_MAX_SIDE <= NEAREST_MAX_SIDE);

/// Where the dyadic path stages a tile's input window ([`Tile::stage_dyadic`]): its first row
/// `r0` and column `c0` (a multiple of 4, so that aligned inputs load whole words), `rows`
/// rows of `entries` entries each, `pitch` bytes from one row to the next.
#[derive(Clone, Copy)]
pub(super) struct DyadicLayout {
    pub(super) r0: i32,
    pub(super) c0: i32,
    pub(super) rows: u32,
    pub(super) entries: u32,
    pub(super) pitch: u32,
}

impl<const STRIP: bool, const COPY: bool> Tile<STRIP, COPY> {
    /// Bytes of one entry of the dyadic path's staged input window ([`Tile::stage_dyadic`]):
    /// every channel's word of four columns' bytes, in a slot `T` (one shared access).
    #[inline(always)]
    fn dyadic_entry<T>() -> u32 {
        size_of::<T>() as u32
    }

    /// Where the dyadic path stages a tile's input window, as its offset in bytes from the
    /// start of the scratch region and its room in bytes: the scratch region itself, or for a
    /// strip's `later` tiles the region past its end (their windows are staged while the tile
    /// before's blurred rows are in it).
    #[inline(always)]
    fn dyadic_region<T>(&self, later: bool) -> (u32, u32) {
        if later {
            (self.scratch_bytes::<T>(), AUGMENT_DYADIC_STAGE_BYTES)
        } else {
            (0, self.scratch_bytes::<T>())
        }
    }

    /// Where the dyadic path stages the input window that crop window `win` reads: its rows
    /// from the first on, and its columns from the multiple of 4 at or before its first, in
    /// entries of four columns, one every two ([`Tile::stage_dyadic`]); in the scratch region,
    /// or for a strip's `later` tiles in the region after it ([`AUGMENT_DYADIC_STAGE_BYTES`]).
    /// One thread works it out for the whole block, with the tile's window.
    #[inline(always)]
    pub(super) fn dyadic_layout<T: Px>(
        &self,
        crop: &Crop,
        win: &Window,
        later: bool,
    ) -> DyadicLayout {
        let es = Self::dyadic_entry::<T>();
        // On this path the window fits: the crop enlarged twofold (the host's `augment_dyadic`)
        // bounds it. Outside that contract, a window of one pixel keeps every access in bounds.
        let iw = crop.input_window(win).unwrap_or(InputWindow {
            r0: 0,
            c0: 0,
            rows: 1,
            cols: 1,
        });
        let c0 = iw.c0 & !3;
        // Entries of a row (two per word of four columns), and the bytes from one row to the
        // next: an odd number of entries, so that rows read together fall in other banks, and
        // the entries' loads stay aligned.
        let layout = |rows: u32, cols: u32| {
            let entries = 2 * (cols + (iw.c0 - c0) as u32).div_ceil(4).max(1);
            (rows.max(1), entries, (entries + 1) * es)
        };
        let (_, room) = self.dyadic_region::<T>(later);
        // Reads reach two rows past the last staged one.
        let (rows, entries, pitch) = match layout(iw.rows, iw.cols) {
            (rows, entries, pitch) if (rows + 2) * pitch <= room => (rows, entries, pitch),
            _ => layout(1, 1),
        };
        DyadicLayout {
            r0: iw.r0,
            c0,
            rows,
            entries,
            pitch,
        }
    }

    /// The dyadic path's staging (`augment_dyadic_*`): instead of the crop window, the input
    /// window itself goes where `lay` and `later` say ([`Tile::dyadic_region`]), one entry per row
    /// and every second column holding every channel's word of that column's bytes and the
    /// next three (so that one word holds any three consecutive columns: from an even one, or
    /// from the odd one after it); the resize-tap tables hold the resize and crop taps composed
    /// ([`augment_dyadic_taps`]). A row entry: the row's byte offset and its three rows' weights; a
    /// column entry (8 bytes, [`Window::x_pair_at`]): its entry's byte offset and the three
    /// columns' weights as bytes of a word, in place (read together, in one access).
    ///
    /// # Safety
    /// `lay` must be [`Tile::dyadic_layout`] of `crop`, `win` and `later`; `s` must be the block's
    /// shared memory, the region `lay` stages into and the tap tables read by no other thread
    /// until the next barrier.
    #[inline(always)]
    pub(super) unsafe fn stage_dyadic<const C: usize, T: Px>(
        &self,
        crop: &Crop,
        win: &Window,
        lay: DyadicLayout,
        later: bool,
        s: &Shared<T>,
    ) {
        let es = Self::dyadic_entry::<T>();
        let DyadicLayout {
            r0,
            c0,
            rows,
            entries,
            pitch,
        } = lay;
        let (at, _) = self.dyadic_region::<T>(later);
        // Word `j` of row `r` (columns `4 j ..`) goes to entry `2 j`; its last two bytes and
        // the next word's first two to entry `2 j + 1`.
        let scratch = (s.scratch as *mut u8).wrapping_add(at as usize);
        let (aligned, pixels) = (crop.words_aligned(), crop.pixels_aligned());
        let words = |row: i32, col: i32| -> [u32; C] {
            if aligned {
                core::array::from_fn(|c| crop.word_at_once(row, col, c as u32))
            } else if pixels {
                crop.pixels_at_once::<C>(row, col)
            } else {
                core::array::from_fn(|c| crop.word(row, col, c as u32))
            }
        };
        // Cell `(r, j)`: the two words of the entries `2 j` and `2 j + 1` of row `r`.
        let load = |r: u32, j: u32| {
            let (row, col) = (r0 + r as i32, c0 + 4 * j as i32);
            (words(row, col), words(row, col + 4))
        };
        let put = |r: u32, j: u32, (a, b): ([u32; C], [u32; C])| {
            let (mut even, mut odd) = (T::zero(), T::zero());
            for c in 0..C {
                even.set(c, f32::from_bits(a[c]));
                odd.set(c, f32::from_bits(a[c] >> 16 | b[c] << 16));
            }
            let at = (r * pitch + 2 * j * es) as usize;
            // SAFETY: `r < rows` and `2 j + 1 < entries`: both entries lie inside row `r`, the
            // rows fit their region (the scratch region, or the one after it, which starts at a
            // multiple of the slot's size as the scratch region's size is one), and entries are
            // aligned to their slot.
            unsafe {
                *scratch.add(at).cast::<T>() = even;
                *scratch.add(at + es as usize).cast::<T>() = odd;
            }
        };
        let div = SmallDiv::new(entries / 2);
        let cells = rows * div.d;
        let lin = lane_for(!STRIP);
        // This thread's first cell is loaded before the tables are worked out, so that the
        // loads' latency passes under that work instead of after it.
        let (r, j) = div.divmod(lin);
        let first = if lin < cells {
            load(r, j)
        } else {
            ([0; C], [0; C])
        };
        // The tables from the block's last threads, which take the fewest staging cells. The
        // box starts at whole input pixels (`augment_dyadic`).
        let (y1, x1) = (crop.roi.start_y as u32, crop.roi.start_x as u32);
        let mut k = threads(STRIP) - 1 - lin;
        while k < win.zrows + win.zcols {
            let e = if k < win.zrows {
                let zi = (win.zi0 + k as i32) as u32;
                let (base, w) = augment_dyadic_taps(zi, self.crop_h, y1, crop.h as u32);
                let r = (base as i32 - r0).max(0).min(rows as i32 - 1) as u32;
                Axis {
                    o0: r * pitch,
                    o1: w[0],
                    l0: f32::from_bits(w[1]),
                    l1: f32::from_bits(w[2]),
                }
            } else {
                let zj = (win.zj0 + (k - win.zrows) as i32) as u32;
                let (base, w) = augment_dyadic_taps(zj, self.crop_w, x1, crop.w as u32);
                let c = (base as i32 - c0).max(0).min(2 * entries as i32 - 1) as u32;
                Axis {
                    o0: (c / 2) * es,
                    o1: (w[0] | w[1] << 8 | w[2] << 16) << (8 * (c % 2)),
                    l0: 0.0,
                    l1: 0.0,
                }
            };
            // SAFETY: `zrows, zcols <= taps_len`: inside the tables (a column entry takes half
            // of an `Axis`).
            unsafe {
                if k < win.zrows {
                    *s.taps_y.add(k as usize) = e;
                } else {
                    *(s.taps_x as *mut [u32; 2]).add((k - win.zrows) as usize) = [e.o0, e.o1];
                }
            }
            k += threads(STRIP);
        }
        if lin < cells {
            put(r, j, first);
        }
        // The other cells, every `threads(STRIP)`-th.
        let mut k = lin + threads(STRIP);
        while k < cells {
            let (r, j) = div.divmod(k);
            put(r, j, load(r, j));
            k += threads(STRIP);
        }
    }

    /// The dyadic path's resized value at `(zi, zj)` from the staged input window
    /// ([`Tile::stage_dyadic`], at shared address `base`, rows `pitch` bytes apart), where
    /// `inside`, else 0: per channel, the nine input bytes times their weights (in 64ths)
    /// summed exactly in integers, and left in 64ths of the input's units (the store's factor takes `scale / 64`, see
    /// [`augment_block`]). An outside pixel reads like any other, with no weight: one select
    /// instead of a branch.
    ///
    /// # Safety
    /// [`Tile::stage_dyadic`] must have staged the window before the last barrier.
    #[inline(always)]
    unsafe fn sample_dyadic<const C: usize, T: Px>(
        &self,
        win: &Window,
        s: &Shared<T>,
        (zi, zj): (u32, u32),
        inside: bool,
        (base, pitch): (u32, u32),
    ) -> T::Sums {
        let (ty, tx) = s.taps_at;
        // SAFETY: the tables were written before the last barrier (the caller's contract).
        let (y, (xo, xw)) = unsafe { (win.y_taps_at(ty, zi), win.x_pair_at(tx, zj)) };
        let xw = if inside { xw } else { 0 };
        let wy = [y.o1, y.l0.to_bits(), y.l1.to_bits()];
        let base = base + y.o0 + xo;
        let mut acc = [0u32; C];
        for (k, wk) in wy.iter().enumerate() {
            let at = base + k as u32 * pitch;
            // The entry: every channel's word.
            let mut w = [0u32; 4];
            // SAFETY: the row and the entry are clamped into the staged rows (with two rows to
            // spare) and their entries (`stage_dyadic`); entries are aligned to their loads.
            unsafe {
                if C == 1 {
                    w[0] = lds(at).to_bits();
                } else if C == 2 {
                    let v = lds2(at);
                    w[0] = v[0].to_bits();
                    w[1] = v[1].to_bits();
                } else {
                    w = lds4(at);
                }
            }
            // Byte weights of at most 8 times row weights of at most 8: no carry between bytes.
            let a = xw.wrapping_mul(*wk);
            for (c, v) in acc.iter_mut().enumerate() {
                *v = dp4a(w[c], a, *v);
            }
        }
        // At most 255 * 64: below 2^16.
        T::Sums::from_sums(acc)
    }

    /// [`Tile::rotate`] for the dyadic path: nearest rotation, each pixel's value from
    /// [`Tile::sample_dyadic`] in 64ths of the input's units (see there).
    ///
    /// # Safety
    /// As for [`Tile::rotate`], with the window staged by [`Tile::stage_dyadic`] as `lay` and
    /// `later` say.
    #[inline(always)]
    pub(super) unsafe fn rotate_dyadic<const C: usize, T: Px>(
        &self,
        rot: &Rotation,
        win: &Window,
        s: &Shared<T>,
        (part, size): ((u32, u32), (u32, u32)),
        (lay, later): (DyadicLayout, bool),
    ) {
        let staged = (s.scratch_at + self.dyadic_region::<T>(later).0, lay.pitch);
        // Sides of at most `AUGMENT_DYADIC_MAX_SIDE` (`augment_dyadic`), which
        // `finish_nearest` serves.
        let (oh, ow) = (self.oh as u32, self.ow as u32);
        // SAFETY: the window and its tables were staged before the last barrier (the caller's
        // contract), and the value reads only them.
        unsafe {
            self.rotate_with(s, part, size, |gx, gy| {
                let (yi, xi) = rot.finish_nearest(gx, gy);
                self.sample_dyadic::<C, T>(win, s, (yi, xi), yi < oh && xi < ow, staged)
            })
        }
    }
}

/// Copies the dyadic strips' last `2 r` horizontally blurred rows of a tile (rows `TILE ..
/// side` of the scratch region) to its top, where the next tile's vertical pass expects its
/// halo: that tile then rotates and blurs horizontally only its `TILE` new rows, and its window
/// can be staged while the rows are still in use. One pixel per thread.
///
/// # Safety
/// `scratch` must hold the blurred rows (`side` rows of `AUGMENT_HBUF_PITCH` pixels, `side -
/// TILE <= 2 AUGMENT_FAST_RADIUS`), each read by this tile for the last time before a barrier,
/// and the copied rows read only after the next.
#[inline(always)]
pub(super) unsafe fn copy_blurred_halo<const C: usize, T: Px>(scratch: *mut T, side: usize) {
    const { assert!(2 * AUGMENT_FAST_RADIUS * TILE <= threads(true)) };
    let (hp, tile) = (AUGMENT_HBUF_PITCH as usize, TILE as usize);
    let k = lane() as usize;
    if planes(DYADIC, C) {
        // Three planes' rows, 16 bytes per thread.
        let (f, q) = (scratch as *mut [f32; 4], tile / 4);
        if k < 3 * (side - tile) * q {
            let (cr, j) = (k / q, k % q);
            let (c, i) = (cr / (side - tile), cr % (side - tile));
            let at = |row: usize| (c * side + row) * (PLANE_PITCH / 4) + j;
            // SAFETY: `c < 3`, `i < side - TILE <= TILE`, `4 j < TILE`: both chunks inside the
            // planes, and apart.
            unsafe { *f.add(at(i)) = *f.add(at(tile + i)) };
        }
        return;
    }
    if k < (side - tile) * tile {
        let (i, j) = (k / tile, k % tile);
        // SAFETY: `i < side - TILE <= TILE` and `j < TILE`: both pixels inside the blurred
        // rows, and apart.
        unsafe { *scratch.add(i * hp + j) = *scratch.add((tile + i) * hp + j) };
    }
}
