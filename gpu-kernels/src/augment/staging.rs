//! Step 1, staging the crop window: the window of crop pixels that the rotation of the haloed
//! tile, or of a part of it, reads, and its staging in shared memory with its tap tables, each
//! crop pixel computed either from device memory or from the staged input window. Bounding the
//! window by what the rotation reads keeps it small enough for shared memory, and computes each
//! crop pixel once for every rotated pixel that reads it.

use super::crop::{Crop, InputWindow};
use super::divisors::{for_cells, SmallDiv};
use super::tile::{Px, Shared, Tile};
use super::{lane_for, threads};
use crate::sampling::Rotation;
use core::intrinsics::fmaf32 as fmaf;
use streamline_device::math::floor_i32;

/// The smallest and largest value of `reflect(i, n)` over `a <= i <= b` (`a <= b`): `|i|`
/// covers the integers from `m` to `big`; `reflect` maps `t = |i|` to `t` below `n` and to
/// `2 (n - 1) - t` from `n` on (rising, then falling from `n - 1`), clamped into the line.
#[inline(always)]
fn reflected_span(a: i32, b: i32, n: i32) -> (i32, i32) {
    let (m, big) = if a <= 0 && b >= 0 {
        (0, (-a).max(b))
    } else if b < 0 {
        (-b, -a)
    } else {
        (a, b)
    };
    let top = 2 * (n - 1);
    let (lo, hi) = if big < n {
        (m, big)
    } else if m >= n {
        (top - big, top - m)
    } else {
        (m.min(top - big), n - 1)
    };
    (lo.max(0).min(n - 1), hi.max(0).min(n - 1))
}

/// A rectangle of crop pixels held in shared memory (rows `p0 ..`, columns `q0 ..`, row by
/// row), and the resized rows `zi0 ..` and columns `zj0 ..` whose taps it serves.
#[derive(Clone, Copy)]
pub(super) struct Window {
    pub(super) p0: i32,
    pub(super) q0: i32,
    pub(super) rows: u32,
    pub(super) cols: u32,
    pub(super) zi0: i32,
    pub(super) zj0: i32,
    pub(super) zrows: u32,
    pub(super) zcols: u32,
}

