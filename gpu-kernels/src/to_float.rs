//! uint8 to f32, like `torchvision.transforms.v2.ToDtype(torch.float32, scale=...)`:
//! `y = f32(x) * scale`, with `scale` 1 or `f32(1/255)`.
//!
//! Where input and output are both 16-byte aligned, each thread converts 16 bytes with one
//! 16-byte load and four 16-byte stores; otherwise element by element.

use streamline_abi::image::ToFloatParams;
use streamline_abi::image::TO_FLOAT;
use streamline_device::kernel;
use streamline_device::thread::global_x;

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
        let x = p.x as *const u8;
        let y = p.y as *mut f32;
        let (first, stride) = global_x();
        let aligned = p.x % 16 == 0 && p.y % 16 == 0;
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
