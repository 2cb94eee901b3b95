//! Seed 003's augmentation in one kernel: uint8 to float, ROI-align crop, bilinear resize up,
//! rotation, Gaussian blur and normalisation, with the intermediates never written to device
//! memory. The input is uint8 NCHW or NHWC, the output f32 NCHW or NHWC, read and written in
//! place (no separate permute).
//!
//! A block owns a 32 x 32 output tile of one image, every channel. The blur needs the rotated
//! image over the tile and its halo (reflected at the border), and the rotation of that haloed
//! tile reads only a small window of the crop. The block works in three steps, each value
//! computed once:
//!
//! 1. **Stage the crop window.** The window is bounded from the rotation's source points of
//!    the haloed tile's corners, widened by the resize's taps. Each crop pixel of it is one
//!    `roi_align` bin of the uint8 input, every channel at once, converted to float on load,
//!    stored as one 16-byte (or smaller) slot. Beside it go two small tables with the resize's
//!    taps of every resized row and column the window spans.
//! 2. **Rotate.** Each pixel of the haloed tile takes its source point (from per-row and
//!    per-column terms tabulated once), one tap table entry per axis and four slot reads from
//!    the window: the resized value of every channel.
//! 3. **Blur and normalise.** A horizontal pass over the rotated tile into the scratch region
//!    (where the window was), a vertical pass, then `(blurred - mean) / std` stored straight to
//!    the output. Kernels of up to 7 taps run as 7 taps with their weights in registers.
//!
//! The window has room for [`AUGMENT_CROP_BUDGET`] pixels. When the window of the whole haloed
//! tile is larger (large blur kernels, crops hardly enlarged), the block goes through the haloed
//! tile in parts of 16 x 16 pixels, each with its own window, which always fits while the resize
//! enlarges (see [`PART`]). The crop, resize and rotation use the f32 operations of the separate
//! kernels; the blur and normalisation use fused multiply-adds (within the written bounds).

use crate::gaussian_blur::sum;
use crate::sampling::{gauss, nearest_pixel, reflect, Bilinear, LinearTaps, Roi, Rotation};
use core::intrinsics::fmaf32 as fmaf;
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;
use streamline_abi::image::AUGMENT;
use streamline_abi::image::{
    augment_radius, augment_scratch_px, augment_side, augment_taps_len,
    AugmentParams, AUGMENT_FAST_RADIUS, AUGMENT_NHWC_IN, AUGMENT_NHWC_OUT, IMAGE_BLOCK_X,
    IMAGE_BLOCK_Y, ROI_MAX_SAMPLES_PER_BIN, TILE,
};
use streamline_device::kernel;
use streamline_device::math::floor_i32;
use streamline_device::mem::ldg_u8;
use streamline_device::thread::{block_x, sync_block, thread_xy};

/// Threads of a block.
const THREADS: u32 = IMAGE_BLOCK_X * IMAGE_BLOCK_Y;

/// Side of the parts of the haloed tile when its whole window does not fit. A part spans at
/// most 15 pixels along each axis, also after reflection at the image border, so its source
/// points span at most `15 sqrt(2)` resized pixels whatever the angle; the window's resized rows
/// `zi0 ..= zi1` then have `zi1 - zi0 < 15 sqrt(2) + 4`, and with a scale `crop / out <= 1`
/// the crop rows number fewer than `15 sqrt(2) + 7 < 29`: `28 * 28 <= AUGMENT_CROP_BUDGET`.
const PART: u32 = 16;

/// Taps of the fast path's blur (`2 AUGMENT_FAST_RADIUS + 1`).
const FAST_TAPS: usize = 2 * AUGMENT_FAST_RADIUS as usize + 1;

/// The channels of one pixel in shared memory, in a slot padded to a power of two so that one
/// shared access moves them all.
trait Px: Copy {
    fn zero() -> Self;
    fn get(&self, c: usize) -> f32;
    fn set(&mut self, c: usize, v: f32);
}

