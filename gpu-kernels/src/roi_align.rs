//! `torchvision.ops.roi_align` on a batch: one output `channels x out_h x out_w` per box, each
//! bin the average of bilinear samples on the box's sampling grid (see
//! [`crate::sampling::Roi`]).
//!
//! A block covers a 32-column patch of one box's output; each thread computes one column of
//! several rows (the host picks how many) for every channel. The box is set up once per
//! thread, a column's horizontal taps once per sample column, and the taps of a sample serve
//! up to three channels, so a warp writes 32 consecutive values of a row. With one sample per
//! bin (an output at least as large as the box, the crop case: [`roi_align_one_sample`]) a
//! thread takes consecutive rows, whose samples share input rows, and loads those rows once.
//!
//! Input and output are NCHW, or NHWC on either side (`RoiAlignParams::layout`) in kernels of
//! their own (`_relayout`): the same code with each layout's strides.

use crate::channels::{for_columns, with_layouts, Column, Strides};
use crate::sampling::{blend, Roi, RoiTap};
use core::arch::asm;
use streamline_abi::image::{RoiAlignParams, ROI_MAX_SAMPLES_PER_BIN};
use streamline_abi::image::{
    ROI_ALIGN, ROI_ALIGN_ONE_SAMPLE, ROI_ALIGN_ONE_SAMPLE_RELAYOUT, ROI_ALIGN_RELAYOUT,
};
use streamline_device::kernel;
use streamline_device::math::trunc_i32;
use streamline_device::mem::{ld_at, stg_at};

kernel! {
    #[declared(ROI_ALIGN)]
    /// # Safety
    /// `p.x` must address `batch * channels * height * width` f32, `p.boxes` `5 * num_boxes` f32,
    /// `p.y` `num_boxes * channels * out_h * out_w` f32; all sizes at least 1, an image of either
    /// (`channels * h * w`) at most `2^32 - 1` values, and the grid as [`for_columns`] describes
    /// for `num_boxes` images of `out_h x out_w` and `p.rows` rows.
    pub unsafe fn roi_align(p: RoiAlignParams) {
        // SAFETY: forwarded from this kernel's contract.
        unsafe { run::<false, false, false>(p) }
    }
}

kernel! {
    #[declared(ROI_ALIGN_RELAYOUT)]
    /// [`roi_align`] in the layouts `p.layout` names (NHWC on at least one side).
    ///
    /// # Safety
    /// As for [`roi_align`], in the layouts `p.layout` names.
    pub unsafe fn roi_align_relayout(p: RoiAlignParams) {
        // SAFETY: forwarded from this kernel's contract.
        unsafe { with_layouts!(p, run::<false>(p)) }
    }
}

kernel! {
    #[declared(ROI_ALIGN_ONE_SAMPLE)]
    /// [`roi_align`] for launches whose every box has a sampling grid of one point per bin (an
    /// output at least as large as the box: the crop case), which the host checks with the same
    /// f32 arithmetic. Kept apart from the general kernel so that neither path's registers limit
    /// the other's occupancy; a box outside that rule would get its single sample, still read
    /// inside the image.
    ///
    /// # Safety
    /// As for [`roi_align`].
    pub unsafe fn roi_align_one_sample(p: RoiAlignParams) {
        // SAFETY: forwarded from this kernel's contract.
        unsafe { run::<true, false, false>(p) }
    }
}

kernel! {
    #[declared(ROI_ALIGN_ONE_SAMPLE_RELAYOUT)]
    /// [`roi_align_one_sample`] in the layouts `p.layout` names (NHWC on at least one side).
    ///
    /// # Safety
    /// As for [`roi_align`], in the layouts `p.layout` names.
    pub unsafe fn roi_align_one_sample_relayout(p: RoiAlignParams) {
        // SAFETY: forwarded from this kernel's contract.
        unsafe { with_layouts!(p, run::<true>(p)) }
    }
}

/// The kernels' body; `ONE`: every bin is one sample; input and output NHWC where `NHWC_IN`,
/// `NHWC_OUT`.
///
/// # Safety
/// As for [`roi_align`], in these layouts.
#[inline(always)]
unsafe fn run<const ONE: bool, const NHWC_IN: bool, const NHWC_OUT: bool>(p: RoiAlignParams) {
    let si = Strides::of(NHWC_IN, p.channels, p.height * p.width);
    let so = Strides::of(NHWC_OUT, p.channels, p.out_h * p.out_w);
    for_columns(
        p.num_boxes,
        p.out_h,
        p.out_w,
        p.rows,
        #[inline(always)]
        |col| {
            let bx = p.boxes.as_ptr().wrapping_add(col.n as usize * 5);
            // SAFETY: `n < num_boxes`; each box is 5 f32.
            let (bi, coords) = unsafe {
                (
                    bx.read(),
                    [
                        bx.add(1).read(),
                        bx.add(2).read(),
                        bx.add(3).read(),
                        bx.add(4).read(),
                    ],
                )
            };
            // torchvision truncates the batch index; one outside the batch (refused by the host)
            // gives zeros rather than a read outside the input.
            let img = trunc_i32(bi);
            let valid = img >= 0 && (img as u32) < p.batch;
            let roi = Roi::new(
                coords,
                p.spatial_scale,
                p.aligned != 0,
                p.sampling_ratio,
                p.out_h,
                p.out_w,
                ROI_MAX_SAMPLES_PER_BIN,
            );
            let bins = Bins {
                p: &p,
                col: &col,
                roi: &roi,
                img: if valid { img as usize } else { 0 },
                valid,
                si,
                so,
            };
            let mut c = 0;
            while c < p.channels {
                // SAFETY: forwarded from this kernel's contract; `c < channels`.
                c += unsafe {
                    match p.channels - c {
                        1 => bins.group::<1, ONE>(c),
                        2 => bins.group::<2, ONE>(c),
                        _ => bins.group::<3, ONE>(c),
                    }
                };
            }
        },
    );
}

