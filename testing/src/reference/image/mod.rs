//! CPU references of the image operations: plain loops over NCHW `Vec`s, values in f64, each
//! written from torchvision's definition (given in each function's documentation, coordinate
//! conventions included) and sharing no code with the kernels.
//!
//! # Error analysis (what the GPU tests allow)
//!
//! The kernels compute in f32 with the same formulas as PyTorch's CUDA kernels. For an output
//! that is a weighted sum `sum_k w_k v_k` of `m` inputs with weights `w_k >= 0` summing to at
//! most 1 (every op here except normalize), each weight carries a relative error of a few ulp
//! (`u = 2^-24`) from its f32 computation and the sum `m` roundings, so the absolute error is at
//! most about `(m + 8) u max|v|`. Where a weight depends on a source coordinate computed in f32
//! (rotation, resize, roi_align), the coordinate has an absolute error `delta` of a few ulp of
//! its magnitude (`~ 4 u (h + w)`), which moves a bilinear result by at most `2 delta max|v|`.
//! Nearest-neighbour choices are discontinuous: where the exact source coordinate lies within
//! `delta` of a rounding tie or of the image border, either neighbour (or the fill) is a
//! correct answer; [`rotate`] reports those pixels with every value they may take.

mod augment;
mod augment_draw;
mod augment_ragged;
mod gaussian_blur;
mod normalize;
mod resize;
mod roi_align;
mod rotate;
mod to_float;

pub use augment::{augment, augment_bound};
pub use augment_draw::{augment_device_draw, philox4x32};
pub use augment_ragged::{
    augment_bound_ragged, augment_device_draw_ragged, augment_ragged, ragged_box,
    ragged_most_samples, Extent,
};
pub use gaussian_blur::{gaussian_blur, gaussian_weights, reflect};
pub use normalize::normalize;
pub use resize::{resize, resize_taps};
pub use roi_align::{roi_align, roi_align_backward};
pub use rotate::{rotate, rotation_source, Rotated};
pub use to_float::to_float;

use streamline::spec::image::{Layout, Shape};

/// The values of a batch of `s` stored in layout `from`, rearranged into layout `to`.
pub fn relayout<T: Copy>(v: &[T], s: Shape, from: Layout, to: Layout) -> Vec<T> {
    let at = |l: Layout, n: usize, c: usize, y: usize, x: usize| match l {
        Layout::Nchw => ((n * s.c + c) * s.h + y) * s.w + x,
        Layout::Nhwc => ((n * s.h + y) * s.w + x) * s.c + c,
    };
    let mut out = v.to_vec();
    for n in 0..s.n {
        for c in 0..s.c {
            for y in 0..s.h {
                for x in 0..s.w {
                    out[at(to, n, c, y, x)] = v[at(from, n, c, y, x)];
                }
            }
        }
    }
    out
}

fn idx(s: Shape, n: usize, c: usize, y: usize, x: usize) -> usize {
    ((n * s.c + c) * s.h + y) * s.w + x
}

/// The taps of every output index along one axis: `(input index, weight)` pairs.
type AxisTaps = [Vec<(usize, f64)>];

/// Image `n` of `x` (shape `s`) filtered separably into `y` (shape `out`): output pixel
/// `(i, j)` of every channel is `sum_a sum_b wa wb x[a][b]` over the taps `(a, wa)` of `ty[i]`
/// and `(b, wb)` of `tx[j]`, in that order.
fn separable(
    x: &[f64],
    (s, out): (Shape, Shape),
    n: usize,
    (ty, tx): (&AxisTaps, &AxisTaps),
    y: &mut [f64],
) {
    for c in 0..s.c {
        for (i, ti) in ty.iter().enumerate() {
            for (j, tj) in tx.iter().enumerate() {
                let mut acc = 0.0;
                for &(a, wa) in ti {
                    for &(b, wb) in tj {
                        acc += wa * wb * x[idx(s, n, c, a, b)];
                    }
                }
                y[idx(out, n, c, i, j)] = acc;
            }
        }
    }
}
