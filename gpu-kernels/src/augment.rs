//! Seed 003's augmentation in one kernel: uint8 to float, ROI-align crop, bilinear resize up,
//! rotation, Gaussian blur and normalisation, with the intermediates never written to device
//! memory.
//!
//! A block owns a 32 x 32 output tile of one image. The blur needs the rotated image over the
//! tile and its halo (reflected at the border), and the rotation of that haloed tile reads only
//! a small window of the crop. The block bounds that window from the rotation's source points
//! of the haloed tile's corners, widened by the resize's taps, and computes each crop value of
//! the window once, every channel, into shared memory (each value a `roi_align` bin of the
//! uint8 input, converted to float on load). Rotating a pixel of the haloed tile then costs one
//! source point, the resize's taps, and four (nearest) or sixteen (bilinear) shared-memory reads
//! per channel, instead of as many `roi_align` bins from global memory. The rotated haloed tile,
//! every channel, stays in shared memory, where the block blurs it separably (see
//! [`crate::gaussian_blur::blur_tile`]) and writes `(blurred - mean) / std`.
//!
//! The window has room for [`AUGMENT_CROP_BUDGET`] values. When the window of the whole haloed
//! tile is larger (large blur kernels, crops hardly enlarged), the block goes through the haloed
//! tile in parts of 16 x 16 pixels, each with its own window, which always fits while the resize
//! enlarges (see [`PART`]). Every stage uses the same f32 operations as the separate kernels, so
//! the fused result equals the chain up to the blur's summation order.

use crate::gaussian_blur::{blur_tile, write_weights};
use crate::sampling::{nearest_pixel, reflect, Bilinear, LinearTaps, Roi, Rotation};
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;
use streamline_abi::image::AUGMENT;
use streamline_abi::image::{
    AugmentParams, AUGMENT_CROP_BUDGET, IMAGE_BLOCK_X, IMAGE_BLOCK_Y, ROI_MAX_SAMPLES_PER_BIN, TILE,
};
use streamline_device::kernel;
use streamline_device::math::floor_i32;
use streamline_device::mem::{ldg_u8, lds, shared_addr, sts};
use streamline_device::thread::{block_x, sync_block, thread_xy};

/// Threads of a block.
const THREADS: u32 = IMAGE_BLOCK_X * IMAGE_BLOCK_Y;

/// Side of the parts of the haloed tile when its whole window does not fit. A part spans at
/// most 15 pixels along each axis, also after reflection at the image border, so its source
/// points span at most `15 sqrt(2)` resized pixels whatever the angle; the window's resized rows
/// `zi0 ..= zi1` then have `zi1 - zi0 < 15 sqrt(2) + 4`, and with a scale `crop / out <= 1`
/// the crop rows number fewer than `15 sqrt(2) + 7 < 29`: `28 * 28 * AUGMENT_MAX_CHANNELS <=
/// AUGMENT_CROP_BUDGET`.
const PART: u32 = 16;

