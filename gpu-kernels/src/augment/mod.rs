//! Seed 003's augmentation in one kernel: uint8 to float, ROI-align crop, bilinear resize up,
//! rotation, Gaussian blur and normalisation, with the intermediates never written to device
//! memory. The input is uint8 NCHW or NHWC, the output f32 NCHW or NHWC, read and written in
//! place (no separate permute).
//!
//! A block owns a strip of 32 x 32 output tiles of one image, one above the other (as many as
//! `AugmentParams::strip` says), every channel, and works down it a tile at a time. The blur
//! needs the rotated image over the tile and its halo (reflected at the border), and the
//! rotation of that haloed tile reads only a small window of the crop. The block works in
//! three steps per tile, each value computed once:
//!
//! 1. **Stage the crop window.** The window is bounded from the rotation's source points of
//!    the haloed tile's corners, widened by the resize's taps. Each crop pixel of it is one
//!    `roi_align` bin of the uint8 input, every channel at once, stored as one 16-byte (or
//!    smaller) slot. When each bin is one bilinear sample (a random crop), the block first
//!    stages the input window the crop reads (a pixel's channels packed in 4 bytes) and
//!    computes the crop from it through per-row and per-column crop-tap tables; otherwise it
//!    reads each bin's samples from device memory. Beside the window go two small tables with
//!    the resize's taps of every resized row and column it spans.
//! 2. **Rotate.** Each pixel of the haloed tile takes its source point (from per-row and
//!    per-column terms tabulated once), one tap table entry per axis and four slot reads from
//!    the window: the resized value of every channel. A bilinear rotation's four neighbours
//!    (two resized rows by two resized columns) share crop rows and columns, and read nine
//!    slots for all four.
//! 3. **Blur and normalise.** A horizontal pass over the rotated tile into the scratch region
//!    (where the window was), a vertical pass, then `(blurred - mean) / std` stored straight to
//!    the output. Kernels of up to 7 taps run as 7 taps with their weights in registers.
//!
//! **The dyadic kernels** (`augment_dyadic_*`, nearest rotation, up to 7 taps) take the place of
//! steps 1 and 2's crop window where the host finds every crop box whole-pixel, of the crop's
//! size and enlarged exactly twofold (`augment_dyadic` in the ABI): then a resized value is a
//! sum of at most 3 x 3 input bytes with weights in 64ths. The block stages the input window
//! itself (per row and every second column, every channel's word of that column's byte and the
//! next three's, so that one word holds any three consecutive columns) with tables of the crop
//! and resize taps composed in closed form (`augment_dyadic_taps` in the ABI, checked there
//! against both sampling rules), and each rotated pixel sums its nine bytes per channel in
//! integers with one `dp4a` per row, exactly, and keeps the sum (two channels to a word in
//! 16-bit halves, which halves the rotated tile's shared-memory traffic): the store's
//! normalisation factor takes the `scale / 64`, a power of two for the default scale of 1 that
//! leaves every blurred value's bits as the f32 crop and resize give them (every intermediate
//! is exact there), one rounding apart otherwise. A column's tap entry is 8 bytes (its offset
//! and its weights), a row's 16. The rotation rounds its source point with the adder
//! rather than a conversion (`Rotation::finish_nearest`), and an outside pixel reads with no
//! weight instead of branching. No crop window, no crop pass and its barrier. A dyadic strip
//! also keeps the tile before's last `2 r` horizontally blurred rows (copied to the top) rather
//! than its rotated ones, so that a later tile rotates and blurs only its 32 new rows; and it
//! stages the next tile's window in a region of its own while the tile is blurred, three
//! barriers a tile instead of four. With three channels it keeps the horizontally blurred rows
//! as one f32 plane per channel rather than 16-byte slots with a word of padding.
//!
//! **Ragged batches** (`AugmentParams::extents`): each image has its own size and place in
//! the input, read where a block's crop stage is set up; the rest of the kernel works in the
//! crop's and the output's coordinates, which every image shares.
//!
//! The haloed tiles of a tile and the next one below share the blur's `2 r` halo rows: the
//! next tile keeps them and rotates only its 32 new ones. The rotated tile is either a ring of
//! rows or, in the nearest 7-tap strips of 1, 2 and 4 channels, a plain tile whose last `2 r`
//! rows are copied to its top for the next tile (see the kernel table at the end); the dyadic
//! strips copy their last `2 r` horizontally blurred rows instead. The block's
//! setup (the image's rotation, crop box, weights and statistics, the columns' rotation terms)
//! serves the whole strip.
//!
//! The window has room for [`AUGMENT_CROP_BUDGET`] pixels. When the window of the whole haloed
//! tile is larger (large blur kernels, crops hardly enlarged), the block goes through the haloed
//! tile in parts of 16 x 16 pixels, each with its own window, which always fits while the resize
//! enlarges (see [`PART`]). The resize and rotation use the f32 operations of the separate
//! kernels, and so does the crop read from device memory; the crop from the staged input blends
//! the bytes and scales the result (exact for the default scale of 1, one rounding apart
//! otherwise), and the blur and normalisation use fused multiply-adds (within the written
//! bounds).

