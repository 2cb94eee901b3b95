//! Split-K products whose `B` is a layer's weights with an SGD step owed: each block applies the
//! step to the vectors of `B` it reads, writes them back and multiplies them, so that the
//! update costs no pass of its own over the weights (the next forward product of a training
//! step reads them anyway). Each element is updated with the same operations as `sgd_f32` and
//! `sgd_pair_f32` (and `sgd_f32_bf16`), so the weights come out bit-identical to the update
//! pass followed by the product. There is no kernel for the mean of two bf16 gradients: under
//! the 255 registers a thread can have, its loop spills (the results history has the count).

use super::splitk::split_k;
use super::*;
use streamline_abi::matmul::{
    SplitKSgdParams, SGEMM_SPLITK_WIDE_SGD_BF16, SGEMM_SPLITK_WIDE_SGD_F32,
    SGEMM_SPLITK_WIDE_SGD_PAIR_F32,
};
use streamline_device::element::{bf16, Element};
use streamline_device::mem::{ldg8, st_stream16};

/// An element type of a gradient, read four at a time and held as loaded until it is used.
trait Grad: Element<Acc = f32> {
    /// Four elements as held in registers.
    type Four: Copy;
    /// Four zeros.
    const ZERO: Self::Four;

    /// The four elements at `p` with one load through the read-only path.
    ///
    /// # Safety
    /// `p` must address four elements of global memory, aligned to the size of all four, that
    /// no thread writes while the kernel runs.
    unsafe fn ldg4(p: *const Self) -> Self::Four;

    /// `four` with its element `j` read from `p`.
    ///
    /// # Safety
    /// `p` must address an element of global memory that no thread writes while the kernel runs.
    unsafe fn ld1(four: Self::Four, j: usize, p: *const Self) -> Self::Four;

    /// Element `j` of `four`, widened exactly to f32.
    fn widen(four: Self::Four, j: usize) -> f32;
}

impl Grad for f32 {
    type Four = [f32; 4];
    const ZERO: [f32; 4] = [0.0; 4];

    #[inline(always)]
    unsafe fn ldg4(p: *const f32) -> [f32; 4] {
        // SAFETY: forwarded.
        unsafe { ldg4(p) }
    }

    #[inline(always)]
    unsafe fn ld1(mut four: [f32; 4], j: usize, p: *const f32) -> [f32; 4] {
        // SAFETY: forwarded.
        four[j] = unsafe { ldg(p) };
        four
    }

    #[inline(always)]
    fn widen(four: [f32; 4], j: usize) -> f32 {
        four[j]
    }
}

/// Four bf16 as two 32-bit words, element `2 i` in the low half of word `i`: one 8-byte access,
/// two registers.
impl Grad for bf16 {
    type Four = [u32; 2];
    const ZERO: [u32; 2] = [0; 2];

    #[inline(always)]
    unsafe fn ldg4(p: *const bf16) -> [u32; 2] {
        // SAFETY: forwarded (8-byte aligned).
        unsafe { ldg8(p as *const [u32; 2]) }
    }

    #[inline(always)]
    unsafe fn ld1(mut four: [u32; 2], j: usize, p: *const bf16) -> [u32; 2] {
        // SAFETY: forwarded.
        let bits = unsafe { *p }.to_bits() as u32;
        four[j / 2] |= bits << (16 * (j % 2));
        four
    }

    #[inline(always)]
    fn widen(four: [u32; 2], j: usize) -> f32 {
        // A bf16 is the upper half of the f32 of the same value.
        let word = four[j / 2];
        f32::from_bits(if j % 2 == 0 {
            word << 16
        } else {
            word & 0xffff_0000
        })
    }
}

/// The first `valid` of the four elements at `p`, zeros after them; one load if `vec`.
///
/// # Safety
/// The first `valid` elements at `p` lie in global memory that no thread writes while the
/// kernel runs; with `vec`, all four, aligned to their size.
#[inline(always)]
unsafe fn read_four<G: Grad>(p: *const G, valid: usize, vec: bool) -> G::Four {
    // SAFETY: forwarded; each element is read only where it lies inside (written out, not a
    // loop, so that the four stay in registers).
    unsafe {
        if vec {
            return G::ldg4(p);
        }
        let mut four = G::ZERO;
        if valid > 0 {
            four = G::ld1(four, 0, p);
        }
        if valid > 1 {
            four = G::ld1(four, 1, p.add(1));
        }
        if valid > 2 {
            four = G::ld1(four, 2, p.add(2));
        }
        if valid > 3 {
            four = G::ld1(four, 3, p.add(3));
        }
        four
    }
}

/// `B = B - lr * g0`, or with `PAIR` `B = B - lr * (g0 + g1) / 2`, applied to each vector of
/// `B` as it is staged.
#[derive(Clone, Copy)]
struct Sgd<G, const PAIR: bool> {
    w: *mut f32,
    g: [*const G; 2],
    lr: f32,
}

impl<G: Grad, const PAIR: bool> Sgd<G, PAIR> {
    fn new(p: &SplitKSgdParams<G>) -> Sgd<G, PAIR> {
        Sgd {
            w: p.w.as_mut_ptr(),
            g: [p.g0.as_ptr(), p.g1.as_ptr()],
            lr: p.lr,
        }
    }
}

