//! Resizing every plane of a batch, like `torch.nn.functional.interpolate` (as
//! `torchvision.transforms.v2.functional.resize` calls it): bilinear with
//! `align_corners=False`, its antialiased variant, and `nearest`.
//!
//! A block covers a 32-column patch of one image's output (64 columns for plain bilinear, two
//! per thread, 32 apart); each thread finds its columns' horizontal taps once, each row's
//! vertical taps once, and reads every channel through them, so a warp writes 32 consecutive
//! values of a row at a time.
//!
//! Input and output are NCHW, or NHWC on either side (`ResizeParams::layout`) in kernels of
//! their own (`_relayout`), so that the NCHW kernels keep their register count: the same code
//! with each layout's strides.

use crate::channels::{
    for_channel_groups, for_column_pairs, for_columns, image_and_column, with_group, with_layouts,
    Column, Strides,
};
use crate::sampling::LinearTaps;
use core::intrinsics::fmaf32 as fmaf;
use streamline_abi::image::ResizeParams;
use streamline_abi::image::IMAGE_BLOCK_X;
use streamline_abi::image::{RESIZE_BILINEAR, RESIZE_BILINEAR_AA, RESIZE_NEAREST};
use streamline_abi::image::{
    RESIZE_BILINEAR_AA_RELAYOUT, RESIZE_BILINEAR_RELAYOUT, RESIZE_NEAREST_RELAYOUT,
};
use streamline_device::kernel;
use streamline_device::math::{floor_i32, trunc_i32};
use streamline_device::mem::{ldg_at, ldg_at_line, stg_at};

/// Image `n` of a launch as one thread sees it ([`image_and_column`]): the image's input
/// (channel 0 of its first pixel) and the thread's output column, with each side's layout
/// strides.
///
/// NHWC in and out, the thread's columns are columns of values (the grid is `out_w * channels`
/// wide), each one channel of one pixel, and it computes that channel alone: its loads and
/// stores then fall on consecutive values across a warp, as in NCHW.
struct Image<'a> {
    p: &'a ResizeParams,
    input: *const f32,
    out: *mut f32,
    si: Strides,
    so: Strides,
    /// Whether the columns are columns of values (NHWC in and out).
    values: bool,
    /// Channels the thread computes per column (1 for columns of values).
    channels: u32,
    /// Offset of output row 1 from row 0.
    row_out: u32,
}

impl<'a> Image<'a> {
    #[inline(always)]
    fn new<const NHWC_IN: bool, const NHWC_OUT: bool>(
        p: &'a ResizeParams,
        n: u32,
        j: u32,
    ) -> Image<'a> {
        let values = NHWC_IN && NHWC_OUT;
        let planes = (p.in_h * p.in_w, p.out_h * p.out_w);
        let si = Strides::of(NHWC_IN, p.channels, planes.0);
        let so = Strides::of(NHWC_OUT, p.channels, planes.1);
        let col = if values { j } else { j * so.px };
        let (input, out) = image_and_column((p.x, p.y), p.channels, planes, n, col);
        Image {
            p,
            input,
            out,
            si,
            so,
            values,
            channels: if values { 1 } else { p.channels },
            row_out: p.out_w * so.px,
        }
    }

    /// The output pixel column of grid column `j`.
    #[inline(always)]
    fn pixel(&self, j: u32) -> u32 {
        if self.values {
            j / self.p.channels
        } else {
            j
        }
    }

    /// Input column `x` (a pixel column) of channel 0, or for columns of values, of grid
    /// column `j`'s channel.
    #[inline(always)]
    fn column(&self, j: u32, x: u32) -> *const f32 {
        let c = if self.values { j % self.p.channels } else { 0 };
        self.input.wrapping_add((x * self.si.px + c) as usize)
    }

    /// Offset of input row `r` from a column.
    #[inline(always)]
    fn in_row(&self, r: u32) -> u32 {
        r * self.p.in_w * self.si.px
    }

    /// Offset of channel `c` and output row `i` from the thread's output column.
    #[inline(always)]
    fn out_at(&self, c: u32, i: u32) -> u32 {
        c * self.so.ch + i * self.row_out
    }

    /// Offset of the thread's second output column from its first, `IMAGE_BLOCK_X` grid
    /// columns on.
    #[inline(always)]
    fn second(&self) -> u32 {
        if self.values {
            IMAGE_BLOCK_X
        } else {
            IMAGE_BLOCK_X * self.so.px
        }
    }

    /// Writes `value(c * ch)` (`ch` the input's channel stride) to output row `i` of every
    /// channel `c` the thread computes, `G` channels at a time.
    #[inline(always)]
    fn row<const G: usize>(&self, i: u32, value: impl Fn(u32) -> f32) {
        for_channel_groups::<G>(
            self.channels,
            |c| value(c * self.si.ch),
            // SAFETY: `n < batch`, `c < channels`, `i < out_h` and the column `j < out_w`.
            |c, v| unsafe { stg_at(self.out, self.out_at(c, i), v) },
        );
    }
}

