//! Per-pixel work over a plane stack (the channels of one image).
//!
//! The per-pixel kernels (resize, rotate, roi_align) give each block a patch of one image's
//! output, 32 columns wide, and each thread one column of several rows of it ([`for_columns`];
//! bilinear resize takes 64 columns, two per thread, with [`for_column_pairs`]), so a warp
//! writes 32 consecutive values of a row. Rotation shapes each image's warps by its angle
//! instead ([`for_shaped_columns`]): rows of 32, or narrower patches several rows tall.
//!
//! A kernel that computes one output pixel for every channel would otherwise load, compute and
//! store channel by channel: the store of one channel orders it before the next channel's loads,
//! so each thread waits for one global-memory latency per channel. Here the values of up to
//! four channels are computed before any is stored, so their loads are in flight together.

use streamline_abi::image::{IMAGE_BLOCK_X, IMAGE_BLOCK_Y};
pub(crate) use streamline_abi::image::{NHWC_IN, NHWC_OUT};
use streamline_device::mem::{stg2_at, stg_at};
use streamline_device::thread::{block_xyz, grid_z, thread_xy};
use streamline_device::{DevPtr, DevPtrMut};

/// The output pixels of one thread: column `j` of image `n`, and up to `per_thread` rows
/// `IMAGE_BLOCK_Y` apart, those below the plane's height.
///
/// A kernel whose neighbouring rows share input may take the same number of consecutive rows
/// instead, from [`Column::strip`]: the block's threads cover the same rows either way.
#[derive(Clone, Copy)]
pub struct Column {
    pub n: u32,
    pub j: u32,
    pub per_thread: u32,
    first: u32,
    h: u32,
    strip: u32,
}

impl Column {
    /// Column `j` of image `n` for the thread at row `ty` of its block, whose first row is
    /// `row0`, with `rows` rows per thread of an `h`-row plane.
    #[inline(always)]
    fn new(n: u32, j: u32, (row0, ty): (u32, u32), rows: u32, h: u32) -> Column {
        Column {
            n,
            j,
            per_thread: rows,
            first: row0 + ty,
            h,
            strip: row0 + ty * rows,
        }
    }

    /// Row `r < per_thread` of this thread (at or past the plane's height when the thread has
    /// fewer rows).
    #[inline(always)]
    pub fn row(&self, r: u32) -> u32 {
        self.first + r * IMAGE_BLOCK_Y
    }

    /// The first of this thread's `per_thread` consecutive rows (rows at or past the plane's
    /// height belong to no thread).
    #[inline(always)]
    pub fn strip(&self) -> u32 {
        self.strip
    }

    /// Calls `row(i)` for each of this thread's rows, in order. Rows go in pairs, so the
    /// assembler sees two rows' loads in one straight stretch and can issue them together.
    #[inline(always)]
    pub fn rows(&self, mut row: impl FnMut(u32)) {
        let mut r = 0;
        while r < self.per_thread {
            let i = self.row(r);
            if i < self.h {
                row(i);
            }
            let i = self.row(r + 1);
            if r + 1 < self.per_thread && i < self.h {
                row(i);
            }
            r += 2;
        }
    }
}

/// Image `n` of a batch of `channels`-plane images: its first input plane at `x` (planes of
/// `plane_in` values) and column `j` of its first output plane at `y` (planes of `plane_out`).
/// Offsets inside one image fit 32 bits (the host checks `c * h * w`), so every access is one
/// 32-bit offset from these pointers, and the output pointer is a per-thread register.
#[inline(always)]
pub fn image_and_column(
    (x, y): (DevPtr<f32>, DevPtrMut<f32>),
    channels: u32,
    (plane_in, plane_out): (u32, u32),
    n: u32,
    j: u32,
) -> (*const f32, *mut f32) {
    let n = n as usize * channels as usize;
    (
        x.as_ptr().wrapping_add(n * plane_in as usize),
        y.as_mut_ptr()
            .wrapping_add(n * plane_out as usize + j as usize),
    )
}

/// Runs `column` for this thread's column of every image it covers, for a batch of `batch`
/// images of `h x w` whose threads compute `rows` rows each. The grid is `(ceil(w / 32),
/// ceil(h / (8 rows)), min(batch, 65535))` blocks of 32 x 8 threads; blocks step through the
/// images by the grid's depth, so any batch is covered.
///
/// The per-image and per-column work (a rotation's matrix, a resize's horizontal taps) is
/// done once per call, not once per pixel, and a warp covers 32 consecutive pixels of a row.
#[inline(always)]
pub fn for_columns(batch: u32, h: u32, w: u32, rows: u32, mut column: impl FnMut(Column)) {
    columns::<1>(batch, h, w, rows, |col, _| column(col))
}