impl<G: Grad, const PAIR: bool> StageB for Sgd<G, PAIR> {
    type Held = [G::Four; 2];
    const EMPTY: [G::Four; 2] = [G::ZERO; 2];
    const WRITES_B: bool = true;

    #[inline(always)]
    unsafe fn held(&self, off: usize, valid: usize, vec: bool) -> [G::Four; 2] {
        // SAFETY: the gradients are laid out as `B` and aligned to four elements where `B` is
        // to 16 bytes (the contract of the kernels), so the elements inside `B` at `off` are
        // inside them, and aligned with `vec`; none is read where none lies inside (`valid` 0,
        // whose offset may lie past them: hence the wrapping offsets).
        unsafe {
            [
                read_four(self.g[0].wrapping_add(off), valid, vec),
                if PAIR {
                    read_four(self.g[1].wrapping_add(off), valid, vec)
                } else {
                    G::ZERO
                },
            ]
        }
    }

    #[inline(always)]
    unsafe fn stage(&self, v: F4, held: [G::Four; 2], off: usize, valid: usize, vec: bool) -> F4 {
        let mut out = v;
        for j in 0..4 {
            if j < valid {
                // The mean as `sgd_pair` takes it: the sum rounded once, halved exactly.
                let g = if PAIR {
                    (G::widen(held[0], j) + G::widen(held[1], j)) * 0.5
                } else {
                    G::widen(held[0], j)
                };
                out.0[j] = fmaf32(-self.lr, g, v.0[j]);
            }
        }
        // SAFETY: the first `valid` elements at `off` lie inside `B`, which this thread alone
        // reads and writes (one row of blocks, each vector fetched by one thread, and a vector
        // past `n` read from A instead: see `Tile::fetch_inside`); with `vec` and `valid` 4,
        // aligned. Nothing is written where `valid` is 0 (whose offset may lie past `B`).
        unsafe {
            let w = self.w.wrapping_add(off);
            if vec && valid == 4 {
                st_stream16(w as *mut [u32; 4], out.0.map(f32::to_bits));
            } else {
                for j in 0..4 {
                    if j < valid {
                        *w.add(j) = out.0[j];
                    }
                }
            }
        }
        out
    }

    #[inline(always)]
    fn from_row(self, rows: usize, ld: usize) -> Sgd<G, PAIR> {
        // Addresses one row further for each row of `B` (the gradients share its stride);
        // offsets only, dereferenced under the contract of `held` and `stage`.
        Sgd {
            w: self.w.wrapping_add(rows * ld),
            g: self.g.map(|g| g.wrapping_add(rows * ld)),
            ..self
        }
    }
}

/// The kernels' common body.
///
/// # Safety
/// The contract of the kernels below.
#[inline(always)]
unsafe fn sgd_split_k<G: Grad, const PAIR: bool>(p: SplitKSgdParams<G>) {
    type T = Tile<128, 128, 8, 16>;
    let u = Sgd::<G, PAIR>::new(&p);
    // SAFETY: forwarded.
    unsafe { split_k::<128, 128, 8, { T::LOADS_A }, { T::LOADS_B }, 16>(p.split, u) }
}

kernel! {
    #[declared(SGEMM_SPLITK_WIDE_SGD_F32)]
    /// [`super::splitk::sgemm_splitk_wide_128x128`] with `B` updated by the f32 gradient `g0`
    /// as it is read, and written back.
    ///
    /// # Safety
    /// As for [`super::splitk::sgemm_splitk_wide_128x128`]; `p.w` is the address of `B`,
    /// which one row of blocks reads (`m` at most 128) and which overlaps neither `A` nor the
    /// partials, and the gradients are laid out as `B` (aligned to four elements where `B` is
    /// to 16 bytes with `ldb` a multiple of 4), overlapping neither it nor the partials.
    pub unsafe fn sgemm_splitk_wide_sgd_f32(p: SplitKSgdParams<f32>) {
        // SAFETY: forwarded.
        unsafe { sgd_split_k::<f32, false>(p) }
    }
}

kernel! {
    #[declared(SGEMM_SPLITK_WIDE_SGD_PAIR_F32)]
    /// The same by the mean of the f32 gradients `g0` and `g1`.
    ///
    /// # Safety
    /// As for [`sgemm_splitk_wide_sgd_f32`].
    pub unsafe fn sgemm_splitk_wide_sgd_pair_f32(p: SplitKSgdParams<f32>) {
        // SAFETY: forwarded.
        unsafe { sgd_split_k::<f32, true>(p) }
    }
}

kernel! {
    #[declared(SGEMM_SPLITK_WIDE_SGD_BF16)]
    /// The same by the bf16 gradient `g0`, widened exactly.
    ///
    /// # Safety
    /// As for [`sgemm_splitk_wide_sgd_f32`].
    pub unsafe fn sgemm_splitk_wide_sgd_bf16(p: SplitKSgdParams<bf16>) {
        // SAFETY: forwarded.
        unsafe { sgd_split_k::<bf16, false>(p) }
    }
}
