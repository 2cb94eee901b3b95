//! Per-channel normalisation, like `torchvision.transforms.v2.functional.normalize`:
//! `y = (x - mean[c]) / std[c]` with an IEEE division (as `tensor.sub_(mean).div_(std)`).
//!
//! Each block covers a stretch of one plane, so the channel is found once per block. With
//! planes of a multiple of 4 values and 16-byte aligned input and output, each thread handles
//! one 16-byte vector; otherwise one element. In NHWC ([`normalize_nhwc`]) a block covers a
//! stretch of one image, and each value's channel follows from its place in the image.

use streamline_abi::image::{NormalizeParams, ELEMENTWISE_BLOCK};
use streamline_abi::image::{NORMALIZE, NORMALIZE_NHWC};
use streamline_device::kernel;
use streamline_device::thread::{block_x, block_xyz, grid_dim_xyz, thread_xy};

#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Floats4([f32; 4]);

/// Whether the kernel works in 16-byte vectors for these parameters (the host sizes the grid
/// with the same rule).
#[inline(always)]
fn vectorised(p: &NormalizeParams) -> bool {
    p.plane_len % 4 == 0 && p.x.addr() % 16 == 0 && p.y.addr() % 16 == 0
}

kernel! {
    #[declared(NORMALIZE)]
    /// # Safety
    /// `p.x` and `p.y` must address `p.planes * p.plane_len` f32 on the device, `p.stats`
    /// `2 * p.channels` f32, `p.channels >= 1`, `p.plane_len >= 1`, and the grid must have
    /// `planes * ceil(units / ELEMENTWISE_BLOCK)` blocks of `ELEMENTWISE_BLOCK` threads, `units`
    /// being `plane_len / 4` when vectorised and `plane_len` otherwise.
    pub unsafe fn normalize(p: NormalizeParams) {
        let vec = vectorised(&p);
        let units = if vec { p.plane_len / 4 } else { p.plane_len };
        let per_plane = units.div_ceil(ELEMENTWISE_BLOCK).max(1);
        let b = block_x();
        let plane = b / per_plane;
        let unit = (b % per_plane) * ELEMENTWISE_BLOCK + thread_xy().0;
        if plane >= p.planes || unit >= units {
            return;
        }
        let c = (plane % p.channels.max(1)) as usize;
        let stats = p.stats.as_ptr();
        // SAFETY: `c < channels`; `stats` holds `2 * channels` values.
        let (m, s) = unsafe {
            (
                stats.add(c).read(),
                stats.add(p.channels as usize + c).read(),
            )
        };
        let base = plane as usize * p.plane_len as usize;
        let x = p.x.as_ptr();
        let y = p.y.as_mut_ptr();
        if vec {
            let e = base + unit as usize * 4;
            // SAFETY: 16-byte aligned bases and a plane length that is a multiple of 4, so the
            // vector is aligned and lies inside the plane.
            unsafe {
                let a = (x.add(e) as *const Floats4).read();
                let mut o = a;
                let mut l = 0;
                while l < 4 {
                    o.0[l] = (a.0[l] - m) / s;
                    l += 1;
                }
                (y.add(e) as *mut Floats4).write(o);
            }
        } else {
            let e = base + unit as usize;
            // SAFETY: `unit < plane_len`, `plane < planes`.
            unsafe { y.add(e).write((x.add(e).read() - m) / s) };
        }
    }
}

/// Whether [`normalize_nhwc`] works in 16-byte vectors for these parameters (the host sizes the
/// grid with the same rule).
#[inline(always)]
fn vectorised_nhwc(p: &NormalizeParams) -> bool {
    (p.plane_len * p.channels) % 4 == 0 && p.x.addr() % 16 == 0 && p.y.addr() % 16 == 0
}

kernel! {
    #[declared(NORMALIZE_NHWC)]
    /// [`normalize`] of NHWC images: `planes / channels` images of `plane_len` pixels of
    /// `channels` interleaved values.
    ///
    /// # Safety
    /// `p.x` and `p.y` must address `planes * plane_len` f32 on the device, `p.stats`
    /// `2 * p.channels` f32, `p.channels >= 1` dividing `planes`, `plane_len * channels` at most
    /// `2^32 - 1`, and the grid `(ceil(units / ELEMENTWISE_BLOCK), min(images, 65535))` blocks of
    /// `ELEMENTWISE_BLOCK` threads, `units` being `plane_len * channels / 4` when vectorised
    /// and `plane_len * channels` otherwise.
    pub unsafe fn normalize_nhwc(p: NormalizeParams) {
        let c_n = p.channels.max(1);
        let images = p.planes / c_n;
        let per_image = p.plane_len * c_n;
        let vec = vectorised_nhwc(&p);
        let units = if vec { per_image / 4 } else { per_image };
        let (bx, by, _) = block_xyz();
        let unit = bx * ELEMENTWISE_BLOCK + thread_xy().0;
        if unit >= units {
            return;
        }
        let stats = p.stats.as_ptr();
        // Mean and standard deviation of channel `c < channels`.
        // SAFETY: `stats` holds `2 * channels` values.
        let stat = |c: u32| unsafe {
            (
                stats.add(c as usize).read(),
                stats.add((p.channels + c) as usize).read(),
            )
        };
        let x = p.x.as_ptr();
        let y = p.y.as_mut_ptr();
        let step = grid_dim_xyz().1;
        let mut n = by;
        while n < images {
            let base = n as usize * per_image as usize;
            if vec {
                let e = unit * 4;
                let mut c = e % c_n;
                // SAFETY: 16-byte aligned bases and images of a multiple of 4 values, so the
                // vector is aligned and lies inside image `n < images`.
                unsafe {
                    let at = base + e as usize;
                    let a = (x.add(at) as *const Floats4).read();
                    let mut o = a;
                    let mut l = 0;
                    while l < 4 {
                        let (m, s) = stat(c);
                        o.0[l] = (a.0[l] - m) / s;
                        c = if c + 1 == c_n { 0 } else { c + 1 };
                        l += 1;
                    }
                    (y.add(at) as *mut Floats4).write(o);
                }
            } else {
                let (m, s) = stat(unit % c_n);
                let at = base + unit as usize;
                // SAFETY: `unit < plane_len * channels`, `n < images`.
                unsafe { y.add(at).write((x.add(at).read() - m) / s) };
            }
            n += step;
        }
    }
}
