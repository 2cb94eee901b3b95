//! Half-precision `C = alpha * A @ B + beta * C` on tensor cores (bf16 or f16 in and out,
//! f32 accumulation; row-major, leading dimensions), as a progression like the FP32 one.
//!
//! 1. [`step1_mma`]: warp-level `mma.sync` (m16n8k16) on fragments loaded by `ldmatrix` from
//!    swizzled shared-memory stages that `cp.async` fills, several stages in flight. Runs on
//!    sm_80 and newer.
//! 2. `step2_wgmma`: warp-specialised: a producer warpgroup drives the TMA into a ring of
//!    stages guarded by `mbarrier`s, two consumer warpgroups multiply with `wgmma`
//!    (m64n256k16) straight from shared memory. sm_90a only.
//! 3. `step3_persistent`: step 2 with one block per multiprocessor walking the tiles, the
//!    producer loading the next tile's stages while the consumers write the last one's
//!    results. sm_90a only.
//! 4. `step4_tma_store`: step 3 with the results converted into a swizzled staging area of
//!    shared memory and written by the TMA while the warpgroup multiplies its next tile.
//!    sm_90a only.
//!
//! Split-K ([`splitk`]): products whose output tiles cannot fill the GPU (a few rows times a
//! deep `K`) cut `K` into slices that steps 3 and 4 multiply into f32 planes, which
//! `hgemm_splitk_reduce_*` adds in slice order.
//!
//! Every product accumulates in f32 and rounds once to the output type (round to nearest
//! even); the order of the `k` sum differs between steps (and from cuBLAS), which the host's
//! error bound covers (`testing/src/reference/hgemm.rs`).

use streamline_device::device;

pub mod splitk;
pub mod step1_mma;
#[cfg(target_feature = "sm_90a")]
pub mod step2_wgmma;
#[cfg(target_feature = "sm_90a")]
pub mod step3_persistent;
#[cfg(target_feature = "sm_90a")]
pub mod step4_tma_store;

/// A 16-bit operand type of the tensor cores: conversions to and from f32 pairs and the
/// products that take it.
pub trait Operand {
    /// The element type in memory.
    type Elem: streamline_device::element::Element;
    /// Two f32 rounded to nearest-even into one register, `lo` in the low half.
    fn pack(lo: f32, hi: f32) -> u32;
    /// The two elements of a register, low half first.
    fn unpack(v: u32) -> (f32, f32);
    /// `mma.sync.m16n8k16` of this type (see `streamline_device::mma`).
    ///
    /// # Safety
    /// As for `streamline_device::mma::mma_m16n8k16_bf16`.
    unsafe fn mma(d: [f32; 4], a: [u32; 4], b: [u32; 2]) -> [f32; 4];
}

/// bf16 (`half::bf16`'s bits).
pub struct Bf16;
/// f16 (IEEE binary16).
pub struct F16;

device! {
    impl Operand for Bf16 {
        type Elem = streamline_device::bf16;
        #[inline(always)]
        fn pack(lo: f32, hi: f32) -> u32 {
            let r: u32;
            // SAFETY: a register conversion (sm_80).
            unsafe {
                core::arch::asm!(
                    "cvt.rn.bf16x2.f32 {r}, {hi}, {lo};",
                    r = out(reg32) r,
                    hi = in(reg32) hi,
                    lo = in(reg32) lo,
                    options(pure, nomem, nostack, preserves_flags)
                )
            };
            r
        }
        #[inline(always)]
        fn unpack(v: u32) -> (f32, f32) {
            (f32::from_bits(v << 16), f32::from_bits(v & 0xffff_0000))
        }
        #[inline(always)]
        unsafe fn mma(d: [f32; 4], a: [u32; 4], b: [u32; 2]) -> [f32; 4] {
            // SAFETY: forwarded.
            unsafe { streamline_device::mma::mma_m16n8k16_bf16(d, a, b) }
        }
    }

    impl Operand for F16 {
        type Elem = streamline_device::f16;
        #[inline(always)]
        fn pack(lo: f32, hi: f32) -> u32 {
            let r: u32;
            // SAFETY: a register conversion.
            unsafe {
                core::arch::asm!(
                    "cvt.rn.f16x2.f32 {r}, {hi}, {lo};",
                    r = out(reg32) r,
                    hi = in(reg32) hi,
                    lo = in(reg32) lo,
                    options(pure, nomem, nostack, preserves_flags)
                )
            };
            r
        }
        #[inline(always)]
        fn unpack(v: u32) -> (f32, f32) {
            let (lo, hi): (f32, f32);
            // SAFETY: register conversions.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .b16 l, h; mov.b32 {{l, h}}, {v}; cvt.f32.f16 {lo}, l; cvt.f32.f16 {hi}, h; }}",
                    v = in(reg32) v,
                    lo = out(reg32) lo,
                    hi = out(reg32) hi,
                    options(pure, nomem, nostack, preserves_flags)
                )
            };
            (lo, hi)
        }
        #[inline(always)]
        unsafe fn mma(d: [f32; 4], a: [u32; 4], b: [u32; 2]) -> [f32; 4] {
            // SAFETY: forwarded.
            unsafe { streamline_device::mma::mma_m16n8k16_f16(d, a, b) }
        }
    }

    /// Writes `alpha * (x, y) + beta * C` at row `row`, columns `col` and `col + 1` of `C`
    /// (`C` unread when `beta` is 0), the elements outside `C` skipped.
    #[inline(always)]
    pub(crate) fn store_pair<T: Operand>(
        p: &streamline_abi::hgemm::HgemmParams<T::Elem>,
        row: u32,
        col: u32,
        x: f32,
        y: f32,
    ) {
        if row >= p.m || col >= p.n {
            return;
        }
        let (mut x, mut y) = (p.alpha * x, p.alpha * y);
        let at = p.c.cast::<u16>().as_mut_ptr().wrapping_add(row as usize * p.ldc as usize + col as usize);
        if col + 1 < p.n {
            // SAFETY: `row < m`, `col + 1 < n`: two elements inside `C`, 4-byte aligned (`col`
            // even, `ldc` a multiple of 8, `c` 16-byte aligned: the kernels' contract).
            unsafe {
                if p.beta != 0.0 {
                    let (ox, oy) = T::unpack(*(at as *const u32));
                    x += p.beta * ox;
                    y += p.beta * oy;
                }
                *(at as *mut u32) = T::pack(x, y);
            }
        } else {
            // SAFETY: `row < m`, `col < n`: one element inside `C`.
            unsafe {
                if p.beta != 0.0 {
                    x += p.beta * T::unpack(*at as u32).0;
                }
                *at = T::pack(x, 0.0) as u16;
            }
        }
    }
}
