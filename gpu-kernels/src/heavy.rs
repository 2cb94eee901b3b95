//! Seed 000's heavy elementwise computation, fused into one pass over memory.
//!
//! `y = x^2 + x^3 * (sin x * cos x) + tan x`, evaluated in f32 in that order (PyTorch's order
//! for the seed's expression), with `sin` and `cos` from one libdevice `sincosf` and
//! `tan x = sin x / cos x` by the hardware reciprocal division (2 ulp: `|cos x|` of an f32 `x`
//! is never below 2^-126, where that bound holds). The error budget is written out in
//! `testing/src/reference/heavy.rs`. The f16 and bf16 kernels read their type, compute in f32
//! and round once to it at the end.
//!
//! Memory is accessed with 16-byte vector loads and stores wherever input and output share an
//! alignment (see [`streamline_abi::VectorSplit`]); the unaligned head and the tail are scalar.

use streamline_abi::heavy::HeavyParams;
use streamline_abi::heavy::{HEAVY_BF16, HEAVY_F16, HEAVY_F32};
use streamline_abi::VectorSplit;
use streamline_device::kernel;
use streamline_device::{
    math::{fast_div, sincosf},
    thread::global_x,
};

#[inline(always)]
fn heavy(x: f32) -> f32 {
    let (s, c) = sincosf(x);
    let x2 = x * x;
    let x3 = x2 * x;
    x2 + x3 * (s * c) + fast_div(s, c)
}

#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Vec16<T: Copy, const L: usize>([T; L]);

/// One elementwise kernel over `T`, with `load`/`store` converting to and from f32.
#[inline(always)]
unsafe fn run<E: streamline_device::element::Element, T: Copy, const L: usize>(
    p: HeavyParams<E>,
    load: fn(T) -> f32,
    store: fn(f32) -> T,
) {
    let elem = core::mem::size_of::<T>() as u64;
    let split = VectorSplit::new(p.x.addr(), p.y.addr(), p.n, elem);
    let x = p.x.cast::<T>().as_ptr();
    let y = p.y.cast::<T>().as_mut_ptr();
    let (first, stride) = global_x();

    let mut v = first;
    while v < split.vectors {
        let off = (split.head + v * L as u64) as usize;
        // SAFETY: `VectorSplit` guarantees `x + off` and `y + off` are 16-byte aligned and that
        // the L elements starting there lie inside `[0, n)`, which the host validated.
        unsafe {
            let src = (x.add(off) as *const Vec16<T, L>).read();
            let mut dst = src;
            let mut l = 0;
            while l < L {
                dst.0[l] = store(heavy(load(src.0[l])));
                l += 1;
            }
            (y.add(off) as *mut Vec16<T, L>).write(dst);
        }
        v += stride;
    }

    let mut i = first;
    while i < split.scalars() {
        let idx = split.scalar_index(i, elem) as usize;
        // SAFETY: `scalar_index` maps `i < scalars()` into `[0, n)`.
        unsafe { y.add(idx).write(store(heavy(load(x.add(idx).read())))) };
        i += stride;
    }
}

kernel! {
    #[declared(HEAVY_F32)]
    /// f32 in, f32 out.
    ///
    /// # Safety
    /// `p.x` and `p.y` must address `p.n` readable and writable f32 values on the device.
    pub unsafe fn heavy_f32(p: HeavyParams<f32>) {
        // SAFETY: forwarded from this function's contract.
        unsafe { run::<f32, f32, 4>(p, |v| v, |v| v) }
    }
}

kernel! {
    #[declared(HEAVY_F16)]
    /// f16 in memory, f32 arithmetic, one rounding to nearest-even f16 at the end.
    ///
    /// # Safety
    /// `p.x` and `p.y` must address `p.n` readable and writable f16 values on the device.
    pub unsafe fn heavy_f16(p: HeavyParams<streamline_device::f16>) {
        // SAFETY: forwarded from this function's contract.
        unsafe { run::<_, u16, 8>(p, |b| f16::from_bits(b) as f32, |v| (v as f16).to_bits()) }
    }
}

kernel! {
    #[declared(HEAVY_BF16)]
    /// bf16 in memory, f32 arithmetic, one rounding to nearest-even bf16 at the end.
    ///
    /// # Safety
    /// `p.x` and `p.y` must address `p.n` readable and writable bf16 values on the device.
    pub unsafe fn heavy_bf16(p: HeavyParams<streamline_device::bf16>) {
        use streamline_device::element::{bf16, Element};
        // SAFETY: forwarded from this function's contract.
        unsafe {
            run::<_, u16, 8>(
                p,
                |b| bf16::from_bits(b).to_acc(),
                |v| bf16::from_acc(v).to_bits(),
            )
        }
    }
}
