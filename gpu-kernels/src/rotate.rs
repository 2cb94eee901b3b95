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
//!
//! Bilinear rotation in NCHW reads twelve values per pixel, and where the input allows it
//! (16-byte aligned rows, at most four channels) it takes [`rotate_bilinear_staged`] instead:
//! each block copies the input window of its 32 x 32 tile into shared memory first, where a
//! warp's scattered reads are cheaper than in L1.

use crate::channels::{
    for_channel_groups, for_channels, for_shaped_columns, image_and_column, store3_at,
    with_layouts, Strides, WarpShape,
};
use crate::sampling::{nearest_pixel, Bilinear, ColumnSpans, Rotation};
use core::intrinsics::fmaf32 as fmaf;
use core::ptr::{addr_of, addr_of_mut};
use streamline_abi::image::RotateParams;
use streamline_abi::image::{
    IMAGE_BLOCK_Y, ROTATE_STAGED_MARGIN, ROTATE_STAGED_PITCH, ROTATE_STAGED_PLANE,
    ROTATE_STAGED_ROWS, ROTATE_STAGED_ROW_PITCH, ROTATE_STAGED_ROW_ROWS, ROTATE_STAGED_SETUP_BYTES,
    ROTATE_STAGED_TILE,
};
use streamline_abi::image::{
    ROTATE_BILINEAR, ROTATE_BILINEAR_RELAYOUT, ROTATE_BILINEAR_STAGED,
    ROTATE_BILINEAR_STAGED_RELAYOUT, ROTATE_NEAREST, ROTATE_NEAREST_RELAYOUT,
};
use streamline_device::kernel;
use streamline_device::math::floor_i32;
use streamline_device::mem::{copy_async16, copy_wait, ldg_at_line, ldg_line, shared_addr, stg_at};
use streamline_device::shared::dynamic_shared;
use streamline_device::thread::{block_xyz, sync_block, thread_xy};

/// The image's rotation (its angle read from `p.angles`).
#[inline(always)]
fn rotation(p: &RotateParams, n: u32) -> Rotation {
    // SAFETY: `n < batch`; `angles` holds `batch` f32.
    let deg = unsafe { p.angles.as_ptr().add(n as usize).read() };
    Rotation::new(deg, p.height, p.width)
}

/// The sine of 22.5 degrees: where an output row runs within that angle of an input row
/// (`|sin| <` this), warps of both the gathering and the staged kernels take rows of 32.
const ROWS_MAX_SIN: f32 = 0.382_683_43;

