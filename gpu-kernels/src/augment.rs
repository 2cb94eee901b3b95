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

use crate::gaussian_blur::sum;
use crate::sampling::{
    gauss, nearest_pixel, reflect, Bilinear, LinearTaps, Roi, RoiTap, Rotation, NEAREST_MAX_SIDE,
};
use core::intrinsics::fmaf32 as fmaf;
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;
use streamline_abi::image::{
    augment_dyadic_taps, augment_pitch, augment_radius, augment_scratch_px, augment_side,
    augment_taps_len, AugmentParams, AUGMENT_CROP_TAPS, AUGMENT_DYADIC_MAX_SIDE,
    AUGMENT_DYADIC_STAGE_BYTES, AUGMENT_FAST_RADIUS, AUGMENT_HBUF_PITCH, AUGMENT_INPUT_BUDGET,
    AUGMENT_NHWC_IN, AUGMENT_NHWC_OUT, AUGMENT_ONE_TILE_WARPS, AUGMENT_SETUP_BYTES, IMAGE_BLOCK_X,
    IMAGE_BLOCK_Y, MAX_KERNEL_SIZE, ROI_MAX_SAMPLES_PER_BIN, TILE,
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
use streamline_device::kernel;
use streamline_device::math::{dp4a, fast_div, floor_i32};
use streamline_device::mem::{ldg, ldg_u8, lds, lds2, lds4, shared_addr};
use streamline_device::thread::{block_x, sync_block, sync_block_or, thread_xy, thread_xy_fresh};

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

/// Row pitch, in f32, of the horizontally blurred rows held as one plane per channel (the
/// dyadic 3-channel kernels, [`planes`]): a multiple of 4 for 16-byte stores, an odd number of
/// 16-byte units so that consecutive rows fall in other banks.
const PLANE_PITCH: usize = 36;
const _: () = assert!(PLANE_PITCH >= TILE as usize && PLANE_PITCH % 8 == 4);

/// Whether a kernel instance keeps its horizontally blurred rows as one f32 plane per channel
/// instead of one padded slot per pixel: the dyadic kernels with three channels, whose slots
/// would move a fourth word for nothing through the busiest pipe (shared memory).
const fn planes(rot: u8, c: usize) -> bool {
    rot == DYADIC && c == 3
}

/// Taps of the fast path's blur (`2 AUGMENT_FAST_RADIUS + 1`).
const FAST_TAPS: usize = 2 * AUGMENT_FAST_RADIUS as usize + 1;

// The dyadic kernels round their source points with `Rotation::finish_nearest`.
const _: () = assert!(AUGMENT_DYADIC_MAX_SIDE <= NEAREST_MAX_SIDE);

// The fast kernels may copy their halo rows up ([`Tile::copy_halo`]): the rows copied must
// not overlap their destination.
const _: () = assert!(2 * AUGMENT_FAST_RADIUS <= TILE);

/// The channels of one pixel in shared memory, in a slot padded to a power of two so that one
/// shared access moves them all.
trait Px: Slot {
    /// The slot of the dyadic kernels' rotated tile for as many channels.
    type Sums: SumSlot;
    fn zero() -> Self;
    fn set(&mut self, c: usize, v: f32);
}

/// A pixel's channels as the horizontal pass reads them from the rotated tile.
trait Slot: Copy {
    fn get(&self, c: usize) -> f32;
}

macro_rules! px {
    ($name:ident, $lanes:literal, $align:literal, $sums:ident) => {
        #[repr(C, align($align))]
        #[derive(Clone, Copy)]
        struct $name([f32; $lanes]);
        impl Slot for $name {
            #[inline(always)]
            fn get(&self, c: usize) -> f32 {
                self.0[c]
            }
        }
        impl Px for $name {
            type Sums = $sums;
            #[inline(always)]
            fn zero() -> Self {
                $name([0.0; $lanes])
            }
            #[inline(always)]
            fn set(&mut self, c: usize, v: f32) {
                self.0[c] = v
            }
        }
    };
}
px!(Px1, 1, 4, Px1);
px!(Px2, 2, 8, Sums2);
px!(Px4, 4, 16, Sums4);

/// The dyadic kernels' rotated values (integers below `2^16`, in 64ths of the input's units)
/// of up to two channels, or of up to four, packed as 16-bit halves: half the shared-memory
/// traffic of f32 slots for the rotation's stores and the horizontal pass's reads. One channel
/// keeps its f32 slot (`Px1`), which is as small as a word.
#[repr(C, align(4))]
#[derive(Clone, Copy)]
struct Sums2(u32);
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Sums4([u32; 2]);

/// The channels' 16-bit half `c` of `w`, exactly as f32.
#[inline(always)]
fn half(w: u32, c: usize) -> f32 {
    (if c % 2 == 0 { w & 0xffff } else { w >> 16 }) as f32
}

impl Slot for Sums2 {
    #[inline(always)]
    fn get(&self, c: usize) -> f32 {
        half(self.0, c)
    }
}

impl Slot for Sums4 {
    #[inline(always)]
    fn get(&self, c: usize) -> f32 {
        half(self.0[c / 2], c)
    }
}

/// A slot of the dyadic path's rotated tile.
trait SumSlot: Slot {
    /// The slot of a rotated value from its channels' sums (each below `2^16`).
    fn from_sums<const C: usize>(acc: [u32; C]) -> Self;
}

impl SumSlot for Px1 {
    #[inline(always)]
    fn from_sums<const C: usize>(acc: [u32; C]) -> Self {
        Px1([acc[0] as f32])
    }
}

impl SumSlot for Sums2 {
    #[inline(always)]
    fn from_sums<const C: usize>(acc: [u32; C]) -> Self {
        let at = |c: usize| if c < C { acc[c] } else { 0 };
        Sums2(at(0) | at(1) << 16)
    }
}

impl SumSlot for Sums4 {
    #[inline(always)]
    fn from_sums<const C: usize>(acc: [u32; C]) -> Self {
        let at = |c: usize| if c < C { acc[c] } else { 0 };
        Sums4([at(0) | at(1) << 16, at(2) | at(3) << 16])
    }
}

/// One resize tap pair along an axis: offsets (in bytes) into the window, and weights. Row
/// entries hold row offsets (`row * cols` slots), column entries column offsets; a pixel's
/// offset is the sum of its row's and its column's, with no scaling left for the reads.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Axis {
    o0: u32,
    o1: u32,
    l0: f32,
    l1: f32,
}