macro_rules! px {
    ($name:ident, $lanes:literal, $align:literal) => {
        #[repr(C, align($align))]
        #[derive(Clone, Copy)]
        struct $name([f32; $lanes]);
        impl Px for $name {
            #[inline(always)]
            fn zero() -> Self {
                $name([0.0; $lanes])
            }
            #[inline(always)]
            fn get(&self, c: usize) -> f32 {
                self.0[c]
            }
            #[inline(always)]
            fn set(&mut self, c: usize, v: f32) {
                self.0[c] = v
            }
        }
    };
}
px!(Px1, 1, 4);
px!(Px2, 2, 8);
px!(Px4, 4, 16);

/// One resize tap pair along an axis: offsets (in pixels) into the window, and weights. Row
/// entries hold row offsets (`row * cols`), column entries column offsets.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Axis {
    o0: u32,
    o1: u32,
    l0: f32,
    l1: f32,
}

/// The crop stage of one image: its uint8 pixels and the box's `roi_align` sampling rule.
struct Crop {
    img: *const u8,
    /// Strides in bytes of a row, a pixel and a channel (NCHW or NHWC); an image holds at
    /// most `2^32 - 1` bytes, so offsets inside it fit `u32`.
    strides: (u32, u32, u32),
    h: i32,
    w: i32,
    scale: f32,
    roi: Roi,
}

impl Crop {
    /// The crop stage of image `n` (`n < batch`). The box is read anew each time a window is
    /// filled, so that the compiler does not keep the box's sampling rule in registers through
    /// the rotation of every part.
    #[inline(always)]
    fn new(p: &AugmentParams, n: usize) -> Crop {
        // SAFETY: `n < batch` and `p.boxes` holds `4 * batch` f32; the volatile reads (of
        // values nothing writes) only keep the compiler from hoisting them out of the loop.
        let bx = unsafe {
            let bp = (p.boxes as *const f32).add(4 * n);
            [
                bp.read_volatile(),
                bp.add(1).read_volatile(),
                bp.add(2).read_volatile(),
                bp.add(3).read_volatile(),
            ]
        };
        let (c, w) = (p.channels, p.width);
        let plane = p.height * w;
        let strides = if p.layout & AUGMENT_NHWC_IN != 0 {
            (w * c, c, 1)
        } else {
            (w, 1, plane)
        };
        Crop {
            img: (p.x as *const u8).wrapping_add(n * c as usize * plane as usize),
            strides,
            h: p.height as i32,
            w: p.width as i32,
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
        }
    }

    /// Crop pixel `(p, q)`, every channel: the `roi_align` bin of the input converted to float
    /// on load.
    #[inline(always)]
    fn pixel<const C: usize, T: Px>(&self, p: i32, q: i32) -> T {
        let (row, px, ch) = self.strides;
        let (img, scale) = (self.img, self.scale);
        // SAFETY: `Roi::bin_n` loads only pixels inside the `h x w` image, and channel
        // `c < channels` of this image lies inside `p.x` by the kernel's contract.
        let load = |c: usize, yy: i32, xx: i32| unsafe {
            let off = yy as u32 * row + xx as u32 * px + c as u32 * ch;
            ldg_u8(img.add(off as usize)) as f32 * scale
        };
        let v = self.roi.bin_n::<C>(self.h, self.w, p as u32, q as u32, load);
        let mut out = T::zero();
        for (c, x) in v.iter().enumerate() {
            out.set(c, *x);
        }
        out
    }
}

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
struct Window {
    p0: i32,
    q0: i32,
    rows: u32,
    cols: u32,
    zi0: i32,
    zj0: i32,
    zrows: u32,
    zcols: u32,
}

impl Window {
    /// Whether the window fits `budget` pixels.
    #[inline(always)]
    fn fits(&self, budget: u32) -> bool {
        self.rows as u64 * self.cols as u64 <= budget as u64
    }

