//! Per-pixel work over a plane stack (the channels of one image).
//!
//! The per-pixel kernels (resize, rotate) give each block a 32 x 16 patch of one image's output
//! and each thread two rows of it ([`for_pixels`]), so a warp writes 32 consecutive values of a
//! row.
//!
//! A kernel that computes one output pixel for every channel would otherwise load, compute and
//! store channel by channel: the store of one channel orders it before the next channel's loads,
//! so each thread waits for one global-memory latency per channel. Here the values of up to
//! four channels are computed before any is stored, so their loads are in flight together.

use crate::thread::{block_x, thread_xy};
use streamline_abi::image::{IMAGE_BLOCK_X, IMAGE_BLOCK_Y, IMAGE_ROWS_PER_THREAD};

/// Runs `pixel(image, i, j)` for this thread's output pixels of a batch of `batch` images of
/// `h x w`, the grid being `ceil(w / 32) * ceil(h / 16) * batch` blocks of 32 x 8 threads.
#[inline(always)]
pub fn for_pixels(batch: u32, h: u32, w: u32, mut pixel: impl FnMut(u32, u32, u32)) {
    let rows_per_block = IMAGE_BLOCK_Y * IMAGE_ROWS_PER_THREAD;
    let tiles_x = w.div_ceil(IMAGE_BLOCK_X);
    let tiles_y = h.div_ceil(rows_per_block);
    let b = block_x();
    let per_image = (tiles_x * tiles_y).max(1);
    let n = b / per_image;
    let t = b % per_image;
    let (tx, ty) = thread_xy();
    let j = (t % tiles_x.max(1)) * IMAGE_BLOCK_X + tx;
    if n >= batch || j >= w {
        return;
    }
    let mut r = 0;
    while r < IMAGE_ROWS_PER_THREAD {
        let i = (t / tiles_x.max(1)) * rows_per_block + r * IMAGE_BLOCK_Y + ty;
        if i < h {
            pixel(n, i, j);
        }
        r += 1;
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