/// Width of the kernels' grid in columns: output pixels, or NHWC in and out, output values.
#[inline(always)]
fn grid_width<const NHWC_IN: bool, const NHWC_OUT: bool>(p: &ResizeParams) -> u32 {
    if NHWC_IN && NHWC_OUT {
        p.out_w * p.channels
    } else {
        p.out_w
    }
}

/// The kernels' bodies for the layouts `p.layout` names ([`with_layouts`]).
#[inline(always)]
fn relayout_bilinear<const I: bool, const O: bool>(p: ResizeParams) {
    if I && O {
        resize_bilinear_values(p)
    } else {
        with_group!(p.channels, resize_bilinear_groups::<I, O>(p))
    }
}

#[inline(always)]
fn relayout_bilinear_aa<const I: bool, const O: bool>(p: ResizeParams) {
    if I && O {
        resize_bilinear_aa_groups::<1, true, true>(p)
    } else {
        with_group!(p.channels, resize_bilinear_aa_groups::<I, O>(p))
    }
}

#[inline(always)]
fn relayout_nearest<const I: bool, const O: bool>(p: ResizeParams) {
    if I && O {
        resize_nearest_groups::<1, true, true>(p)
    } else {
        with_group!(p.channels, resize_nearest_groups::<I, O>(p))
    }
}

kernel! {
    #[declared(RESIZE_BILINEAR)]
    /// Bilinear, `align_corners=False`: source `scale * (d + 0.5) - 0.5` clamped below at 0, with
    /// `scale = in / out`; the upper neighbour is the pixel itself on the last row/column.
    ///
    /// # Safety
    /// `p.x` must address `batch * channels * in_h * in_w` f32, `p.y`
    /// `batch * channels * out_h * out_w` f32, all sizes at least 1, `scale_h = in_h / out_h` and
    /// `scale_w = in_w / out_w`, every image (`channels * h * w`, input and output) at most
    /// `2^32 - 1` values; grid as [`for_column_pairs`] describes for `p.rows` rows.
    pub unsafe fn resize_bilinear(p: ResizeParams) {
        with_group!(p.channels, resize_bilinear_groups::<false, false>(p))
    }
}

kernel! {
    #[declared(RESIZE_BILINEAR_RELAYOUT)]
    /// [`resize_bilinear`] in the layouts `p.layout` names (NHWC on at least one side).
    ///
    /// # Safety
    /// As for [`resize_bilinear`], in the layouts `p.layout` names.
    pub unsafe fn resize_bilinear_relayout(p: ResizeParams) {
        with_layouts!(p, relayout_bilinear(p))
    }
}

