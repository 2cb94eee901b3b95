//! Step 2, rotating: the rotation's terms of the haloed tile's rows and columns, the rotated
//! tile (a ring of rows, or rows copied up for the next tile), and each rotated pixel's resized
//! value from the staged window through the tap tables, by nearest or bilinear interpolation.
//! The interpolation is chosen once per part, not per pixel, and a bilinear rotation reads the
//! four neighbours' shared crop rows and columns once.

use super::staging::Window;
use super::taps::Axis;
use super::tile::{Px, Shared, Tile};
use super::{lane_for, threads};
use crate::sampling::{nearest_pixel, reflect, Bilinear, Rotation};
use core::intrinsics::fmaf32 as fmaf;
use streamline_abi::image::{AUGMENT_FAST_RADIUS, TILE};

// The fast kernels may copy their halo rows up ([`Tile::copy_halo`]): the rows copied must
// not overlap their destination.
const _: () = assert!(2 * AUGMENT_FAST_RADIUS <= TILE);

/// The resized value of every channel from the window at `win`: torch's bilinear blend in the
/// order of the resize kernel.
///
/// # Safety
/// `win` must hold the window's pixels, written before the last barrier, and `y`, `x` come
/// from [`Window::row`] and [`Window::col`] of that window.
#[inline(always)]
unsafe fn resized<const C: usize, T: Px>(win: *const T, y: Axis, x: Axis) -> T {
    // SAFETY: the byte offsets are clamped into the window (see `Window::row`).
    let at = |o: u32| unsafe { *(win as *const u8).add(o as usize).cast::<T>() };
    let (a, b, c, d) = (
        at(y.o0 + x.o0),
        at(y.o0 + x.o1),
        at(y.o1 + x.o0),
        at(y.o1 + x.o1),
    );
    let mut out = T::zero();
    for k in 0..C {
        out.set(
            k,
            fmaf(
                y.l1,
                fmaf(x.l1, d.get(k), x.l0 * c.get(k)),
                y.l0 * fmaf(x.l1, b.get(k), x.l0 * a.get(k)),
            ),
        );
    }
    out
}

impl<const STRIP: bool, const COPY: bool> Tile<STRIP, COPY> {
    /// Writes the rotation's terms of every row of the haloed tile (reflected at the image
    /// border) into the second half of `tab` (see [`Shared::table`]), and with `COLS` those of
    /// every column into the first. One thread per row and column.
    ///
    /// # Safety
    /// `tab` must hold `2 * side` pairs of shared memory, read only after the next barrier.
    #[inline(always)]
    pub(super) unsafe fn tabulate<const COLS: bool>(&self, rot: &Rotation, tab: *mut [f32; 2]) {
        let side = self.side as usize;
        let mut k = lane_for(!STRIP) as usize;
        while k < side {
            if COLS {
                let (cx, cy) = rot.col(reflect(self.left + k as i32, self.ow));
                // SAFETY: `k < side`: inside the table.
                unsafe { *tab.add(k) = [cx, cy] };
            }
            let (rx, ry) = rot.row(reflect(self.top + k as i32, self.oh));
            // SAFETY: `k < side`: inside the table.
            unsafe { *tab.add(side + k) = [rx, ry] };
            k += threads(STRIP) as usize;
        }
    }

    /// The row of the rotated tile that holds the haloed tile's row `i < side`. In a ring (not
    /// `COPY`), a block going down its strip keeps the rows that the next tile's halo shares
    /// with this tile where they are, and writes the next tile's new rows over those it no
    /// longer needs; with `COPY`, [`Tile::copy_halo`] moves the shared rows to the top and row
    /// `i` is row `i`: no wrap to compute for each pixel, a copy of `2 r` rows per tile instead.
    #[inline(always)]
    pub(super) fn slot(&self, i: u32) -> u32 {
        if !STRIP || COPY {
            return i;
        }
        let k = self.ring + i;
        if k >= self.side {
            k - self.side
        } else {
            k
        }
    }

    /// The same geometry one tile further down the strip.
    #[inline(always)]
    pub(super) fn below(&self) -> Tile<STRIP, COPY> {
        Tile {
            top: self.top + TILE as i32,
            ring: self.slot(TILE),
            ..*self
        }
    }