/// [`for_columns`] with two columns per thread, `IMAGE_BLOCK_X` apart: a block covers
/// `2 IMAGE_BLOCK_X` columns (the grid's width halves), and `column` receives the thread's first
/// column and whether its second lies inside the plane.
#[inline(always)]
pub fn for_column_pairs(batch: u32, h: u32, w: u32, rows: u32, column: impl FnMut(Column, bool)) {
    columns::<2>(batch, h, w, rows, column)
}

/// [`for_columns`] for blocks `K` times `IMAGE_BLOCK_X` columns wide.
#[inline(always)]
fn columns<const K: u32>(
    batch: u32,
    h: u32,
    w: u32,
    rows: u32,
    mut column: impl FnMut(Column, bool),
) {
    let (bx, by, bz) = block_xyz();
    let (tx, ty) = thread_xy();
    let j = bx * K * IMAGE_BLOCK_X + tx;
    if j >= w {
        return;
    }
    let second = K > 1 && j + IMAGE_BLOCK_X < w;
    let row0 = by * IMAGE_BLOCK_Y * rows;
    let step = grid_z();
    let mut n = bz;
    while n < batch {
        column(Column::new(n, j, (row0, ty), rows, h), second);
        n += step;
    }
}

/// How a warp lies on its block's `IMAGE_BLOCK_X x IMAGE_BLOCK_Y` pixels: a patch `32 >> s`
/// columns wide and `1 << s` rows tall (`s <= 3`), so `WarpShape(0)` is a row of 32.
#[derive(Clone, Copy)]
pub struct WarpShape(pub u32);

impl WarpShape {
    /// The pixel of the block that thread `lane` of warp `warp` takes, as `(x, y)`.
    #[inline(always)]
    fn place(self, lane: u32, warp: u32) -> (u32, u32) {
        let s = self.0;
        (
            ((warp & ((1 << s) - 1)) << (5 - s)) | (lane & (31 >> s)),
            ((warp >> s) << s) | (lane >> (5 - s)),
        )
    }
}

/// [`for_columns`] with the warps' shape chosen per image: `per_image(n)` gives image `n`'s
/// [`WarpShape`] and what else the image needs once per thread, which `column` receives
/// with each of the thread's columns of it. The block covers the same pixels whatever the shape.
///
/// A gather's cost in the L1 cache grows with the cache lines each warp load touches, so a
/// kernel whose reads run through the input along some direction (a rotation) picks the shape
/// whose reads run most nearly along the input's rows.
#[inline(always)]
pub fn for_shaped_columns<T>(
    batch: u32,
    h: u32,
    w: u32,
    rows: u32,
    per_image: impl Fn(u32) -> (WarpShape, T),
    mut column: impl FnMut(Column, &T),
) {
    const { assert!(IMAGE_BLOCK_X == 32 && IMAGE_BLOCK_Y >= 8) };
    let (bx, by, bz) = block_xyz();
    let (lane, warp) = thread_xy();
    let row0 = by * IMAGE_BLOCK_Y * rows;
    let step = grid_z();
    let mut n = bz;
    while n < batch {
        let (shape, t) = per_image(n);
        let (tx, ty) = shape.place(lane, warp);
        let j = bx * IMAGE_BLOCK_X + tx;
        if j < w {
            column(Column::new(n, j, (row0, ty), rows, h), &t);
        }
        n += step;
    }
}

/// Calls `store(c, value(c))` for every channel `c < channels`, computing each group of up to
/// four values before storing it.
#[inline(always)]
pub fn for_channels(channels: u32, value: impl Fn(u32) -> f32, mut store: impl FnMut(u32, f32)) {
    let mut c = 0;
    while c < channels {
        c += match channels - c {
            1 => group::<1>(c, &value, &mut store),
            2 => group::<2>(c, &value, &mut store),
            3 => group::<3>(c, &value, &mut store),
            _ => group::<4>(c, &value, &mut store),
        };
    }
}