impl<const STRIP: bool, const COPY: bool> Tile<STRIP, COPY> {
    /// Fills the window's resize-tap tables, and either computes every crop pixel of `win`
    /// from device memory into the scratch region (`input` is `None`), or stages the input
    /// window and the crop-tap tables for [`Tile::crop_from_input`]. Each thread takes every
    /// `threads(STRIP)`-th entry. Returns whether one of this thread's entries breaks the step rule
    /// of [`Tile::sample_quad`] (see [`Axis::follows`]); never for a nearest rotation, which
    /// does not use it.
    ///
    /// # Safety
    /// `win` must fit the budget, `input` come from [`Crop::input_window`] of `win`, and `s` be
    /// the block's shared memory, none of it read by another thread before the next barrier.
    #[inline(always)]
    pub(super) unsafe fn stage<const C: usize, T: Px>(
        &self,
        crop: &Crop,
        win: Window,
        input: Option<InputWindow>,
        s: &Shared<T>,
    ) -> bool {
        let lin = lane_for(!STRIP);
        let pitch = win.pitch::<T>(self.scratch_bytes::<T>());
        let mut broken = false;
        let mut k = lin;
        while k < win.zrows + win.zcols {
            let (rows, i) = if k < win.zrows {
                (true, k as i32)
            } else {
                (false, (k - win.zrows) as i32)
            };
            let entry = |i: i32| {
                if rows {
                    win.row::<T>(self.taps_y(win.zi0 + i), pitch)
                } else {
                    win.col::<T>(self.taps_x(win.zj0 + i))
                }
            };
            let e = entry(i);
            // Only a bilinear rotation reads the pairs that `follows` checks.
            if !self.nearest && i > 0 {
                broken |= !e.follows(&entry(i - 1));
            }
            let table = if rows { s.taps_y } else { s.taps_x };
            // SAFETY: `zrows, zcols <= taps_len`: inside the tables.
            unsafe { *table.add(i as usize) = e };
            k += threads(STRIP);
        }
        let Some(iw) = input else {
            for_cells::<STRIP>(win.rows, win.cols, |_, pr, q| {
                let v = crop.pixel::<C, T>(win.p0 + pr as i32, win.q0 + q as i32);
                // SAFETY: `pr < rows`, `q < cols <= pitch`, `rows * pitch` cells fit the
                // scratch region (`Window::pitch`, and `capped`).
                unsafe { *s.scratch.add((pr * pitch + q) as usize) = v };
            });
            return broken;
        };
        let mut k = lin;
        while k < win.rows + win.cols {
            // SAFETY: `rows, cols <= AUGMENT_CROP_TAPS` (`Crop::input_window`): inside the
            // tables.
            unsafe {
                if k < win.rows {
                    let y = crop.roi.y_of_one((win.p0 + k as i32) as u32);
                    *s.ctap_y.add(k as usize) = Crop::tap(y, crop.h, (iw.r0, iw.rows, iw.cols));
                } else {
                    let j = k - win.rows;
                    let x = crop.roi.x_of_one((win.q0 + j as i32) as u32);
                    *s.ctap_x.add(j as usize) = Crop::tap(x, crop.w, (iw.c0, iw.cols, 1));
                }
            }
            k += threads(STRIP);
        }
        // The input pixels, four per thread at a time so that their loads are in flight
        // together; pixel `k` is row `r`, column `c` of the window, advanced without dividing.
        let div = SmallDiv::new(iw.cols);
        let (rows, cols) = (iw.rows.max(1), div.d);
        let total = rows * cols;
        let (step_r, step_c) = div.divmod(threads(STRIP));
        let (mut r, mut c) = div.divmod(lin);
        let mut k = lin;
        while k < total {
            let mut v = [0u32; 4];
            for (u, x) in v.iter_mut().enumerate() {
                if k + u as u32 * threads(STRIP) < total {
                    *x = crop.packed::<C>(iw.r0 + r as i32, iw.c0 + c as i32);
                }
                c += step_c;
                r += step_r;
                if c >= cols {
                    c -= cols;
                    r += 1;
                }
            }
            for (u, x) in v.iter().enumerate() {
                let kk = k + u as u32 * threads(STRIP);
                if kk < total {
                    // SAFETY: `kk < rows * cols <= AUGMENT_INPUT_BUDGET`.
                    unsafe { *s.input.add(kk as usize) = *x };
                }
            }
            k += 4 * threads(STRIP);
        }
        broken
    }

    /// Computes every crop pixel of `win` into the scratch region from the staged input
    /// window: torchvision's bilinear blend of the four input pixels, every channel, then the
    /// uint8-to-float scale (exact for the default scale of 1, one rounding otherwise).
    ///
    /// # Safety
    /// [`Tile::stage`] must have staged `win` with an input window before the last barrier, and
    /// nothing else read the scratch region until the next barrier.
    #[inline(always)]
    pub(super) unsafe fn crop_from_input<const C: usize, T: Px>(
        &self,
        crop: &Crop,
        win: &Window,
        s: &Shared<T>,
    ) {
        let pitch = win.pitch::<T>(self.scratch_bytes::<T>());
        for_cells::<STRIP>(win.rows, win.cols, |_, pr, q| {
            // SAFETY: `pr < rows`, `q < cols`: inside the tables; their offsets lie in the
            // input window (`Crop::tap`).
            let (ty, tx) = unsafe { (*s.ctap_y.add(pr as usize), *s.ctap_x.add(q as usize)) };
            let at = |o: u32| unsafe { *(s.input as *const u8).add(o as usize).cast::<u32>() };
            let v = [
                at(ty.lo + tx.lo),
                at(ty.lo + tx.hi),
                at(ty.hi + tx.lo),
                at(ty.hi + tx.hi),
            ];
            let w = [ty.h * tx.h, ty.h * tx.l, ty.l * tx.h, ty.l * tx.l];
            let byte = |x: u32, c: usize| ((x >> (8 * c)) & 0xff) as f32;
            let mut out = T::zero();
            for c in 0..C {
                let b = fmaf(
                    w[3],
                    byte(v[3], c),
                    fmaf(
                        w[2],
                        byte(v[2], c),
                        fmaf(w[1], byte(v[1], c), w[0] * byte(v[0], c)),
                    ),
                );
                out.set(c, b * crop.scale);
            }
            // SAFETY: `pr < rows`, `q < cols <= pitch`, and `rows * pitch` cells fit the scratch
            // region (`Window::pitch`, and `capped` for `pitch == cols`).
            unsafe { *s.scratch.add((pr * pitch + q) as usize) = out };
        });
    }
}