/// [`resize_bilinear`] with channels computed `G` at a time. Each thread computes two columns
/// ([`for_column_pairs`]), which share the vertical taps and the bookkeeping of every row. It
/// takes consecutive output rows ([`Column::strip`]) and keeps the horizontal blend of the last
/// two input rows it read: the next output row needs the same rows or the following one, so an
/// upscale reads each input row about once instead of twice per output row. The blend order is
/// unchanged (each row across, then down).
#[inline(always)]
fn resize_bilinear_groups<const G: usize, const NHWC_IN: bool, const NHWC_OUT: bool>(
    p: ResizeParams,
) {
    if NHWC_IN && NHWC_OUT {
        return resize_bilinear_values(p);
    }
    let (sh, sw) = (p.scale_h, p.scale_w);
    for_column_pairs(p.batch, p.out_h, p.out_w, p.rows, |col, second| {
        let img = Image::new::<NHWC_IN, NHWC_OUT>(&p, col.n, col.j);
        // The second column is the first again when it lies outside (computed, not stored).
        let j2 = if second { col.j + IMAGE_BLOCK_X } else { col.j };
        let taps = [
            LinearTaps::new(sw, col.j, p.in_w),
            LinearTaps::new(sw, j2, p.in_w),
        ];
        let mut c = 0;
        while c + G as u32 <= p.channels {
            bilinear_rows::<G>(&p, &img, taps, second, sh, &col, c);
            c += G as u32;
        }
        while c < p.channels {
            bilinear_rows::<1>(&p, &img, taps, second, sh, &col, c);
            c += 1;
        }
    });
}

/// The thread's rows of channels `c0 .. c0 + N` in both of its columns (see
/// [`resize_bilinear_groups`]); the second is stored only when `second`.
#[inline(always)]
fn bilinear_rows<const N: usize>(
    p: &ResizeParams,
    img: &Image,
    taps: [LinearTaps; 2],
    second: bool,
    sh: f32,
    col: &Column,
    c0: u32,
) {
    // The input columns of both output columns.
    let cols = taps.map(|t| (img.column(0, t.i0 as u32), img.column(0, t.i1 as u32)));
    // The horizontal blend of input row `r`, channels `c0 ..`, both columns.
    let across = |r: i32| {
        let mut v = [[0.0f32; N]; 2];
        for (m, vm) in v.iter_mut().enumerate() {
            let (s0, s1) = cols[m];
            let tx = taps[m];
            for (k, x) in vm.iter_mut().enumerate() {
                let o = (c0 + k as u32) * img.si.ch + img.in_row(r as u32);
                // SAFETY: `r < in_h` (a tap), both columns `< in_w` and `c0 + k < channels`:
                // inside image `n`.
                let at = |s: *const f32| unsafe { ldg_at_line(s, o) };
                *x = fmaf(tx.l1, at(s1), tx.l0 * at(s0));
            }
        }
        v
    };
    blend_rows::<N>(p, img, across, second, sh, col, |k, i| {
        img.out_at(c0 + k as u32, i)
    });
}

/// [`resize_bilinear`] NHWC in and out: each image's rows are rows of `out_w * channels`
/// values, cut into `channels` stretches of `out_w`; the grid covers one stretch, and each thread
/// computes its columns' value in every stretch (three values of a row where NCHW computes
/// three channels), each value with its own pixel's horizontal taps and channel. A warp's loads
/// and stores in each stretch fall on consecutive values, as in NCHW.
#[inline(always)]
fn resize_bilinear_values(p: ResizeParams) {
    match p.channels {
        1 => bilinear_values::<1>(p),
        2 => bilinear_values::<2>(p),
        3 => bilinear_values::<3>(p),
        _ => bilinear_values::<4>(p),
    }
}

