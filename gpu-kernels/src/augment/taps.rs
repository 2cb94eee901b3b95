//! The tap tables: the resize's taps of a window's resized rows and columns, and the crop's taps
//! of its crop rows and columns, as entries of offsets into the window and weights, with their
//! reads from shared memory. The staging works them out once per window and every rotated pixel
//! reads them, so that the rotation is left no index arithmetic but a sum; their reads clamp
//! every index into the table, so that no parameter can make them read outside it.

use super::crop::Crop;
use super::staging::Window;
use crate::sampling::{LinearTaps, RoiTap};
use streamline_device::mem::{lds2, lds4};

/// One resize tap pair along an axis: offsets (in bytes) into the window, and weights. Row
/// entries hold row offsets (`row * cols` slots), column entries column offsets; a pixel's
/// offset is the sum of its row's and its column's, with no scaling left for the reads.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub(super) struct Axis {
    pub(super) o0: u32,
    pub(super) o1: u32,
    pub(super) l0: f32,
    pub(super) l1: f32,
}

/// One crop-tap table entry: a crop row's (or column's) two input rows as byte offsets into
/// the staged input window, and their weights (both 0 where torchvision's sample is 0).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub(super) struct CropTap {
    pub(super) lo: u32,
    pub(super) hi: u32,
    pub(super) l: f32,
    pub(super) h: f32,
}

impl Crop {
    /// The crop-tap entry of a sample at `v` along an axis of `n` pixels whose window starts at
    /// `start`, spans `len` and is `stride` packed pixels per step; its offsets are in bytes.
    #[inline(always)]
    pub(super) fn tap(v: f32, n: i32, (start, len, stride): (i32, u32, u32)) -> CropTap {
        let t = RoiTap::new(v, n);
        let at = |i: i32| (i - start).max(0).min(len as i32 - 1) as u32 * stride * 4;
        if t.valid {
            CropTap {
                lo: at(t.lo),
                hi: at(t.hi),
                l: t.l,
                h: t.h,
            }
        } else {
            CropTap {
                lo: 0,
                hi: 0,
                l: 0.0,
                h: 0.0,
            }
        }
    }
}

impl Window {
    /// Row taps as byte offsets of rows into the window of `T` slots, rows `pitch` slots apart
    /// ([`Window::pitch`]). The indices are clamped into the window: a no-op for every read the
    /// window was bounded for, and what keeps every read inside shared memory whatever the
    /// parameters hold.
    #[inline(always)]
    pub(super) fn row<T>(&self, t: LinearTaps, pitch: u32) -> Axis {
        Axis::clamped(t, self.p0, self.rows, pitch * size_of::<T>() as u32)
    }

    /// Column taps as byte offsets of columns into the window of `T` slots (clamped like
    /// [`Window::row`]).
    #[inline(always)]
    pub(super) fn col<T>(&self, t: LinearTaps) -> Axis {
        Axis::clamped(t, self.q0, self.cols, size_of::<T>() as u32)
    }

    /// The entry of resized row `zi` in the row tap table at shared address `table`, the
    /// index clamped into the table.
    ///
    /// # Safety
    /// The table's `zrows` entries must have been written before the last barrier.
    #[inline(always)]
    pub(super) unsafe fn y_taps(&self, table: u32, zi: i32) -> Axis {
        // SAFETY: forwarded.
        unsafe { Axis::load(table, zi.wrapping_sub(self.zi0), self.zrows) }
    }

    /// [`Window::y_taps`] of resized row `zi` given as `u32`, the index clamped with one
    /// unsigned minimum (an index below the table's first takes its last entry; every read
    /// still lies in the table).
    ///
    /// # Safety
    /// The table's `zrows` entries must have been written before the last barrier.
    #[inline(always)]
    pub(super) unsafe fn y_taps_at(&self, table: u32, zi: u32) -> Axis {
        // SAFETY: forwarded.
        unsafe { Axis::load_at(table, zi.wrapping_sub(self.zi0 as u32), self.zrows) }
    }

    /// The dyadic path's entry of resized column `zj` in the column tap table at `table`
    /// ([`Tile::stage_dyadic`]: 8 bytes, an offset and the weights), given as `u32` and clamped
    /// into the table as [`Window::y_taps_at`] does.
    ///
    /// # Safety
    /// The table's `zcols` entries must have been written before the last barrier.
    #[inline(always)]
    pub(super) unsafe fn x_pair_at(&self, table: u32, zj: u32) -> (u32, u32) {
        let i = zj.wrapping_sub(self.zj0 as u32).min(self.zcols - 1);
        // SAFETY: `i < zcols`: inside the table, whose entries are 8-byte aligned.
        let [o, w] = unsafe { lds2(table + 8 * i) };
        (o.to_bits(), w.to_bits())
    }

    /// The entry of resized column `zj` in the column tap table at `table`, as
    /// [`Window::y_taps`].
    ///
    /// # Safety
    /// The table's `zcols` entries must have been written before the last barrier.
    #[inline(always)]
    pub(super) unsafe fn x_taps(&self, table: u32, zj: i32) -> Axis {
        // SAFETY: forwarded.
        unsafe { Axis::load(table, zj.wrapping_sub(self.zj0), self.zcols) }
    }
}

impl Axis {
    /// Entry `i`, clamped into the `len` entries of the table at shared address `table`.
    ///
    /// # Safety
    /// The table's `len` entries must have been written before the last barrier.
    #[inline(always)]
    unsafe fn load(table: u32, i: i32, len: u32) -> Axis {
        // SAFETY: forwarded; the index is clamped into the table.
        unsafe { Axis::read(table, i.max(0).min(len as i32 - 1) as u32) }
    }

    /// Entry `i`, clamped to the last of the `len` (at least 1) entries of the table at shared
    /// address `table`.
    ///
    /// # Safety
    /// The table's `len` entries must have been written before the last barrier.
    #[inline(always)]
    unsafe fn load_at(table: u32, i: u32, len: u32) -> Axis {
        // SAFETY: forwarded; the index is clamped into the table.
        unsafe { Axis::read(table, i.min(len - 1)) }
    }

    /// Entry `i` of the table at shared address `table`.
    ///
    /// # Safety
    /// Entry `i` must lie in the table and have been written before the last barrier.
    #[inline(always)]
    unsafe fn read(table: u32, i: u32) -> Axis {
        // SAFETY: `i` lies in the table (the caller's contract); entries are 16-byte aligned.
        let [o0, o1, l0, l1] = unsafe { lds4(table + 16 * i) };
        Axis {
            o0,
            o1,
            l0: f32::from_bits(l0),
            l1: f32::from_bits(l1),
        }
    }

    /// Whether these taps (of resized index `z + 1`) take the same crop pair as `prev` (of `z`)
    /// or the pair one step on, whose first tap is `prev`'s second: what an enlarging resize
    /// gives, its source point moving by `crop / out <= 1` per resized index (f32 rounding
    /// aside, hence the check).
    #[inline(always)]
    pub(super) fn follows(&self, prev: &Axis) -> bool {
        (self.o0 == prev.o0 && self.o1 == prev.o1) || self.o0 == prev.o1
    }

    /// Taps `t` as offsets (`stride` apart) into the `len` indices from `first`, each index
    /// clamped into them.
    #[inline(always)]
    fn clamped(t: LinearTaps, first: i32, len: u32, stride: u32) -> Axis {
        let last = len as i32 - 1;
        let at = |i: i32| (i - first).max(0).min(last) as u32 * stride;
        Axis {
            o0: at(t.i0),
            o1: at(t.i1),
            l0: t.l0,
            l1: t.l1,
        }
    }
}
