//! What the steps share: the slots that hold a pixel's channels in shared memory, the block's
//! setup record and shared memory, the haloed tile the block works on with the loop over its
//! rotated pixels, and the blur weights. Each step reads the same record, addresses the same
//! regions and walks the same pixels, so they are defined once here rather than by the step
//! that happens to use them first.

use super::blur::FAST_TAPS;
use super::divisors::for_cells;
use super::dyadic::DyadicLayout;
use super::staging::Window;
use super::taps::{Axis, CropTap};

use crate::gaussian_blur::sum;
use crate::sampling::{LinearTaps, Roi, Rotation};
use core::intrinsics::fmaf32 as fmaf;
use streamline_abi::image::AUGMENT_SETUP_BYTES;

/// The channels of one pixel in shared memory, in a slot padded to a power of two so that one
/// shared access moves them all.
pub(super) trait Px: Slot {
    /// The slot of the dyadic kernels' rotated tile for as many channels.
    type Sums: SumSlot;
    fn zero() -> Self;
    fn set(&mut self, c: usize, v: f32);
}

/// A pixel's channels as the horizontal pass reads them from the rotated tile.
pub(super) trait Slot: Copy {
    fn get(&self, c: usize) -> f32;
}

macro_rules! px {
    ($name:ident, $lanes:literal, $align:literal, $sums:ident) => {
        #[repr(C, align($align))]
        #[derive(Clone, Copy)]
        pub(super) struct $name(pub(super) [f32; $lanes]);
        impl Slot for $name {
            #[inline(always)]
            fn get(&self, c: usize) -> f32 {
                self.0[c]
            }
        }
        impl Px for $name {
            type Sums = $sums;
            #[inline(always)]
            fn zero() -> Self {
                $name([0.0; $lanes])
            }
            #[inline(always)]
            fn set(&mut self, c: usize, v: f32) {
                self.0[c] = v
            }
        }
    };
}
px!(Px1, 1, 4, Px1);
px!(Px2, 2, 8, Sums2);
px!(Px4, 4, 16, Sums4);

/// The dyadic kernels' rotated values (integers below `2^16`, in 64ths of the input's units)
/// of up to two channels, or of up to four, packed as 16-bit halves: half the shared-memory
/// traffic of f32 slots for the rotation's stores and the horizontal pass's reads. One channel
/// keeps its f32 slot (`Px1`), which is as small as a word.
#[repr(C, align(4))]
#[derive(Clone, Copy)]
pub(super) struct Sums2(u32);
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(super) struct Sums4([u32; 2]);

/// The channels' 16-bit half `c` of `w`, exactly as f32.
#[inline(always)]
fn half(w: u32, c: usize) -> f32 {
    (if c % 2 == 0 { w & 0xffff } else { w >> 16 }) as f32
}

/// The per-block values one thread computes for all, kept in shared memory.
#[derive(Clone, Copy)]
pub(super) struct Setup {
    pub(super) rot: Rotation,
    pub(super) roi: Roi,
    pub(super) whole: Window,
    pub(super) mean: [f32; 4],
    pub(super) inv_std: [f32; 4],
    /// The dyadic path's staging of `whole` ([`Tile::dyadic_layout`]).
    pub(super) layout: DyadicLayout,
    /// A ragged batch's image ([`Crop::ragged`]).
    pub(super) image: RaggedImage,
}

const _: () = assert!(core::mem::size_of::<Setup>() <= AUGMENT_SETUP_BYTES as usize);

/// Where a ragged batch's image lies ([`Crop::ragged`]): its offset in the input (low and high
/// words), height, width, and the uint8-to-float multiplier (NaN for an extent that does not
/// fit).
#[derive(Clone, Copy)]
pub(super) struct RaggedImage {
    pub(super) offset: [u32; 2],
    pub(super) h: u32,
    pub(super) w: u32,
    pub(super) scale: f32,
}