/// The crop stage of one image: its uint8 pixels and the box's `roi_align` sampling rule.
#[derive(Clone, Copy)]
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

/// One crop-tap table entry: a crop row's (or column's) two input rows as byte offsets into
/// the staged input window, and their weights (both 0 where torchvision's sample is 0).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct CropTap {
    lo: u32,
    hi: u32,
    l: f32,
    h: f32,
}

/// The staged input window: rows `r0 ..`, columns `c0 ..`, `rows x cols` packed pixels.
#[derive(Clone, Copy)]
struct InputWindow {
    r0: i32,
    c0: i32,
    rows: u32,
    cols: u32,
}

/// Where the dyadic path stages a tile's input window ([`Tile::stage_dyadic`]): its first row
/// `r0` and column `c0` (a multiple of 4, so that aligned inputs load whole words), `rows`
/// rows of `entries` entries each, `pitch` bytes from one row to the next.
#[derive(Clone, Copy)]
struct DyadicLayout {
    r0: i32,
    c0: i32,
    rows: u32,
    entries: u32,
    pitch: u32,
}

impl Crop {
    /// The crop stage of image `n` (`n < batch`) with box sampling rule `roi`.
    #[inline(always)]
    fn new(p: &AugmentParams, n: usize, roi: Roi) -> Crop {
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
            roi,
        }
    }

    /// Crop pixel `(p, q)`, every channel, straight from device memory: the `roi_align` bin of
    /// the input converted to float on load.
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
    fn input_window(&self, win: &Window) -> Option<InputWindow> {
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

    /// The crop-tap entry of a sample at `v` along an axis of `n` pixels whose window starts at
    /// `start`, spans `len` and is `stride` packed pixels per step; its offsets are in bytes.
    #[inline(always)]
    fn tap(v: f32, n: i32, (start, len, stride): (i32, u32, u32)) -> CropTap {
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

    /// Input pixel `(r, c)` (inside the image), every channel packed little-end first.
    #[inline(always)]
    fn packed<const C: usize>(&self, r: i32, c: i32) -> u32 {
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
    fn word(&self, r: i32, c: i32, k: u32) -> u32 {
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
    fn words_aligned(&self) -> bool {
        let (row, px, ch) = self.strides;
        px == 1 && row % 4 == 0 && ch % 4 == 0 && self.img as usize % 4 == 0
    }

    /// [`Crop::word`] of column `c`, a multiple of 4, with one 4-byte load where
    /// [`Crop::words_aligned`]: columns from the image's width on read the last word instead
    /// (the width is a multiple of 4), which callers give no weight.
    #[inline(always)]
    fn word_at_once(&self, r: i32, c: i32, k: u32) -> u32 {
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
    fn pixels_aligned(&self) -> bool {
        let (_, px, ch) = self.strides;
        ch == 1 && px > 1 && self.w % 4 == 0 && self.img as usize % 4 == 0
    }

    /// Every channel's [`Crop::word`] of column `c`, a multiple of 4, from `C` 4-byte loads of
    /// the four NHWC pixels, regrouped by channel, where [`Crop::pixels_aligned`]; columns from
    /// the width on read the last four pixels instead, which callers give no weight.
    #[inline(always)]
    fn pixels_at_once<const C: usize>(&self, r: i32, c: i32) -> [u32; C] {
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

    /// Row taps as byte offsets of rows into the window of `T` slots, rows `pitch` slots apart
    /// ([`Window::pitch`]). The indices are clamped into the window: a no-op for every read the
    /// window was bounded for, and what keeps every read inside shared memory whatever the
    /// parameters hold.
    #[inline(always)]
    fn row<T>(&self, t: LinearTaps, pitch: u32) -> Axis {
        Axis::clamped(t, self.p0, self.rows, pitch * size_of::<T>() as u32)
    }

    /// Column taps as byte offsets of columns into the window of `T` slots (clamped like
    /// [`Window::row`]).
    #[inline(always)]
    fn col<T>(&self, t: LinearTaps) -> Axis {
        Axis::clamped(t, self.q0, self.cols, size_of::<T>() as u32)
    }

    /// The entry of resized row `zi` in the row tap table at shared address `table`, the
    /// index clamped into the table.
    ///
    /// # Safety
    /// The table's `zrows` entries must have been written before the last barrier.
    #[inline(always)]
    unsafe fn y_taps(&self, table: u32, zi: i32) -> Axis {
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
    unsafe fn y_taps_at(&self, table: u32, zi: u32) -> Axis {
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
    unsafe fn x_pair_at(&self, table: u32, zj: u32) -> (u32, u32) {
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
    unsafe fn x_taps(&self, table: u32, zj: i32) -> Axis {
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
    fn follows(&self, prev: &Axis) -> bool {
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

/// The per-block values one thread computes for all, kept in shared memory.
#[derive(Clone, Copy)]
struct Setup {
    rot: Rotation,
    roi: Roi,
    whole: Window,
    mean: [f32; 4],
    inv_std: [f32; 4],
    /// The dyadic path's staging of `whole` ([`Tile::dyadic_layout`]).
    layout: DyadicLayout,
}

const _: () = assert!(core::mem::size_of::<Setup>() <= AUGMENT_SETUP_BYTES as usize);

/// The block's shared memory, as laid out by `augment_shared_bytes`.
struct Shared<T> {
    setup: *mut Setup,
    /// Blur weights (unnormalised).
    wts: *mut f32,
    /// The rotation's terms `(gx, gy)`: `side` columns, then `side` rows.
    table: *mut [f32; 2],
    /// Resize taps of the window's resized rows, then of its columns.
    taps_y: *mut Axis,
    taps_x: *mut Axis,
    /// The same two tables' 32-bit shared-memory addresses, for the rotation's reads: a generic
    /// pointer into them costs a conversion for every read.
    taps_at: (u32, u32),
    /// Crop taps of the window's crop rows, then of its columns (staged input path).
    ctap_y: *mut CropTap,
    ctap_x: *mut CropTap,
    /// The rotated tile, `side` rows of `pitch` pixels.
    rotated: *mut T,
    /// The crop window, later the horizontally blurred tile (`side` rows of
    /// `AUGMENT_HBUF_PITCH`).
    scratch: *mut T,
    /// Its 32-bit shared-memory address, for the dyadic path's reads.
    scratch_at: u32,
    /// The staged input window, packed pixels.
    input: *mut u32,
}

/// What the block's steps need, the same in every thread of the block, for a block working
/// down a strip of tiles (`STRIP`) or on one, keeping the next tile's halo rows in a ring or
/// copying them up (`COPY`, see [`Tile::slot`]).
#[derive(Clone, Copy)]
struct Tile<const STRIP: bool, const COPY: bool> {
    /// Output row and column of the haloed tile's top-left pixel (before reflection).
    top: i32,
    left: i32,
    /// Side and row pitch of the haloed tile.
    side: u32,
    pitch: u32,
    /// Row of the rotated tile's ring (see [`Tile::slot`]) that holds the haloed tile's first
    /// row (unused where `COPY`).
    ring: u32,
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

impl<const STRIP: bool, const COPY: bool> Tile<STRIP, COPY> {
    /// Bytes of the scratch region (the crop window's room), for cells of `T`.
    #[inline(always)]
    fn scratch_bytes<T>(&self) -> u32 {
        self.budget * size_of::<T>() as u32
    }

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

    /// Writes the rotation's terms of every row of the haloed tile (reflected at the image
    /// border) into the second half of `tab` (see [`Shared::table`]), and with `COLS` those of
    /// every column into the first. One thread per row and column.
    ///
    /// # Safety
    /// `tab` must hold `2 * side` pairs of shared memory, read only after the next barrier.
    #[inline(always)]
    unsafe fn tabulate<const COLS: bool>(&self, rot: &Rotation, tab: *mut [f32; 2]) {
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
    fn slot(&self, i: u32) -> u32 {
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
    fn below(&self) -> Tile<STRIP, COPY> {
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
    unsafe fn copy_halo<T: Px>(&self, rotated: *mut T) {
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

    /// The crop window that the rotation (`rot`) of the haloed tile's pixels `i0 ..= i1` x
    /// `j0 ..= j1` reads. Those pixels, reflected, lie in the rectangle of rows `ilo ..= ihi`
    /// and columns `jlo ..= jhi`, whose source coordinates' extremes are those of its corners
    /// ([`Rotation::bounds`]). Nearest rounds a source coordinate `s` to at most `floor(s) + 1`
    /// and bilinear reads `floor(s)` and `floor(s) + 1`, so resized rows
    /// `floor(min) - 1 ..= floor(max) + 2` cover every read (one row of margin each side); the
    /// resize's taps grow with the resized index, so their crop rows lie between the first tap
    /// of the first row and the second tap of the last.
    #[inline(always)]
    fn window(&self, rot: &Rotation, (i0, i1): (u32, u32), (j0, j1): (u32, u32)) -> Window {
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
    unsafe fn stage<const C: usize, T: Px>(
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
    unsafe fn crop_from_input<const C: usize, T: Px>(
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
    fn dyadic_layout<T: Px>(&self, crop: &Crop, win: &Window, later: bool) -> DyadicLayout {
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
    unsafe fn stage_dyadic<const C: usize, T: Px>(
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
    unsafe fn rotate<const C: usize, T: Px>(
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

    /// [`Tile::rotate`] for the dyadic path: nearest rotation, each pixel's value from
    /// [`Tile::sample_dyadic`] in 64ths of the input's units (see there).
    ///
    /// # Safety
    /// As for [`Tile::rotate`], with the window staged by [`Tile::stage_dyadic`] as `lay` and
    /// `later` say.
    #[inline(always)]
    unsafe fn rotate_dyadic<const C: usize, T: Px>(
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

    /// [`Tile::rotate`] with `value(gx, gy)` the rotated value at the normalised source point
    /// `(gx, gy)` ([`Rotation::finish`] gives it in pixels), one loop per interpolation so that
    /// the choice is made once, not per pixel.
    ///
    /// # Safety
    /// As for [`Tile::rotate`], and `value` reads only what was staged; the slots `V` it gives
    /// are no larger and no more aligned than `T` (the rotated tile holds `V` slots `pitch` to a
    /// row).
    #[inline(always)]
    unsafe fn rotate_with<T: Px, V: Slot>(
        &self,
        s: &Shared<T>,
        (i0, j0): (u32, u32),
        (h, w): (u32, u32),
        value: impl Fn(f32, f32) -> V,
    ) {
        let (side, pitch) = (self.side as usize, self.pitch as usize);
        let tab = s.table as *const [f32; 2];
        for_cells::<STRIP>(h, w, |_, i, j| {
            let (ti, tj) = ((i0 + i) as usize, (j0 + j) as usize);
            // SAFETY: `ti, tj < side`: inside the table.
            let (gx, gy) = unsafe {
                let (c, r) = (*tab.add(tj), *tab.add(side + ti));
                (c[0] + r[0], c[1] + r[1])
            };
            let v = value(gx, gy);
            let row = self.slot(ti as u32) as usize;
            // SAFETY: `row, tj < side <= pitch`: inside the rotated tile (whose slots `T` are at
            // least as large as `V`, and as aligned); this thread's pixel.
            unsafe { *(s.rotated as *mut V).add(row * pitch + tj) = v };
        });
    }

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
    unsafe fn vblur_store<
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
        let dst = (p.y as *mut f32).wrapping_add(nu * C * oh as usize * ow as usize);
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

/// Division by a block-wide `d` of numerators below `2^16` (thread indices, cell counts): one
/// hardware reciprocal per divisor, then a multiply per quotient, where an integer division
/// costs a few tens of instructions. Exact: `(n + 1/2) / d` lies at least `1 / (2 d)` from an
/// integer, and the reciprocal (at most 2 ulp) and the product's rounding move it by at most
/// `2^16 / d * 5 * 2^-24`.
#[derive(Clone, Copy)]
struct SmallDiv {
    d: u32,
    inv: f32,
}

impl SmallDiv {
    /// Divisor `d` (at least 1, below `2^24`).
    #[inline(always)]
    fn new(d: u32) -> SmallDiv {
        let d = d.max(1);
        SmallDiv {
            d,
            inv: fast_div(1.0, d as f32),
        }
    }

    /// `(n / d, n % d)` for `n < 2^16`.
    #[inline(always)]
    fn divmod(self, n: u32) -> (u32, u32) {
        let q = ((n as f32 + 0.5) * self.inv) as u32;
        (q, n - q * self.d)
    }
}

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

/// Calls `cell(index, row, column)` for this thread's cells of a `rows x cols` rectangle, every
/// `threads(STRIP)`-th in row-major order, the row and column advanced without dividing; this
/// thread's index read afresh with `fresh` ([`lane_for`]).
#[inline(always)]
fn for_cells<const STRIP: bool>(rows: u32, cols: u32, mut cell: impl FnMut(u32, u32, u32)) {
    let div = SmallDiv::new(cols);
    let cols = div.d;
    let total = rows * cols;
    let (step_r, step_c) = div.divmod(threads(STRIP));
    let k0 = lane_for(!STRIP);
    let (mut r, mut c) = div.divmod(k0);
    let mut k = k0;
    while k < total {
        cell(k, r, c);
        k += threads(STRIP);
        r += step_r;
        c += step_c;
        if c >= cols {
            c -= cols;
            r += 1;
        }
    }
}

/// The blur weights, unnormalised: in registers on the fast path (`FAST`, 7 taps), read from
/// shared memory otherwise.
#[derive(Clone, Copy)]
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

    /// torchvision normalises each 1-D kernel by its sum; the product of both normalisations,
    /// applied once to the result.
    #[inline(always)]
    fn norm(&self) -> f32 {
        let total = if FAST {
            self.reg.iter().fold(0.0f32, |a, w| a + w)
        } else {
            // SAFETY: `shared` holds `taps` weights (`Weights::new`).
            unsafe { sum(self.shared, self.taps as u32) }
        };
        (1.0 / total) * (1.0 / total)
    }

    /// Weight `t < taps`.
    #[inline(always)]
    fn at(&self, t: usize) -> f32 {
        if FAST {
            self.reg[t]
        } else {
            // SAFETY: `t < taps`: inside the weights.
            unsafe { *self.shared.add(t) }
        }
    }

    /// `sum_t w[t] * at(t)` per channel, as fused multiply-adds.
    #[inline(always)]
    fn dot<const C: usize, T: Px>(&self, at: impl Fn(usize) -> T) -> [f32; C] {
        let mut acc = [0.0f32; C];
        let taps = if FAST { FAST_TAPS } else { self.taps };
        for t in 0..taps {
            let wt = self.at(t);
            let v = at(t);
            for (c, a) in acc.iter_mut().enumerate() {
                *a = fmaf(v.get(c), wt, *a);
            }
        }
        acc
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
unsafe fn copy_blurred_halo<const C: usize, T: Px>(scratch: *mut T, side: usize) {
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
            let bp = (p.boxes as *const f32).add(4 * nu);
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
        let angle = unsafe { (p.angles as *const f32).add(nu).read() };
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
            let layout = tile.dyadic_layout::<T>(&Crop::new(p, nu, roi), &whole, false);
            unsafe {
                (*s.setup).roi = roi;
                (*s.setup).layout = layout;
            }
        }
    } else if lin == 128 && ROT != DYADIC {
        unsafe { (*s.setup).roi = roi() };
    } else if lin >= 160 && lin < 160 + C as u32 {
        let c = lin as usize - 160;
        let stats = p.stats as *const f32;
        unsafe {
            (*s.setup).mean[c] = stats.add(c).read();
            (*s.setup).inv_std[c] = 1.0 / stats.add(C + c).read();
        }
    } else if lin >= 32 && lin < 32 + taps as u32 {
        let w = lin as usize - 32;
        let off = (taps - k as usize) / 2;
        let sigma = unsafe { (p.sigmas as *const f32).add(nu).read() };
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
            tile.stage_dyadic::<C, T>(&Crop::new(p, nu, roi), &win, layout, false, &s);
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
                    let crop = Crop::new(p, nu, unsafe { (*s.setup).roi });
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
                        let crop = Crop::new(p, nu, (*s.setup).roi);
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
                next.stage_dyadic::<C, T>(&Crop::new(p, nu, roi), &win, layout, true, &s);
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
/// instead of its rotated ones ([`copy_blurred_halo`]).
macro_rules! augment_kernels {
    ($($decl:ident $name:ident $c:literal $px:ident $fast:literal $strip:literal $rot:ident
        $copy:literal;)*) => {$(
        kernel! {
            #[declared($decl)]
            /// # Safety
            /// `p.x` must address `batch * channels * height * width` bytes, `p.y`
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
                unsafe { augment_block::<$c, $px, $fast, $strip, $rot, $copy>(&p) }
            }
        }
    )*};
}

augment_kernels! {
    AUGMENT_C1 augment_c1 1 Px1 true false NEAREST false;
    AUGMENT_C2 augment_c2 2 Px2 true false NEAREST false;
    AUGMENT_C3 augment_c3 3 Px4 true false NEAREST false;
    AUGMENT_C4 augment_c4 4 Px4 true false NEAREST false;
    AUGMENT_STRIP_C1 augment_strip_c1 1 Px1 true true NEAREST true;
    AUGMENT_STRIP_C2 augment_strip_c2 2 Px2 true true NEAREST true;
    AUGMENT_STRIP_C3 augment_strip_c3 3 Px4 true true NEAREST false;
    AUGMENT_STRIP_C4 augment_strip_c4 4 Px4 true true NEAREST true;
    AUGMENT_BILINEAR_C1 augment_bilinear_c1 1 Px1 true false BILINEAR false;
    AUGMENT_BILINEAR_C2 augment_bilinear_c2 2 Px2 true false BILINEAR false;
    AUGMENT_BILINEAR_C3 augment_bilinear_c3 3 Px4 true false BILINEAR false;
    AUGMENT_BILINEAR_C4 augment_bilinear_c4 4 Px4 true false BILINEAR false;
    AUGMENT_BILINEAR_STRIP_C1 augment_bilinear_strip_c1 1 Px1 true true BILINEAR false;
    AUGMENT_BILINEAR_STRIP_C2 augment_bilinear_strip_c2 2 Px2 true true BILINEAR false;
    AUGMENT_BILINEAR_STRIP_C3 augment_bilinear_strip_c3 3 Px4 true true BILINEAR false;
    AUGMENT_BILINEAR_STRIP_C4 augment_bilinear_strip_c4 4 Px4 true true BILINEAR false;
    AUGMENT_DYADIC_C1 augment_dyadic_c1 1 Px1 true false DYADIC false;
    AUGMENT_DYADIC_C2 augment_dyadic_c2 2 Px2 true false DYADIC false;
    AUGMENT_DYADIC_C3 augment_dyadic_c3 3 Px4 true false DYADIC false;
    AUGMENT_DYADIC_C4 augment_dyadic_c4 4 Px4 true false DYADIC false;
    AUGMENT_DYADIC_STRIP_C1 augment_dyadic_strip_c1 1 Px1 true true DYADIC true;
    AUGMENT_DYADIC_STRIP_C2 augment_dyadic_strip_c2 2 Px2 true true DYADIC true;
    AUGMENT_DYADIC_STRIP_C3 augment_dyadic_strip_c3 3 Px4 true true DYADIC true;
    AUGMENT_DYADIC_STRIP_C4 augment_dyadic_strip_c4 4 Px4 true true DYADIC true;
    AUGMENT_WIDE_C1 augment_wide_c1 1 Px1 false true EITHER false;
    AUGMENT_WIDE_C2 augment_wide_c2 2 Px2 false true EITHER false;
    AUGMENT_WIDE_C3 augment_wide_c3 3 Px4 false true EITHER false;
    AUGMENT_WIDE_C4 augment_wide_c4 4 Px4 false true EITHER false;
}