// The order of the functions' symbol names shapes the kernels' code: rustc emits functions in
// that order and LLVM inlines the `#[inline(always)]` ones in it, which decides where each
// one's locals land in a kernel and so the PTX generated. A module's name and an `impl`
// block's position among its module's `impl`s are part of those names; the files' names, the
// order of their `impl` blocks and `augment_block`'s place in this file keep that order.
mod blur;
mod crop;
mod divisors;
mod dyadic;
mod rotation;
mod staging;
mod taps;
mod tile;

use crate::sampling::{gauss, Roi, Rotation};
use blur::{planes, FAST_TAPS, PLANE_PITCH};
use core::intrinsics::fmaf32 as fmaf;
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;
use crop::Crop;
use divisors::SmallDiv;
use dyadic::copy_blurred_halo;
use streamline_abi::image::{
    augment_pitch, augment_radius, augment_scratch_px, augment_side, augment_taps_len,
    AugmentParams, AUGMENT_CROP_TAPS, AUGMENT_HBUF_PITCH, AUGMENT_ONE_TILE_WARPS,
    AUGMENT_SETUP_BYTES, IMAGE_BLOCK_X, IMAGE_BLOCK_Y, MAX_KERNEL_SIZE, ROI_MAX_SAMPLES_PER_BIN,
    TILE,
};
use streamline_abi::image::{
    AUGMENT_BILINEAR_C1, AUGMENT_BILINEAR_C2, AUGMENT_BILINEAR_C3, AUGMENT_BILINEAR_C4,
    AUGMENT_BILINEAR_STRIP_C1, AUGMENT_BILINEAR_STRIP_C2, AUGMENT_BILINEAR_STRIP_C3,
    AUGMENT_BILINEAR_STRIP_C4, AUGMENT_C1, AUGMENT_C2, AUGMENT_C3, AUGMENT_C4, AUGMENT_DYADIC_C1,
    AUGMENT_DYADIC_C2, AUGMENT_DYADIC_C3, AUGMENT_DYADIC_C4, AUGMENT_DYADIC_STRIP_C1,
    AUGMENT_DYADIC_STRIP_C2, AUGMENT_DYADIC_STRIP_C3, AUGMENT_DYADIC_STRIP_C4, AUGMENT_STRIP_C1,
    AUGMENT_STRIP_C2, AUGMENT_STRIP_C3, AUGMENT_STRIP_C4, AUGMENT_WIDE_C1, AUGMENT_WIDE_C2,
    AUGMENT_WIDE_C3, AUGMENT_WIDE_C4,
};
use streamline_abi::image::{
    AUGMENT_RAGGED_BILINEAR_C1, AUGMENT_RAGGED_BILINEAR_C2, AUGMENT_RAGGED_BILINEAR_C3,
    AUGMENT_RAGGED_BILINEAR_C4, AUGMENT_RAGGED_C1, AUGMENT_RAGGED_C2, AUGMENT_RAGGED_C3,
    AUGMENT_RAGGED_C4, AUGMENT_RAGGED_WIDE_C1, AUGMENT_RAGGED_WIDE_C2, AUGMENT_RAGGED_WIDE_C3,
    AUGMENT_RAGGED_WIDE_C4,
};
use streamline_device::kernel;
use streamline_device::mem::shared_addr;
use streamline_device::thread::{block_x, sync_block, sync_block_or, thread_xy, thread_xy_fresh};
use taps::{Axis, CropTap};
use tile::{Px, Px1, Px2, Px4, Setup, Shared, Slot, Tile, Weights};

/// Warps of a block: eight in the strip kernels, [`AUGMENT_ONE_TILE_WARPS`] in the one-tile ones
/// (`STRIP` false), which then have 72 registers a thread at four blocks per SM.
const fn warps(strip: bool) -> u32 {
    if strip {
        IMAGE_BLOCK_Y
    } else {
        AUGMENT_ONE_TILE_WARPS
    }
}

/// Threads of a block (see [`warps`]).
const fn threads(strip: bool) -> u32 {
    IMAGE_BLOCK_X * warps(strip)
}

/// Output rows of a tile per warp in the vertical pass: the strips' eight warps share them
/// evenly, the one-tile kernels' seven take five each (the last warp two).
const STRIP_ROWS: usize = (TILE / IMAGE_BLOCK_Y) as usize;
const ONE_TILE_ROWS: usize = TILE.div_ceil(AUGMENT_ONE_TILE_WARPS) as usize;
const _: () = assert!(STRIP_ROWS * IMAGE_BLOCK_Y as usize == TILE as usize);
const _: () = assert!(ONE_TILE_ROWS * AUGMENT_ONE_TILE_WARPS as usize >= TILE as usize);
// The block's setup takes threads up to 160 + channels (at most 4): every block has them.
const _: () = assert!(160 + 4 <= threads(false) && threads(false) <= threads(true));