/// The crop stage of one image: its uint8 planes and the box's `roi_align` sampling rule.
struct Crop {
    img: *const u8,
    plane: usize,
    h: i32,
    w: i32,
    width: usize,
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
        let plane = p.height as usize * p.width as usize;
        Crop {
            img: (p.x as *const u8).wrapping_add(n * p.channels as usize * plane),
            plane,
            h: p.height as i32,
            w: p.width as i32,
            width: p.width as usize,
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

    /// Crop value `(p, q)` of channel `c` (`c < channels`): the `roi_align` bin of the input
    /// converted to float on load.
    #[inline(always)]
    fn value(&self, c: u32, p: i32, q: i32) -> f32 {
        let src = self.img.wrapping_add(c as usize * self.plane);
        let (width, scale) = (self.width, self.scale);
        // SAFETY: `Roi::bin` loads only indices inside the `h x w` plane, and channel `c` of
        // this image lies inside `p.x` by the kernel's contract.
        let load = |yy: i32, xx: i32| unsafe {
            ldg_u8(src.add(yy as usize * width + xx as usize)) as f32 * scale
        };
        self.roi.bin(self.h, self.w, p as u32, q as u32, load)
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

/// A rectangle of crop values held in shared memory: rows `p0 ..`, columns `q0 ..`, stored
/// channel by channel, row by row.
#[derive(Clone, Copy)]
struct Window {
    p0: i32,
    q0: i32,
    rows: u32,
    cols: u32,
}

/// One resize tap pair along an axis, as byte offsets into a plane of the window, and weights.
#[derive(Clone, Copy)]
struct Axis {
    o0: u32,
    o1: u32,
    l0: f32,
    l1: f32,
}

impl Window {
    /// Whether `channels` planes of the window fit [`AUGMENT_CROP_BUDGET`].
    #[inline(always)]
    fn fits(&self, channels: u32) -> bool {
        self.rows as u64 * self.cols as u64 * channels as u64 <= AUGMENT_CROP_BUDGET as u64
    }

    /// This window, or, when it does not fit, one value per channel: only a resize that
    /// shrinks (outside the kernel's contract) makes a part's window overflow the budget, and
    /// every access then still stays in bounds.
    #[inline(always)]
    fn capped(self, channels: u32) -> Window {
        if self.fits(channels) {
            self
        } else {
            Window {
                rows: 1,
                cols: 1,
                ..self
            }
        }
    }

    /// Row taps as byte offsets into a plane of the window. The indices are clamped into the
    /// window: a no-op for every read the window was bounded for, and what keeps every read
    /// inside shared memory whatever the parameters hold.
    #[inline(always)]
    fn row(&self, t: LinearTaps) -> Axis {
        let last = self.rows as i32 - 1;
        let at = |i: i32| (i - self.p0).max(0).min(last) as u32 * self.cols * 4;
        Axis {
            o0: at(t.i0),
            o1: at(t.i1),
            l0: t.l0,
            l1: t.l1,
        }
    }

    /// Column taps as byte offsets into a row of the window (clamped like [`Window::row`]).
    #[inline(always)]
    fn col(&self, t: LinearTaps) -> Axis {
        let last = self.cols as i32 - 1;
        let at = |i: i32| (i - self.q0).max(0).min(last) as u32 * 4;
        Axis {
            o0: at(t.i0),
            o1: at(t.i1),
            l0: t.l0,
            l1: t.l1,
        }
    }
}

/// The resized value from the plane of the window at shared address `plane`: torch's
/// bilinear blend in the order of the resize kernel.
///
/// # Safety
/// `plane` must be the shared address of a plane of the window, written before the last
/// barrier, and `y`, `x` come from [`Window::row`] and [`Window::col`] of that window.
#[inline(always)]
unsafe fn resized(plane: u32, y: Axis, x: Axis) -> f32 {
    // SAFETY: the offsets are clamped into the plane (see `Window::row`).
    let at = |o: u32| unsafe { lds(plane + o) };
    y.l0 * (x.l0 * at(y.o0 + x.o0) + x.l1 * at(y.o0 + x.o1))
        + y.l1 * (x.l0 * at(y.o1 + x.o0) + x.l1 * at(y.o1 + x.o1))
}

/// What the rotation of the haloed tile needs, the same in every thread of the block.
struct Tile {
    /// Output row and column of the haloed tile's top-left pixel (before reflection).
    top: i32,
    left: i32,
    /// Side of the haloed tile.
    side: u32,
    chan: u32,
    oh: i32,
    ow: i32,
    nearest: bool,
    /// The resize's scales (`crop / out`, f32 as torch computes them) and the crop size.
    sh: f32,
    sw: f32,
    crop_h: u32,
    crop_w: u32,
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
    /// the image border) into `tab`: `side` column terms `gx`, `side` column terms `gy`, then
    /// the same for the rows. One thread per row and column.
    ///
    /// # Safety
    /// `tab` must be the shared address of `4 * side` f32, read only after the next barrier.
    #[inline(always)]
    unsafe fn tabulate(&self, rot: &Rotation, tab: u32) {
        let (tx, ty) = thread_xy();
        let lin = ty * IMAGE_BLOCK_X + tx;
        let side = self.side;
        let mut k = lin;
        while k < side {
            let (cx, cy) = rot.col(reflect(self.left + k as i32, self.ow));
            let (rx, ry) = rot.row(reflect(self.top + k as i32, self.oh));
            // SAFETY: `k < side`: inside the table.
            unsafe {
                sts(tab + 4 * k, cx);
                sts(tab + 4 * (side + k), cy);
                sts(tab + 4 * (2 * side + k), rx);
                sts(tab + 4 * (3 * side + k), ry);
            }
            k += THREADS;
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
        Window {
            p0,
            q0,
            rows: (self.taps_y(zi1).i1 - p0 + 1).max(1) as u32,
            cols: (self.taps_x(zj1).i1 - q0 + 1).max(1) as u32,
        }
    }

    /// Computes every crop value of `win`, every channel, into `dst`; each thread takes every
    /// `THREADS`-th value.
    ///
    /// # Safety
    /// `n < batch`, `win` must fit (`Window::fits`) and `dst` hold [`AUGMENT_CROP_BUDGET`]
    /// f32 of shared memory.
    #[inline(always)]
    unsafe fn stage(&self, p: &AugmentParams, n: usize, win: Window, dst: *mut f32) {
        let crop = Crop::new(p, n);
        let (tx, ty) = thread_xy();
        let lin = ty * IMAGE_BLOCK_X + tx;
        // At least 1 (`Tile::window`); `max` also spares the division its zero check.
        let (rows, cols) = (win.rows.max(1), win.cols.max(1));
        let total = self.chan * rows * cols;
        // Value `k` is channel `c`, row `pr`, column `q` of the window:
        // `k = (c rows + pr) cols + q = cr cols + q`, advanced without dividing.
        let (step_r, step_q) = (THREADS / cols, THREADS % cols);
        let (mut cr, mut q) = (lin / cols, lin % cols);
        let (mut c, mut pr) = (cr / rows, cr % rows);
        let mut k = lin;
        while k < total {
            let v = crop.value(c, win.p0 + pr as i32, win.q0 + q as i32);
            // SAFETY: `k < channels * rows * cols <= AUGMENT_CROP_BUDGET`.
            unsafe { *dst.add(k as usize) = v };
            k += THREADS;
            q += step_q;
            cr += step_r;
            if q >= cols {
                q -= cols;
                cr += 1;
            }
            pr = cr - c * rows;
            while pr >= rows {
                pr -= rows;
                c += 1;
            }
        }
    }

    /// Writes the rotated image over the haloed tile's pixels `(i0 .., j0 ..)`, `h x w` of them,
    /// every channel, into `rotated` (`channels x side x side`), with the rotation's terms from
    /// `tab` and the crop from `win` held at `staged` (all shared addresses); each thread takes
    /// every `THREADS`-th pixel.
    ///
    /// # Safety
    /// `rotated` must hold `channels * side * side` f32, the part must lie inside the haloed
    /// tile, `tab` hold the table of [`Tile::tabulate`] and `staged` the window, both written
    /// before the last barrier.
    #[inline(always)]
    unsafe fn rotate(
        &self,
        rot: &Rotation,
        (win, staged, tab): (Window, u32, u32),
        rotated: u32,
        (i0, j0): (u32, u32),
        (h, w): (u32, u32),
    ) {
        let (tx, ty) = thread_xy();
        let lin = ty * IMAGE_BLOCK_X + tx;
        // At least 1 (a part of the tile); `max` also spares the division its zero check.
        let w = w.max(1);
        let total = h * w;
        let side = self.side;
        let tile_plane = 4 * side * side;
        let win_plane = 4 * win.rows * win.cols;
        let (step_i, step_j) = (THREADS / w, THREADS % w);
        let (mut i, mut j) = (lin / w, lin % w);
        let mut k = lin;
        while k < total {
            let (ti, tj) = (i0 + i, j0 + j);
            // SAFETY: `ti, tj < side`: inside the table.
            let (sy, sx) = unsafe {
                let gx = lds(tab + 4 * tj) + lds(tab + 4 * (2 * side + ti));
                let gy = lds(tab + 4 * (side + tj)) + lds(tab + 4 * (3 * side + ti));
                rot.finish(gx, gy)
            };
            let dst = rotated + 4 * (ti * side + tj);
            if self.nearest {
                match nearest_pixel(sy, sx, self.oh, self.ow) {
                    Some((zi, zj)) => {
                        let ay = win.row(self.taps_y(zi));
                        let ax = win.col(self.taps_x(zj));
                        let mut c = 0;
                        while c < self.chan {
                            // SAFETY: a plane of the window, offsets from it; the pixel lies
                            // in the haloed tile and `c < channels`.
                            unsafe {
                                let v = resized(staged + c * win_plane, ay, ax);
                                sts(dst + c * tile_plane, v);
                            }
                            c += 1;
                        }
                    }
                    None => {
                        let mut c = 0;
                        while c < self.chan {
                            // SAFETY: as above; the zero fill.
                            unsafe { sts(dst + c * tile_plane, 0.0) };
                            c += 1;
                        }
                    }
                }
            } else {
                let bl = Bilinear::new(sy, sx, self.oh, self.ow);
                // `Bilinear::sample`: from 0, add each neighbour inside the image in the order
                // north-west, north-east, south-west, south-east. The sum of each channel
                // builds up in place in the rotated tile (this thread's own pixel), so that
                // only one neighbour's taps are live at a time.
                let mut c = 0;
                while c < self.chan {
                    // SAFETY: the pixel lies in the haloed tile and `c < channels`.
                    unsafe { sts(dst + c * tile_plane, 0.0) };
                    c += 1;
                }
                let y1 = bl.y0.wrapping_add(1);
                let x1 = bl.x0.wrapping_add(1);
                let add = |inside: bool, zi: i32, zj: i32, wt: f32| {
                    if !inside {
                        return;
                    }
                    let ay = win.row(self.taps_y(zi));
                    let ax = win.col(self.taps_x(zj));
                    let mut c = 0;
                    while c < self.chan {
                        let at = dst + c * tile_plane;
                        // SAFETY: a plane of the window, offsets from it; the pixel lies in the
                        // haloed tile and `c < channels`, written by this thread only.
                        unsafe {
                            let v = resized(staged + c * win_plane, ay, ax);
                            sts(at, lds(at) + v * wt);
                        }
                        c += 1;
                    }
                };
                add(bl.inside[0], bl.y0, bl.x0, bl.w[0]);
                add(bl.inside[1], bl.y0, x1, bl.w[1]);
                add(bl.inside[2], y1, bl.x0, bl.w[2]);
                add(bl.inside[3], y1, x1, bl.w[3]);
            }
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

/// The angle of image `n` (`n < batch`), read anew at each call so that the compiler does not
/// keep the rotation in registers across the rotation of every part.
#[inline(always)]
fn angle_of(p: &AugmentParams, n: usize) -> f32 {
    // SAFETY: `n < batch` and `p.angles` holds `batch` f32; the volatile read (of a value
    // nothing writes) only keeps the compiler from hoisting it out of the loop.
    unsafe { (p.angles as *const f32).add(n).read_volatile() }
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
        // SAFETY: `n < batch`; `p.sigmas` holds `batch` f32.
        let sigma = unsafe { (p.sigmas as *const f32).add(nu).read() };
        let chan = p.channels;
        let (oh, ow) = (p.out_h as i32, p.out_w as i32);
        let r = (p.ksize / 2) as i32;
        let side = TILE + 2 * r as u32;
        let y0 = ((t / tiles_x.max(1)) * TILE) as i32;
        let x0 = ((t % tiles_x.max(1)) * TILE) as i32;
        let tile = Tile {
            top: y0 - r,
            left: x0 - r,
            side,
            chan,
            oh,
            ow,
            nearest: p.nearest != 0,
            sh: p.crop_h as f32 / p.out_h as f32,
            sw: p.crop_w as f32 / p.out_w as f32,
            crop_h: p.crop_h,
            crop_w: p.crop_w,
        };

        // Shared memory: the weights, the rotation's table, the rotated haloed tile (every
        // channel), then one region holding first the crop window (every channel) and later the
        // blur's horizontal pass (`augment_shared_bytes`).
        let smem = gpu_launch_sized_workgroup_mem::<f32>();
        let wts = smem;
        let table = wts.wrapping_add(p.ksize as usize);
        let rotated = table.wrapping_add(4 * side as usize);
        let scratch = rotated.wrapping_add((chan * side * side) as usize);
        let (tab_a, rot_a, scr_a) = (
            shared_addr(table),
            shared_addr(rotated),
            shared_addr(scratch),
        );
        // SAFETY: `wts` is `ksize` f32 of the launch's shared memory, read after the first barrier
        // inside `blur_tile`; the table is `4 * side` f32, read after the barrier that follows the
        // first window.
        let rot = Rotation::new(angle_of(&p, nu), p.out_h, p.out_w);
        unsafe {
            write_weights(wts, p.ksize, sigma);
            tile.tabulate(&rot, tab_a);
        }

        // The rotated haloed tile: in one part when its window fits, else in parts of PART x PART.
        // Every value here is the same in every thread, so the branches, loops and barriers are
        // uniform.
        let whole = tile.window(&rot, (0, side - 1), (0, side - 1));
        let (part, parts) = if whole.fits(chan) {
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
                        .capped(chan)
                };
                if bi + bj > 0 {
                    // SAFETY: every thread of the block reaches this barrier; the previous part's
                    // reads of the window are done before it is overwritten.
                    unsafe { sync_block() };
                }
                // SAFETY: `n < batch`; the window fits (`capped`); `scratch` holds
                // `AUGMENT_CROP_BUDGET` f32.
                unsafe { tile.stage(&p, nu, win, scratch) };
                // SAFETY: every thread of the block reaches this barrier; it publishes the window
                // (and the table).
                unsafe { sync_block() };
                // SAFETY: the part lies inside the haloed tile; the buffers are as stated,
                // published above.
                unsafe { tile.rotate(&rot, (win, scr_a, tab_a), rot_a, (i0, j0), (h, w)) };
                bj += 1;
            }
            bi += 1;
        }

        let hbuf = scratch;
        let stats = p.stats as *const f32;
        let out_plane = p.out_h as usize * p.out_w as usize;
        let out_w = p.out_w as usize;
        let tile_plane = (side * side) as usize;
        let mut c = 0;
        while c < chan as usize {
            // SAFETY: `c < channels`; `stats` holds `2 * channels` f32.
            let (mean, std) = unsafe { (stats.add(c).read(), stats.add(chan as usize + c).read()) };
            let dst = (p.y as *mut f32).wrapping_add((nu * chan as usize + c) * out_plane);
            // The rotated tile of channel `c` is in place; `blur_tile`'s first barrier publishes it
            // (and, for channel 0, the weights) and orders the last reads of the crop window before
            // the first write of `hbuf` over it.
            // SAFETY: every thread runs this loop with the same `c`; the buffers are sized by the
            // host (`augment_shared_bytes`).
            unsafe {
                blur_tile(
                    (oh, ow),
                    (y0, x0),
                    (r, r),
                    rotated.wrapping_add(c * tile_plane),
                    hbuf,
                    wts,
                    wts,
                    |_, _, _| {},
                    // SAFETY: `blur_tile` stores only pixels inside the output plane.
                    |yy, xx, v| {
                        dst.add(yy as usize * out_w + xx as usize)
                            .write((v - mean) / std)
                    },
                )
            };
            c += 1;
        }
    }
}