    /// This window, or, when it does not fit, one pixel: only a resize that shrinks (outside
    /// the kernel's contract) makes a part's window overflow the budget, and every access then
    /// still stays in bounds.
    #[inline(always)]
    fn capped(self, budget: u32) -> Window {
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

    /// Row taps as row offsets into the window. The indices are clamped into the window: a
    /// no-op for every read the window was bounded for, and what keeps every read inside
    /// shared memory whatever the parameters hold.
    #[inline(always)]
    fn row(&self, t: LinearTaps) -> Axis {
        let last = self.rows as i32 - 1;
        let at = |i: i32| (i - self.p0).max(0).min(last) as u32 * self.cols;
        Axis {
            o0: at(t.i0),
            o1: at(t.i1),
            l0: t.l0,
            l1: t.l1,
        }
    }

    /// Column taps as column offsets into the window (clamped like [`Window::row`]).
    #[inline(always)]
    fn col(&self, t: LinearTaps) -> Axis {
        let last = self.cols as i32 - 1;
        let at = |i: i32| (i - self.q0).max(0).min(last) as u32;
        Axis {
            o0: at(t.i0),
            o1: at(t.i1),
            l0: t.l0,
            l1: t.l1,
        }
    }
}

/// The resized value of every channel from the window at `win`: torch's bilinear blend in the
/// order of the resize kernel.
///
/// # Safety
/// `win` must hold the window's pixels, written before the last barrier, and `y`, `x` come
/// from [`Window::row`] and [`Window::col`] of that window.
#[inline(always)]
unsafe fn resized<const C: usize, T: Px>(win: *const T, y: Axis, x: Axis) -> T {
    // SAFETY: the offsets are clamped into the window (see `Window::row`).
    let at = |o: u32| unsafe { *win.add(o as usize) };
    let (a, b, c, d) = (at(y.o0 + x.o0), at(y.o0 + x.o1), at(y.o1 + x.o0), at(y.o1 + x.o1));
    let mut out = T::zero();
    for k in 0..C {
        out.set(
            k,
            y.l0 * (x.l0 * a.get(k) + x.l1 * b.get(k))
                + y.l1 * (x.l0 * c.get(k) + x.l1 * d.get(k)),
        );
    }
    out
}

/// The block's shared memory, as laid out by `augment_shared_bytes`.
struct Shared<T> {
    /// Blur weights (unnormalised).
    wts: *mut f32,
    /// The rotation's terms: `side` column `gx`, `side` column `gy`, `side` row `gx`, `side`
    /// row `gy`.
    table: *mut f32,
    /// Resize taps of the window's resized rows, then of its columns.
    taps_y: *mut Axis,
    taps_x: *mut Axis,
    /// The rotated tile, `side x side` pixels.
    rotated: *mut T,
    /// The crop window, later the horizontally blurred tile (`side` rows of `TILE`).
    scratch: *mut T,
}

/// What the block's steps need, the same in every thread of the block.
struct Tile {
    /// Output row and column of the haloed tile's top-left pixel (before reflection).
    top: i32,
    left: i32,
    /// Side of the haloed tile.
    side: u32,
    oh: i32,
    ow: i32,
    nearest: bool,
    /// The resize's scales (`crop / out`, f32 as torch computes them) and the crop size.
    sh: f32,
    sw: f32,
    crop_h: u32,
    crop_w: u32,
    /// Entries of each tap table, and pixels of the scratch region.
    taps_len: u32,
    budget: u32,
}

impl Tile {
    /// Resize taps along y of resized row `zi`.
    #[inline(always)]
    fn taps_y(&self, zi: i32) -> LinearTaps {
        LinearTaps::new(self.sh, zi as u32, self.crop_h)
    }

    /// Resize taps along x of resized column `zj`.
    #[inline(always)]
    fn taps_x(&self, zj: i32) -> LinearTaps {
        LinearTaps::new(self.sw, zj as u32, self.crop_w)
    }

