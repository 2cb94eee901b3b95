//! `torchvision.ops.roi_align` on a batch: one output `channels x out_h x out_w` per box, each
//! bin the average of bilinear samples on the box's sampling grid (see
//! [`crate::sampling::Roi`]).
//!
//! A block covers a 32-column patch of one box's output; each thread computes one column of
//! several rows (the host picks how many) for every channel. The box is set up once per
//! thread, a column's horizontal taps once per sample column, and the taps of a sample serve
//! up to three channels, so a warp writes 32 consecutive values of a row. With one sample per
//! bin (an output at least as large as the box, the crop case: [`roi_align_one_sample`]) the
//! loads of two rows are issued before either is blended.

use crate::channels::{for_columns, Column};
use crate::libdevice::trunc_i32;
use crate::mem::{ld_at, stg_at};
use crate::sampling::{blend, Roi, RoiTap};
use streamline_abi::image::{RoiAlignParams, ROI_MAX_SAMPLES_PER_BIN};

/// # Safety
/// `p.x` must address `batch * channels * height * width` f32, `p.boxes` `5 * num_boxes` f32,
/// `p.y` `num_boxes * channels * out_h * out_w` f32; all sizes at least 1, an image of either
/// (`channels * h * w`) at most `2^32 - 1` values, and the grid as [`for_columns`] describes
/// for `num_boxes` images of `out_h x out_w` and `p.rows` rows.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn roi_align(p: RoiAlignParams) {
    // SAFETY: forwarded from this kernel's contract.
    unsafe { run::<false>(p) }
}

/// [`roi_align`] for launches whose every box has a sampling grid of one point per bin (an
/// output at least as large as the box: the crop case), which the host checks with the same
/// f32 arithmetic. Kept apart from the general kernel so that neither path's registers limit
/// the other's occupancy; a box outside that rule would get its single sample, still read
/// inside the image.
///
/// # Safety
/// As for [`roi_align`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn roi_align_one_sample(p: RoiAlignParams) {
    // SAFETY: forwarded from this kernel's contract.
    unsafe { run::<true>(p) }
}

/// The kernels' body; `ONE`: every bin is one sample.
///
/// # Safety
/// As for [`roi_align`].
#[inline(always)]
unsafe fn run<const ONE: bool>(p: RoiAlignParams) {
    for_columns(p.num_boxes, p.out_h, p.out_w, p.rows, |col| {
        let bx = (p.boxes as *const f32).wrapping_add(col.n as usize * 5);
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
    });
}

/// Rows of the one-sample path whose loads are issued together.
const BATCH: usize = 2;

/// One thread's column of one box's output.
struct Bins<'a> {
    p: &'a RoiAlignParams,
    col: &'a Column,
    roi: &'a Roi,
    img: usize,
    valid: bool,
}

impl Bins<'_> {
    /// Computes and stores this thread's bins of channels `first..first + N`; returns `N`.
    ///
    /// # Safety
    /// As for [`roi_align`]; `first + N <= channels`.
    #[inline(always)]
    unsafe fn group<const N: usize, const ONE: bool>(&self, first: u32) -> u32 {
        let p = self.p;
        let (h, w) = (p.height as i32, p.width as i32);
        let plane_in = p.height * p.width;
        let plane_out = p.out_h * p.out_w;
        let channels = p.channels as usize;
        // The box's image; offsets inside it fit 32 bits (the host checks `c * h * w`).
        let image = (p.x as *const f32).wrapping_add(self.img * channels * plane_in as usize);
        let pw = self.col.j;
        let last = p.out_h - 1;
        // This thread's output column of the box's first channel.
        let dst = (p.y as *mut f32)
            .wrapping_add(self.col.n as usize * channels * plane_out as usize + pw as usize);
        let store = |ph: u32, v: &[f32; N]| {
            let o = ph * p.out_w;
            for (k, &value) in v.iter().enumerate() {
                // SAFETY: box `n < num_boxes`, channel `first + k < channels`, `ph < out_h`
                // (callers check), `pw < out_w`.
                unsafe { stg_at(dst, (first + k as u32) * plane_out + o, value) };
            }
        };
        if ONE {
            // One sample per bin, and a count of 1: the average is the sample itself. The
            // column's two input columns are fixed for the thread, so each load is one offset
            // from a per-thread pointer. Rows go in pairs whose loads are all issued before the
            // first blend (a row past the output is sampled on the last row and not stored).
            let tx = RoiTap::new(self.roi.x_of_one(pw), w);
            let cols = [
                image.wrapping_add(tx.lo as usize),
                image.wrapping_add(tx.hi as usize),
            ];
            // SAFETY (for `at`): callers pass the offset of a tap's row inside the `h x w`
            // plane of channel `first + k` of image `img < batch`.
            let at = |x: usize, o: u32| unsafe { ld_at(cols[x], o) };
            let mut r = 0;
            while r < self.col.per_thread {
                let ph: [u32; BATCH] = core::array::from_fn(|q| self.col.row(r + q as u32));
                let ty = ph.map(|ph| RoiTap::new(self.roi.y_of_one(ph.min(last)), h));
                let v: [[[f32; 4]; N]; BATCH] = core::array::from_fn(|q| {
                    core::array::from_fn(|k| {
                        let c = (first + k as u32) * plane_in;
                        let (r0, r1) =
                            (c + ty[q].lo as u32 * p.width, c + ty[q].hi as u32 * p.width);
                        [at(0, r0), at(1, r0), at(0, r1), at(1, r1)]
                    })
                });
                for q in 0..BATCH {
                    if ph[q] <= last {
                        let inside = self.valid && ty[q].valid && tx.valid;
                        store(
                            ph[q],
                            &core::array::from_fn(|k| {
                                if inside {
                                    blend(&ty[q], &tx, &v[q][k])
                                } else {
                                    0.0
                                }
                            }),
                        );
                    }
                }
                r += BATCH as u32;
            }
            return N as u32;
        }
        // The general grid (`Roi::bin_n`). Each row is stored before the next starts, which
        // keeps few values live.
        let mut r = 0;
        while r < self.col.per_thread {
            let ph = self.col.row(r);
            if ph > last {
                break;
            }
            let acc = if self.valid {
                self.roi.bin_n::<N>(h, w, ph, pw, |k, yy, xx| {
                    let o = (first + k as u32) * plane_in + yy as u32 * p.width + xx as u32;
                    // SAFETY: `bin_n` passes only pixels inside the `h x w` plane; channel
                    // `first + k < channels` of image `img < batch`.
                    unsafe { ld_at(image, o) }
                })
            } else {
                [0.0; N]
            };
            store(ph, &acc);
            r += 1;
        }
        N as u32
    }
}