/// The warps' shape for a rotation whose output rows run through the input with slope
/// `sin` (per unit of length): rows of 32 within 22.5 degrees of a row, 16 x 2 patches up to
/// 67.5 degrees, and `steep` (narrow, tall patches) beyond, measured per angle on an H200.
#[inline(always)]
fn warp_shape(sin: f32, steep: WarpShape) -> WarpShape {
    let s = sin.abs();
    if s < ROWS_MAX_SIN {
        WarpShape(0)
    } else if s < 0.923_879_5 {
        WarpShape(1)
    } else {
        steep
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
    // Three channels written interleaved go as one pixel's run of values.
    let rgb_run = NHWC_OUT && p.channels == 3;
    // Near 90 degrees, 8 x 4 patches.
    for_pixels(p, WarpShape(2), so, |image, out, dst, (sy, sx)| {
        let src =
            nearest_pixel(sy, sx, h, w).map(|(yi, xi)| (yi as u32 * p.width + xi as u32) * si.px);
        let value = |c| match src {
            // SAFETY: `nearest_pixel` returns only pixels inside the image, `c < channels`.
            Some(o) => unsafe { ldg_at_line(image, c * si.ch + o) },
            None => fill,
        };
        if rgb_run {
            // SAFETY: the pixel is in the image (`for_pixels`), its three values at `dst`.
            unsafe { store3_at(out, dst, [value(0), value(1), value(2)]) };
        } else {
            // SAFETY: the pixel is in the image (`for_pixels`), `c < channels`.
            for_channels(p.channels, value, |c, v| unsafe {
                stg_at(out, c * so.ch + dst, v)
            });
        }
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

/// What one thread of a staged rotation's block works out for all: the image's rotation and
/// the input window its tile reads.
#[derive(Clone, Copy)]
struct Staged {
    rot: Rotation,
    /// First input row and column of the window (the column a multiple of 4).
    r0: i32,
    c0: i32,
    /// Rows and 16-byte chunks of the window (0 rows: no source point has a neighbour inside).
    rows: u32,
    chunks: u32,
}

/// The per-block values at the start of a staged rotation's shared memory: the window (worked
/// out by the first warp) and the columns each of its rows is read in (by the second): the
/// window is the bounding box of the tile's rotated square, which near 45 degrees holds twice
/// the pixels read.
#[repr(C)]
struct StagedSetup {
    window: Staged,
    spans: ColumnSpans,
}

const _: () = assert!(core::mem::size_of::<StagedSetup>() <= ROTATE_STAGED_SETUP_BYTES as usize);

impl Staged {
    /// The window of the tile `i0 ..= i1` x `j0 ..= j1` of an `h x w` image rotated by `rot`,
    /// from the extremes of its source coordinates ([`Rotation::bounds`]). Bilinear reads rows
    /// `floor(y)` and `floor(y) + 1` (and columns alike), so the window spans `floor(min) ..=
    /// floor(max) + 1` of each axis, cut to the image, the columns widened to whole 16-byte
    /// chunks (inside the row, since `w` is a multiple of 4).
    #[inline(always)]
    fn new(rot: Rotation, tile_rows: (i32, i32), tile_cols: (i32, i32), h: i32, w: i32) -> Staged {
        let ((ymin, ymax), (xmin, xmax)) = rot.bounds(tile_rows, tile_cols);
        // Saturating conversions (NaN to 0) keep every bound finite.
        let r0 = floor_i32(ymin).max(0);
        let r1 = floor_i32(ymax).saturating_add(1).min(h - 1);
        let c0 = floor_i32(xmin).max(0) & !3;
        let c1 = floor_i32(xmax).saturating_add(1).min(w - 1);
        let rows = if r1 >= r0 && c1 >= c0 {
            ((r1 - r0 + 1) as u32).min(ROTATE_STAGED_ROWS)
        } else {
            0
        };
        let chunks = if c1 >= c0 {
            ((c1 - c0) as u32 / 4 + 1).min(ROTATE_STAGED_PITCH / 4)
        } else {
            0
        };
        Staged {
            rot,
            r0,
            c0,
            rows,
            chunks,
        }
    }
}

/// The staged bilinear rotation: block `(bx, by, n)` rotates output tile `(by, bx)` of image
/// `n`. One warp works out the image's rotation and the tile's window, another the columns each
/// window row is read in ([`ColumnSpans`]); the block copies those 16-byte chunks of every
/// channel's window into shared memory with asynchronous copies; then each thread computes four
/// pixels, every channel, reading their neighbours from shared memory, where a warp's reads
/// along a rotated line cost a few bank cycles instead of a pass per input line in L1. Each
/// pixel's value is [`rotate_bilinear`]'s (the same source points, neighbours, weights and order
/// of operations). The kernel has an instance per channel count `G` (the launch's `channels`),
/// whose reads and stores of a pixel's channels have fixed offsets.
///
/// Warps take rows of 32 pixels where an output row runs within 22.5 degrees of an input row,
/// else 8 x 4 patches, whose source points fall on distinct banks when they run down the
/// input's columns. For rows the window's rows lie [`ROTATE_STAGED_ROW_PITCH`] values apart, a
/// multiple of the 32 banks, so that a warp's reads along a line near an input row take about
/// one bank cycle each; patches keep [`ROTATE_STAGED_PITCH`].
///
/// # Safety
/// `p.x` 16-byte aligned, `p.width` a multiple of 4, `p.channels == G <=
/// ROTATE_STAGED_MAX_CHANNELS`, the other parameters as for [`rotate_nearest`] (NCHW); grid
/// `(ceil(width / 32), ceil(height / 32), batch)` of 32 x 8 threads with
/// `rotate_staged_shared_bytes(channels)` bytes of dynamic shared memory.
///
/// NHWC input (`NHWC_IN`) is staged as it lies, the window's pixels with their channels
/// interleaved (a 16-byte chunk of 4 pixels is `G` chunks of the input row), and read with
/// those strides; NHWC output (`NHWC_OUT`) is stored with its strides. The shared memory is
/// then `rotate_staged_nhwc_shared_bytes`.
#[inline(always)]
unsafe fn staged<const FILL: bool, const G: usize, const NHWC_IN: bool, const NHWC_OUT: bool>(
    p: &RotateParams,
) {
    let (bx, by, n) = block_xyz();
    let (tx, ty) = thread_xy();
    let (h, w) = (p.height as i32, p.width as i32);
    let tile = ROTATE_STAGED_TILE as i32;
    let (i0, j0) = (by as i32 * tile, bx as i32 * tile);
    let smem = dynamic_shared::<f32>();
    let setup = smem as *mut StagedSetup;
    // The window's layout: NCHW a plane per channel, NHWC channels interleaved (offsets of a
    // channel and a pixel from the one before), and the margin before it.
    let (ch_win, px_win) = if NHWC_IN {
        (1, G)
    } else {
        (ROTATE_STAGED_PLANE as usize, 1)
    };
    let margin = ROTATE_STAGED_MARGIN as usize * px_win;
    let window = smem.wrapping_add(ROTATE_STAGED_SETUP_BYTES as usize / 4 + margin);
    let (tile_rows, tile_cols) = (
        (i0, (i0 + tile - 1).min(h - 1)),
        (j0, (j0 + tile - 1).min(w - 1)),
    );
    if ty < 2 {
        let rot = rotation(p, n);
        if ty == 0 {
            let st = Staged::new(rot, tile_rows, tile_cols, h, w);
            if tx == 0 {
                // SAFETY: the per-block values at the start of the launch's shared memory,
                // read after the barrier below.
                unsafe { addr_of_mut!((*setup).window).write(st) };
            }
        } else {
            let spans = rot.column_spans(tile_rows, tile_cols);
            if tx == 0 {
                // SAFETY: as above.
                unsafe { addr_of_mut!((*setup).spans).write(spans) };
            }
        }
    }
    // SAFETY: every thread of the block reaches it.
    unsafe { sync_block() };
    // SAFETY: written before the barrier.
    let (st, spans) = unsafe {
        (
            addr_of!((*setup).window).read(),
            addr_of!((*setup).spans).read(),
        )
    };
    let rows_shape = st.rot.sin.abs() < ROWS_MAX_SIN;
    let (pitch, max_rows) = if rows_shape {
        (ROTATE_STAGED_ROW_PITCH, ROTATE_STAGED_ROW_ROWS)
    } else {
        (ROTATE_STAGED_PITCH, ROTATE_STAGED_ROWS)
    };
    let (pitch, rows) = (pitch as usize, st.rows.min(max_rows));
    // Offset of a window row from the one above.
    let row_win = pitch * px_win;
    let plane = p.height * p.width;
    let image =
        p.x.as_ptr()
            .wrapping_add(n as usize * p.channels as usize * plane as usize);
    // Half a warp per window row, the 16-byte chunks (4 pixels) the row is read in. NCHW: a
    // chunk per thread, from each channel's plane. NHWC: a chunk's pixels with their channels
    // are `G` consecutive 16-byte pieces of the input row, and consecutive threads take
    // consecutive pieces, so that each copy instruction reads consecutive bytes.
    let (half, q) = (tx / 16, tx % 16);
    let stage = shared_addr(window);
    if NHWC_IN {
        let mut r = 2 * ty + half;
        while r < rows {
            let row_in = (st.r0 as u32 + r) * p.width + st.c0 as u32;
            let to = (r as usize * row_win) as u32;
            let mut k = q;
            while k < st.chunks * G as u32 {
                let first = (st.c0 + 4 * (k / G as u32) as i32) as f32;
                if spans.touches(st.r0 + r as i32, first, first + 3.0) {
                    // SAFETY: piece `k` of the window row's chunks, inside the image
                    // (`Staged::new`) and 16-byte aligned (the width and the window's first
                    // column are multiples of 4), into the window as it lies, written by this
                    // thread alone and read after the barrier below.
                    unsafe {
                        copy_async16(
                            stage + 4 * (to + 4 * k),
                            image.add((row_in * G as u32 + 4 * k) as usize),
                            16,
                        )
                    };
                }
                k += 16;
            }
            r += 2 * IMAGE_BLOCK_Y;
        }
    } else if q < st.chunks {
        let first = (st.c0 + 4 * q as i32) as f32;
        let mut r = 2 * ty + half;
        while r < rows {
            if spans.touches(st.r0 + r as i32, first, first + 3.0) {
                let from = (st.r0 as u32 + r) * p.width + st.c0 as u32 + 4 * q;
                let to = (r as usize * row_win) as u32 + 4 * q;
                for c in 0..G as u32 {
                    // SAFETY: `r < rows` and `q < chunks` lie inside the image (`Staged::new`),
                    // 16-byte aligned since the plane and the width are; the destination lies
                    // inside channel `c`'s window, written by this thread alone and read after
                    // the barrier below.
                    unsafe {
                        copy_async16(
                            stage + 4 * (c * ch_win as u32 + to),
                            image.add((c * plane + from) as usize),
                            16,
                        )
                    };
                }
            }
            r += 2 * IMAGE_BLOCK_Y;
        }
    }
    // SAFETY: the kernels are built for sm_80 and newer; every thread reaches the barrier.
    unsafe {
        copy_wait();
        sync_block();
    }
    // The rotation and the window's origin read again rather than kept in registers through
    // the copy (where they would raise the register count past the launch bound's 40).
    // SAFETY: written before the first barrier, never written since.
    let st = unsafe { addr_of!((*setup).window).read() };
    let out =
        p.y.as_mut_ptr()
            .wrapping_add(n as usize * p.channels as usize * plane as usize);
    let last_row = max_rows as i32 - 1;
    let last_col = pitch as i32 - 2;
    let so = Strides::of(NHWC_OUT, G as u32, plane);
    for k in 0..4u32 {
        let (ti, tj) = if rows_shape {
            (ty + IMAGE_BLOCK_Y * k, tx)
        } else {
            let patch = ty + IMAGE_BLOCK_Y * k;
            ((patch / 4) * 4 + tx / 8, (patch % 4) * 8 + tx % 8)
        };
        let (i, j) = (i0 + ti as i32, j0 + tj as i32);
        if i >= h || j >= w {
            continue;
        }
        let (sy, sx) = st.rot.source(i, j);
        let dst = (i * w + j) as u32;
        // SAFETY: the pixel is in the image, `c < channels`.
        let store = |c: u32, v: f32| unsafe { stg_at(out, c * so.ch + dst * so.px, v) };
        let bl = Bilinear::new(sy, sx, h, w);
        let mask = if FILL { bl.mask() } else { 0.0 };
        // The north-west neighbour's offset from the window's first pixel, clamped to one row
        // above and one column left of the window at least: a no-op for every neighbour inside
        // the image (`Staged::new`), and what keeps every read inside shared memory (the margin,
        // the extra row) whatever the parameters hold.
        let at = bl.y0.wrapping_sub(st.r0).max(-1).min(last_row) as isize * row_win as isize
            + bl.x0.wrapping_sub(st.c0).max(-1).min(last_col) as isize * px_win as isize;
        let nw = window.wrapping_offset(at);
        for_channel_groups::<G>(
            G as u32,
            |c| {
                let n = nw.wrapping_add(c as usize * ch_win);
                let mut v = 0.0f32;
                // SAFETY: the four offsets lie in the margin or channel `c`'s buffer (`at`),
                // copied before the barrier wherever a neighbour inside the image is read.
                unsafe {
                    if bl.inside[0] {
                        v = fmaf(*n, bl.w[0], v);
                    }
                    if bl.inside[1] {
                        v = fmaf(*n.add(px_win), bl.w[1], v);
                    }
                    if bl.inside[2] {
                        v = fmaf(*n.add(row_win), bl.w[2], v);
                    }
                    if bl.inside[3] {
                        v = fmaf(*n.add(row_win + px_win), bl.w[3], v);
                    }
                }
                if FILL {
                    (v - p.fill) * mask + p.fill
                } else {
                    v
                }
            },
            store,
        );
    }
}

kernel! {
    #[declared(ROTATE_BILINEAR_STAGED)]
    /// [`rotate_bilinear`] with each tile's input window staged in shared memory (see
    /// [`staged`]).
    ///
    /// # Safety
    /// As for [`staged`].
    pub unsafe fn rotate_bilinear_staged(p: RotateParams) {
        // SAFETY: forwarded.
        unsafe { staged_layouts::<false, false>(&p) }
    }
}

kernel! {
    #[declared(ROTATE_BILINEAR_STAGED_RELAYOUT)]
    /// [`rotate_bilinear_staged`] in the layouts `p.layout` names (NHWC on at least one side).
    ///
    /// # Safety
    /// As for [`staged`] in those layouts.
    pub unsafe fn rotate_bilinear_staged_relayout(p: RotateParams) {
        // SAFETY: forwarded.
        unsafe { with_layouts!(p, staged_layouts(&p)) }
    }
}

/// [`staged`] for the launch's fill and channel count, in these layouts.
///
/// # Safety
/// As for [`staged`].
#[inline(always)]
unsafe fn staged_layouts<const I: bool, const O: bool>(p: &RotateParams) {
    // SAFETY: forwarded.
    unsafe {
        match (p.has_fill != 0, p.channels) {
            (true, 1) => staged::<true, 1, I, O>(p),
            (true, 2) => staged::<true, 2, I, O>(p),
            (true, 3) => staged::<true, 3, I, O>(p),
            (true, _) => staged::<true, 4, I, O>(p),
            (false, 1) => staged::<false, 1, I, O>(p),
            (false, 2) => staged::<false, 2, I, O>(p),
            (false, 3) => staged::<false, 3, I, O>(p),
            (false, _) => staged::<false, 4, I, O>(p),
        }
    }
}