/// Output rows of one step of the one-sample path.
const STEP: usize = 2;
/// Input rows that hold the taps of one step's samples.
const STEP_ROWS: usize = STEP + 1;

/// One thread's column of one box's output.
struct Bins<'a> {
    p: &'a RoiAlignParams,
    col: &'a Column,
    roi: &'a Roi,
    img: usize,
    valid: bool,
    /// Strides of the input's and the output's layouts.
    si: Strides,
    so: Strides,
}

impl Bins<'_> {
    /// Computes and stores this thread's bins of channels `first..first + N`; returns `N`.
    ///
    /// # Safety
    /// As for [`roi_align`]; `first + N <= channels`.
    #[inline(always)]
    unsafe fn group<const N: usize, const ONE: bool>(&self, first: u32) -> u32 {
        if ONE {
            // SAFETY: forwarded from this function's contract.
            unsafe { self.one_sample::<N>(first) };
            return N as u32;
        }
        let p = self.p;
        let (h, w) = (p.height as i32, p.width as i32);
        let si = self.si;
        let image = self.image();
        let last = p.out_h - 1;
        // The general grid (`Roi::bin_n`). Each row is stored before the next starts, which
        // keeps few values live.
        let mut r = 0;
        while r < self.col.per_thread {
            let ph = self.col.row(r);
            if ph > last {
                break;
            }
            let acc = if self.valid {
                self.roi.bin_n::<N>(h, w, ph, self.col.j, |k, yy, xx| {
                    let o = (first + k as u32) * si.ch + (yy as u32 * p.width + xx as u32) * si.px;
                    // SAFETY: `bin_n` passes only pixels inside the `h x w` plane; channel
                    // `first + k < channels` of image `img < batch`.
                    unsafe { ld_at(image, o) }
                })
            } else {
                [0.0; N]
            };
            // SAFETY: `ph <= last`; `first + N <= channels` (this function's contract).
            unsafe { self.store(first, ph, &acc) };
            r += 1;
        }
        N as u32
    }

    /// The one-sample path: the bin is its single sample. The column's two input columns are
    /// fixed for the thread, so each load is one offset from a per-thread pointer. The thread
    /// takes its rows (consecutive ones, [`Column::strip`]) [`STEP`] at a time: neighbouring
    /// samples are at most one bin, at most one pixel, apart, so a step's taps lie in
    /// [`STEP_ROWS`] input rows, each loaded once and all issued before the first blend. A step
    /// whose samples spread further (f32 rounding can add a row) loads each sample's taps
    /// itself. A row past the output is sampled on the last row and not stored.
    ///
    /// # Safety
    /// As for [`roi_align`]; `first + N <= channels`; every box of the launch has a one-point
    /// sampling grid.
    #[inline(always)]
    unsafe fn one_sample<const N: usize>(&self, first: u32) {
        let p = self.p;
        let (h, w) = (p.height as i32, p.width as i32);
        let si = self.si;
        let image = self.image();
        let last = p.out_h - 1;
        let tx = RoiTap::new(self.roi.x_of_one(self.col.j), w);
        let cols = [
            image.wrapping_add((tx.lo as u32 * si.px) as usize),
            image.wrapping_add((tx.hi as u32 * si.px) as usize),
        ];
        // Both taps of input row `y` (inside the plane) of channel `first + k`.
        let taps = |k: usize, y: i32| {
            let o = (first + k as u32) * si.ch + y as u32 * p.width * si.px;
            // SAFETY: `o` is the offset of row `y < h` of channel `first + k < channels` of
            // image `img < batch`, and the columns are inside the row.
            unsafe { [ld_at(cols[0], o), ld_at(cols[1], o)] }
        };
        let strip = self.col.strip();
        let per_thread = self.col.per_thread;
        let mut r = 0;
        while r < per_thread {
            let ph: [u32; STEP] = array(|k| strip + r + k as u32);
            let kept: [bool; STEP] = array(|k| r + (k as u32) < per_thread && ph[k] <= last);
            let ty: [RoiTap; STEP] = array(|k| RoiTap::new(self.roi.y_of_one(ph[k].min(last)), h));
            // Each sample's upper tap row, counted from the first sample's.
            let d: [i32; STEP] = array(|k| ty[k].lo - ty[0].lo);
            let value = |k: usize, v: [f32; 4]| {
                if self.valid && ty[k].valid && tx.valid {
                    blend(&ty[k], &tx, &v)
                } else {
                    0.0
                }
            };
            let mut shared = true;
            each::<STEP>(|k| shared &= (0..=k as i32).contains(&d[k]));
            if shared {
                // Rows `ty[0].lo + i`, clamped to the plane as every lower tap `hi` is.
                let rows: [[[f32; 2]; STEP_ROWS]; N] =
                    array(|c| array(|i| taps(c, (ty[0].lo + i as i32).min(h - 1))));
                each::<STEP>(|k| {
                    if kept[k] {
                        let bins: [f32; N] = array(|c| {
                            let (a, b) = (
                                pick(&rows[c], d[k], 0, k),
                                pick(&rows[c], d[k] + 1, 1, k + 1),
                            );
                            value(k, [a[0], a[1], b[0], b[1]])
                        });
                        // SAFETY: `ph <= last`; `first + N <= channels`.
                        unsafe { self.store(first, ph[k], &bins) };
                    }
                });
            } else {
                each::<STEP>(|k| {
                    if kept[k] {
                        let bins: [f32; N] = array(|c| {
                            let (a, b) = (taps(c, ty[k].lo), taps(c, ty[k].hi));
                            value(k, [a[0], a[1], b[0], b[1]])
                        });
                        // SAFETY: `ph <= last`; `first + N <= channels`.
                        unsafe { self.store(first, ph[k], &bins) };
                    }
                });
            }
            r += STEP as u32;
        }
    }

    /// The box's image; offsets inside it fit 32 bits (the host checks `c * h * w`).
    #[inline(always)]
    fn image(&self) -> *const f32 {
        let p = self.p;
        p.x.as_ptr()
            .wrapping_add(self.img * p.channels as usize * (p.height * p.width) as usize)
    }

    /// Stores `v`, the bins of channels `first..first + N` at row `ph` of this thread's column.
    ///
    /// # Safety
    /// `ph < out_h`, `first + N <= channels`, and the launch's contract.
    #[inline(always)]
    unsafe fn store<const N: usize>(&self, first: u32, ph: u32, v: &[f32; N]) {
        let p = self.p;
        let (plane_out, so) = (p.out_h * p.out_w, self.so);
        let dst = p.y.as_mut_ptr().wrapping_add(
            self.col.n as usize * p.channels as usize * plane_out as usize
                + (self.col.j * so.px) as usize,
        );
        let o = ph * p.out_w * so.px;
        for (k, &value) in v.iter().enumerate() {
            // SAFETY: box `n < num_boxes`, channel `first + k < channels`, `ph < out_h`,
            // `pw < out_w` (the caller's contract and the grid's).
            unsafe { stg_at(dst, (first + k as u32) * so.ch + o, value) };
        }
    }
}

