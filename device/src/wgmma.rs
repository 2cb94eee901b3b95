//! Hopper's warpgroup matrix multiply-accumulate (`wgmma`, sm_90a): four warps together
//! multiply a 64 x N tile, `A` and `B` read from shared memory through descriptors (or `A` from
//! registers), accumulating into f32 registers spread over the warpgroup's 128 threads; the
//! instructions run asynchronously, ordered by fences and commit groups.
//!
//! The sequence for one tile: [`fence`], the `mma_*` calls, [`commit_group`], then
//! [`wait_group`] before reading the accumulators or reusing the operands' shared memory.
//!
//! Accumulator layout (the PTX ISA's "register fragment" of `D`), for thread `t` of the
//! warpgroup (`w = t / 32`, `l = t % 32`) and register `i`: row `16 w + l / 4 + 8 ((i / 2) % 2)`,
//! column `8 (i / 4) + 2 (l % 4) + i % 2`.
//!
//! Operand layouts in shared memory are the "canonical" ones of the PTX ISA, described by
//! [`descriptor`]: K-major (`A` row-major, `B` column-major) or, for 16-bit types, MN-major
//! through the transpose flags.

use core::arch::asm;

/// The shared-memory swizzle of an operand, as a descriptor encodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Swizzle {
    /// No swizzle: 8 x 16-byte core matrices.
    Interleave = 0,
    /// 128-byte rows, 16-byte units XOR-permuted by the row within each group of 8 (TMA's
    /// `CU_TENSOR_MAP_SWIZZLE_128B`); tiles 1024-byte aligned.
    B128 = 1,
    /// 64-byte rows (`CU_TENSOR_MAP_SWIZZLE_64B`); tiles 512-byte aligned.
    B64 = 2,
    /// 32-byte rows (`CU_TENSOR_MAP_SWIZZLE_32B`); tiles 256-byte aligned.
    B32 = 3,
}

/// A shared-memory matrix descriptor: the operand starts at shared address `addr`; `leading`
/// and `stride` are the byte offsets between core-matrix groups the PTX ISA calls leading- and
/// stride-dimension offsets (for a K-major 128-byte-swizzled operand: `leading` unused, `stride`
/// the 1024 bytes between groups of 8 rows; for an MN-major one: `leading` between groups of 64
/// MN-elements, `stride` between groups of 8 K-rows). All three are multiples of 16.
#[inline(always)]
pub const fn descriptor(addr: u32, leading: u32, stride: u32, swizzle: Swizzle) -> u64 {
    ((addr as u64 & 0x3_ffff) >> 4)
        | (((leading as u64 >> 4) & 0x3fff) << 16)
        | (((stride as u64 >> 4) & 0x3fff) << 32)
        | ((swizzle as u64) << 62)
}

/// Orders this warpgroup's earlier register and shared-memory accesses before the `wgmma`
/// instructions that follow (required before the first, and after touching accumulators).
///
/// # Safety
/// All threads of the warpgroup must call it together. sm_90a only.
#[inline(always)]
pub unsafe fn fence() {
    // SAFETY: guaranteed by the caller; a fence, touching no memory.
    unsafe {
        asm!(
            "wgmma.fence.sync.aligned;",
            options(nostack, preserves_flags)
        )
    }
}

/// Closes the group of `wgmma` instructions issued since the last commit.
///
/// # Safety
/// All threads of the warpgroup must call it together. sm_90a only.
#[inline(always)]
pub unsafe fn commit_group() {
    // SAFETY: guaranteed by the caller; marks a group, touching no memory.
    unsafe {
        asm!(
            "wgmma.commit_group.sync.aligned;",
            options(nostack, preserves_flags)
        )
    }
}

/// Waits until at most `N` committed groups are pending: the older ones' accumulators are
/// written and their operands' shared memory may be reused.
///
/// # Safety
/// All threads of the warpgroup must call it together. sm_90a only.
#[inline(always)]
pub unsafe fn wait_group<const N: u32>() {
    // SAFETY: guaranteed by the caller; waits, touching no memory of its own.
    unsafe {
        asm!(
            "wgmma.wait_group.sync.aligned {n};",
            n = const N,
            options(nostack, preserves_flags)
        )
    }
}

/// Raises this warpgroup's register budget to `N` per thread (24..=256, a multiple of 8), for
/// the warpgroups that hold accumulators, while [`release_registers`] lowers the others'.
///
/// # Safety
/// All threads of the warpgroup must call it together, in a kernel whose launch leaves the
/// registers free (launch bounds with one block per multiprocessor). sm_90a only.
#[inline(always)]
pub unsafe fn claim_registers<const N: u32>() {
    // SAFETY: guaranteed by the caller; changes the register allocation only.
    unsafe {
        asm!(
            "setmaxnreg.inc.sync.aligned.u32 {n};",
            n = const N,
            options(nostack, preserves_flags)
        )
    }
}

/// Lowers this warpgroup's register budget to `N` per thread (see [`claim_registers`]).
///
/// # Safety
/// As for [`claim_registers`]; the warpgroup must not need more than `N` registers afterwards.
#[inline(always)]
pub unsafe fn release_registers<const N: u32>() {
    // SAFETY: guaranteed by the caller; changes the register allocation only.
    unsafe {
        asm!(
            "setmaxnreg.dec.sync.aligned.u32 {n};",
            n = const N,
            options(nostack, preserves_flags)
        )
    }
}