    /// Writes the rotation's terms of every row and column of the haloed tile (reflected at
    /// the image border) into `tab` (see [`Shared::table`]). One thread per row and column.
    ///
    /// # Safety
    /// `tab` must hold `4 * side` f32 of shared memory, read only after the next barrier.
    #[inline(always)]
    unsafe fn tabulate(&self, rot: &Rotation, tab: *mut f32) {
        let side = self.side as usize;
        let mut k = lane() as usize;
        while k < side {
            let (cx, cy) = rot.col(reflect(self.left + k as i32, self.ow));
            let (rx, ry) = rot.row(reflect(self.top + k as i32, self.oh));
            // SAFETY: `k < side`: inside the table.
            unsafe {
                *tab.add(k) = cx;
                *tab.add(side + k) = cy;
                *tab.add(2 * side + k) = rx;
                *tab.add(3 * side + k) = ry;
            }
            k += THREADS as usize;
        }
    }

    /// The crop window that the rotation (`rot`) of the haloed tile's pixels `i0 ..= i1` x
    /// `j0 ..= j1` reads. Those pixels, reflected, lie in the rectangle of rows `ilo ..= ihi`
    /// and columns `jlo ..= jhi`. Each computed source coordinate is a rounded sum of a term of
    /// the column and a term of the row, each rounded monotonically, so it is monotonic in the
    /// row and in the column separately, and its extremes over the rectangle are those of the
    /// four corners, exactly. Nearest rounds a source coordinate `s` to at most `floor(s) + 1`
    /// and bilinear reads `floor(s)` and `floor(s) + 1`, so resized rows
    /// `floor(min) - 1 ..= floor(max) + 2` cover every read (one row of margin each side); the
    /// resize's taps grow with the resized index, so their crop rows lie between the first tap
    /// of the first row and the second tap of the last.
    #[inline(always)]
    fn window(&self, rot: &Rotation, (i0, i1): (u32, u32), (j0, j1): (u32, u32)) -> Window {
        let (ilo, ihi) = reflected_span(self.top + i0 as i32, self.top + i1 as i32, self.oh);
        let (jlo, jhi) = reflected_span(self.left + j0 as i32, self.left + j1 as i32, self.ow);
        let (ay, ax) = rot.source(ilo, jlo);
        let (by, bx) = rot.source(ilo, jhi);
        let (cy, cx) = rot.source(ihi, jlo);
        let (dy, dx) = rot.source(ihi, jhi);
        let ymin = ay.min(by).min(cy.min(dy));
        let ymax = ay.max(by).max(cy.max(dy));
        let xmin = ax.min(bx).min(cx.min(dx));
        let xmax = ax.max(bx).max(cx.max(dx));
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

    /// Computes every crop pixel of `win` into the scratch region and the window's tap tables;
    /// each thread takes every `THREADS`-th entry.
    ///
    /// # Safety
    /// `n < batch`, `win` must fit the budget, and `s` be the block's shared memory, none of it
    /// read by another thread before the next barrier.
    #[inline(always)]
    unsafe fn stage<const C: usize, T: Px>(
        &self,
        p: &AugmentParams,
        n: usize,
        win: Window,
        s: &Shared<T>,
    ) {
        let lin = lane();
        let mut k = lin;
        while k < win.zrows + win.zcols {
            // SAFETY: `zrows, zcols <= taps_len`: inside the tables.
            unsafe {
                if k < win.zrows {
                    *s.taps_y.add(k as usize) = win.row(self.taps_y(win.zi0 + k as i32));
                } else {
                    let j = k - win.zrows;
                    *s.taps_x.add(j as usize) = win.col(self.taps_x(win.zj0 + j as i32));
                }
            }
            k += THREADS;
        }
        let crop = Crop::new(p, n);
        // At least 1 (`Tile::window`); `max` also spares the division its zero check.
        let (rows, cols) = (win.rows.max(1), win.cols.max(1));
        let total = rows * cols;
        // Pixel `k` is row `pr`, column `q` of the window, advanced without dividing.
        let (step_r, step_q) = (THREADS / cols, THREADS % cols);
        let (mut pr, mut q) = (lin / cols, lin % cols);
        let mut k = lin;
        while k < total {
            let v = crop.pixel::<C, T>(win.p0 + pr as i32, win.q0 + q as i32);
            // SAFETY: `k < rows * cols <= budget`.
            unsafe { *s.scratch.add(k as usize) = v };
            k += THREADS;
            q += step_q;
            pr += step_r;
            if q >= cols {
                q -= cols;
                pr += 1;
            }
        }
    }

    /// The resized value at resized pixel `(zi, zj)` through the window's tap tables.
    ///
    /// # Safety
    /// The window and its tables must have been staged before the last barrier.
    #[inline(always)]
    unsafe fn sample<const C: usize, T: Px>(&self, win: &Window, s: &Shared<T>, zi: i32, zj: i32) -> T {
        let iy = (zi - win.zi0).max(0).min(win.zrows as i32 - 1) as usize;
        let ix = (zj - win.zj0).max(0).min(win.zcols as i32 - 1) as usize;
        // SAFETY: the indices are clamped into the tables, whose offsets lie in the window.
        unsafe { resized::<C, T>(s.scratch, *s.taps_y.add(iy), *s.taps_x.add(ix)) }
    }

    /// Writes the rotated image over the haloed tile's pixels `(i0 .., j0 ..)`, `h x w` of
    /// them, into the rotated tile; each thread takes every `THREADS`-th pixel.
    ///
    /// # Safety
    /// The part must lie inside the haloed tile; the table and the window (with its tap tables)
    /// must have been written before the last barrier.
    #[inline(always)]
    unsafe fn rotate<const C: usize, T: Px>(
        &self,
        rot: &Rotation,
        win: &Window,
        s: &Shared<T>,
        (i0, j0): (u32, u32),
        (h, w): (u32, u32),
    ) {
        let lin = lane();
        // At least 1 (a part of the tile); `max` also spares the division its zero check.
        let w = w.max(1);
        let total = h * w;
        let side = self.side as usize;
        let tab = s.table as *const f32;
        let (step_i, step_j) = (THREADS / w, THREADS % w);
        let (mut i, mut j) = (lin / w, lin % w);
        let mut k = lin;
        while k < total {
            let (ti, tj) = ((i0 + i) as usize, (j0 + j) as usize);
            // SAFETY: `ti, tj < side`: inside the table.
            let (sy, sx) = unsafe {
                let gx = *tab.add(tj) + *tab.add(2 * side + ti);
                let gy = *tab.add(side + tj) + *tab.add(3 * side + ti);
                rot.finish(gx, gy)
            };
            let v = if self.nearest {
                match nearest_pixel(sy, sx, self.oh, self.ow) {
                    // SAFETY: staged before the last barrier.
                    Some((zi, zj)) => unsafe { self.sample::<C, T>(win, s, zi, zj) },
                    None => T::zero(),
                }
            } else {
                // `Bilinear::sample`: from 0, add each neighbour inside the image in the order
                // north-west, north-east, south-west, south-east.
                let bl = Bilinear::new(sy, sx, self.oh, self.ow);
                let (y1, x1) = (bl.y0.wrapping_add(1), bl.x0.wrapping_add(1));
                let mut acc = T::zero();
                let mut add = |inside: bool, zi: i32, zj: i32, wt: f32| {
                    if inside {
                        // SAFETY: staged before the last barrier.
                        let v = unsafe { self.sample::<C, T>(win, s, zi, zj) };
                        for c in 0..C {
                            acc.set(c, acc.get(c) + v.get(c) * wt);
                        }
                    }
                };
                add(bl.inside[0], bl.y0, bl.x0, bl.w[0]);
                add(bl.inside[1], bl.y0, x1, bl.w[1]);
                add(bl.inside[2], y1, bl.x0, bl.w[2]);
                add(bl.inside[3], y1, x1, bl.w[3]);
                acc
            };
            // SAFETY: `ti, tj < side`: inside the rotated tile; this thread's pixel.
            unsafe { *s.rotated.add(ti * side + tj) = v };
            k += THREADS;
            i += step_i;
            j += step_j;
            if j >= w {
                j -= w;
                i += 1;
            }
        }
    }
}

/// This thread's index in the block.
#[inline(always)]
fn lane() -> u32 {
    let (tx, ty) = thread_xy();
    ty * IMAGE_BLOCK_X + tx
}

/// The angle of image `n` (`n < batch`), read anew at each call so that the compiler does not
/// keep the rotation in registers across the rotation of every part.
#[inline(always)]
fn angle_of(p: &AugmentParams, n: usize) -> f32 {
    // SAFETY: `n < batch` and `p.angles` holds `batch` f32; the volatile read (of a value
    // nothing writes) only keeps the compiler from hoisting it out of the loop.
    unsafe { (p.angles as *const f32).add(n).read_volatile() }
}

/// The blur weights, unnormalised: in registers on the fast path (`FAST`, 7 taps), read from
/// shared memory otherwise.
struct Weights<const FAST: bool> {
    reg: [f32; FAST_TAPS],
    shared: *const f32,
    taps: usize,
}

impl<const FAST: bool> Weights<FAST> {
    /// # Safety
    /// `shared` must hold the `taps` weights, written before the last barrier.
    #[inline(always)]
    unsafe fn new(shared: *const f32, taps: usize) -> Self {
        let mut reg = [0.0; FAST_TAPS];
        if FAST {
            for (t, r) in reg.iter_mut().enumerate() {
                // SAFETY: the fast path's table holds `FAST_TAPS` weights.
                *r = unsafe { *shared.add(t) };
            }
        }
        Weights { reg, shared, taps }
    }