/// Side of the parts of the haloed tile when its whole window does not fit. A part spans at
/// most 15 pixels along each axis, also after reflection at the image border, so its source
/// points span at most `15 sqrt(2)` resized pixels whatever the angle; the window's resized rows
/// `zi0 ..= zi1` then have `zi1 - zi0 < 15 sqrt(2) + 4`, and with a scale `crop / out <= 1`
/// the crop rows number fewer than `15 sqrt(2) + 7 < 29`: `28 * 28 <= AUGMENT_CROP_BUDGET`.
const PART: u32 = 16;

/// This thread's index in the block.
#[inline(always)]
fn lane() -> u32 {
    lane_for(false)
}

/// This thread's index in the block, read afresh where `fresh` ([`thread_xy_fresh`]): what
/// derives from it is then recomputed where it is used instead of held in a register (or
/// spilled) across the block's steps. The one-tile kernels' steps read it afresh (they then
/// spill less); the strip kernels' only in the blur and the store (afresh in every step, they
/// spilled more).
#[inline(always)]
fn lane_for(fresh: bool) -> u32 {
    let (tx, ty) = if fresh {
        thread_xy_fresh()
    } else {
        thread_xy()
    };
    ty * IMAGE_BLOCK_X + tx
}

/// Which rotations a kernel instance computes: one of them only (the other's code left out), or
/// either as `AugmentParams::nearest` says.
const NEAREST: u8 = 0;
const BILINEAR: u8 = 1;
const EITHER: u8 = 2;
/// Nearest rotation with the crop and resize composed in integers (`augment_dyadic_*`): for a
/// whole-pixel crop box of the crop's size enlarged exactly twofold, where every weight of both
/// is a multiple of an eighth along each axis and the resized values are exact.
const DYADIC: u8 = 3;

/// One block's work for `C` channels held in slots `T`, with the fast blur path (7 taps,
/// weights in registers) or not, over a strip of `p.strip` tiles (`STRIP`) or one tile, for
/// the rotations `ROT` says, the halo rows kept in a ring or copied up (`COPY`, fast path
/// only).
///
/// # Safety
/// The kernels' contract, with `channels == C`; `FAST` exactly when `ksize <= 7`; `p.strip`
/// is 1 unless `STRIP`.
#[inline(always)]
unsafe fn augment_block<
    const C: usize,
    T: Px,
    const FAST: bool,
    const STRIP: bool,
    const ROT: u8,
    const COPY: bool,
    const RAGGED: bool,