/// [`resize_bilinear_values`] for `C` channels (up to four; more go four stretches at a time).
#[inline(always)]
fn bilinear_values<const C: usize>(p: ResizeParams) {
    let (sh, sw) = (p.scale_h, p.scale_w);
    let stretch = p.out_w;
    for_column_pairs(p.batch, p.out_h, stretch, p.rows, |col, second| {
        let img = Image::new::<true, true>(&p, col.n, col.j);
        let j2 = if second { col.j + IMAGE_BLOCK_X } else { col.j };
        let mut k0 = 0;
        while k0 < p.channels {
            // Value column `j + (k0 + k) stretch`: its pixel's taps and its channel.
            let taps = [col.j, j2].map(|j| {
                core::array::from_fn::<_, C, _>(|k| {
                    // Stretches past the last are the last again (computed twice, stored
                    // twice).
                    let v = j + (k0 + k as u32).min(p.channels - 1) * stretch;
                    let (px, c) = (v / p.channels, v % p.channels);
                    let t = LinearTaps::new(sw, px, p.in_w);
                    let at = |i: i32| i as u32 * p.channels + c;
                    (at(t.i0), at(t.i1), t.l0, t.l1)
                })
            });
            // The horizontal blend of input row `r` in each stretch, both columns.
            let across = |r: i32| {
                let mut v = [[0.0f32; C]; 2];
                let row = img.in_row(r as u32);
                for (m, vm) in v.iter_mut().enumerate() {
                    for (k, x) in vm.iter_mut().enumerate() {
                        let (i0, i1, l0, l1) = taps[m][k];
                        // SAFETY: `r < in_h` (a tap), both columns inside the row of
                        // `in_w * channels` values: inside image `n`.
                        let at = |i: u32| unsafe { ldg_at_line(img.input, row + i) };
                        *x = fmaf(l1, at(i1), l0 * at(i0));
                    }
                }
                v
            };
            blend_rows::<C>(&p, &img, across, second, sh, &col, |k, i| {
                img.out_at(0, i) + (k0 + k as u32).min(p.channels - 1) * stretch
            });
            k0 += C as u32;
        }
    });
}

/// The thread's output rows from `across(r)`, the horizontal blends of input row `r` (`N`
/// values of each of the thread's two columns): each output row blends two input rows, kept
/// from the row before where they are the same, and stores value `k` of the first column at
/// `out_at(k, i)` of row `i` (the second column [`Image::second`] on, when `second`).
#[inline(always)]
fn blend_rows<const N: usize>(
    p: &ResizeParams,
    img: &Image,
    across: impl Fn(i32) -> [[f32; N]; 2],
    second: bool,
    sh: f32,
    col: &Column,
    out_at: impl Fn(usize, u32) -> u32,
) {
    let first = col.strip();
    let end = (first + col.per_thread).min(p.out_h);
    // The last two rows blended: (row, values).
    let mut cache = [(-1i32, [[0.0f32; N]; 2]); 2];
    let mut i = first;
    while i < end {
        let ty = LinearTaps::new(sh, i, p.in_h);
        let row = |r: i32, cache: &[(i32, [[f32; N]; 2]); 2]| {
            if cache[0].0 == r {
                cache[0].1
            } else if cache[1].0 == r {
                cache[1].1
            } else {
                across(r)
            }
        };
        let h0 = row(ty.i0, &cache);
        let h1 = row(ty.i1, &cache);
        cache = [(ty.i0, h0), (ty.i1, h1)];
        for k in 0..N {
            let at = out_at(k, i);
            let v = fmaf(ty.l1, h1[0][k], ty.l0 * h0[0][k]);
            // SAFETY: `n < batch`, `i < out_h`, and `out_at` gives a value of the thread's
            // column inside the image.
            unsafe { stg_at(img.out, at, v) };
            if second {
                let v = fmaf(ty.l1, h1[1][k], ty.l0 * h0[1][k]);
                // SAFETY: as above, for the column `j + IMAGE_BLOCK_X < out_w`.
                unsafe { stg_at(img.out, at + img.second(), v) };
            }
        }
        i += 1;
    }
}

