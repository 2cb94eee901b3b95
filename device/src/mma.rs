//! Warp-level tensor-core products (`mma.sync`, sm_80) and the shared-memory loads that feed
//! them (`ldmatrix`).
//!
//! A warp multiplies a 16 x 16 tile of `A` by a 16 x 8 tile of `B` into a 16 x 8 tile of f32,
//! each operand spread over the 32 lanes as the PTX ISA's fragments. For lane `l` (`g = l / 4`,
//! `t = l % 4`), 16-bit operands, two elements per register, lower column first:
//! - `A` (row-major, `a[0..4]`): rows `g`, `g + 8`, `g`, `g + 8`; columns `2t, 2t + 1`, plus 8
//!   for `a[2]` and `a[3]`.
//! - `B` (`b[0..2]`): rows (`k`) `2t, 2t + 1`, plus 8 for `b[1]`; column `g`.
//! - `C`, `D` (`d[0..4]`): rows `g` (`d[0]`, `d[1]`) and `g + 8` (`d[2]`, `d[3]`), columns
//!   `2t + (i % 2)`.
//!
//! [`ldmatrix_x4`] loads four 8 x 8 16-bit matrices whose rows lanes 0-7, 8-15, 16-23 and
//! 24-31 address, into exactly these fragments: rows of `A` as they lie, and, with
//! [`ldmatrix_x4_trans`], columns of a row-major `B`.

use core::arch::asm;

/// Defines an `ldmatrix.x4` load, `$shape` being `""` or `".trans"`.
macro_rules! ldmatrix_op {
    ($(#[$doc:meta])* $name:ident, $shape:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub unsafe fn $name(addr: u32) -> [u32; 4] {
            let (a, b, c, d): (u32, u32, u32, u32);
            // SAFETY: guaranteed by the caller; reads shared memory only.
            unsafe {
                asm!(
                    concat!("ldmatrix.sync.aligned.m8n8.x4", $shape, ".shared.b16 {{{a}, {b}, {c}, {d}}}, [{p}];"),
                    a = out(reg32) a,
                    b = out(reg32) b,
                    c = out(reg32) c,
                    d = out(reg32) d,
                    p = in(reg32) addr,
                    options(nostack, readonly, preserves_flags)
                );
            }
            [a, b, c, d]
        }
    };
}

ldmatrix_op! {
    /// Loads four 8 x 8 matrices of 16-bit elements from shared memory: lane `l` gives the
    /// address of row `l % 8` of matrix `l / 8` (16 contiguous bytes) and receives, in register
    /// `j`, the elements `(l / 4, 2 (l % 4))` and `(l / 4, 2 (l % 4) + 1)` of matrix `j`.
    ///
    /// # Safety
    /// All 32 lanes must call it together, each with a 16-byte aligned shared address of 16
    /// initialised bytes. sm_75 or newer.
    ldmatrix_x4, ""
}

ldmatrix_op! {
    /// [`ldmatrix_x4`] with each matrix transposed: register `j` of lane `l` holds the elements
    /// `(2 (l % 4), l / 4)` and `(2 (l % 4) + 1, l / 4)` of matrix `j` (the `B` fragment of a
    /// row-major `B`).
    ///
    /// # Safety
    /// As for [`ldmatrix_x4`].
    ldmatrix_x4_trans, ".trans"
}

macro_rules! mma_op {
    ($(#[$doc:meta])* $name:ident, $shape:literal, $ty:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// All 32 lanes of the warp must call it together (converged). sm_80 or newer.
        #[inline(always)]
        pub unsafe fn $name(d: [f32; 4], a: [u32; 4], b: [u32; 2]) -> [f32; 4] {
            let mut r = d;
            // SAFETY: guaranteed by the caller; registers only.
            unsafe {
                asm!(
                    concat!("mma.sync.aligned.", $shape, ".row.col.f32.", $ty, ".", $ty, ".f32 "),
                    "{{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
                    d0 = inout(reg32) r[0],
                    d1 = inout(reg32) r[1],
                    d2 = inout(reg32) r[2],
                    d3 = inout(reg32) r[3],
                    a0 = in(reg32) a[0],
                    a1 = in(reg32) a[1],
                    a2 = in(reg32) a[2],
                    a3 = in(reg32) a[3],
                    b0 = in(reg32) b[0],
                    b1 = in(reg32) b[1],
                    options(nostack, pure, nomem, preserves_flags)
                );
            }
            r
        }
    };
}

mma_op! {
    /// `D = A B + C` for a 16 x 8 tile, bf16 operands (`K` = 16), f32 accumulators; fragments
    /// as in the module's documentation.
    mma_m16n8k16_bf16, "m16n8k16", "bf16"
}

mma_op! {
    /// `D = A B + C` for a 16 x 8 tile, f16 operands (`K` = 16), f32 accumulators.
    mma_m16n8k16_f16, "m16n8k16", "f16"
}

mma_op! {
    /// `D = A B + C` for a 16 x 8 tile, tf32 operands (`K` = 8: one element per register, `A`
    /// rows `g`, `g + 8`, `g`, `g + 8` and columns `t`, `t`, `t + 4`, `t + 4`; `B` rows `t` and
    /// `t + 4`, column `g`), f32 accumulators.
    mma_m16n8k8_tf32, "m16n8k8", "tf32"
}