    /// Copies the rotated rows that the next tile's halo shares with this tile (rows `TILE ..`)
    /// to the top of the rotated tile, where the next tile expects its first rows: the rotation
    /// and the horizontal pass then address rows without the ring's wrap. Only where those
    /// rows do not overlap their destination (`2 r <= TILE`); each thread takes every
    /// `threads(STRIP)`-th pixel.
    ///
    /// # Safety
    /// `side - TILE <= TILE` (the fast path's radius: the rows read and written are apart);
    /// every read of the rotated tile by this tile must be done (a barrier since the horizontal
    /// pass), and the next write to it must come after a barrier.
    #[inline(always)]
    pub(super) unsafe fn copy_halo<T: Px>(&self, rotated: *mut T) {
        let (side, pitch) = (self.side, self.pitch);
        let cells = (side - TILE) * side;
        // A plain walk, not `for_cells`: the fast path's side is a constant, so its quotient and
        // remainder cost a multiply, where `for_cells`' reciprocal and running indices made the
        // strip kernels spill (measured with `ptx-check`).
        let mut k = lane_for(true);
        while k < cells {
            let (i, j) = (k / side, k % side);
            // SAFETY: `TILE + i < side` and `j < side <= pitch`: inside the rotated tile; the
            // rows read (`TILE ..`) and written (`.. side - TILE <= TILE`) are disjoint.
            unsafe {
                let v = *rotated.add(((TILE + i) * pitch + j) as usize);
                *rotated.add((i * pitch + j) as usize) = v;
            }
            k += threads(STRIP);
        }
    }

    /// The resized value at resized pixel `(zi, zj)` through the window's tap tables.
    ///
    /// # Safety
    /// The window and its tables must have been staged before the last barrier.
    #[inline(always)]
    unsafe fn sample<const C: usize, T: Px>(
        &self,
        win: &Window,
        s: &Shared<T>,
        zi: i32,
        zj: i32,
    ) -> T {
        // SAFETY: the tables were written before the last barrier (the caller's contract); the
        // entries' offsets lie in the window.
        unsafe {
            let (y, x) = (win.y_taps(s.taps_at.0, zi), win.x_taps(s.taps_at.1, zj));
            resized::<C, T>(s.scratch, y, x)
        }
    }

    /// The resized values at `(zi, zj)`, `(zi, zj + 1)`, `(zi + 1, zj)` and `(zi + 1, zj + 1)`
    /// (a bilinear rotation's four neighbours), each as [`Tile::sample`] computes it, from nine
    /// window reads instead of sixteen: when every tap pair follows the one before
    /// ([`Axis::follows`]), the two resized rows read the crop rows `y0.o0`, `y0.o1` and
    /// `y1.o1`, and likewise the columns.
    ///
    /// # Safety
    /// As for [`Tile::sample`], and every entry of both tables follows the one before it.
    #[inline(always)]
    unsafe fn sample_quad<const C: usize, T: Px>(
        &self,
        win: &Window,
        s: &Shared<T>,
        zi: i32,
        zj: i32,
    ) -> [[f32; C]; 4] {
        let (ty, tx) = s.taps_at;
        // SAFETY: the tables were written before the last barrier (the caller's contract).
        let (y, x) = unsafe {
            (
                [win.y_taps(ty, zi), win.y_taps(ty, zi.wrapping_add(1))],
                [win.x_taps(tx, zj), win.x_taps(tx, zj.wrapping_add(1))],
            )
        };
        // The second pair along an axis is the first (`same`) or the one a step on.
        let (same_y, same_x) = (y[1].o0 == y[0].o0, x[1].o0 == x[0].o0);
        let cols = [x[0].o0, x[0].o1, x[1].o1];
        // Each crop row's horizontal blends for both resized columns, torch's order as in
        // `resized`: `fmaf(x.l1, right, x.l0 * left)`.
        let blends = |row: u32| {
            let v = cols.map(|c| {
                // SAFETY: the byte offsets are clamped into the window (see `Window::row`).
                let cell = unsafe { *(s.scratch as *const u8).add((row + c) as usize).cast::<T>() };
                core::array::from_fn::<f32, C, _>(|k| cell.get(k))
            });
            let (l, r) = if same_x {
                (&v[0], &v[1])
            } else {
                (&v[1], &v[2])
            };
            let mut out = [[0.0f32; C]; 2];
            for k in 0..C {
                out[0][k] = fmaf(x[0].l1, v[1][k], x[0].l0 * v[0][k]);
                out[1][k] = fmaf(x[1].l1, r[k], x[1].l0 * l[k]);
            }
            out
        };
        let h = [blends(y[0].o0), blends(y[0].o1), blends(y[1].o1)];
        let (top, bottom) = if same_y {
            (&h[0], &h[1])
        } else {
            (&h[1], &h[2])
        };
        let mut out = [[0.0f32; C]; 4];
        for j in 0..2 {
            for k in 0..C {
                out[j][k] = fmaf(y[0].l1, h[1][j][k], y[0].l0 * h[0][j][k]);
                out[2 + j][k] = fmaf(y[1].l1, bottom[j][k], y[1].l0 * top[j][k]);
            }
        }
        out
    }