/// The block's shared memory, as laid out by `augment_shared_bytes`.
pub(super) struct Shared<T> {
    pub(super) setup: *mut Setup,
    /// Blur weights (unnormalised).
    pub(super) wts: *mut f32,
    /// The rotation's terms `(gx, gy)`: `side` columns, then `side` rows.
    pub(super) table: *mut [f32; 2],
    /// Resize taps of the window's resized rows, then of its columns.
    pub(super) taps_y: *mut Axis,
    pub(super) taps_x: *mut Axis,
    /// The same two tables' 32-bit shared-memory addresses, for the rotation's reads: a generic
    /// pointer into them costs a conversion for every read.
    pub(super) taps_at: (u32, u32),
    /// Crop taps of the window's crop rows, then of its columns (staged input path).
    pub(super) ctap_y: *mut CropTap,
    pub(super) ctap_x: *mut CropTap,
    /// The rotated tile, `side` rows of `pitch` pixels.
    pub(super) rotated: *mut T,
    /// The crop window, later the horizontally blurred tile (`side` rows of
    /// `AUGMENT_HBUF_PITCH`).
    pub(super) scratch: *mut T,
    /// Its 32-bit shared-memory address, for the dyadic path's reads.
    pub(super) scratch_at: u32,
    /// The staged input window, packed pixels.
    pub(super) input: *mut u32,
}

/// What the block's steps need, the same in every thread of the block, for a block working
/// down a strip of tiles (`STRIP`) or on one, keeping the next tile's halo rows in a ring or
/// copying them up (`COPY`, see [`Tile::slot`]).
#[derive(Clone, Copy)]
pub(super) struct Tile<const STRIP: bool, const COPY: bool> {
    /// Output row and column of the haloed tile's top-left pixel (before reflection).
    pub(super) top: i32,
    pub(super) left: i32,
    /// Side and row pitch of the haloed tile.
    pub(super) side: u32,
    pub(super) pitch: u32,
    /// Row of the rotated tile's ring (see [`Tile::slot`]) that holds the haloed tile's first
    /// row (unused where `COPY`).
    pub(super) ring: u32,
    pub(super) oh: i32,
    pub(super) ow: i32,
    pub(super) nearest: bool,
    /// The resize's scales (`crop / out`, f32 as torch computes them) and the crop size.
    pub(super) sh: f32,
    pub(super) sw: f32,
    pub(super) crop_h: u32,
    pub(super) crop_w: u32,
    /// Entries of each tap table, and pixels of the scratch region.
    pub(super) taps_len: u32,
    pub(super) budget: u32,
}

// The first `impl` of this module; `Weights`' comes after the slots' (see the note on the files
// in mod.rs).
impl<const STRIP: bool, const COPY: bool> Tile<STRIP, COPY> {
    /// Bytes of the scratch region (the crop window's room), for cells of `T`.
    #[inline(always)]
    pub(super) fn scratch_bytes<T>(&self) -> u32 {
        self.budget * size_of::<T>() as u32
    }

    /// Resize taps along y of resized row `zi`.
    #[inline(always)]
    pub(super) fn taps_y(&self, zi: i32) -> LinearTaps {
        LinearTaps::new(self.sh, zi as u32, self.crop_h)
    }

    /// Resize taps along x of resized column `zj`.
    #[inline(always)]
    pub(super) fn taps_x(&self, zj: i32) -> LinearTaps {
        LinearTaps::new(self.sw, zj as u32, self.crop_w)
    }

    /// [`Tile::rotate`] with `value(gx, gy)` the rotated value at the normalised source point
    /// `(gx, gy)` ([`Rotation::finish`] gives it in pixels), one loop per interpolation so that
    /// the choice is made once, not per pixel.
    ///
    /// # Safety
    /// As for [`Tile::rotate`], and `value` reads only what was staged; the slots `V` it gives
    /// are no larger and no more aligned than `T` (the rotated tile holds `V` slots `pitch` to a
    /// row).
    #[inline(always)]
    pub(super) unsafe fn rotate_with<T: Px, V: Slot>(
        &self,
        s: &Shared<T>,
        (i0, j0): (u32, u32),
        (h, w): (u32, u32),
        value: impl Fn(f32, f32) -> V,
    ) {
        let (side, pitch) = (self.side as usize, self.pitch as usize);
        let tab = s.table as *const [f32; 2];
        for_cells::<STRIP>(h, w, |_, i, j| {
            let (ti, tj) = ((i0 + i) as usize, (j0 + j) as usize);
            // SAFETY: `ti, tj < side`: inside the table.
            let (gx, gy) = unsafe {
                let (c, r) = (*tab.add(tj), *tab.add(side + ti));
                (c[0] + r[0], c[1] + r[1])
            };
            let v = value(gx, gy);
            let row = self.slot(ti as u32) as usize;
            // SAFETY: `row, tj < side <= pitch`: inside the rotated tile (whose slots `T` are at
            // least as large as `V`, and as aligned); this thread's pixel.
            unsafe { *(s.rotated as *mut V).add(row * pitch + tj) = v };
        });
    }
}