/// torch's antialiased bilinear filter along one axis: output `d` covers input
/// `[min, min + size)` with triangle weights of support `max(scale, 1)`, normalised by their
/// sum.
#[derive(Clone, Copy)]
struct AaSpan {
    min: i32,
    size: i32,
    center: f32,
    invscale: f32,
    inv_total: f32,
}

impl AaSpan {
    #[inline(always)]
    fn new(scale: f32, d: u32, n_in: u32) -> AaSpan {
        let support = if scale >= 1.0 { scale } else { 1.0 };
        let center = scale * (d as f32 + 0.5);
        let invscale = if scale >= 1.0 { 1.0 / scale } else { 1.0 };
        let lo = trunc_i32(center - support + 0.5);
        let min = if lo > 0 { lo } else { 0 };
        let hi = trunc_i32(center + support + 0.5);
        let hi = if hi < n_in as i32 { hi } else { n_in as i32 };
        let mut span = AaSpan {
            min,
            size: hi - min,
            center,
            invscale,
            inv_total: 1.0,
        };
        let mut total = 0.0f32;
        let mut k = 0;
        while k < span.size {
            total += span.raw(k);
            k += 1;
        }
        span.inv_total = if total != 0.0 { 1.0 / total } else { 1.0 };
        span
    }

    /// Unnormalised weight of tap `k`: the triangle `max(0, 1 - |t|)`.
    #[inline(always)]
    fn raw(&self, k: i32) -> f32 {
        let t = ((k + self.min) as f32 - self.center + 0.5) * self.invscale;
        let t = if t < 0.0 { -t } else { t };
        if t < 1.0 {
            1.0 - t
        } else {
            0.0
        }
    }

    #[inline(always)]
    fn weight(&self, k: i32) -> f32 {
        self.raw(k) * self.inv_total
    }
}

kernel! {
    #[declared(RESIZE_BILINEAR_AA)]
    /// Antialiased bilinear (torch's `_upsample_bilinear2d_aa`): separable triangle filter whose
    /// support widens by the downscale factor, rows blended first, then columns.
    ///
    /// # Safety
    /// As for [`resize_bilinear`].
    pub unsafe fn resize_bilinear_aa(p: ResizeParams) {
        with_group!(p.channels, resize_bilinear_aa_groups::<false, false>(p))
    }
}

kernel! {
    #[declared(RESIZE_BILINEAR_AA_RELAYOUT)]
    /// [`resize_bilinear_aa`] in the layouts `p.layout` names (NHWC on at least one side).
    ///
    /// # Safety
    /// As for [`resize_bilinear`], in the layouts `p.layout` names.
    pub unsafe fn resize_bilinear_aa_relayout(p: ResizeParams) {
        with_layouts!(p, relayout_bilinear_aa(p))
    }
}

