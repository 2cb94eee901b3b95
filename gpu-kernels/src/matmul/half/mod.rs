//! Half-precision `C = alpha * A @ B + beta * C` on tensor cores (bf16 or f16 in and out,
//! f32 accumulation; row-major, leading dimensions), as a progression like the FP32 one; step
//! 3 also multiplies f32 matrices as TF32 (f32 out).
//!
//! 1. [`step1_mma`]: warp-level `mma.sync` (m16n8k16) on fragments loaded by `ldmatrix` from
//!    swizzled shared-memory stages that `cp.async` fills, several stages in flight. Runs on
//!    sm_80 and newer.
//! 2. `step2_wgmma`: warp-specialised: a producer warpgroup drives the TMA into a ring of
//!    stages guarded by `mbarrier`s, two consumer warpgroups multiply with `wgmma`
//!    (m64n256k16) straight from shared memory. sm_90a only.
//! 3. `step3_persistent`: step 2 with one block per multiprocessor walking the tiles, the
//!    producer loading the next tile's stages while the consumers write the last one's
//!    results. sm_90a only. Its TF32 kernel reads `B` K-major (the only way `wgmma` takes
//!    TF32), from a transposed copy the host makes.
//! 4. `step4_tma_store`: step 3 with the results converted into a swizzled staging area of
//!    shared memory and written by the TMA while the warpgroup multiplies its next tile.
//!    sm_90a only.
//! 5. `step5_narrow`: step 4 with tiles half as wide (128 x 128), for products whose wide tiles
//!    would leave multiprocessors idle. sm_90a only.
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
#[cfg(target_feature = "sm_90a")]
pub mod step5_narrow;

/// How a product's f32 results are written to `C`'s element type.
pub trait Output {
    /// The element type in memory.
    type Elem: streamline_device::element::Element;
    /// Writes `v + beta * *at` (the old value unread when `beta` is 0), rounded, to `*at`.
    ///
    /// # Safety
    /// `at` must address an element of `C`.
    unsafe fn write(at: *mut Self::Elem, v: f32, beta: f32);
    /// Writes `(x, y) + beta * (at[0], at[1])` to `at[0]` and `at[1]`.
    ///
    /// # Safety
    /// `at` must address two elements of `C`, aligned to the size of both.
    unsafe fn write2(at: *mut Self::Elem, x: f32, y: f32, beta: f32);
    /// Writes `x` and `y`, rounded, side by side at shared address `at`.
    ///
    /// # Safety
    /// `at` must address two elements of the block's shared memory, aligned to the size of
    /// both, that nothing else reads or writes meanwhile.
    unsafe fn stage2(at: u32, x: f32, y: f32);
}