    /// Writes the rotated image over the haloed tile's pixels from `part` (row, column) on,
    /// `size` (rows, columns) of them, into the rotated tile; each thread takes every
    /// `threads(STRIP)`-th pixel. `quads` says that every tap table entry follows the one before it
    /// ([`Tile::sample_quad`]).
    ///
    /// # Safety
    /// The part must lie inside the haloed tile; the table and the window (with its tap tables)
    /// must have been written before the last barrier.
    #[inline(always)]
    pub(super) unsafe fn rotate<const C: usize, T: Px>(
        &self,
        rot: &Rotation,
        win: &Window,
        s: &Shared<T>,
        part: (u32, u32),
        size: (u32, u32),
        quads: bool,
    ) {
        if self.nearest {
            // SAFETY: the window and its tables were staged before the last barrier (the
            // caller's contract), and `value` reads only them.
            unsafe {
                self.rotate_with(s, part, size, |gx, gy| {
                    let (sy, sx) = rot.finish(gx, gy);
                    match nearest_pixel(sy, sx, self.oh, self.ow) {
                        Some((zi, zj)) => self.sample::<C, T>(win, s, zi, zj),
                        None => T::zero(),
                    }
                })
            }
        } else if quads && C <= 3 {
            // Four channels keep too many values live across the nine reads (their kernels'
            // spills more than doubled), so they read sixteen.
            // SAFETY: as above, and every tap entry follows the one before (`quads`).
            unsafe {
                self.rotate_with(s, part, size, |gx, gy| {
                    let (sy, sx) = rot.finish(gx, gy);
                    // The neighbours inside the image added from 0 in torch's order, as below.
                    let bl = Bilinear::new(sy, sx, self.oh, self.ow);
                    let v = self.sample_quad::<C, T>(win, s, bl.y0, bl.x0);
                    let mut acc = T::zero();
                    for (n, v) in v.iter().enumerate() {
                        if bl.inside[n] {
                            for (c, x) in v.iter().enumerate() {
                                acc.set(c, fmaf(*x, bl.w[n], acc.get(c)));
                            }
                        }
                    }
                    acc
                })
            }
        } else {
            // SAFETY: as above.
            unsafe {
                self.rotate_with(s, part, size, |gx, gy| {
                    let (sy, sx) = rot.finish(gx, gy);
                    // From 0, add each neighbour inside the image in torch's order:
                    // north-west, north-east, south-west, south-east.
                    let bl = Bilinear::new(sy, sx, self.oh, self.ow);
                    let (y1, x1) = (bl.y0.wrapping_add(1), bl.x0.wrapping_add(1));
                    let mut acc = T::zero();
                    let mut add = |inside: bool, zi: i32, zj: i32, wt: f32| {
                        if inside {
                            let v = self.sample::<C, T>(win, s, zi, zj);
                            for c in 0..C {
                                acc.set(c, fmaf(v.get(c), wt, acc.get(c)));
                            }
                        }
                    };
                    add(bl.inside[0], bl.y0, bl.x0, bl.w[0]);
                    add(bl.inside[1], bl.y0, x1, bl.w[1]);
                    add(bl.inside[2], y1, bl.x0, bl.w[2]);
                    add(bl.inside[3], y1, x1, bl.w[3]);
                    acc
                })
            }
        }
    }
}
