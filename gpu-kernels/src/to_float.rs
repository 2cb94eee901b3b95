//! uint8 to f32, like `torchvision.transforms.v2.ToDtype(torch.float32, scale=...)`:
//! `y = f32(x) * scale`, with `scale` 1 or `f32(1/255)`.
//!
//! Where input and output are both 16-byte aligned, each thread converts 16 bytes with one
//! 16-byte load and four 16-byte stores; otherwise element by element.
//!
//! `to_float_relayout` converts and changes the layout in the same pass (uint8 NHWC from an
//! image decoder to the f32 NCHW a model takes, or back): one thread per pixel, its channels
//! read together and written together, so a warp's accesses to the planar side are contiguous
//! and those to the interleaved side cover one contiguous run of pixels.

use streamline_abi::image::{ToFloatParams, ToFloatRelayoutParams};
use streamline_abi::image::{TO_FLOAT, TO_FLOAT_RELAYOUT};
use streamline_device::kernel;
use streamline_device::thread::{block_dim_xyz, block_xyz, global_x, grid_dim_xyz, thread_xyz};

#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Bytes16([u8; 16]);

#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Floats4([f32; 4]);

kernel! {
    #[declared(TO_FLOAT)]
    /// # Safety
    /// `p.x` must address `p.n` readable bytes and `p.y` `p.n` writable f32 on the device.
    pub unsafe fn to_float(p: ToFloatParams) {
        let x = p.x.as_ptr();
        let y = p.y.as_mut_ptr();
        let (first, stride) = global_x();
        let aligned = p.x.addr() % 16 == 0 && p.y.addr() % 16 == 0;
        let vectors = if aligned { p.n / 16 } else { 0 };
        let mut v = first;
        while v < vectors {
            let off = (v * 16) as usize;
            // SAFETY: both bases are 16-byte aligned (checked above) and `off + 16 <= n`.
            unsafe {
                let b = (x.add(off) as *const Bytes16).read();
                let mut q = 0;
                while q < 4 {
                    let mut f = Floats4([0.0; 4]);
                    let mut l = 0;
                    while l < 4 {
                        f.0[l] = b.0[q * 4 + l] as f32 * p.scale;
                        l += 1;
                    }
                    (y.add(off + q * 4) as *mut Floats4).write(f);
                    q += 1;
                }
            }
            v += stride;
        }
        let mut i = vectors * 16 + first;
        while i < p.n {
            // SAFETY: `i < n`.
            unsafe {
                y.add(i as usize)
                    .write(x.add(i as usize).read() as f32 * p.scale)
            };
            i += stride;
        }
    }
}

kernel! {
    #[declared(TO_FLOAT_RELAYOUT)]
    /// # Safety
    /// `p.x` must address `images * channels * plane` readable bytes and `p.y` as many writable
    /// f32; an image (`channels * plane`) at most `2^32 - 1` values; any grid (blocks stride
    /// over the pixels along x and over the images along y).
    pub unsafe fn to_float_relayout(p: ToFloatRelayoutParams) {
        let (bx, by, _) = block_xyz();
        let (tx, _, _) = thread_xyz();
        let (dx, _, _) = block_dim_xyz();
        let (gx, gy, _) = grid_dim_xyz();
        let (c, plane) = (p.channels, p.plane);
        // Strides (pixel, channel) of the input and the output.
        let (src, dst) = if p.to_nchw != 0 { ((c, 1), (1, plane)) } else { ((1, plane), (c, 1)) };
        let image = c as usize * plane as usize;
        let mut n = by;
        while n < p.images {
            let x = p.x.as_ptr().wrapping_add(n as usize * image);
            let y = p.y.as_mut_ptr().wrapping_add(n as usize * image);
            let mut px = bx * dx + tx;
            while px < plane {
                let mut k = 0;
                while k < c {
                    // SAFETY: `px < plane`, `k < channels`, `n < images`: both offsets lie
                    // inside image `n` (at most `2^32 - 1` values).
                    unsafe {
                        let v = x.add((px * src.0 + k * src.1) as usize).read() as f32 * p.scale;
                        y.add((px * dst.0 + k * dst.1) as usize).write(v);
                    }
                    k += 1;
                }
                px += gx * dx;
            }
            n += gy;
        }
    }
}