/// A 16-bit operand type of the tensor cores: conversions to and from f32 pairs and the
/// products that take it.
pub trait Operand: Output {
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
/// f32 in memory, multiplied as TF32 (see `streamline_device::wgmma::mma_m64n256k8_tf32`).
pub struct Tf32;

/// [`Output`] of a 16-bit [`Operand`] type: its stores go through `pack` and `unpack`.
macro_rules! output_16 {
    ($t:ty, $elem:ty) => {
        impl Output for $t {
            type Elem = $elem;
            #[inline(always)]
            unsafe fn stage2(at: u32, x: f32, y: f32) {
                // SAFETY: forwarded.
                unsafe { stage2_16::<Self>(at, x, y) }
            }
            #[inline(always)]
            unsafe fn write(at: *mut Self::Elem, v: f32, beta: f32) {
                // SAFETY: forwarded.
                unsafe { write_16::<Self>(at.cast(), v, beta) }
            }
            #[inline(always)]
            unsafe fn write2(at: *mut Self::Elem, x: f32, y: f32, beta: f32) {
                // SAFETY: forwarded.
                unsafe { write2_16::<Self>(at.cast(), x, y, beta) }
            }
        }
    };
}

#[cfg(target_arch = "nvptx64")]
output_16!(Bf16, streamline_device::bf16);
#[cfg(target_arch = "nvptx64")]
output_16!(F16, streamline_device::f16);

device! {
    impl Output for Tf32 {
        type Elem = f32;
        #[inline(always)]
        unsafe fn stage2(at: u32, x: f32, y: f32) {
            // SAFETY: two f32 of shared memory, 8-byte aligned (the contract).
            unsafe {
                core::arch::asm!(
                    "st.shared.v2.f32 [{a}], {{{x}, {y}}};",
                    a = in(reg32) at,
                    x = in(reg32) x,
                    y = in(reg32) y,
                    options(nostack, preserves_flags)
                )
            };
        }
        #[inline(always)]
        unsafe fn write(at: *mut f32, v: f32, beta: f32) {
            // SAFETY: an element of `C` (the contract).
            unsafe { *at = if beta != 0.0 { v + beta * *at } else { v } };
        }
        #[inline(always)]
        unsafe fn write2(at: *mut f32, x: f32, y: f32, beta: f32) {
            let at = at as *mut [f32; 2];
            // SAFETY: two elements of `C`, 8-byte aligned (the contract).
            unsafe {
                *at = if beta != 0.0 {
                    let [ox, oy] = *at;
                    [x + beta * ox, y + beta * oy]
                } else {
                    [x, y]
                }
            };
        }
    }

    /// [`Output::stage2`] of a 16-bit type: one 4-byte store.
    ///
    /// # Safety
    /// As for [`Output::stage2`].
    #[inline(always)]
    unsafe fn stage2_16<T: Operand>(at: u32, x: f32, y: f32) {
        // SAFETY: two elements of shared memory, 4-byte aligned (the contract).
        unsafe {
            core::arch::asm!(
                "st.shared.b32 [{a}], {v};",
                a = in(reg32) at,
                v = in(reg32) T::pack(x, y),
                options(nostack, preserves_flags)
            )
        };
    }

    /// [`Output::write`] of a 16-bit type.
    ///
    /// # Safety
    /// As for [`Output::write`].
    #[inline(always)]
    unsafe fn write_16<T: Operand>(at: *mut u16, mut v: f32, beta: f32) {
        // SAFETY: an element of `C` (the contract).
        unsafe {
            if beta != 0.0 {
                v += beta * T::unpack(*at as u32).0;
            }
            *at = T::pack(v, 0.0) as u16;
        }
    }

    /// [`Output::write2`] of a 16-bit type: one 4-byte access.
    ///
    /// # Safety
    /// As for [`Output::write2`].
    #[inline(always)]
    unsafe fn write2_16<T: Operand>(at: *mut u16, mut x: f32, mut y: f32, beta: f32) {
        let at = at as *mut u32;
        // SAFETY: two elements of `C`, 4-byte aligned (the contract).
        unsafe {
            if beta != 0.0 {
                let (ox, oy) = T::unpack(*at);
                x += beta * ox;
                y += beta * oy;
            }
            *at = T::pack(x, y);
        }
    }

    impl Operand for Bf16 {
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
    pub(crate) fn store_pair<T: Output>(
        p: &streamline_abi::hgemm::HgemmParams<T::Elem>,
        row: u32,
        col: u32,
        x: f32,
        y: f32,
    ) {
        if row >= p.m || col >= p.n {
            return;
        }
        let at = p.c.as_mut_ptr().wrapping_add(row as usize * p.ldc as usize + col as usize);
        if col + 1 < p.n {
            // SAFETY: `row < m`, `col + 1 < n`: two elements inside `C`, aligned to both (`col`
            // even, `ldc` a multiple of 16 bytes, `c` 16-byte aligned: the kernels' contract).
            unsafe { T::write2(at, p.alpha * x, p.alpha * y, p.beta) };
        } else {
            // SAFETY: `row < m`, `col < n`: one element inside `C`.
            unsafe { T::write(at, p.alpha * x, p.beta) };
        }
    }
}