/// [`resize_bilinear_aa`] with channels computed `G` at a time.
#[inline(always)]
fn resize_bilinear_aa_groups<const G: usize, const NHWC_IN: bool, const NHWC_OUT: bool>(
    p: ResizeParams,
) {
    let (sh, sw) = (p.scale_h, p.scale_w);
    let width = grid_width::<NHWC_IN, NHWC_OUT>(&p);
    for_columns(
        p.batch,
        p.out_h,
        width,
        p.rows,
        #[inline(always)]
        |col| {
            let img = Image::new::<NHWC_IN, NHWC_OUT>(&p, col.n, col.j);
            let sx = AaSpan::new(sw, img.pixel(col.j), p.in_w);
            let nx = sx.size;
            // Upscaling (and mild downscaling) has at most two taps per axis: their weights are
            // found once (per column, per row) for every channel.
            let wx = [sx.weight(0), if nx > 1 { sx.weight(1) } else { 0.0 }];
            let cols = [
                img.column(col.j, sx.min as u32),
                img.column(col.j, (sx.min + (nx > 1) as i32) as u32),
            ];
            col.rows(
                #[inline(always)]
                |i| {
                    let sy = AaSpan::new(sh, i, p.in_h);
                    let ny = sy.size;
                    if (1..=2).contains(&nx) && (1..=2).contains(&ny) {
                        // The same operations in the same order as the general loop below.
                        let wy = [sy.weight(0), if ny > 1 { sy.weight(1) } else { 0.0 }];
                        let rows = [
                            img.in_row(sy.min as u32),
                            img.in_row((sy.min + (ny > 1) as i32) as u32),
                        ];
                        img.row::<G>(
                            i,
                            #[inline(always)]
                            |plane| {
                                // SAFETY: the spans lie inside `[0, in_h) x [0, in_w)`.
                                let at = |r: usize, c: usize| unsafe {
                                    ldg_at(cols[c], plane + rows[r])
                                };
                                let column = |c: usize| {
                                    let t = 0.0f32 + at(0, c) * wy[0];
                                    if ny > 1 {
                                        t + at(1, c) * wy[1]
                                    } else {
                                        t
                                    }
                                };
                                let acc = 0.0f32 + column(0) * wx[0];
                                if nx > 1 {
                                    acc + column(1) * wx[1]
                                } else {
                                    acc
                                }
                            },
                        );
                        return;
                    }
                    img.row::<G>(
                        i,
                        #[inline(always)]
                        |plane| {
                            let mut acc = 0.0f32;
                            let mut kx = 0;
                            while kx < sx.size {
                                let c = (sx.min + kx) as u32;
                                let mut t = 0.0f32;
                                let mut ky = 0;
                                while ky < sy.size {
                                    let r = (sy.min + ky) as u32;
                                    // SAFETY: the spans lie inside `[0, in_h) x [0, in_w)`.
                                    let src = img.column(col.j, c);
                                    t += unsafe { ldg_at(src, plane + img.in_row(r)) }
                                        * sy.weight(ky);
                                    ky += 1;
                                }
                                acc += t * sx.weight(kx);
                                kx += 1;
                            }
                            acc
                        },
                    );
                },
            );
        },
    );
}

kernel! {
    #[declared(RESIZE_NEAREST)]
    /// Nearest (torch's `nearest`): source `min(floor(d * scale), in - 1)` with `scale = in / out`
    /// in f32.
    ///
    /// # Safety
    /// As for [`resize_bilinear`].
    pub unsafe fn resize_nearest(p: ResizeParams) {
        with_group!(p.channels, resize_nearest_groups::<false, false>(p))
    }
}

kernel! {
    #[declared(RESIZE_NEAREST_RELAYOUT)]
    /// [`resize_nearest`] in the layouts `p.layout` names (NHWC on at least one side).
    ///
    /// # Safety
    /// As for [`resize_bilinear`], in the layouts `p.layout` names.
    pub unsafe fn resize_nearest_relayout(p: ResizeParams) {
        with_layouts!(p, relayout_nearest(p))
    }
}

/// [`resize_nearest`] with channels computed `G` at a time.
#[inline(always)]
fn resize_nearest_groups<const G: usize, const NHWC_IN: bool, const NHWC_OUT: bool>(
    p: ResizeParams,
) {
    let (sh, sw) = (p.scale_h, p.scale_w);
    let width = grid_width::<NHWC_IN, NHWC_OUT>(&p);
    for_columns(p.batch, p.out_h, width, p.rows, |col| {
        let img = Image::new::<NHWC_IN, NHWC_OUT>(&p, col.n, col.j);
        let j = img.pixel(col.j);
        let xi = floor_i32(j as f32 * sw).max(0).min(p.in_w as i32 - 1) as u32;
        let src = img.column(col.j, xi);
        col.rows(|i| {
            let yi = floor_i32(i as f32 * sh).max(0).min(p.in_h as i32 - 1) as u32;
            let o = img.in_row(yi);
            // SAFETY: `yi < in_h`, `xi < in_w`.
            img.row::<G>(i, |plane| unsafe { ldg_at(src, plane + o) });
        });
    });
}