impl Window {
    /// Whether the window fits `budget` pixels.
    #[inline(always)]
    pub(super) fn fits(&self, budget: u32) -> bool {
        self.rows as u64 * self.cols as u64 <= budget as u64
    }

    /// This window, or, when it does not fit, one pixel: only a resize that shrinks (outside
    /// the kernel's contract) makes a part's window overflow the budget, and every access then
    /// still stays in bounds.
    #[inline(always)]
    pub(super) fn capped(self, budget: u32) -> Window {
        if self.fits(budget) {
            self
        } else {
            Window {
                rows: 1,
                cols: 1,
                ..self
            }
        }
    }

    /// Slots of `T` from one window row to the next, in a scratch region of `budget` bytes:
    /// a row's bytes rounded up to 64 more than a multiple of 128 where that fits. The rows
    /// that a quarter of a warp's rotated pixels read then start in the other half of the banks
    /// from the row before, which a simulation of the reads (random angles, seed 003's sizes)
    /// found to give the fewest bank conflicts of any pitch.
    #[inline(always)]
    fn pitch<T>(&self, budget: u32) -> u32 {
        let size = size_of::<T>() as u32;
        let bytes = self.cols * size;
        let padded = bytes + (192 - bytes % 128) % 128;
        if self.rows as u64 * padded as u64 <= budget as u64 {
            padded / size
        } else {
            self.cols
        }
    }
}

// The window's bounds in a block of their own, after `impl Window` (see the note on the files
// in mod.rs).
impl<const STRIP: bool, const COPY: bool> Tile<STRIP, COPY> {
    /// The crop window that the rotation (`rot`) of the haloed tile's pixels `i0 ..= i1` x
    /// `j0 ..= j1` reads. Those pixels, reflected, lie in the rectangle of rows `ilo ..= ihi`
    /// and columns `jlo ..= jhi`, whose source coordinates' extremes are those of its corners
    /// ([`Rotation::bounds`]). Nearest rounds a source coordinate `s` to at most `floor(s) + 1`
    /// and bilinear reads `floor(s)` and `floor(s) + 1`, so resized rows
    /// `floor(min) - 1 ..= floor(max) + 2` cover every read (one row of margin each side); the
    /// resize's taps grow with the resized index, so their crop rows lie between the first tap
    /// of the first row and the second tap of the last.
    #[inline(always)]
    pub(super) fn window(
        &self,
        rot: &Rotation,
        (i0, i1): (u32, u32),
        (j0, j1): (u32, u32),
    ) -> Window {
        let (ilo, ihi) = reflected_span(self.top + i0 as i32, self.top + i1 as i32, self.oh);
        let (jlo, jhi) = reflected_span(self.left + j0 as i32, self.left + j1 as i32, self.ow);
        let ((ymin, ymax), (xmin, xmax)) = rot.bounds((ilo, ihi), (jlo, jhi));
        // Resized indices, kept inside the resized image (a NaN bound gives index 0).
        let span = |lo: f32, hi: f32, n: i32| {
            let a = floor_i32(lo).saturating_sub(1).max(0).min(n - 1);
            let b = floor_i32(hi).saturating_add(2).max(0).min(n - 1);
            (a, b.max(a))
        };
        let (zi0, zi1) = span(ymin, ymax, self.oh);
        let (zj0, zj1) = span(xmin, xmax, self.ow);
        let p0 = self.taps_y(zi0).i0;
        let q0 = self.taps_x(zj0).i0;
        let len = self.taps_len as i32;
        Window {
            p0,
            q0,
            rows: (self.taps_y(zi1).i1 - p0 + 1).max(1) as u32,
            cols: (self.taps_x(zj1).i1 - q0 + 1).max(1) as u32,
            zi0,
            zj0,
            zrows: (zi1 - zi0 + 1).max(1).min(len) as u32,
            zcols: (zj1 - zj0 + 1).max(1).min(len) as u32,
        }
    }
}