/// `rows[i]` for `i` in `min..=max`, chosen with selects so that the rows stay in registers (see
/// [`select`]).
#[inline(always)]
fn pick<const R: usize>(rows: &[[f32; 2]; R], i: i32, min: usize, max: usize) -> [f32; 2] {
    let mut v = rows[min];
    each::<R>(|j| {
        if j > min && j <= max {
            let hit = i == j as i32;
            v = [select(hit, rows[j][0], v[0]), select(hit, rows[j][1], v[1])];
        }
    });
    v
}

/// `if c { a } else { b }` as one `selp`. Written as a branch or a select, LLVM turns a chain
/// of these over an array into an indexed load from a local copy of the array.
#[inline(always)]
fn select(c: bool, a: f32, b: f32) -> f32 {
    let r: f32;
    // SAFETY: register-only arithmetic; no memory is touched.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {c}, 0; selp.f32 {r}, {a}, {b}, p; }}",
            r = out(reg32) r,
            c = in(reg32) c as u32,
            a = in(reg32) a,
            b = in(reg32) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    r
}

/// Calls `f(k)` for `k` in `0..S` (`S <= 3`), written out so that every `k` is a constant after
/// inlining: in a loop LLVM may index the per-row and per-channel arrays at run time, which
/// puts them in local memory.
#[inline(always)]
fn each<const S: usize>(mut f: impl FnMut(usize)) {
    const { assert!(S <= 3) };
    if S > 0 {
        f(0);
    }
    if S > 1 {
        f(1);
    }
    if S > 2 {
        f(2);
    }
}

/// `[f(0), .., f(S - 1)]`, built with [`each`].
#[inline(always)]
fn array<T: Copy, const S: usize>(mut f: impl FnMut(usize) -> T) -> [T; S] {
    const { assert!(S >= 1) };
    let mut a = [f(0); S];
    each::<S>(|k| {
        if k > 0 {
            a[k] = f(k);
        }
    });
    a
}