/// Defines `wgmma.mma_async.m64nNk16.f32.T.T` with both operands from shared memory.
macro_rules! wgmma_op {
    ($(#[$doc:meta])* $name:ident, $ty:literal, $n:literal, $regs:literal, [$first:literal $($i:literal)*]) => {
        $(#[$doc])*
        ///
        /// `d` is this thread's part of `D` (see the module's layout); `a` and `b` are
        /// [`descriptor`]s; with `accumulate` false, `D = A B` (the old `d` is ignored).
        /// `TRANS_A` / `TRANS_B` = 1 read that operand MN-major instead of K-major.
        ///
        /// # Safety
        /// All threads of the warpgroup must call it together, between [`fence`] and
        /// [`commit_group`]; the descriptors must describe initialised shared memory that
        /// stays unchanged until [`wait_group`] says the group is done, and `d` must not be
        /// read before then. sm_90a only.
        #[inline(always)]
        pub unsafe fn $name<const TRANS_A: u32, const TRANS_B: u32>(
            d: &mut [f32; $regs],
            a: u64,
            b: u64,
            accumulate: bool,
        ) {
            // SAFETY: guaranteed by the caller; reads the operands' shared memory and updates
            // `d`, asynchronously.
            unsafe {
                asm!(
                    "{{ .reg .pred p; setp.ne.b32 p, {sc}, 0;",
                    concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " {{"),
                    concat!("{", stringify!($first), "}"),
                    $(concat!(", {", stringify!($i), "}"),)*
                    "}}, {a}, {b}, p, 1, 1, {ta}, {tb}; }}",
                    inout(reg32) d[$first],
                    $(inout(reg32) d[$i],)*
                    a = in(reg64) a,
                    b = in(reg64) b,
                    sc = in(reg32) accumulate as u32,
                    ta = const TRANS_A,
                    tb = const TRANS_B,
                    options(nostack, preserves_flags)
                );
            }
        }
    };
}

wgmma_op! {
    /// `D (+)= A B` for a 64 x 64 tile of `D` in f32 and bf16 operands with `K` = 16.
    mma_m64n64k16_bf16, "bf16", "64", 32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31]
}
wgmma_op! {
    /// `D (+)= A B` for a 64 x 128 tile of `D` in f32 and bf16 operands with `K` = 16.
    mma_m64n128k16_bf16, "bf16", "128", 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
}
wgmma_op! {
    /// `D (+)= A B` for a 64 x 256 tile of `D` in f32 and bf16 operands with `K` = 16.
    mma_m64n256k16_bf16, "bf16", "256", 128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
}
wgmma_op! {
    /// `D (+)= A B` for a 64 x 64 tile of `D` in f32 and f16 operands with `K` = 16.
    mma_m64n64k16_f16, "f16", "64", 32, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31]
}
wgmma_op! {
    /// `D (+)= A B` for a 64 x 128 tile of `D` in f32 and f16 operands with `K` = 16.
    mma_m64n128k16_f16, "f16", "128", 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
}
wgmma_op! {
    /// `D (+)= A B` for a 64 x 256 tile of `D` in f32 and f16 operands with `K` = 16.
    mma_m64n256k16_f16, "f16", "256", 128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
}

/// Defines `wgmma.mma_async.m64nNk8.f32.tf32.tf32` with both operands from shared memory.
macro_rules! wgmma_tf32_op {
    ($(#[$doc:meta])* $name:ident, $n:literal, $regs:literal, [$first:literal $($i:literal)*]) => {
        $(#[$doc])*
        ///
        /// The operands are f32 in shared memory, of which the tensor cores read the TF32 part
        /// (the sign, the exponent and the top 10 bits of the mantissa; the rest is ignored).
        /// Both operands K-major (TF32 has no transposed form).
        ///
        /// `d` is this thread's part of `D` (see the module's layout); `a` and `b` are
        /// [`descriptor`]s; with `accumulate` false, `D = A B` (the old `d` is ignored).
        ///
        /// # Safety
        /// As for [`mma_m64n256k16_bf16`].
        #[inline(always)]
        pub unsafe fn $name(d: &mut [f32; $regs], a: u64, b: u64, accumulate: bool) {
            // SAFETY: guaranteed by the caller; reads the operands' shared memory and updates
            // `d`, asynchronously.
            unsafe {
                asm!(
                    "{{ .reg .pred p; setp.ne.b32 p, {sc}, 0;",
                    concat!("wgmma.mma_async.sync.aligned.m64n", $n, "k8.f32.tf32.tf32 {{"),
                    concat!("{", stringify!($first), "}"),
                    $(concat!(", {", stringify!($i), "}"),)*
                    "}}, {a}, {b}, p, 1, 1; }}",
                    inout(reg32) d[$first],
                    $(inout(reg32) d[$i],)*
                    a = in(reg64) a,
                    b = in(reg64) b,
                    sc = in(reg32) accumulate as u32,
                    options(nostack, preserves_flags)
                );
            }
        }
    };
}

wgmma_tf32_op! {
    /// `D (+)= A B` for a 64 x 128 tile of `D` in f32 and TF32 operands with `K` = 8.
    mma_m64n128k8_tf32, "128", 64, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63]
}
wgmma_tf32_op! {
    /// `D (+)= A B` for a 64 x 256 tile of `D` in f32 and TF32 operands with `K` = 8.
    mma_m64n256k8_tf32, "256", 128, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127]
}