/// [`for_channels`] with the group size `G` fixed for the whole kernel ([`with_group`]):
/// chosen per pixel, the compiler computes the first channel ahead of the choice and waits for
/// its loads before issuing the others'. Channels past the last whole group go one at a time.
#[inline(always)]
pub fn for_channel_groups<const G: usize>(
    channels: u32,
    value: impl Fn(u32) -> f32,
    mut store: impl FnMut(u32, f32),
) {
    let mut c = 0;
    while c + G as u32 <= channels {
        group::<G>(c, &value, &mut store);
        c += G as u32;
    }
    while c < channels {
        group::<1>(c, &value, &mut store);
        c += 1;
    }
}

/// Evaluates `$f::<G, $rest>($args)` with the channel group `G` for `$channels` channels: all
/// of them up to four, else four at a time.
macro_rules! with_group {
    ($channels:expr, $f:ident$(::<$($rest:tt),+>)?($($arg:expr),*)) => {
        match $channels {
            1 => $f::<1 $($(, $rest)+)?>($($arg),*),
            2 => $f::<2 $($(, $rest)+)?>($($arg),*),
            3 => $f::<3 $($(, $rest)+)?>($($arg),*),
            _ => $f::<4 $($(, $rest)+)?>($($arg),*),
        }
    };
}
pub(crate) use with_group;

#[inline(always)]
fn group<const N: usize>(
    first: u32,
    value: &impl Fn(u32) -> f32,
    store: &mut impl FnMut(u32, f32),
) -> u32 {
    let mut v = [0.0f32; N];
    for (k, slot) in v.iter_mut().enumerate() {
        *slot = value(first + k as u32);
    }
    for (k, &x) in v.iter().enumerate() {
        store(first + k as u32, x);
    }
    N as u32
}

/// Writes an interleaved pixel's three values to `base[i..i + 3]` as one 8-byte store and one
/// 4-byte store, the 8-byte one on whichever end of the pixel is 8-byte aligned: a warp's
/// stores of neighbouring pixels then reach each 32-byte sector of their run twice instead of
/// three times (once per channel).
///
/// # Safety
/// `base + i` must point to three writable f32 in global memory that no other thread accesses
/// while the kernel runs.
#[inline(always)]
pub unsafe fn store3_at(base: *mut f32, i: u32, v: [f32; 3]) {
    let odd = base.wrapping_add(i as usize) as usize & 4 != 0;
    let (pair_at, pair, one_at, one) = if odd {
        (i + 1, [v[1], v[2]], i, v[0])
    } else {
        (i, [v[0], v[1]], i + 2, v[2])
    };
    // SAFETY: both stores lie in `base[i..i + 3]` (the caller's); `base + pair_at` is 8-byte
    // aligned, since `base` holds f32 (4-byte aligned) and `odd` picks the aligned end.
    unsafe {
        stg2_at(base, pair_at, pair);
        stg_at(base, one_at, one);
    }
}

/// Where a layout keeps value `c` of pixel `o` of an image of `channels` planes of `plane`
/// values: `c * ch + o * px`, with `(ch, px)` the layout's strides.
#[derive(Clone, Copy)]
pub struct Strides {
    pub ch: u32,
    pub px: u32,
}

impl Strides {
    /// NCHW (planes one after the other) or, when `nhwc`, pixels with interleaved channels.
    #[inline(always)]
    pub fn of(nhwc: bool, channels: u32, plane: u32) -> Strides {
        if nhwc {
            Strides {
                ch: 1,
                px: channels,
            }
        } else {
            Strides { ch: plane, px: 1 }
        }
    }
}

/// Runs `f::<NHWC_IN, NHWC_OUT>` for the launch's layouts (`p.layout`, NHWC on at least one
/// side; any other value is taken as NHWC on both), decided once per launch rather than per
/// value. NCHW in and out has kernels of their own, so that they keep their register count.
macro_rules! with_layouts {
    ($p:expr, $f:ident$(::<$($lead:ident),+>)?($($arg:expr),*)) => {
        match $p.layout & ($crate::channels::NHWC_IN | $crate::channels::NHWC_OUT) {
            $crate::channels::NHWC_IN => $f::<$($({ $lead },)+)? true, false>($($arg),*),
            $crate::channels::NHWC_OUT => $f::<$($({ $lead },)+)? false, true>($($arg),*),
            _ => $f::<$($({ $lead },)+)? true, true>($($arg),*),
        }
    };
}
pub(crate) use with_layouts;