    /// `sum_t w[t] * at(t)` per channel, as fused multiply-adds.
    #[inline(always)]
    fn dot<const C: usize, T: Px>(&self, at: impl Fn(usize) -> T) -> [f32; C] {
        let mut acc = [0.0f32; C];
        let taps = if FAST { FAST_TAPS } else { self.taps };
        for t in 0..taps {
            // SAFETY: `t < taps`: inside the weights.
            let wt = if FAST { self.reg[t] } else { unsafe { *self.shared.add(t) } };
            let v = at(t);
            for (c, a) in acc.iter_mut().enumerate() {
                *a = fmaf(v.get(c), wt, *a);
            }
        }
        acc
    }
}

/// One block's work for `C` channels held in slots `T`, with the fast blur path or not.
///
/// # Safety
/// The kernel's contract, with `channels == C`; `FAST` only when `ksize <= 7`.
#[inline(always)]
unsafe fn augment_block<const C: usize, T: Px, const FAST: bool>(p: &AugmentParams) {
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
    let (oh, ow) = (p.out_h as i32, p.out_w as i32);
    let k = p.ksize;
    let r = augment_radius(k) as i32;
    let side = augment_side(k);
    let y0 = ((t / tiles_x.max(1)) * TILE) as i32;
    let x0 = ((t % tiles_x.max(1)) * TILE) as i32;
    let tile = Tile {
        top: y0 - r,
        left: x0 - r,
        side,
        oh,
        ow,
        nearest: p.nearest != 0,
        sh: p.crop_h as f32 / p.out_h as f32,
        sw: p.crop_w as f32 / p.out_w as f32,
        crop_h: p.crop_h,
        crop_w: p.crop_w,
        taps_len: augment_taps_len(k),
        budget: augment_scratch_px(k),
    };

    // Shared memory as `augment_shared_bytes` lays it out.
    let taps = 2 * r as usize + 1;
    let smem = gpu_launch_sized_workgroup_mem::<f32>();
    let table = smem.wrapping_add(taps.next_multiple_of(4));
    let taps_y = table.wrapping_add(4 * side as usize) as *mut Axis;
    let taps_x = taps_y.wrapping_add(tile.taps_len as usize);
    let rotated = taps_x.wrapping_add(tile.taps_len as usize) as *mut T;
    let scratch = rotated.wrapping_add((side * side) as usize);
    let s = Shared {
        wts: smem,
        table,
        taps_y,
        taps_x,
        rotated,
        scratch,
    };

    // The weights: the kernel's `ksize` taps centred in `taps` (zero beyond them).
    // SAFETY: `n < batch`; `p.sigmas` holds `batch` f32.
    let sigma = unsafe { (p.sigmas as *const f32).add(nu).read() };
    let lin = lane() as usize;
    if lin < taps {
        let off = (taps - k as usize) / 2;
        // SAFETY: `lin < taps`: inside the weights.
        unsafe { *s.wts.add(lin) = 0.0 };
        if lin >= off && lin < off + k as usize {
            // SAFETY: as above.
            unsafe { *s.wts.add(lin) = gauss((lin - off) as u32, k / 2, sigma) };
        }
    }
    let rot = Rotation::new(angle_of(p, nu), p.out_h, p.out_w);
    // SAFETY: the table is `4 * side` f32, read after the barrier that follows the first window.
    unsafe { tile.tabulate(&rot, s.table) };

    // Steps 1 and 2: the rotated haloed tile, in one part when its window fits, else in parts
    // of PART x PART. Every value here is the same in every thread, so the branches, loops and
    // barriers are uniform.
    let whole = tile.window(&rot, (0, side - 1), (0, side - 1));
    let (part, parts) = if whole.fits(tile.budget) {
        (side, 1)
    } else {
        (PART, side.div_ceil(PART))
    };
    let mut bi = 0;
    while bi < parts {
        let mut bj = 0;
        while bj < parts {
            let (i0, j0) = (bi * part, bj * part);
            let (h, w) = (part.min(side - i0), part.min(side - j0));
            let win = if parts == 1 {
                whole
            } else {
                tile.window(&rot, (i0, i0 + h - 1), (j0, j0 + w - 1))
                    .capped(tile.budget)
            };
            if bi + bj > 0 {
                // SAFETY: every thread of the block reaches this barrier; the previous part's
                // reads of the window are done before it is overwritten.
                unsafe { sync_block() };
            }
            // SAFETY: `n < batch`; the window fits (`capped`).
            unsafe { tile.stage::<C, T>(p, nu, win, &s) };
            // SAFETY: every thread of the block reaches this barrier; it publishes the window,
            // its tap tables (and the weights and the rotation's table).
            unsafe { sync_block() };
            // SAFETY: the part lies inside the haloed tile; the buffers are published above.
            unsafe { tile.rotate::<C, T>(&rot, &win, &s, (i0, j0), (h, w)) };
            bj += 1;
        }
        bi += 1;
    }
    // SAFETY: every thread of the block reaches this barrier: the rotated tile is complete and
    // the window's last reads are done before the horizontal pass overwrites it.
    unsafe { sync_block() };

    // Step 3: blur and normalise. torchvision normalises each 1-D kernel by its sum; the
    // product of both normalisations is applied once to the result.
    // SAFETY: the weights were written before the barriers above.
    let wts = unsafe { Weights::<FAST>::new(s.wts, taps) };
    let norm = unsafe {
        let total = sum(s.wts, taps as u32);
        (1.0 / total) * (1.0 / total)
    };
    let (tx, ty) = thread_xy();
    let (tx, ty) = (tx as usize, ty as usize);
    let (tw, side) = (TILE as usize, side as usize);
    // Rows: scratch[row][c] = sum_t w[t] * rotated[row][c + t].
    let mut row = ty;
    while row < side {
        // SAFETY: `row < side`, `tx + t < TILE + 2 r = side`.
        let v = wts.dot::<C, T>(|t| unsafe { *s.rotated.add(row * side + tx + t) });
        let mut out = T::zero();
        for (c, x) in v.iter().enumerate() {
            out.set(c, *x);
        }
        // SAFETY: `row < side`, `tx < TILE`: inside the scratch region (`side * TILE` pixels).
        unsafe { *s.scratch.add(row * tw + tx) = out };
        row += IMAGE_BLOCK_Y as usize;
    }
    // SAFETY: every thread of the block reaches this barrier; it publishes the rows.
    unsafe { sync_block() };

    // Columns, normalisation and the store.
    let stats = p.stats as *const f32;
    let mut mean = [0.0f32; C];
    let mut inv = [0.0f32; C];
    for c in 0..C {
        // SAFETY: `c < channels`; `stats` holds `2 * channels` f32.
        unsafe {
            mean[c] = stats.add(c).read();
            inv[c] = 1.0 / stats.add(C + c).read();
        }
    }
    // Offsets inside an image fit `u32` (at most `2^32 - 1` values).
    let (oh, ow, cu) = (p.out_h, p.out_w, C as u32);
    let (row_o, px_o, ch_o) = if p.layout & AUGMENT_NHWC_OUT != 0 {
        (ow * cu, cu, 1)
    } else {
        (ow, 1, oh * ow)
    };
    let dst = (p.y as *mut f32).wrapping_add(nu * C * oh as usize * ow as usize);
    let gx = x0 as u32 + tx as u32;
    let mut row = ty;
    while row < tw {
        let gy = y0 as u32 + row as u32;
        if gy < oh && gx < ow {
            // SAFETY: `row + t < TILE + 2 r = side`, `tx < TILE`: inside the blurred rows.
            let v = wts.dot::<C, T>(|t| unsafe { *s.scratch.add((row + t) * tw + tx) });
            let base = gy * row_o + gx * px_o;
            for c in 0..C {
                let y = fmaf(v[c], norm, -mean[c]) * inv[c];
                // SAFETY: `gy < out_h`, `gx < out_w`, `c < channels`, `n < batch`: inside `p.y`.
                unsafe { dst.add((base + c as u32 * ch_o) as usize).write(y) };
            }
        }
        row += IMAGE_BLOCK_Y as usize;
    }
}

kernel! {
    #[declared(AUGMENT)]
    /// # Safety
    /// `p.x` must address `batch * channels * height * width` bytes, `p.y`
    /// `batch * channels * out_h * out_w` f32, `p.boxes` `4 * batch` f32, `p.angles` and
    /// `p.sigmas` `batch` f32, `p.stats` `2 * channels` f32; `1 <= channels <=
    /// AUGMENT_MAX_CHANNELS`, `ksize` odd, at most `MAX_KERNEL_SIZE`, `ksize / 2 < min(out_h,
    /// out_w)`, `crop_h <= out_h` and `crop_w <= out_w` (otherwise the result is wrong, though
    /// every access stays in bounds); grid `ceil(out_w / 32) * ceil(out_h / 32) * batch` blocks of
    /// 32 x 8 threads with `augment_shared_bytes(channels, ksize)` bytes of dynamic shared memory.
    pub unsafe fn augment(p: AugmentParams) {
        let fast = augment_radius(p.ksize) == AUGMENT_FAST_RADIUS;
        // SAFETY: forwarded; the channel count picks the instance, `fast` only for 7 taps or
        // fewer.
        unsafe {
            match (p.channels, fast) {
                (1, true) => augment_block::<1, Px1, true>(&p),
                (2, true) => augment_block::<2, Px2, true>(&p),
                (3, true) => augment_block::<3, Px4, true>(&p),
                (_, true) => augment_block::<4, Px4, true>(&p),
                (1, false) => augment_block::<1, Px1, false>(&p),
                (2, false) => augment_block::<2, Px2, false>(&p),
                (3, false) => augment_block::<3, Px4, false>(&p),
                (_, false) => augment_block::<4, Px4, false>(&p),
            }
        }
    }
}