impl Slot for Sums2 {
    #[inline(always)]
    fn get(&self, c: usize) -> f32 {
        half(self.0, c)
    }
}

impl Slot for Sums4 {
    #[inline(always)]
    fn get(&self, c: usize) -> f32 {
        half(self.0[c / 2], c)
    }
}

/// A slot of the dyadic path's rotated tile.
pub(super) trait SumSlot: Slot {
    /// The slot of a rotated value from its channels' sums (each below `2^16`).
    fn from_sums<const C: usize>(acc: [u32; C]) -> Self;
}

impl SumSlot for Px1 {
    #[inline(always)]
    fn from_sums<const C: usize>(acc: [u32; C]) -> Self {
        Px1([acc[0] as f32])
    }
}

impl SumSlot for Sums2 {
    #[inline(always)]
    fn from_sums<const C: usize>(acc: [u32; C]) -> Self {
        let at = |c: usize| if c < C { acc[c] } else { 0 };
        Sums2(at(0) | at(1) << 16)
    }
}

impl SumSlot for Sums4 {
    #[inline(always)]
    fn from_sums<const C: usize>(acc: [u32; C]) -> Self {
        let at = |c: usize| if c < C { acc[c] } else { 0 };
        Sums4([at(0) | at(1) << 16, at(2) | at(3) << 16])
    }
}

/// The blur weights, unnormalised: in registers on the fast path (`FAST`, 7 taps), read from
/// shared memory otherwise.
#[derive(Clone, Copy)]
pub(super) struct Weights<const FAST: bool> {
    reg: [f32; FAST_TAPS],
    shared: *const f32,
    taps: usize,
}

impl<const FAST: bool> Weights<FAST> {
    /// # Safety
    /// `shared` must hold the `taps` weights, written before the last barrier.
    #[inline(always)]
    pub(super) unsafe fn new(shared: *const f32, taps: usize) -> Self {
        let mut reg = [0.0; FAST_TAPS];
        if FAST {
            for (t, r) in reg.iter_mut().enumerate() {
                // SAFETY: the fast path's table holds `FAST_TAPS` weights.
                *r = unsafe { *shared.add(t) };
            }
        }
        Weights { reg, shared, taps }
    }

    /// torchvision normalises each 1-D kernel by its sum; the product of both normalisations,
    /// applied once to the result.
    #[inline(always)]
    pub(super) fn norm(&self) -> f32 {
        let total = if FAST {
            self.reg.iter().fold(0.0f32, |a, w| a + w)
        } else {
            // SAFETY: `shared` holds `taps` weights (`Weights::new`).
            unsafe { sum(self.shared, self.taps as u32) }
        };
        (1.0 / total) * (1.0 / total)
    }

    /// Weight `t < taps`.
    #[inline(always)]
    pub(super) fn at(&self, t: usize) -> f32 {
        if FAST {
            self.reg[t]
        } else {
            // SAFETY: `t < taps`: inside the weights.
            unsafe { *self.shared.add(t) }
        }
    }

    /// `sum_t w[t] * at(t)` per channel, as fused multiply-adds.
    #[inline(always)]
    pub(super) fn dot<const C: usize, T: Px>(&self, at: impl Fn(usize) -> T) -> [f32; C] {
        let mut acc = [0.0f32; C];
        let taps = if FAST { FAST_TAPS } else { self.taps };
        for t in 0..taps {
            let wt = self.at(t);
            let v = at(t);
            for (c, a) in acc.iter_mut().enumerate() {
                *a = fmaf(v.get(c), wt, *a);
            }
        }
        acc
    }
}