>(
    p: &AugmentParams,
) {
    // Copying the halo rows up needs them apart from their destination: the fast path's. The
    // dyadic strips copy their blurred halo rows up and address the rotated rows directly.
    const { assert!(!COPY || FAST) };
    const { assert!(ROT != DYADIC || !STRIP || COPY) };
    // The block's image and strip, by divisions the host prepared.
    let (n, t) = p.tiles.divmod(block_x());
    let (sy, tx) = p.tiles_x.divmod(t);
    // One tile per block is an instance of its own, so that it keeps the registers of a
    // kernel without the strip's loop.
    let strip = if STRIP { p.strip.max(1) } else { 1 };
    let (y0, x0) = (sy * strip * TILE, tx * TILE);
    // The whole block takes the same branch: `n` depends on the block only.
    if n >= p.batch {
        return;
    }
    // The strip's tiles inside the image (the last strip of a column may hold fewer; a block
    // of one tile lies inside by the grid).
    let tiles = if STRIP {
        strip.min(p.out_h.saturating_sub(y0).div_ceil(TILE))
    } else {
        1
    };
    let nu = n as usize;
    let (oh, ow) = (p.out_h as i32, p.out_w as i32);
    let k = p.ksize;
    // The fast kernels' geometry is that of 7 taps whatever `ksize` (at most 7) is, known when
    // they are built.
    let kg = if FAST { FAST_TAPS as u32 } else { k };
    let r = augment_radius(kg) as i32;
    let side = augment_side(kg);
    let (y0, x0) = (y0 as i32, x0 as i32);
    let mut tile = Tile::<STRIP, COPY> {
        top: y0 - r,
        left: x0 - r,
        side,
        pitch: augment_pitch(kg),
        ring: 0,
        oh,
        ow,
        nearest: match ROT {
            NEAREST | DYADIC => true,
            BILINEAR => false,
            _ => p.nearest != 0,
        },
        sh: p.scale_y,
        sw: p.scale_x,
        crop_h: p.crop_h,
        crop_w: p.crop_w,
        taps_len: augment_taps_len(kg),
        budget: augment_scratch_px(kg),
    };

    // Shared memory as `augment_shared_bytes` lays it out (the dyadic kernels without the
    // crop-tap tables).
    let taps = 2 * r as usize + 1;
    let crop_taps = if ROT == DYADIC {
        0
    } else {
        AUGMENT_CROP_TAPS as usize
    };
    let smem = gpu_launch_sized_workgroup_mem::<f32>();
    let wts = smem.wrapping_add(AUGMENT_SETUP_BYTES as usize / 4);
    let table = wts.wrapping_add(taps.next_multiple_of(4));
    let table = table as *mut [f32; 2];
    let taps_y = table.wrapping_add(2 * side as usize) as *mut Axis;
    let taps_x = taps_y.wrapping_add(tile.taps_len as usize);
    let ctap_y = taps_x.wrapping_add(tile.taps_len as usize) as *mut CropTap;
    let ctap_x = ctap_y.wrapping_add(crop_taps);
    let rotated = ctap_x.wrapping_add(crop_taps) as *mut T;
    let scratch = rotated.wrapping_add((side * tile.pitch) as usize);
    let input = scratch.wrapping_add(tile.budget as usize) as *mut u32;
    let s = Shared {
        setup: smem as *mut Setup,
        wts,
        table,
        taps_y,
        taps_x,
        taps_at: (
            shared_addr(taps_y as *const f32),
            shared_addr(taps_x as *const f32),
        ),
        ctap_y,
        ctap_x,
        rotated,
        scratch,
        scratch_at: shared_addr(scratch as *const f32),
        input,
    };

    // Setup: one thread finds the rotation and the window of the whole haloed tile, one the
    // crop box's sampling rule (on the dyadic path the first, which also lays out the
    // window's staging), one per channel the normalisation, and threads 32 .. 32 + taps
    // (at most 63 of them, so none of the others) write the weights (the kernel's `ksize` taps
    // centred in `taps`, zero beyond them).
    let lin = lane();
    // Each part of the setup record comes from another warp, so that they run side by side
    // (on the dyadic path the first thread also takes the box and the staging's layout, which
    // need its window).
    const _: () = assert!(32 + 2 * MAX_KERNEL_SIZE as usize / 2 + 1 <= 128);
    // SAFETY (all four branches): `n < batch`, so `p.angles`, `p.boxes` and `p.sigmas` hold
    // image `n`'s values, `p.stats` holds `2 * channels` f32; the setup record lies at the
    // start of the shared memory (`Setup` fits `AUGMENT_SETUP_BYTES`) and the weights after
    // it, each field written by one thread and read after the barrier below.
    let roi = || {
        let bx = unsafe {
            let bp = p.boxes.as_ptr().add(4 * nu);
            [
                bp.read(),
                bp.add(1).read(),
                bp.add(2).read(),
                bp.add(3).read(),
            ]
        };
        Roi::new(
            bx,
            1.0,
            false,
            -1,
            p.crop_h,
            p.crop_w,
            ROI_MAX_SAMPLES_PER_BIN,
        )
    };
    if lin == 0 {
        let angle = unsafe { p.angles.as_ptr().add(nu).read() };
        let rot = Rotation::new(angle, p.out_h, p.out_w);
        let whole = tile.window(&rot, (0, side - 1), (0, side - 1));
        unsafe {
            (*s.setup).rot = rot;
            (*s.setup).whole = whole;
        }
        // The dyadic path's staging needs the box too: this thread works it out for the whole
        // block, so that no warp repeats it.
        if ROT == DYADIC {
            let roi = roi();
            let layout =
                tile.dyadic_layout::<T>(&Crop::new::<RAGGED>(s.setup, p, nu, roi), &whole, false);
            unsafe {
                (*s.setup).roi = roi;
                (*s.setup).layout = layout;
            }
        }
    } else if lin == 128 && ROT != DYADIC {
        unsafe { (*s.setup).roi = roi() };
        if RAGGED {
            // SAFETY: as above; `n < batch`, whose extent `p.extents` holds.
            unsafe { (*s.setup).image = Crop::ragged(p, nu) };
        }
    } else if lin >= 160 && lin < 160 + C as u32 {
        let c = lin as usize - 160;
        let stats = p.stats.as_ptr();
        unsafe {
            (*s.setup).mean[c] = stats.add(c).read();
            (*s.setup).inv_std[c] = 1.0 / stats.add(C + c).read();
        }
        // A ragged batch's image whose extent does not fit comes out NaN, its fill included.
        if RAGGED && !Crop::fits(p, nu) {
            unsafe { (*s.setup).inv_std[c] = f32::NAN };
        }
    } else if lin >= 32 && lin < 32 + taps as u32 {
        let w = lin as usize - 32;
        let off = (taps - k as usize) / 2;
        let sigma = unsafe { p.sigmas.as_ptr().add(nu).read() };
        let v = if w >= off && w < off + k as usize {
            gauss((w - off) as u32, k / 2, sigma)
        } else {
            0.0
        };
        // `w < taps`: inside the weights.
        unsafe { *s.wts.add(w) = v };
    }
    // SAFETY: every thread of the block reaches this barrier; it publishes the setup record and
    // the weights.
    unsafe { sync_block() };
    // The setup record is read where each value is needed (after the barrier above publishes
    // it), so that none of it occupies registers across the steps.
    // SAFETY: written before the barrier above; nothing writes it again.
    let setup = s.setup;
    let rot = move || unsafe { (*setup).rot };
    // SAFETY: as above; the table is `2 * side` pairs, read after the barriers that follow the
    // staging. The columns' terms serve every tile of the strip.
    unsafe { tile.tabulate::<true>(&rot(), s.table) };
    if ROT == DYADIC {
        // The first tile's window, staged in the scratch region: steps 1 and 2 in one part,
        // the tile's window fitting, the crop being enlarged twofold (outside that contract,
        // `dyadic_layout` stages one row of two entries and every access stays in bounds).
        // SAFETY: the setup record was published by the barrier above; `layout` is the
        // window's (worked out with it), and the region and the tables are read only after the
        // barrier that starts the tile's rotation.
        unsafe {
            let (win, layout, roi) = ((*s.setup).whole, (*s.setup).layout, (*s.setup).roi);
            tile.stage_dyadic::<C, T>(
                &Crop::new::<RAGGED>(s.setup, p, nu, roi),
                &win,
                layout,
                false,
                &s,
            );
        }
    }

    // The strip's tiles one after the other. The first rotates its whole haloed tile; each
    // later one only its `TILE` new rows, the rows above being the previous tile's last ones,
    // kept in the ring or copied up (`COPY`). The dyadic strips keep the previous tile's last
    // blurred rows instead (see below), and stage each later tile's window while the tile
    // before is blurred.
    let mut band = 0;
    while band < tiles {
        let first = if band == 0 { 0 } else { side - TILE };
        let rows = side - first;
        if ROT == DYADIC {
            // SAFETY: every thread of the block reaches this barrier; it publishes the tile's
            // staged window and its tables (staged before the loop, or at the end of the tile
            // before), and orders the vertical pass of the tile before ahead of the copy below.
            unsafe { sync_block() };
            if STRIP && band > 0 {
                // SAFETY: the tile before's horizontally blurred rows are complete and its
                // vertical pass done (the barrier above); this tile's horizontal pass writes
                // only rows below the copied ones, after the barrier that ends its rotation.
                unsafe { copy_blurred_halo::<C, T>(s.scratch, side as usize) };
            }
            // SAFETY: written before the barrier above (by the setup, or during the tile
            // before's horizontal pass), and not again before the barrier after the rotation.
            let (win, layout) = unsafe { ((*s.setup).whole, (*s.setup).layout) };
            // SAFETY: the tile's new rows lie inside the haloed tile; the buffers are
            // published above. With `COPY` (every dyadic strip) the rows are addressed
            // directly: the rows above the new ones are not read again.
            unsafe {
                tile.rotate_dyadic::<C, T>(
                    &rot(),
                    &win,
                    &s,
                    ((first, 0), (rows, side)),
                    (layout, band > 0),
                )
            };
        } else {
            // Steps 1 and 2: the tile's new rotated rows, in one part when their window fits, else
            // in parts of PART x PART. Every value here is the same in every thread, so the
            // branches, loops and barriers are uniform.
            // SAFETY: written before a barrier above (the setup's, or the previous tile's after
            // its rotation), and not again before the next tile's.
            let whole = unsafe { (*s.setup).whole };
            let (part_h, part_w, parts_y, parts_x) = if whole.fits(tile.budget) {
                (rows, side, 1, 1)
            } else {
                (PART, PART, rows.div_ceil(PART), side.div_ceil(PART))
            };
            let mut bi = 0;
            while bi < parts_y {
                let mut bj = 0;
                while bj < parts_x {
                    let (i0, j0) = (first + bi * part_h, bj * part_w);
                    let (h, w) = (part_h.min(side - i0), part_w.min(side - j0));
                    let win = if parts_y * parts_x == 1 {
                        whole
                    } else {
                        tile.window(&rot(), (i0, i0 + h - 1), (j0, j0 + w - 1))
                            .capped(tile.budget)
                    };
                    // SAFETY: as above.
                    let crop = Crop::new::<RAGGED>(s.setup, p, nu, unsafe { (*s.setup).roi });
                    let staged = crop.input_window(&win);
                    // The previous part's reads of the window and its tables, and the previous
                    // tile's vertical pass over the scratch region, must be done before they are
                    // overwritten. Staging from the input writes the scratch region only after the
                    // barrier that follows it, which every thread reaches after that pass.
                    if bi + bj > 0 || (band > 0 && staged.is_none()) {
                        // SAFETY: every thread of the block reaches this barrier (uniform
                        // condition).
                        unsafe { sync_block() };
                    }
                    // SAFETY: the window fits (`capped`), `staged` is its input window.
                    let broken = unsafe { tile.stage::<C, T>(&crop, win, staged, &s) };
                    // SAFETY: every thread of the block reaches this barrier; it publishes what
                    // `stage` wrote (and the rotation's table), and whether any tap entry breaks
                    // the step rule.
                    let quads = !unsafe { sync_block_or(broken) };
                    if staged.is_some() {
                        // SAFETY: staged with its input window above; the barrier after it
                        // publishes the crop window.
                        unsafe {
                            tile.crop_from_input::<C, T>(&crop, &win, &s);
                            sync_block();
                        }
                    }
                    // SAFETY: the part lies inside the haloed tile; the buffers are published
                    // above.
                    unsafe { tile.rotate::<C, T>(&rot(), &win, &s, (i0, j0), (h, w), quads) };
                    bj += 1;
                }
                bi += 1;
            }
        }
        // SAFETY: every thread of the block reaches this barrier: the rotated tile is complete
        // and the window's last reads are done before the horizontal pass overwrites it, and
        // the rows' terms and the window are read for the last time before the next tile's
        // replace them below.
        unsafe { sync_block() };
        let next = tile.below();
        if band + 1 < tiles {
            // SAFETY: the table's rows are read again only after the barrier below; the
            // window is written by one thread and read after that barrier.
            unsafe {
                next.tabulate::<false>(&rot(), s.table);
                if lane() == threads(STRIP) - 1 {
                    let whole = next.window(&rot(), (side - TILE, side - 1), (0, side - 1));
                    (*s.setup).whole = whole;
                    if ROT == DYADIC {
                        let crop = Crop::new::<RAGGED>(s.setup, p, nu, (*s.setup).roi);
                        (*s.setup).layout = next.dyadic_layout::<T>(&crop, &whole, true);
                    }
                }
            }
        }

        // Step 3: blur and normalise. The weights are read again for every tile, after its
        // rotation, so that they occupy no registers across the other steps (kept across a
        // strip, they made the kernel spill more).
        // SAFETY: the weights were written before the setup's barrier and not since.
        let wts = unsafe { Weights::<FAST>::new(s.wts, taps) };
        // The dyadic path's rotated values are in 64ths of the input's units, scaled here once
        // instead of for each rotated pixel: by a power of two for the default scale of 1, so
        // that every blurred and normalised value keeps its bits; one rounding apart otherwise.
        let norm = if ROT == DYADIC {
            wts.norm() * (p.scale * (1.0 / 64.0))
        } else {
            wts.norm()
        };
        // The thread's indices read afresh for each tile: what the blur and the store derive
        // from them is recomputed here instead of held (and spilled) across the strip's steps.
        let (tx, ty) = thread_xy_fresh();
        let (tx, ty) = (tx as usize, ty as usize);
        let (hp, side, pitch) = (
            AUGMENT_HBUF_PITCH as usize,
            side as usize,
            tile.pitch as usize,
        );
        let at_row = |row: usize| tile.slot(row as u32) as usize * pitch;
        // Rows: scratch[row][c] = sum_t w[t] * rotated[row][c + t].
        if FAST {
            // Each thread blurs `SEG` consecutive pixels of a row, reading each rotated pixel
            // once into every sum it reaches; consecutive threads take consecutive rows (odd
            // pitches: distinct banks).
            const SEG: usize = 8;
            // The dyadic strips' later tiles blur only their new rows (see
            // `copy_blurred_halo`).
            let hfirst = if ROT == DYADIC { first as usize } else { 0 };
            let items = ((side - hfirst) * (TILE as usize / SEG)) as u32;
            let by_side = SmallDiv::new((side - hfirst) as u32);
            let mut it = lane_for(true);
            while it < items {
                let (seg, row) = by_side.divmod(it);
                let (row, seg) = (hfirst + row as usize, seg as usize);
                let src = at_row(row) + seg * SEG;
                let mut acc = [[0.0f32; C]; SEG];
                for u in 0..SEG + FAST_TAPS - 1 {
                    // SAFETY: `row < side`, `SEG seg + u < TILE + 2 r = side <= pitch`; the
                    // dyadic path's rotated tile holds `T::Sums` (`rotate_dyadic`).
                    let v: [f32; C] = unsafe {
                        if ROT == DYADIC {
                            let v = *(s.rotated as *const T::Sums).add(src + u);
                            core::array::from_fn(|c| v.get(c))
                        } else {
                            let v = *s.rotated.add(src + u);
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
                if planes(ROT, C) {
                    // Each channel's `SEG` values in 16-byte stores.
                    let f = s.scratch as *mut [f32; 4];
                    for c in 0..C {
                        for h in 0..SEG / 4 {
                            let at = ((c * side + row) * PLANE_PITCH + seg * SEG) / 4 + h;
                            // SAFETY: `row < side`, `SEG seg + 4 h + 3 < TILE <= PLANE_PITCH`,
                            // `c < 3`: inside the scratch region (`3 side PLANE_PITCH` f32 fit
                            // its `side * AUGMENT_HBUF_PITCH` slots of 16 bytes), 16-byte
                            // aligned (`PLANE_PITCH` and `SEG` multiples of 4).
                            unsafe {
                                *f.add(at) = core::array::from_fn(|k| acc[4 * h + k][c]);
                            }
                        }
                    }
                } else {
                    for (i, a) in acc.iter().enumerate() {
                        let mut out = T::zero();
                        for (c, x) in a.iter().enumerate() {
                            out.set(c, *x);
                        }
                        // SAFETY: `row < side`, `SEG seg + i < TILE`: inside the scratch region
                        // (`side * AUGMENT_HBUF_PITCH` pixels).
                        unsafe { *s.scratch.add(row * hp + seg * SEG + i) = out };
                    }
                }
                it += threads(STRIP);
            }
        } else {
            let mut row = ty;
            while row < side {
                let src = at_row(row) + tx;
                // SAFETY: `row < side`, `tx + t < TILE + 2 r = side <= pitch`.
                let v = wts.dot::<C, T>(|t| unsafe { *s.rotated.add(src + t) });
                let mut out = T::zero();
                for (c, x) in v.iter().enumerate() {
                    out.set(c, *x);
                }
                // SAFETY: `row < side`, `tx < TILE`: inside the scratch region.
                unsafe { *s.scratch.add(row * hp + tx) = out };
                row += warps(STRIP) as usize;
            }
        }
        // SAFETY: every thread of the block reaches this barrier; it publishes the rows, and
        // the next tile's row terms and window.
        unsafe { sync_block() };
        if STRIP && COPY && ROT != DYADIC && band + 1 < tiles {
            // SAFETY: `COPY` only on the fast path (asserted above), whose halo is `2 r = 6 <=
            // TILE` rows; the barrier above orders the horizontal pass's reads of the rotated
            // tile before the copy, and the next tile rotates into it only after its staging's
            // barrier.
            unsafe { tile.copy_halo(s.rotated) };
        }

        if ROT == DYADIC && band + 1 < tiles {
            // The next tile's window, staged past the scratch region before this tile's
            // vertical pass (staged after it, the strip's 3-channel kernel spilled and lost).
            // SAFETY: the next tile's window and layout were published by the barrier after
            // the horizontal pass; this tile's rotation read the region and the tables for
            // the last time before that pass, and the next tile reads them after the barrier
            // that starts its rotation.
            unsafe {
                let (win, layout, roi) = ((*s.setup).whole, (*s.setup).layout, (*s.setup).roi);
                next.stage_dyadic::<C, T>(
                    &Crop::new::<RAGGED>(s.setup, p, nu, roi),
                    &win,
                    layout,
                    true,
                    &s,
                );
            }
        }
        // Columns, normalisation and the store: each warp takes consecutive output rows of the
        // tile (`STRIP_ROWS` or `ONE_TILE_ROWS`).
        let at = (tx, ty);
        // SAFETY: the blurred rows and the setup record were published by the barriers above.
        unsafe {
            if STRIP {
                tile.vblur_store::<C, T, FAST, STRIP_ROWS, ROT>(p, &wts, norm, &s, nu, at, x0);
            } else {
                tile.vblur_store::<C, T, FAST, ONE_TILE_ROWS, ROT>(p, &wts, norm, &s, nu, at, x0);
            }
        }
        tile = next;
        band += 1;
    }
}

/// The kernel entries, one per channel count and blur path, and for the 7-tap path per
/// rotation (nearest with the crop window, nearest dyadic, bilinear): each is
/// [`augment_block`] for its instance, so that each gets registers for its own needs. The last
/// column says whether the instance copies its halo rows up (`COPY`): the nearest strips of 1,
/// 2 and 4 channels, which it made faster; 3 channels keep the ring (the copy made the crop
/// window's strip no faster), as do the bilinear strips (untimed with it; it raised the
/// 3-channel one's spills). Every dyadic strip copies its horizontally blurred halo rows up
/// instead of its rotated ones ([`copy_blurred_halo`]). The `augment_ragged_*` kernels are the
/// strip kernels (nearest, bilinear, wide) for ragged batches (the last column, `RAGGED`).
macro_rules! augment_kernels {
    ($($decl:ident $name:ident $c:literal $px:ident $fast:literal $strip:literal $rot:ident
        $copy:literal $ragged:literal;)*) => {$(
        kernel! {
            #[declared($decl)]
            /// # Safety
            /// `p.x` must address `batch * channels * height * width` bytes (or, with
            /// `p.extents` not null, `x_bytes` bytes and `p.extents` `EXTENT_WORDS * batch`
            /// u32), `p.y`
            /// `batch * channels * out_h * out_w` f32, `p.boxes` `4 * batch` f32, `p.angles`
            /// and `p.sigmas` `batch` f32, `p.stats` `2 * channels` f32; `channels` as the
            /// kernel's name says, `ksize` odd, at most 7 for the `augment_c*`,
            /// `augment_strip_c*`, `augment_dyadic_*` and `augment_bilinear_*` kernels and 9 to
            /// `MAX_KERNEL_SIZE` for the `augment_wide_c*` ones, `strip` 1 for the
            /// `augment_c*`, `augment_dyadic_c*` and `augment_bilinear_c*` ones and at least 1
            /// for the others, `nearest` 1 for the 7-tap kernels without `bilinear` in their
            /// name and 0 for those with it (either for the wide ones), the boxes and sizes of
            /// the `augment_dyadic_*` kernels accepted by `augment_dyadic`, `ksize / 2 <
            /// min(out_h, out_w)`, `crop_h <= out_h` and `crop_w <= out_w` (otherwise the result
            /// is wrong, though every access stays in bounds); `tiles` and `tiles_x` divide by
            /// `ceil(out_w / 32) * ceil(ceil(out_h / 32) / strip)` and `ceil(out_w / 32)`,
            /// `scale_y` and `scale_x` are `crop_h / out_h` and `crop_w / out_w`; grid
            /// `ceil(out_w / 32) * ceil(ceil(out_h / 32) / strip) * batch` blocks of 32 x 8
            /// threads (32 x 7 for the `augment_c*`, `augment_dyadic_c*` and
            /// `augment_bilinear_c*` kernels:
            /// `augment_block_dim` of the kernel) with `augment_shared_bytes(channels, ksize,
            /// dyadic)` bytes of dynamic shared memory (`dyadic` for the `augment_dyadic_*`
            /// kernels).
            pub unsafe fn $name(p: AugmentParams) {
                // SAFETY: forwarded.
                unsafe { augment_block::<$c, $px, $fast, $strip, $rot, $copy, $ragged>(&p) }
            }
        }
    )*};
}

augment_kernels! {
    AUGMENT_C1 augment_c1 1 Px1 true false NEAREST false false;
    AUGMENT_C2 augment_c2 2 Px2 true false NEAREST false false;
    AUGMENT_C3 augment_c3 3 Px4 true false NEAREST false false;
    AUGMENT_C4 augment_c4 4 Px4 true false NEAREST false false;
    AUGMENT_STRIP_C1 augment_strip_c1 1 Px1 true true NEAREST true false;
    AUGMENT_STRIP_C2 augment_strip_c2 2 Px2 true true NEAREST true false;
    AUGMENT_STRIP_C3 augment_strip_c3 3 Px4 true true NEAREST false false;
    AUGMENT_STRIP_C4 augment_strip_c4 4 Px4 true true NEAREST true false;
    AUGMENT_BILINEAR_C1 augment_bilinear_c1 1 Px1 true false BILINEAR false false;
    AUGMENT_BILINEAR_C2 augment_bilinear_c2 2 Px2 true false BILINEAR false false;
    AUGMENT_BILINEAR_C3 augment_bilinear_c3 3 Px4 true false BILINEAR false false;
    AUGMENT_BILINEAR_C4 augment_bilinear_c4 4 Px4 true false BILINEAR false false;
    AUGMENT_BILINEAR_STRIP_C1 augment_bilinear_strip_c1 1 Px1 true true BILINEAR false false;
    AUGMENT_BILINEAR_STRIP_C2 augment_bilinear_strip_c2 2 Px2 true true BILINEAR false false;
    AUGMENT_BILINEAR_STRIP_C3 augment_bilinear_strip_c3 3 Px4 true true BILINEAR false false;
    AUGMENT_BILINEAR_STRIP_C4 augment_bilinear_strip_c4 4 Px4 true true BILINEAR false false;
    AUGMENT_DYADIC_C1 augment_dyadic_c1 1 Px1 true false DYADIC false false;
    AUGMENT_DYADIC_C2 augment_dyadic_c2 2 Px2 true false DYADIC false false;
    AUGMENT_DYADIC_C3 augment_dyadic_c3 3 Px4 true false DYADIC false false;
    AUGMENT_DYADIC_C4 augment_dyadic_c4 4 Px4 true false DYADIC false false;
    AUGMENT_DYADIC_STRIP_C1 augment_dyadic_strip_c1 1 Px1 true true DYADIC true false;
    AUGMENT_DYADIC_STRIP_C2 augment_dyadic_strip_c2 2 Px2 true true DYADIC true false;
    AUGMENT_DYADIC_STRIP_C3 augment_dyadic_strip_c3 3 Px4 true true DYADIC true false;
    AUGMENT_DYADIC_STRIP_C4 augment_dyadic_strip_c4 4 Px4 true true DYADIC true false;
    AUGMENT_WIDE_C1 augment_wide_c1 1 Px1 false true EITHER false false;
    AUGMENT_WIDE_C2 augment_wide_c2 2 Px2 false true EITHER false false;
    AUGMENT_WIDE_C3 augment_wide_c3 3 Px4 false true EITHER false false;
    AUGMENT_WIDE_C4 augment_wide_c4 4 Px4 false true EITHER false false;
    AUGMENT_RAGGED_C1 augment_ragged_c1 1 Px1 true true NEAREST true true;
    AUGMENT_RAGGED_C2 augment_ragged_c2 2 Px2 true true NEAREST true true;
    AUGMENT_RAGGED_C3 augment_ragged_c3 3 Px4 true true NEAREST false true;
    AUGMENT_RAGGED_C4 augment_ragged_c4 4 Px4 true true NEAREST true true;
    AUGMENT_RAGGED_BILINEAR_C1 augment_ragged_bilinear_c1 1 Px1 true true BILINEAR false true;
    AUGMENT_RAGGED_BILINEAR_C2 augment_ragged_bilinear_c2 2 Px2 true true BILINEAR false true;
    AUGMENT_RAGGED_BILINEAR_C3 augment_ragged_bilinear_c3 3 Px4 true true BILINEAR false true;
    AUGMENT_RAGGED_BILINEAR_C4 augment_ragged_bilinear_c4 4 Px4 true true BILINEAR false true;
    AUGMENT_RAGGED_WIDE_C1 augment_ragged_wide_c1 1 Px1 false true EITHER false true;
    AUGMENT_RAGGED_WIDE_C2 augment_ragged_wide_c2 2 Px2 false true EITHER false true;
    AUGMENT_RAGGED_WIDE_C3 augment_ragged_wide_c3 3 Px4 false true EITHER false true;
    AUGMENT_RAGGED_WIDE_C4 augment_ragged_wide_c4 4 Px4 false true EITHER false true;
}
